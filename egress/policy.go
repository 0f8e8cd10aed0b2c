// Package egress decides what the platform may dial on a tenant's behalf:
// webhook deliveries, OpenID discovery documents, JSON Web Key Sets, and
// every redirect any of them leads to. Tenants choose those URLs, so each
// one is a way into the platform's own network unless every connection is
// checked.
//
// The check runs on the address actually dialled, after DNS resolution
// and on every attempt of a multi-address dial, as a net.Dialer Control
// hook. A hostname that resolves (or re-resolves, DNS rebinding) to a
// refused address is refused, and so is every spelling of one: a zoned
// IPv6 literal, an IPv4-mapped or IPv4-compatible form, a NAT64 or 6to4
// address embedding it. Proxies are never used, since a proxy would dial
// on the platform's behalf where no hook can see.
package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// ErrRefused marks a connection the policy refused. Dial and HTTP errors
// wrap it, so errors.Is finds it however deep the transport nests it.
var ErrRefused = errors.New("egress: address not allowed")

// Policy says which addresses may be dialled. The zero value refuses every
// address Refused names; it is safe for concurrent use once built.
type Policy struct {
	// AllowPrivate lets connections reach every address, refused ranges
	// included: the operator setting PLATFORM_ALLOW_PRIVATE_TARGETS, for
	// development and tests only.
	AllowPrivate bool
	// Allow lists exact address and port pairs that may be dialled although
	// their address is refused. It exists for tests that need one loopback
	// server reachable while every other port and address stays refused, so
	// that a refusal they observe is the policy's and not a side effect of
	// AllowPrivate. Zones are ignored and IPv4-mapped IPv6 matches IPv4.
	Allow []netip.AddrPort
}

// Check reports whether the policy lets network reach ap; the error wraps
// ErrRefused. Only TCP is ever dialled on a tenant's behalf.
func (p *Policy) Check(network string, ap netip.AddrPort) error {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return fmt.Errorf("%w: network %q", ErrRefused, network)
	}
	a := ap.Addr().WithZone("").Unmap()
	for _, allowed := range p.Allow {
		if allowed.Port() == ap.Port() && allowed.Addr().WithZone("").Unmap() == a {
			return nil
		}
	}
	if p.AllowPrivate {
		return nil
	}
	if name, refused := Refused(ap.Addr()); refused {
		return fmt.Errorf("%w: %s address", ErrRefused, name)
	}
	return nil
}

// Control is a net.Dialer Control hook enforcing the policy. It sees the
// resolved address of each connection attempt, just before connect(2).
func (p *Policy) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		// The dialer always hands over a numeric address; anything else is
		// not something to connect to.
		return fmt.Errorf("%w: unparsable dial address", ErrRefused)
	}
	return p.Check(network, ap)
}

// Dialer returns a dialer whose every connection passes the policy. The
// policy is copied: changing p later does not change the dialer.
func (p *Policy) Dialer() *net.Dialer {
	pc := &Policy{AllowPrivate: p.AllowPrivate, Allow: append([]netip.AddrPort(nil), p.Allow...)}
	return &net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second, Control: pc.Control}
}

// DialTimeout bounds one connection attempt (TCP connect, before TLS).
const DialTimeout = 5 * time.Second

// v4Range is a refused IPv4 range and what it is.
type v4Range struct {
	prefix netip.Prefix
	name   string
}

// refused4 are the IPv4 ranges no tenant may reach: everything the IANA
// special-purpose registry marks as not globally reachable, plus the one
// public address a cloud platform serves its own control plane on.
var refused4 = mustRanges(
	"0.0.0.0/32", "unspecified",
	"0.0.0.0/8", "this-network",
	"10.0.0.0/8", "private",
	"100.64.0.0/10", "shared (CGNAT)",
	"127.0.0.0/8", "loopback",
	// Cloud metadata (AWS, GCP, Azure, Oracle: 169.254.169.254) lives here.
	"169.254.0.0/16", "link-local",
	"172.16.0.0/12", "private",
	"192.0.0.0/24", "IETF protocol assignment",
	"192.0.2.0/24", "documentation",
	"192.88.99.0/24", "6to4 relay anycast",
	"192.168.0.0/16", "private",
	"198.18.0.0/15", "benchmarking",
	"198.51.100.0/24", "documentation",
	"203.0.113.0/24", "documentation",
	"224.0.0.0/4", "multicast",
	"240.0.0.0/4", "reserved", // 255.255.255.255 broadcast included
	// Azure's WireServer: a public address every Azure VM reaches its host
	// platform (agent channel, health and certificates) through.
	"168.63.129.16/32", "cloud platform",
)

