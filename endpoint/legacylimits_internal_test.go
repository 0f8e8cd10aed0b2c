package endpoint

import (
	"testing"
	"time"

	"github.com/opsmcp/platform/auth"
)

// TestStartLimitsBoundEachCallerAndTheTenant: a caller gets its
// minute's allowance at once and then one start every 60/n seconds; the
// tenant's allowance bounds all its callers together, another tenant's
// is its own; a refused start takes nothing from either bucket; buckets
// full again are forgotten.
func TestStartLimitsBoundEachCallerAndTheTenant(t *testing.T) {
	s := newStartLimits(2, 3)
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	steps := []struct {
		tenant, caller string
		at             time.Duration
		ok             bool
	}{
		{"t1", "a", 0, true},
		{"t1", "a", 0, true},
		{"t1", "a", 0, false}, // a's two are taken
		{"t1", "b", 0, true},  // the tenant's third
		{"t1", "c", 0, false}, // the tenant's three are taken
		{"t2", "a", 0, true},  // another tenant: its own buckets
		{"t1", "a", 20 * time.Second, false},
		{"t1", "a", 30 * time.Second, true}, // a has one again (2 a minute), the tenant too (3 a minute)
		{"t1", "b", 30 * time.Second, false},
	}
	for i, st := range steps {
		wait, ok := s.allow(st.tenant, st.caller, now.Add(st.at))
		if ok != st.ok {
			t.Fatalf("step %d (%s/%s at %s): allowed %v, want %v", i, st.tenant, st.caller, st.at, ok, st.ok)
		}
		if !ok && (wait <= 0 || wait > time.Minute) {
			t.Fatalf("step %d: refused with a wait of %s", i, wait)
		}
	}
	// A minute and more later every bucket is full: the sweep forgets
	// them all.
	s.allow("t3", "z", now.Add(5*time.Minute))
	if n := len(s.buckets); n != 2 {
		t.Fatalf("%d buckets after the sweep; want only t3's two", n)
	}
}

// TestCallerKeyNamesACallerHoweverItIsSpelt: a principal is one caller
// however many tokens it holds (its binding: issuer, subject, client);
// an address is one caller however it is written, an IPv4 one mapped
// into IPv6 included, and an IPv6 caller is its /64.
func TestCallerKeyNamesACallerHoweverItIsSpelt(t *testing.T) {
	ada := &auth.Principal{Issuer: "https://id.example", Subject: "ada", Client: "app"}
	adaAgain := &auth.Principal{Issuer: "https://id.example", Subject: "ada", Client: "app", Scopes: []string{"other"}}
	bob := &auth.Principal{Issuer: "https://id.example", Subject: "bob", Client: "app"}
	same := [][2]string{
		{callerKey(ada, "192.0.2.1"), callerKey(adaAgain, "198.51.100.9")},
		{callerKey(nil, "203.0.113.7"), callerKey(nil, "::ffff:203.0.113.7")},
		{callerKey(nil, "2001:db8:1:2::1"), callerKey(nil, "2001:db8:1:2:ffff:ffff:ffff:ffff")},
		{callerKey(nil, "2001:DB8:1:2::1"), callerKey(nil, "2001:db8:0001:0002:0:0:0:1")},
	}
	for _, p := range same {
		if p[0] != p[1] {
			t.Errorf("one caller, two keys: %q and %q", p[0], p[1])
		}
	}
	differ := [][2]string{
		{callerKey(ada, "192.0.2.1"), callerKey(bob, "192.0.2.1")},
		{callerKey(nil, "203.0.113.7"), callerKey(nil, "203.0.113.8")},
		{callerKey(nil, "2001:db8:1:2::1"), callerKey(nil, "2001:db8:1:3::1")},
		{callerKey(ada, ""), callerKey(nil, "")},
	}
	for _, p := range differ {
		if p[0] == p[1] {
			t.Errorf("two callers, one key: %q", p[0])
		}
	}
}
