package auth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"reflect"
	"testing"
	"time"
)

func cachedVerifier(t testing.TB, ti *testIssuer, size int) (*Verifier, *fakeClock) {
	clock := &fakeClock{t: time.Now()}
	v := NewVerifier(VerifierOptions{Egress: policyAllowing(t, ti.URL), TokenCacheTTL: time.Minute,
		TokenCacheSize: size, MinRefetch: time.Nanosecond})
	v.Now = clock.Now
	return v, clock
}

// remembered reports whether the token is in the cache for the tenant
// under cfg, without touching its recency.
func remembered(v *Verifier, tok string, cfg Config, resource string) bool {
	v.tokens.mu.Lock()
	defer v.tokens.mu.Unlock()
	b := v.tokens.tenants[resource]
	return b != nil && b.config == settingsFingerprint(&cfg, resource) && b.entries[sha256.Sum256([]byte(tok))] != nil
}

// A remembered token gives the same principal as a fresh verification,
// and is answered without the issuer: with its server down and its keys
// forgotten by a new key set object, the cached token still verifies,
// while a new token of the same issuer cannot.
func TestVerifiedTokensAreRemembered(t *testing.T) {
	ti := newTestIssuer(t)
	v, clock := cachedVerifier(t, ti, 100)
	cfg := tenantConfig(ti.URL)
	tok := ti.token(t, clock.Now(), "alice", resourceA)
	first, err := v.Verify(context.Background(), tok, cfg, resourceA)
	if err != nil {
		t.Fatal(err)
	}
	if !remembered(v, tok, cfg, resourceA) {
		t.Fatal("a verified token is not remembered")
	}
	again, err := v.Verify(context.Background(), tok, cfg, resourceA)
	if err != nil || !reflect.DeepEqual(first, again) || first == again {
		t.Fatalf("cached answer %+v, %v; want a copy of %+v", again, err, first)
	}
	again.Scopes[0] = "changed by the caller"
	if third, _ := v.Verify(context.Background(), tok, cfg, resourceA); third.Scopes[0] != "mcp" {
		t.Fatal("a caller's change to a returned principal reached the cache")
	}
	before := ti.jwksFetches.Load() + ti.discoveries.Load()
	for range 10 {
		if _, err := v.Verify(context.Background(), tok, cfg, resourceA); err != nil {
			t.Fatal(err)
		}
	}
	if n := ti.jwksFetches.Load() + ti.discoveries.Load(); n != before {
		t.Fatalf("remembered tokens reached the issuer %d times", n-before)
	}
	// Past the cache's TTL the entry is not used, whatever the token's own
	// expiry (an hour here).
	clock.Add(61 * time.Second)
	if _, ok := v.tokens.get(resourceA, settingsFingerprint(&cfg, resourceA), sha256.Sum256([]byte(tok)), clock.Now()); ok {
		t.Fatal("an entry outlived the cache's TTL")
	}
}

