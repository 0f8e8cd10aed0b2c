package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/opsmcp/platform/egress"
)

// testIssuer is a real HTTP OpenID issuer for the verifier's tests: a
// discovery document, a JWKS of ES256 keys it can change, and switches
// to make either endpoint fail or hang. It counts the requests it serves,
// so tests assert fetches where they happen.
type testIssuer struct {
	srv    *httptest.Server
	URL    string
	signer map[string]*ecdsa.PrivateKey // every key it can sign with, by kid

	discoveries atomic.Int64
	jwksFetches atomic.Int64

	mu            sync.Mutex
	published     []string // kids in the JWKS
	failDiscovery bool
	holdDiscovery bool
	holdJWKS      bool
	discoveryBody func(w http.ResponseWriter, r *http.Request) // replaces the document when set
	jwksBody      func(w http.ResponseWriter, r *http.Request)

	release     chan struct{} // closed to let held requests finish
	releaseOnce sync.Once
	entered     chan struct{} // a held request arrived (buffered)
}

func newTestIssuer(t testing.TB) *testIssuer {
	t.Helper()
	ti := &testIssuer{signer: map[string]*ecdsa.PrivateKey{}, release: make(chan struct{}), entered: make(chan struct{}, 64)}
	ti.addKey("k1", true)
	ti.srv = httptest.NewServer(http.HandlerFunc(ti.serve))
	ti.URL = ti.srv.URL
	t.Cleanup(ti.srv.Close)
	// Registered after Close, so it runs first: held handlers return
	// before the server waits for them.
	t.Cleanup(ti.unhold)
	return ti
}

// unhold lets every held request finish, and later ones pass.
func (ti *testIssuer) unhold() { ti.releaseOnce.Do(func() { close(ti.release) }) }

// addKey makes a new signing key; published puts it in the JWKS.
func (ti *testIssuer) addKey(kid string, published bool) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	ti.mu.Lock()
	defer ti.mu.Unlock()
	ti.signer[kid] = k
	if published {
		ti.published = append(ti.published, kid)
	}
}

// publish sets which keys the JWKS lists.
func (ti *testIssuer) publish(kids ...string) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	ti.published = kids
}

func (ti *testIssuer) set(f func(ti *testIssuer)) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	f(ti)
}

func (ti *testIssuer) hold(w http.ResponseWriter, r *http.Request) bool {
	ti.entered <- struct{}{}
	select {
	case <-ti.release:
		return true
	case <-r.Context().Done():
		return false
	}
}

func (ti *testIssuer) serve(w http.ResponseWriter, r *http.Request) {
	ti.mu.Lock()
	fail, holdD, holdJ, dBody, jBody := ti.failDiscovery, ti.holdDiscovery, ti.holdJWKS, ti.discoveryBody, ti.jwksBody
	var set jose.JSONWebKeySet
	for _, kid := range ti.published {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &ti.signer[kid].PublicKey, KeyID: kid, Algorithm: "ES256", Use: "sig"})
	}
	ti.mu.Unlock()
	switch {
	case strings.HasSuffix(r.URL.Path, "/.well-known/openid-configuration"):
		ti.discoveries.Add(1)
		if holdD && !ti.hold(w, r) {
			return
		}
		if fail {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		if dBody != nil {
			dBody(w, r)
			return
		}
		iss := ti.URL + strings.TrimSuffix(r.URL.Path, "/.well-known/openid-configuration")
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": iss, "jwks_uri": ti.URL + "/jwks",
			"authorization_endpoint": ti.URL + "/auth", "token_endpoint": ti.URL + "/token"})
	case r.URL.Path == "/jwks":
		ti.jwksFetches.Add(1)
		if holdJ && !ti.hold(w, r) {
			return
		}
		if jBody != nil {
			jBody(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(set)
	default:
		http.NotFound(w, r)
	}
}

// addrPort is where the issuer listens, for an egress allow-list.
func (ti *testIssuer) addrPort() netip.AddrPort {
	return netip.MustParseAddrPort(ti.srv.Listener.Addr().String())
}

// sign makes a compact ES256 JWS of claims under kid.
func (ti *testIssuer) sign(t testing.TB, kid string, claims map[string]any) string {
	t.Helper()
	ti.mu.Lock()
	key := ti.signer[kid]
	ti.mu.Unlock()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	obj, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// claims are a user token's claims: issued now, valid an hour, for aud.
func (ti *testIssuer) claims(now time.Time, sub, aud string) map[string]any {
	return map[string]any{"iss": ti.URL, "sub": sub, "aud": aud, "azp": "cli", "scope": "mcp read",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

func (ti *testIssuer) token(t testing.TB, now time.Time, sub, aud string) string {
	return ti.sign(t, "k1", ti.claims(now, sub, aud))
}

// policyAllowing is the production egress policy (loopback refused)
// except for the exact address and port of each server named: a test
// reaches its own issuers and nothing else on this machine.
func policyAllowing(t testing.TB, urls ...string) egress.Policy {
	t.Helper()
	var p egress.Policy
	for _, u := range urls {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		host, port, _ := net.SplitHostPort(pu.Host)
		ap, err := netip.ParseAddrPort(net.JoinHostPort(host, port))
		if err != nil {
			t.Fatal(err)
		}
		p.Allow = append(p.Allow, ap)
	}
	return p
}

func tenantConfig(issuers ...string) Config {
	var c Config
	for _, is := range issuers {
		c.Issuers = append(c.Issuers, Issuer{Issuer: is, Algorithms: []string{"ES256"}})
	}
	return c
}

// fakeClock is a settable clock for Verifier.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
