package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsmcp/platform/egress"
	"github.com/opsmcp/platform/testkit/oidctest"
)

const (
	resourceA = "https://mcp.example/t/a/mcp"
	resourceB = "https://mcp.example/t/b/mcp"
)

// arrived waits for a held request to reach its issuer. The bound only
// keeps a broken verifier from hanging the test run; nothing is timed.
func arrived(t *testing.T, entered <-chan struct{}) {
	t.Helper()
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the request never reached the issuer")
	}
}

func reason(err error) string {
	var te *TokenError
	if errors.As(err, &te) {
		return te.Reason
	}
	if err == nil {
		return ""
	}
	return "not a TokenError: " + err.Error()
}

// While tenant A's issuer hangs in discovery, tenant B's tokens, from a
// real OpenID Provider, verify: B finishes while A is still waiting,
// which the ordering of the two channels shows (no clock involved).
func TestAHangingIssuerDoesNotHoldUpAnotherTenant(t *testing.T) {
	hanging := newTestIssuer(t)
	hanging.set(func(ti *testIssuer) { ti.holdDiscovery = true })
	op := oidctest.Start(t)
	v := NewVerifier(VerifierOptions{Egress: policyAllowing(t, hanging.URL, op.Issuer)})
	cfgA := tenantConfig(hanging.URL)
	cfgB := Config{Issuers: []Issuer{{Issuer: op.Issuer, Audiences: []string{oidctest.ClientA}}}}
	tokB := op.UserToken(t, oidctest.ClientA, op.UserName(1))

	doneA := make(chan error, 1)
	go func() {
		_, err := v.Verify(context.Background(), hanging.token(t, time.Now(), "alice", resourceA), cfgA, resourceA)
		doneA <- err
	}()
	arrived(t, hanging.entered) // A's discovery is in flight and held
	p, err := v.Verify(context.Background(), tokB, cfgB, resourceB)
	if err != nil || p.Issuer != op.Issuer {
		t.Fatalf("tenant B while A's issuer hangs: %v, %v", p, err)
	}
	select {
	case err := <-doneA:
		t.Fatalf("tenant A finished (%v) before its issuer answered", err)
	default:
	}
	hanging.unhold()
	if err := <-doneA; err != nil {
		t.Fatalf("tenant A once its issuer answered: %v", err)
	}
}

// A refetch of an issuer's keys (an unknown kid) that hangs does not hold
// up tokens signed with a key already held, of the same issuer.
func TestAHangingKeyRefetchDoesNotHoldUpKnownKeys(t *testing.T) {
	ti := newTestIssuer(t)
	ti.addKey("k2", false)
	v := NewVerifier(VerifierOptions{Egress: policyAllowing(t, ti.URL), MinRefetch: time.Nanosecond})
	cfg := tenantConfig(ti.URL)
	now := time.Now()
	if _, err := v.Verify(context.Background(), ti.token(t, now, "alice", resourceA), cfg, resourceA); err != nil {
		t.Fatal(err)
	}
	ti.set(func(ti *testIssuer) { ti.holdJWKS = true })
	unknown := make(chan error, 1)
	go func() {
		_, err := v.Verify(context.Background(), ti.sign(t, "k2", ti.claims(now, "mallory", resourceA)), cfg, resourceA)
		unknown <- err
	}()
	arrived(t, ti.entered) // the refetch for k2 is in flight and held
	if _, err := v.Verify(context.Background(), ti.token(t, now, "bob", resourceA), cfg, resourceA); err != nil {
		t.Fatalf("a token with a held key during a hanging refetch: %v", err)
	}
	select {
	case err := <-unknown:
		t.Fatalf("the unknown-kid token finished (%v) before the refetch answered", err)
	default:
	}
	ti.unhold()
	if err := <-unknown; reason(err) != "unknown_key" {
		t.Fatalf("unknown kid: %v", err)
	}
}

// N concurrent first uses of one issuer make one discovery and one JWKS
// fetch, counted at the issuer; all N verify.
func TestConcurrentFirstUsesShareOneFetch(t *testing.T) {
	ti := newTestIssuer(t)
	ti.set(func(ti *testIssuer) { ti.holdDiscovery = true })
	v := NewVerifier(VerifierOptions{Egress: policyAllowing(t, ti.URL)})
	cfg := tenantConfig(ti.URL)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		tok := ti.token(t, time.Now(), fmt.Sprintf("user-%d", i), resourceA)
		wg.Go(func() {
			_, err := v.Verify(context.Background(), tok, cfg, resourceA)
			errs <- err
		})
	}
	arrived(t, ti.entered)
	ti.unhold()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if d, j := ti.discoveries.Load(), ti.jwksFetches.Load(); d != 1 || j != 1 {
		t.Fatalf("%d discovery and %d JWKS fetches for %d concurrent first uses, want 1 and 1", d, j, n)
	}
}