// refused6 are IPv6 ranges refused inside and around 2000::/3. Forms that
// embed an IPv4 address are handled before this list (see Refused).
var refused6 = mustRanges(
	"::/128", "unspecified",
	"::1/128", "loopback",
	// IPv4-compatible addresses (::a.b.c.d) were deprecated by RFC 4291 and
	// are never routed; refusing the whole range needs no decoding.
	"::/96", "IPv4-compatible",
	// SIIT IPv4-translated addresses (::ffff:0:a.b.c.d, RFC 2765).
	"::ffff:0:0:0/96", "IPv4-translated",
	// RFC 8215 local-use NAT64: the operator picks where the IPv4 address
	// sits, so it cannot be decoded; it is local by definition.
	"64:ff9b:1::/48", "local-use NAT64",
	"100::/64", "discard-only",
	// Teredo: the client's IPv4 address is obfuscated (inverted) in the low
	// 32 bits and a NAT maps it; the protocol is obsolete, so the whole
	// prefix is refused rather than decoded.
	"2001::/32", "Teredo",
	"2001:2::/48", "benchmarking",
	"2001:10::/28", "ORCHID",
	"2001:20::/28", "ORCHIDv2",
	"2001:db8::/32", "documentation",
	"3fff::/20", "documentation",
	"fc00::/7", "unique-local",
	"fe80::/10", "link-local",
	"fec0::/10", "site-local",
	"ff00::/8", "multicast",
)

var (
	// globalUnicast6 is 2000::/3, where every public IPv6 address lives;
	// anything outside it (bar NAT64 below) is reserved or local.
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
	// nat64 is the well-known NAT64 prefix (RFC 6052): the low 32 bits are
	// an IPv4 address the translator connects to.
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	// sixToFour is 6to4 (RFC 3056): bits 16-47 are the IPv4 address of the
	// site's relay, which delivers there.
	sixToFour = netip.MustParsePrefix("2002::/16")
)

func mustRanges(pairs ...string) []v4Range {
	out := make([]v4Range, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, v4Range{netip.MustParsePrefix(pairs[i]), pairs[i+1]})
	}
	return out
}

// Refused reports whether addr is an address no tenant may make the
// platform dial, and names its range. It decides on the address alone,
// whatever its spelling:
//
//   - a zone (fe80::1%eth0, ::1%lo) is stripped first: netip prefixes never
//     contain a zoned address, so a check without this misses them;
//   - IPv4-mapped IPv6 (::ffff:a.b.c.d) is judged as its IPv4 address;
//   - NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses are judged by
//     the IPv4 address they embed, so a public IPv4 host stays reachable
//     through a translator and a private one does not;
//   - IPv4-compatible (::/96), IPv4-translated, local-use NAT64
//     (64:ff9b:1::/48) and Teredo (2001::/32) are refused whole (see
//     refused6 for why each is not decoded);
//   - any other IPv6 address outside global unicast 2000::/3 is reserved
//     and refused, so ranges IANA assigns later fail closed.
//
// An invalid address is refused.
func Refused(addr netip.Addr) (rangeName string, refused bool) {
	if !addr.IsValid() {
		return "invalid", true
	}
	a := addr.WithZone("").Unmap()
	if a.Is4() {
		return refusedV4(a)
	}
	switch {
	case nat64.Contains(a):
		b := a.As16()
		if name, bad := refusedV4(netip.AddrFrom4([4]byte(b[12:16]))); bad {
			return "NAT64 of " + name, true
		}
		return "", false
	case sixToFour.Contains(a):
		b := a.As16()
		if name, bad := refusedV4(netip.AddrFrom4([4]byte(b[2:6]))); bad {
			return "6to4 of " + name, true
		}
		return "", false
	}
	for _, r := range refused6 {
		if r.prefix.Contains(a) {
			return r.name, true
		}
	}
	if !globalUnicast6.Contains(a) {
		return "reserved", true
	}
	return "", false
}

func refusedV4(a netip.Addr) (string, bool) {
	for _, r := range refused4 {
		if r.prefix.Contains(a) {
			return r.name, true
		}
	}
	return "", false
}
