package egress_test

import (
	"net/netip"
	"testing"

	"github.com/opsmcp/platform/egress"
)

// independentBlocks is a second, separately written list of what must
// never be allowed, taken from the IANA special-purpose registries rather
// than from the package's tables, with each blocked IPv4 range also
// expanded by hand into every IPv6 form that embeds an IPv4 address. The
// fuzz target checks the policy against it, so a mistake in one list is
// caught by the other.
var independentBlocks = func() []netip.Prefix {
	v4 := []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
		"203.0.113.0/24", "224.0.0.0/3", // multicast and everything above it
	}
	var out []netip.Prefix
	for _, s := range v4 {
		p := netip.MustParsePrefix(s)
		b := p.Addr().As4()
		bits := p.Bits()
		out = append(out, p)
		// ::ffff:a.b.c.d (mapped), ::a.b.c.d (compatible), 64:ff9b::a.b.c.d
		// (NAT64, RFC 6052 /96) and ::ffff:0:a.b.c.d (SIIT).
		for _, hi := range [][12]byte{
			{10: 0xff, 11: 0xff},
			{},
			{0: 0x00, 1: 0x64, 2: 0xff, 3: 0x9b},
			{8: 0xff, 9: 0xff},
		} {
			var a [16]byte
			copy(a[:12], hi[:])
			copy(a[12:], b[:])
			out = append(out, netip.PrefixFrom(netip.AddrFrom16(a), 96+bits))
		}
		// 2002:AABB:CCDD::/48 (6to4).
		var a [16]byte
		a[0], a[1] = 0x20, 0x02
		copy(a[2:6], b[:])
		out = append(out, netip.PrefixFrom(netip.AddrFrom16(a), 16+bits))
	}
	for _, s := range []string{
		"::/128", "::1/128", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8", "2001::/32", "2001:db8::/32",
		"64:ff9b:1::/48", "100::/64", "2001:2::/48", "3fff::/20",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// outsideGlobalUnicast is everything but 2000::/3; of it, only NAT64
// (64:ff9b::/96, translated public IPv4) and IPv4-mapped addresses (IPv4
// itself) may hold allowed addresses.
var (
	outsideGlobalUnicast = []netip.Prefix{
		netip.MustParsePrefix("::/3"), netip.MustParsePrefix("4000::/2"), netip.MustParsePrefix("8000::/1"),
	}
	wellKnownNAT64 = netip.MustParsePrefix("64:ff9b::/96")
)

// FuzzRefused parses arbitrary text and arbitrary 16-byte and 4-byte
// values as addresses. Classification must never panic, and an address
// it allows must lie in none of the independently listed blocks, however
// it is spelled (zones, mapped, embedded).
func FuzzRefused(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "::1%lo", "::ffff:7f00:1", "64:ff9b::7f00:1", "2002:7f00:1::",
		"8.8.8.8", "2606:4700:4700::1111", "64:ff9b::808:808", "fe80::1%eth0", "::127.0.0.1", ""} {
		f.Add(s, []byte(nil))
	}
	f.Add("", netip.MustParseAddr("::ffff:169.254.169.254").AsSlice())
	f.Add("", []byte{127, 0, 0, 1})
	f.Fuzz(func(t *testing.T, text string, raw []byte) {
		var addrs []netip.Addr
		if a, err := netip.ParseAddr(text); err == nil {
			addrs = append(addrs, a)
		}
		if ap, err := netip.ParseAddrPort(text); err == nil {
			addrs = append(addrs, ap.Addr())
		}
		if a, ok := netip.AddrFromSlice(raw); ok {
			addrs = append(addrs, a)
			if zone := text; len(zone) > 0 && a.Is6() {
				addrs = append(addrs, a.WithZone(zone))
			}
		}
		var p egress.Policy
		for _, a := range addrs {
			_, refused := egress.Refused(a)
			// Control (what the dialer calls) agrees with Refused on every
			// address the dialer could hand it.
			s := netip.AddrPortFrom(a, 443).String()
			if back, err := netip.ParseAddrPort(s); err == nil && back.Addr() == a {
				if ctl := p.Control("tcp", s, nil); refused != (ctl != nil) {
					t.Fatalf("%s: Refused says %v but Control says %v", s, refused, ctl)
				}
			}
			if refused {
				continue
			}
			bare := a.WithZone("")
			for _, b := range independentBlocks {
				if b.Contains(bare) {
					t.Fatalf("%s is allowed but lies in %s", a, b)
				}
			}
			for _, b := range outsideGlobalUnicast {
				if bare.Is6() && !bare.Is4In6() && b.Contains(bare) && !wellKnownNAT64.Contains(bare) {
					t.Fatalf("%s is allowed but lies outside global unicast, in %s", a, b)
				}
			}
		}
	})
}