// A caller that gives up does not fail the shared discovery for the
// others: the fetch runs on, to its own timeout.
func TestAnImpatientCallerDoesNotFailTheSharedDiscovery(t *testing.T) {
	ti := newTestIssuer(t)
	ti.set(func(ti *testIssuer) { ti.holdDiscovery = true })
	v := NewVerifier(VerifierOptions{Egress: policyAllowing(t, ti.URL)})
	cfg := tenantConfig(ti.URL)
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := v.Verify(ctx, ti.token(t, time.Now(), "alice", resourceA), cfg, resourceA)
		first <- err
	}()
	arrived(t, ti.entered)
	cancel()
	if err := <-first; reason(err) != "discovery" {
		t.Fatalf("cancelled caller: %v", err)
	}
	ti.unhold()
	if _, err := v.Verify(context.Background(), ti.token(t, time.Now(), "bob", resourceA), cfg, resourceA); err != nil {
		t.Fatalf("after the impatient caller left: %v", err)
	}
	if n := ti.discoveries.Load(); n != 1 {
		t.Fatalf("%d discoveries, want the one the first caller started", n)
	}
}

// A failing issuer is asked once per failure window, not once per token;
// after the window it is asked again, and a recovered issuer then works.
func TestAFailingIssuerIsAskedOncePerFailureWindow(t *testing.T) {
	ti := newTestIssuer(t)
	ti.set(func(ti *testIssuer) { ti.failDiscovery = true })
	clock := &fakeClock{t: time.Now()}
	v := NewVerifier(VerifierOptions{Egress: policyAllowing(t, ti.URL), FailureTTL: 10 * time.Second})
	v.Now = clock.Now
	cfg := tenantConfig(ti.URL)
	tok := ti.token(t, clock.Now(), "alice", resourceA)
	for range 20 {
		if _, err := v.Verify(context.Background(), tok, cfg, resourceA); reason(err) != "discovery" {
			t.Fatalf("failing issuer: %v", err)
		}
	}
	if n := ti.discoveries.Load(); n != 1 {
		t.Fatalf("%d discovery requests for 20 tokens within the failure window, want 1", n)
	}
	ti.set(func(ti *testIssuer) { ti.failDiscovery = false })
	clock.Add(9 * time.Second)
	if _, err := v.Verify(context.Background(), tok, cfg, resourceA); reason(err) != "discovery" {
		t.Fatalf("still within the window: %v", err)
	}
	clock.Add(2 * time.Second)
	if _, err := v.Verify(context.Background(), tok, cfg, resourceA); err != nil {
		t.Fatalf("after the window, recovered: %v", err)
	}
	if n := ti.discoveries.Load(); n != 2 {
		t.Fatalf("%d discovery requests, want 2", n)
	}
}

// However many issuers tenants name, the verifier keeps at most
// MaxIssuers of them (failures included), forgetting the least recently
// used; a forgotten one is asked again on its next use.
func TestIssuersKeptAreBounded(t *testing.T) {
	ti := newTestIssuer(t)
	ti.set(func(ti *testIssuer) { ti.failDiscovery = true })
	v := NewVerifier(VerifierOptions{Egress: policyAllowing(t, ti.URL), MaxIssuers: 3})
	for i := range 10 {
		iss := fmt.Sprintf("%s/tenant-%d", ti.URL, i)
		tok := ti.sign(t, "k1", map[string]any{"iss": iss, "sub": "x", "aud": resourceA, "exp": time.Now().Add(time.Hour).Unix()})
		if _, err := v.Verify(context.Background(), tok, tenantConfig(iss), resourceA); reason(err) != "discovery" {
			t.Fatalf("issuer %d: %v", i, err)
		}
		v.mu.Lock()
		n, m := len(v.issuers), v.order.Len()
		v.mu.Unlock()
		if n > 3 || m != n {
			t.Fatalf("after %d issuers: %d kept (%d in order), want at most 3", i+1, n, m)
		}
	}
	if n := ti.discoveries.Load(); n != 10 {
		t.Fatalf("%d discoveries for 10 issuers", n)
	}
	iss := ti.URL + "/tenant-0"
	tok := ti.sign(t, "k1", map[string]any{"iss": iss, "sub": "x", "aud": resourceA, "exp": time.Now().Add(time.Hour).Unix()})
	_, _ = v.Verify(context.Background(), tok, tenantConfig(iss), resourceA)
	if n := ti.discoveries.Load(); n != 11 {
		t.Fatalf("the forgotten issuer was not asked again: %d discoveries", n)
	}
}

