package endpoint

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/opsmcp/platform/auth"
)

// startLimits bounds the legacy sessions started a minute on this
// replica, per caller of a tenant and per tenant: each initialize writes
// a row, and a public tenant's callers need no token to send one. Each
// bound is a token bucket (golang.org/x/time/rate) refilled evenly over
// the minute and as deep as the minute's allowance. A tenant's bucket is
// taken from first, so a flood of new callers makes no more caller
// buckets than the tenant's allowance; buckets full again are forgotten
// once a minute.
type startLimits struct {
	perCaller, perTenant int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	swept   time.Time
}

func newStartLimits(perCaller, perTenant int) *startLimits {
	if perCaller <= 0 {
		perCaller = 30
	}
	if perTenant <= 0 {
		perTenant = 600
	}
	return &startLimits{perCaller: perCaller, perTenant: perTenant, buckets: map[string]*rate.Limiter{}}
}

// allow takes one start for caller on tenant at now; when the tenant's
// or the caller's bucket is empty it takes none and says how long until
// one would be.
func (s *startLimits) allow(tenant, caller string, now time.Time) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.swept) >= time.Minute {
		s.sweep(now)
	}
	t := s.bucket("t\x00"+tenant, s.perTenant)
	rt := t.ReserveN(now, 1)
	if wait := rt.DelayFrom(now); wait > 0 {
		rt.CancelAt(now)
		return wait, false
	}
	c := s.bucket("c\x00"+tenant+"\x00"+caller, s.perCaller)
	rc := c.ReserveN(now, 1)
	if wait := rc.DelayFrom(now); wait > 0 {
		rc.CancelAt(now)
		rt.CancelAt(now)
		return wait, false
	}
	return 0, true
}

func (s *startLimits) bucket(key string, perMinute int) *rate.Limiter {
	b := s.buckets[key]
	if b == nil {
		b = rate.NewLimiter(rate.Limit(float64(perMinute)/60), perMinute)
		s.buckets[key] = b
	}
	return b
}

// sweep forgets the buckets that are full again: a new one would be the
// same.
func (s *startLimits) sweep(now time.Time) {
	for k, b := range s.buckets {
		if b.TokensAt(now) >= float64(b.Burst()) {
			delete(s.buckets, k)
		}
	}
	s.swept = now
}

// callerKey names who starts a session: the token's principal (however
// many tokens it holds), or on a public tenant the caller's address, an
// IPv6 one by its /64 (one machine's share of a network).
func callerKey(p *auth.Principal, addr string) string {
	if p != nil {
		return "p:" + p.Binding()
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return "a:" + addr
	}
	ip = ip.Unmap()
	if ip.Is6() {
		pfx, _ := ip.Prefix(64)
		return "a:" + pfx.String()
	}
	return "a:" + ip.String()
}

type clientIPKey struct{}

// WithClientIP gives the endpoint the caller's address as the server
// resolved it (through the proxies it trusts); without it the
// connecting peer is the caller.
func WithClientIP(ctx context.Context, ip string) context.Context {
	return context.WithValue(ctx, clientIPKey{}, ip)
}
