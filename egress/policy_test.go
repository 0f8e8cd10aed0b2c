package egress_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/opsmcp/platform/egress"
)

// Every spelling of a refused address is refused, with the range it is
// in; public addresses, also reached through NAT64 or 6to4, are not.
func TestRefusedJudgesTheAddressWhateverItsSpelling(t *testing.T) {
	refused := []struct{ addr, rangeName string }{
		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"::1", "loopback"},
		{"::1%lo", "loopback"}, // the zone hid it from netip.Prefix.Contains
		{"::1%1", "loopback"},
		{"0:0:0:0:0:0:0:1", "loopback"},
		{"0000:0000:0000:0000:0000:0000:0000:0001", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:7f00:1", "loopback"},
		{"::ffff:127.0.0.1%eth0", "loopback"},
		{"::127.0.0.1", "IPv4-compatible"},
		{"::7f00:1", "IPv4-compatible"},
		{"::a9fe:a9fe", "IPv4-compatible"},
		{"::ffff:0:7f00:1", "IPv4-translated"},
		{"64:ff9b::7f00:1", "NAT64 of loopback"},
		{"64:ff9b::127.0.0.1", "NAT64 of loopback"},
		{"64:ff9b::a9fe:a9fe", "NAT64 of link-local"},
		{"64:ff9b::a00:1", "NAT64 of private"},
		{"64:ff9b:1::808:808", "local-use NAT64"},
		{"2002:7f00:1::", "6to4 of loopback"},
		{"2002:7f00:0001:0:0:0:0:1", "6to4 of loopback"},
		{"2002:a9fe:a9fe::1", "6to4 of link-local"},
		{"2002:c0a8:101::1", "6to4 of private"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"},
		{"2001::1", "Teredo"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "this-network"},
		{"::", "unspecified"},
		{"::%eth0", "unspecified"},
		{"10.0.0.1", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"100.64.0.1", "shared (CGNAT)"},
		{"100.127.255.255", "shared (CGNAT)"},
		{"100.100.100.200", "shared (CGNAT)"}, // Alibaba Cloud metadata
		{"169.254.169.254", "link-local"},     // AWS, GCP, Azure, Oracle metadata
		{"::ffff:169.254.169.254", "link-local"},
		{"::ffff:a9fe:a9fe", "link-local"},
		{"168.63.129.16", "cloud platform"},
		{"fd00:ec2::254", "unique-local"}, // AWS IPv6 metadata
		{"fc00::1", "unique-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"fe80::a9fe:a9fe%25", "link-local"},
		{"febf:ffff::1", "link-local"},
		{"fec0::1", "site-local"},
		{"ff02::1", "multicast"},
		{"ff05::1:3", "multicast"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"255.255.255.255", "reserved"},
		{"240.0.0.1", "reserved"},
		{"192.0.0.8", "IETF protocol assignment"},
		{"192.0.2.1", "documentation"},
		{"198.51.100.7", "documentation"},
		{"203.0.113.9", "documentation"},
		{"2001:db8::1", "documentation"},
		{"3fff::1", "documentation"},
		{"198.18.0.1", "benchmarking"},
		{"2001:2::1", "benchmarking"},
		{"192.88.99.1", "6to4 relay anycast"},
		{"100::1", "discard-only"},
		{"2001:10::1", "ORCHID"},
		{"2001:20::1", "ORCHIDv2"},
		{"5f00::1", "reserved"}, // SRv6 SIDs, outside 2000::/3
		{"4000::1", "reserved"},
		{"1::1", "reserved"},
	}
	for _, tt := range refused {
		a, err := netip.ParseAddr(tt.addr)
		if err != nil {
			t.Fatalf("%s: %v", tt.addr, err)
		}
		name, bad := egress.Refused(a)
		if !bad || name != tt.rangeName {
			t.Errorf("Refused(%s) = %q, %v; want %q, true", tt.addr, name, bad, tt.rangeName)
		}
	}
	for _, s := range []string{
		"8.8.8.8", "1.1.1.1", "93.184.216.34", "100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0",
		"169.253.255.255", "168.63.129.17", "11.0.0.1", "223.255.255.255",
		"::ffff:8.8.8.8", "2606:4700:4700::1111", "2a00:1450:4001::1",
		"64:ff9b::808:808", "64:ff9b::8.8.8.8", "2002:808:808::1", "2001:4860:4860::8888",
		"2606:4700:4700::1111%eth0", // a zone does not make a public address private
	} {
		if name, bad := egress.Refused(netip.MustParseAddr(s)); bad {
			t.Errorf("Refused(%s) = %q: a public address is refused", s, name)
		}
	}
	if _, bad := egress.Refused(netip.Addr{}); !bad {
		t.Error("the invalid zero Addr is not refused")
	}
}

// Control sees "ip:port" or "[ip%zone]:port" from the dialer; it refuses
// refused addresses in both forms, non-TCP networks and anything it
// cannot parse, and lets public addresses through.
func TestControlChecksWhatTheDialerHandsIt(t *testing.T) {
	var p egress.Policy
	for _, c := range []struct{ network, address string }{
		{"tcp4", "127.0.0.1:80"},
		{"tcp6", "[::1]:80"},
		{"tcp6", "[::1%lo]:80"},
		{"tcp6", "[fe80::1%eth0]:443"},
		{"tcp6", "[::ffff:127.0.0.1]:80"},
		{"tcp6", "[64:ff9b::a9fe:a9fe]:80"},
		{"tcp4", "169.254.169.254:80"},
		{"tcp4", "0.0.0.0:80"},
		{"tcp", "localhost:80"}, // a name never reaches Control; refuse if it did
		{"tcp", "2130706433:80"},
		{"tcp", ""},
		{"udp4", "8.8.8.8:53"}, // only TCP is dialled for tenants
		{"unix", "/var/run/docker.sock"},
	} {
		err := p.Control(c.network, c.address, nil)
		if !errors.Is(err, egress.ErrRefused) {
			t.Errorf("Control(%s, %q) = %v, want ErrRefused", c.network, c.address, err)
		}
	}
	for _, c := range []struct{ network, address string }{
		{"tcp4", "8.8.8.8:443"}, {"tcp6", "[2606:4700:4700::1111]:443"}, {"tcp", "[64:ff9b::808:808]:80"},
	} {
		if err := p.Control(c.network, c.address, nil); err != nil {
			t.Errorf("Control(%s, %q) = %v, want nil", c.network, c.address, err)
		}
	}
	// The refusal names the range, never the address: it may reach logs a
	// tenant reads.
	err := p.Control("tcp4", "10.1.2.3:80", nil)
	if err == nil || strings.Contains(err.Error(), "10.1.2.3") || !strings.Contains(err.Error(), "private") {
		t.Errorf("refusal message %q", err)
	}
}

// The allow-list admits exactly the listed address and port (whatever
// the spelling of the address), and nothing next to it.
func TestAllowListAdmitsOnlyTheExactAddressAndPort(t *testing.T) {
	p := egress.Policy{Allow: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:8080")}}
	for _, ok := range []string{"127.0.0.1:8080", "[::ffff:127.0.0.1]:8080"} {
		if err := p.Control("tcp", ok, nil); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, no := range []string{"127.0.0.1:8081", "127.0.0.2:8080", "[::1]:8080", "[::1%lo]:8080", "10.0.0.1:8080"} {
		if err := p.Control("tcp", no, nil); !errors.Is(err, egress.ErrRefused) {
			t.Errorf("%s: %v, want ErrRefused", no, err)
		}
	}
	all := egress.Policy{AllowPrivate: true}
	for _, a := range []string{"127.0.0.1:1", "[::1%lo]:2", "169.254.169.254:80"} {
		if err := all.Control("tcp", a, nil); err != nil {
			t.Errorf("AllowPrivate: %s: %v", a, err)
		}
	}
	if err := all.Control("udp", "127.0.0.1:53", nil); !errors.Is(err, egress.ErrRefused) {
		t.Errorf("AllowPrivate still dials only TCP: %v", err)
	}
}