// Without private targets allowed, an issuer on loopback is never
// fetched, in any spelling, and neither is one behind a redirect; with
// them allowed (the operator setting), it works.
func TestIssuersOnRefusedAddressesAreNeverFetched(t *testing.T) {
	ti := newTestIssuer(t)
	strict := NewVerifier(VerifierOptions{})
	port := ti.addrPort().Port()
	for _, iss := range []string{
		ti.URL, fmt.Sprintf("http://localhost:%d", port), fmt.Sprintf("http://[::1]:%d", port),
		fmt.Sprintf("http://[::ffff:127.0.0.1]:%d", port), fmt.Sprintf("http://[::1%%25lo]:%d", port),
		fmt.Sprintf("http://0.0.0.0:%d", port), "http://169.254.169.254/latest",
	} {
		claims := ti.claims(time.Now(), "alice", resourceA)
		claims["iss"] = iss
		_, err := strict.Verify(context.Background(), ti.sign(t, "k1", claims), tenantConfig(iss), resourceA)
		if reason(err) != "discovery" {
			t.Errorf("%s: %v, want a discovery failure", iss, err)
		}
	}
	if n := ti.discoveries.Load(); n != 0 {
		t.Fatalf("the loopback issuer was fetched %d times", n)
	}
	open := NewVerifier(VerifierOptions{Egress: egress.Policy{AllowPrivate: true}})
	if _, err := open.Verify(context.Background(), ti.token(t, time.Now(), "alice", resourceA), tenantConfig(ti.URL), resourceA); err != nil {
		t.Fatalf("with private targets allowed: %v", err)
	}
}

// A discovery document or JWKS that redirects to a refused address is not
// followed there. The issuer itself is allowed by exact address and port
// (so every other loopback port stays refused, as in production); the
// refused server serves a valid answer and counts requests, so reaching it
// would show.
func TestRedirectsOfDiscoveryAndKeysToRefusedAddressesFail(t *testing.T) {
	ti := newTestIssuer(t)
	elsewhere := newTestIssuer(t) // a working issuer on a refused port
	v := NewVerifier(VerifierOptions{Egress: policyAllowing(t, ti.URL)})
	cfg := tenantConfig(ti.URL)
	ti.set(func(ti *testIssuer) {
		ti.discoveryBody = func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elsewhere.URL+"/.well-known/openid-configuration", http.StatusFound)
		}
	})
	if _, err := v.Verify(context.Background(), ti.token(t, time.Now(), "alice", resourceA), cfg, resourceA); reason(err) != "discovery" {
		t.Fatalf("discovery redirected to a refused address: %v", err)
	}
	// The JWKS: discovery answers, the key set redirects. (Only the first
	// target has a server behind it to count a request; the others show
	// the fetch fails, not where.)
	for _, target := range []string{elsewhere.URL + "/jwks", "http://169.254.169.254/jwks",
		strings.Replace(elsewhere.URL, "127.0.0.1", "[::1%25lo]", 1) + "/jwks"} {
		ti.set(func(ti *testIssuer) {
			ti.discoveryBody = nil
			ti.jwksBody = func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, target, http.StatusFound) }
		})
		v := NewVerifier(VerifierOptions{Egress: policyAllowing(t, ti.URL)})
		if _, err := v.Verify(context.Background(), ti.token(t, time.Now(), "alice", resourceA), cfg, resourceA); reason(err) != "unknown_key" {
			t.Fatalf("JWKS redirected to %s: %v", target, err)
		}
	}
	if d, j := elsewhere.discoveries.Load(), elsewhere.jwksFetches.Load(); d+j != 0 {
		t.Fatalf("the refused server was reached: %d discoveries, %d JWKS fetches", d, j)
	}
	// Control: a redirect within the allowed issuer is followed.
	ti.set(func(ti *testIssuer) {
		ti.jwksBody = nil
		ti.discoveryBody = func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("hop") == "" {
				http.Redirect(w, r, r.URL.Path+"?hop=1", http.StatusFound)
				return
			}
			ti.discoveryBody = nil
			fmt.Fprintf(w, `{"issuer":%q,"jwks_uri":%q}`, ti.URL, ti.URL+"/jwks")
		}
	})
	v = NewVerifier(VerifierOptions{Egress: policyAllowing(t, ti.URL)})
	if _, err := v.Verify(context.Background(), ti.token(t, time.Now(), "alice", resourceA), cfg, resourceA); err != nil {
		t.Fatalf("redirect within the allowed issuer: %v", err)
	}
}