// An expired token is refused, remembered or not, with the reason a fresh
// verification gives; so is one not yet valid under a clock moved back.
func TestRememberedTokensAreStillCheckedForTime(t *testing.T) {
	ti := newTestIssuer(t)
	v, clock := cachedVerifier(t, ti, 100)
	v.tokens.ttl = time.Hour // so only the token's own times can refuse it
	cfg := tenantConfig(ti.URL)
	now := clock.Now()
	claims := ti.claims(now, "alice", resourceA)
	claims["exp"] = now.Add(2 * time.Minute).Unix()
	tok := ti.sign(t, "k1", claims)
	if _, err := v.Verify(context.Background(), tok, cfg, resourceA); err != nil {
		t.Fatal(err)
	}
	clock.Add(3 * time.Minute)
	if _, err := v.Verify(context.Background(), tok, cfg, resourceA); reason(err) != "expired" {
		t.Fatalf("an expired remembered token: %v", err)
	}
	clock.Add(-3 * time.Minute)
	if _, err := v.Verify(context.Background(), tok, cfg, resourceA); err != nil {
		t.Fatal(err)
	}
	clock.Add(-2 * time.Hour)
	if _, err := v.Verify(context.Background(), tok, cfg, resourceA); reason(err) != "not_yet_valid" {
		t.Fatalf("a remembered token under a clock before its nbf: %v", err)
	}

	// The checks of a remembered entry themselves, entry by entry: each
	// refusal a fresh verification would give.
	e := &tokenEntry{expiry: now.Add(time.Minute), notBefore: now, issuedAt: now,
		audience: []string{resourceA}, principal: Principal{Issuer: ti.URL, Subject: "s", Client: "c"}}
	v.Now = func() time.Time { return now }
	for name, c := range map[string]struct {
		mutate func(*tokenEntry, *Config)
		want   string
	}{
		"good":               {func(*tokenEntry, *Config) {}, ""},
		"expired":            {func(e *tokenEntry, _ *Config) { e.expiry = now.Add(-time.Second) }, "expired"},
		"not yet valid":      {func(e *tokenEntry, _ *Config) { e.notBefore = now.Add(6 * time.Minute) }, "not_yet_valid"},
		"issued in future":   {func(e *tokenEntry, _ *Config) { e.issuedAt = now.Add(2 * time.Minute) }, "issued_in_future"},
		"other audience":     {func(e *tokenEntry, _ *Config) { e.audience = []string{resourceB} }, "audience"},
		"issuer not trusted": {func(_ *tokenEntry, c *Config) { c.Issuers[0].Issuer = "https://other.example" }, "untrusted_issuer"},
		"machine refused":    {func(e *tokenEntry, _ *Config) { e.principal.Subject = "" }, "machine_principal"},
	} {
		ec, cc := *e, tenantConfig(ti.URL)
		c.mutate(&ec, &cc)
		if _, err := v.recheck(&ec, &cc, resourceA); reason(err) != c.want {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// A token signed with a key the issuer has since removed is refused once
// the key set is refreshed, although it was remembered: the refresh moves
// the key set's generation and every token remembered under the old one
// is verified again.
func TestATokenOfARemovedKeyIsRefusedOnceKeysAreRefreshed(t *testing.T) {
	ti := newTestIssuer(t)
	ti.addKey("k2", false)
	ti.addKey("never-published", false)
	v, clock := cachedVerifier(t, ti, 100)
	cfg := tenantConfig(ti.URL)
	old := ti.token(t, clock.Now(), "alice", resourceA)
	if _, err := v.Verify(context.Background(), old, cfg, resourceA); err != nil {
		t.Fatal(err)
	}
	// A refetch (for an unknown kid) that returns the same keys is no
	// change: the remembered token stays.
	if _, err := v.Verify(context.Background(), ti.sign(t, "never-published", ti.claims(clock.Now(), "x", resourceA)), cfg, resourceA); reason(err) != "unknown_key" {
		t.Fatalf("unknown kid: %v", err)
	}
	if _, err := v.Verify(context.Background(), old, cfg, resourceA); err != nil || !remembered(v, old, cfg, resourceA) {
		t.Fatalf("a refetch without change dropped the token: %v", err)
	}
	// The issuer rotates: k1 out, k2 in. A token of k2 refreshes the keys.
	ti.publish("k2")
	clock.Add(time.Second)
	if _, err := v.Verify(context.Background(), ti.sign(t, "k2", ti.claims(clock.Now(), "bob", resourceA)), cfg, resourceA); err != nil {
		t.Fatalf("a token of the new key: %v", err)
	}
	clock.Add(time.Second)
	if _, err := v.Verify(context.Background(), old, cfg, resourceA); reason(err) != "unknown_key" {
		t.Fatalf("a remembered token of the removed key: %v", err)
	}
	if remembered(v, old, cfg, resourceA) {
		t.Fatal("the token of the removed key is still remembered")
	}
}

// A change of the tenant's auth settings drops what was verified under
// the old ones; a token remembered for one tenant is nothing to another.
func TestSettingsChangesAndOtherTenantsMiss(t *testing.T) {
	ti := newTestIssuer(t)
	v, clock := cachedVerifier(t, ti, 100)
	cfg := tenantConfig(ti.URL)
	tok := ti.token(t, clock.Now(), "alice", resourceA)
	if _, err := v.Verify(context.Background(), tok, cfg, resourceA); err != nil {
		t.Fatal(err)
	}
	// Tenant B trusts the same issuer; the token's audience is A's.
	if _, err := v.Verify(context.Background(), tok, cfg, resourceB); reason(err) != "audience" {
		t.Fatalf("A's token at B: %v", err)
	}
	// A now accepts only another audience: refused at once.
	narrowed := tenantConfig(ti.URL)
	narrowed.Issuers[0].Audiences = []string{"https://elsewhere.example"}
	if _, err := v.Verify(context.Background(), tok, narrowed, resourceA); reason(err) != "audience" {
		t.Fatalf("after the audience changed: %v", err)
	}
	if remembered(v, tok, cfg, resourceA) {
		t.Fatal("the settings change left the old entries")
	}
	// Any other change of the settings, a scope here, misses too.
	if _, err := v.Verify(context.Background(), tok, cfg, resourceA); err != nil {
		t.Fatal(err)
	}
	scoped := tenantConfig(ti.URL)
	scoped.Scopes = []string{"admin"}
	if remembered(v, tok, scoped, resourceA) {
		t.Fatal("a token is remembered under settings it was not verified under")
	}
}

// A flood of distinct valid tokens never grows the cache past its bound,
// and a tenant flooding it churns its own share: another tenant's
// remembered tokens stay.
func TestTheCacheStaysWithinItsBound(t *testing.T) {
	ti := newTestIssuer(t)
	const size = 64
	v, clock := cachedVerifier(t, ti, size)
	cfg := tenantConfig(ti.URL)
	var kept []string
	for i := range 8 {
		tok := ti.token(t, clock.Now(), fmt.Sprintf("b-user-%d", i), resourceB)
		if _, err := v.Verify(context.Background(), tok, cfg, resourceB); err != nil {
			t.Fatal(err)
		}
		kept = append(kept, tok)
	}
	for i := range 1000 {
		tok := ti.token(t, clock.Now(), fmt.Sprintf("a-user-%d", i), resourceA)
		if _, err := v.Verify(context.Background(), tok, cfg, resourceA); err != nil {
			t.Fatal(err)
		}
		if n := v.tokens.len(); n > size {
			t.Fatalf("after %d tokens the cache holds %d, bound %d", i+1, n, size)
		}
	}
	for i, tok := range kept {
		if !remembered(v, tok, cfg, resourceB) {
			t.Errorf("tenant B's token %d was evicted by tenant A's flood", i)
		}
	}
	if n := v.tokens.len(); n != size {
		t.Errorf("the cache holds %d after the flood, want it full at %d", n, size)
	}
}

// With the cache off (TTL 0), nothing is remembered.
func TestTheCacheCanBeTurnedOff(t *testing.T) {
	ti := newTestIssuer(t)
	v := NewVerifier(VerifierOptions{Egress: policyAllowing(t, ti.URL)})
	if v.tokens != nil {
		t.Fatal("a cache without a TTL")
	}
	if _, err := v.Verify(context.Background(), ti.token(t, time.Now(), "alice", resourceA), tenantConfig(ti.URL), resourceA); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkVerify is the verification of one ES256 access token, as every
// round of a client presenting the same token pays it: with the token
// cache (the default) and without it.
func BenchmarkVerify(b *testing.B) {
	ti := newTestIssuer(b)
	cfg := tenantConfig(ti.URL)
	tok := ti.token(b, time.Now(), "alice", resourceA)
	for _, c := range []struct {
		name string
		ttl  time.Duration
	}{{"cached", time.Minute}, {"uncached", 0}} {
		b.Run(c.name, func(b *testing.B) {
			v := NewVerifier(VerifierOptions{Egress: policyAllowing(b, ti.URL), TokenCacheTTL: c.ttl})
			ctx := context.Background()
			if _, err := v.Verify(ctx, tok, cfg, resourceA); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(ctx, tok, cfg, resourceA); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