// Discovery documents and key sets are bounded in size, and a fetch that
// never answers ends at FetchTimeout with a discovery failure.
func TestDiscoveryAndKeySetFetchesAreBounded(t *testing.T) {
	ti := newTestIssuer(t)
	huge := strings.Repeat(" ", 2<<20)
	ti.set(func(ti *testIssuer) {
		ti.discoveryBody = func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `{"issuer":%q,"jwks_uri":%q,"pad":"%s"}`, ti.URL, ti.URL+"/jwks", huge)
		}
	})
	cfg := tenantConfig(ti.URL)
	v := NewVerifier(VerifierOptions{Egress: policyAllowing(t, ti.URL)})
	if _, err := v.Verify(context.Background(), ti.token(t, time.Now(), "alice", resourceA), cfg, resourceA); reason(err) != "discovery" {
		t.Fatalf("2 MiB discovery document: %v", err)
	}
	ti.set(func(ti *testIssuer) {
		ti.discoveryBody = nil
		ti.jwksBody = func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, `{"keys":[],"pad":"%s"}`, huge) }
	})
	v = NewVerifier(VerifierOptions{Egress: policyAllowing(t, ti.URL)})
	if _, err := v.Verify(context.Background(), ti.token(t, time.Now(), "alice", resourceA), cfg, resourceA); reason(err) != "unknown_key" {
		t.Fatalf("2 MiB JWKS: %v", err)
	}
	ti.set(func(ti *testIssuer) { ti.jwksBody, ti.holdDiscovery = nil, true })
	v = NewVerifier(VerifierOptions{Egress: policyAllowing(t, ti.URL), FetchTimeout: 50 * time.Millisecond})
	if _, err := v.Verify(context.Background(), ti.token(t, time.Now(), "alice", resourceA), cfg, resourceA); reason(err) != "discovery" {
		t.Fatalf("hanging discovery: %v", err)
	}
}

func TestIssuerSettingsAreValidated(t *testing.T) {
	ok := []string{"https://id.example.com", "https://id.example.com/realms/acme", "http://127.0.0.1:8080",
		"http://localhost:9000/x", "http://[::1]:8080", "http://127.9.9.9"}
	for _, iss := range ok {
		if errs := (Config{Issuers: []Issuer{{Issuer: iss}}}).Validate("auth"); len(errs) != 0 {
			t.Errorf("%s: %v", iss, errs)
		}
	}
	bad := []string{"http://id.example.com", "http://10.0.0.1", "http://169.254.169.254", "http://[::1%25lo]:80",
		"http://[fe80::1%25eth0]", "https://user:pass@id.example.com", "https://id.example.com?x=1",
		"https://id.example.com#f", "ftp://id.example.com", "id.example.com", "https://", "http://0.0.0.0",
		"http://[::ffff:10.0.0.1]", "http://2130706433", "http://localhost.example.com"}
	for _, iss := range bad {
		if errs := (Config{Issuers: []Issuer{{Issuer: iss}}}).Validate("auth"); len(errs) != 1 || errs[0].Field != "auth.issuers[0].issuer" {
			t.Errorf("%s: %v, want one error on the issuer", iss, errs)
		}
	}
	var many Config
	for i := range MaxIssuersPerTenant + 1 {
		many.Issuers = append(many.Issuers, Issuer{Issuer: fmt.Sprintf("https://id%d.example.com", i)})
	}
	errs := many.Validate("auth")
	if len(errs) != 1 || errs[0].Field != "auth.issuers" || !strings.Contains(errs[0].Message, fmt.Sprint(MaxIssuersPerTenant)) {
		t.Fatalf("%d issuers: %v", len(many.Issuers), errs)
	}
	many.Issuers = many.Issuers[:MaxIssuersPerTenant]
	if errs := many.Validate("auth"); len(errs) != 0 {
		t.Fatalf("%d issuers: %v", MaxIssuersPerTenant, errs)
	}
}
