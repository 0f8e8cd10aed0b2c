package devissuer_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/cmd/platform/internal/devissuer"
	"github.com/opsmcp/platform/egress"
)

const (
	clientID = "admin-ui"
	path     = "/dev/oidc"
)

type env struct {
	issuer   *devissuer.Issuer
	url      string // the issuer identifier
	redirect string
	now      *atomic.Int64 // unix seconds the issuer sees
	http     *http.Client  // follows no redirects
}

// start serves an issuer under /dev/oidc of a loopback server, with one
// public client whose redirect URI is on the same server.
func start(t *testing.T) *env {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{now: &atomic.Int64{}, http: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	e.now.Store(time.Now().Unix())
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	e.url, e.redirect = srv.URL+path, srv.URL+"/admin/callback"
	e.issuer, err = devissuer.New(devissuer.Options{
		Issuer: e.url, Key: key,
		User:    devissuer.User{Subject: "dev", Name: "Dev Admin", Email: "dev@localhost", Roles: []string{"platform-admin"}},
		Clients: []devissuer.Client{{ID: clientID, Name: "the admin UI", RedirectURIs: []string{e.redirect}}},
		Now:     func() time.Time { return time.Unix(e.now.Load(), 0) },
	})
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle(path+"/", e.issuer)
	return e
}

// pkce is a verifier and its S256 challenge.
func pkce() (verifier, challenge string) {
	verifier = oauth2.GenerateVerifier()
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

func (e *env) authorizeURL(q url.Values) string { return e.url + "/authorize?" + q.Encode() }

func (e *env) goodQuery(challenge string) url.Values {
	return url.Values{"client_id": {clientID}, "redirect_uri": {e.redirect}, "response_type": {"code"},
		"scope": {"openid profile"}, "state": {"st-1"}, "nonce": {"n-1"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
}

var requestField = regexp.MustCompile(`name="request" value="([^"]+)"`)

// login opens the login page and returns its pending request id.
func (e *env) login(t *testing.T, q url.Values) string {
	t.Helper()
	resp, err := e.http.Get(e.authorizeURL(q))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("login page: HTTP %d (%s)\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	m := requestField.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no pending request on the login page:\n%s", body)
	}
	return string(m[1])
}

// decide posts the login page's form and returns where it redirects.
func (e *env) decide(t *testing.T, id, decision string) (*url.URL, int) {
	t.Helper()
	resp, err := e.http.PostForm(e.url+"/authorize", url.Values{"request": {id}, "decision": {decision}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := resp.Location()
	return loc, resp.StatusCode
}

// code walks the login page and returns a fresh code and its verifier.
func (e *env) code(t *testing.T) (code, verifier string) {
	t.Helper()
	verifier, challenge := pkce()
	loc, status := e.decide(t, e.login(t, e.goodQuery(challenge)), "approve")
	if status != http.StatusFound || loc == nil {
		t.Fatalf("sign-in: HTTP %d, no redirect", status)
	}
	return loc.Query().Get("code"), verifier
}

// exchange posts to the token endpoint.
func (e *env) exchange(t *testing.T, form url.Values, basic ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.url+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if len(basic) == 2 {
		req.SetBasicAuth(basic[0], basic[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) tokenForm(code, verifier string) url.Values {
	return url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {e.redirect},
		"client_id": {clientID}, "code_verifier": {verifier}}
}

// TestARelyingPartySignsInWithOneClick drives the flow the admin UI's
// sign-in drives, with the same libraries (go-oidc and x/oauth2): the
// login page, one click, the code back with the state and the issuer,
// the exchange with the PKCE verifier, an ID token that verifies against
// the published keys and carries the nonce, the name and the roles.
func TestARelyingPartySignsInWithOneClick(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	p, err := oidc.NewProvider(ctx, e.url)
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	conf := &oauth2.Config{ClientID: clientID, RedirectURL: e.redirect, Endpoint: p.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "profile"}}
	verifier := oauth2.GenerateVerifier()
	authURL := conf.AuthCodeURL("st-42", oauth2.S256ChallengeOption(verifier), oidc.Nonce("nonce-42"))
	q, _ := url.Parse(authURL)
	id := e.login(t, q.Query())
	loc, status := e.decide(t, id, "approve")
	if status != http.StatusFound || !strings.HasPrefix(loc.String(), e.redirect+"?") {
		t.Fatalf("after the click: HTTP %d to %v", status, loc)
	}
	if loc.Query().Get("state") != "st-42" || loc.Query().Get("iss") != e.url {
		t.Fatalf("the redirect lacks the state or the issuer: %v", loc)
	}
	tok, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := p.Verifier(&oidc.Config{ClientID: clientID}).Verify(ctx, raw)
	if err != nil {
		t.Fatalf("ID token: %v", err)
	}
	var claims struct {
		Name  string   `json:"name"`
		Email string   `json:"email"`
		Roles []string `json:"roles"`
	}
	if err := idt.Claims(&claims); err != nil {
		t.Fatal(err)
	}
	if idt.Subject != "dev" || idt.Nonce != "nonce-42" || claims.Name != "Dev Admin" || fmt.Sprint(claims.Roles) != "[platform-admin]" {
		t.Fatalf("ID token: sub %q nonce %q claims %+v", idt.Subject, idt.Nonce, claims)
	}
	if tok.AccessToken == "" || tok.TokenType != "Bearer" {
		t.Fatalf("no access token: %+v", tok)
	}
}

// TestAccessTokensVerifyAtATenantsEndpoint: a token minted for a tenant's
// endpoint passes the platform's own bearer verification for a tenant
// that trusts the issuer, and fails it for another audience.
func TestAccessTokensVerifyAtATenantsEndpoint(t *testing.T) {
	e := start(t)
	resource := "http://127.0.0.1:8080/t/demo/mcp"
	tok, exp, err := e.issuer.AccessToken(resource, "cli", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(exp); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("expiry %s away, want an hour", d)
	}
	v := auth.NewVerifier(auth.VerifierOptions{Egress: egress.Policy{AllowPrivate: true}})
	cfg := auth.Config{Issuers: []auth.Issuer{{Issuer: e.url}}}
	p, err := v.Verify(context.Background(), tok, cfg, resource)
	if err != nil {
		t.Fatalf("the tenant's verification: %v", err)
	}
	if p.Issuer != e.url || p.Subject != "dev" || p.Client != "cli" || p.Machine() {
		t.Fatalf("principal %+v", p)
	}
	if _, err := v.Verify(context.Background(), tok, cfg, "http://127.0.0.1:8080/t/other/mcp"); err == nil {
		t.Fatal("a token for the demo tenant passed another tenant's audience")
	}
}

// TestAuthorizationRequestsAreCheckedBeforeAnyRedirect: an unknown client
// or a redirect URI that is not exactly a registered one gets a page,
// never a redirect (so the issuer cannot be used to send a code, or the
// user, elsewhere); other mistakes go back to the client as OAuth errors.
func TestAuthorizationRequestsAreCheckedBeforeAnyRedirect(t *testing.T) {
	e := start(t)
	_, challenge := pkce()
	u, _ := url.Parse(e.redirect)
	for _, redirect := range []string{
		"", "https://evil.example/admin/callback", e.redirect + "/", e.redirect + "x", e.redirect + "?next=/x", e.redirect + "#",
		strings.Replace(e.redirect, "127.0.0.1", "localhost", 1), strings.Replace(e.redirect, u.Host, u.Hostname()+":1", 1),
		strings.ToUpper(e.redirect[:4]) + e.redirect[4:], strings.Replace(e.redirect, "/admin/callback", "/admin/../admin/callback", 1),
		"//evil.example/admin/callback", "javascript:alert(1)",
	} {
		q := e.goodQuery(challenge)
		q.Set("redirect_uri", redirect)
		resp, err := e.http.Get(e.authorizeURL(q))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
			t.Errorf("redirect_uri %q: HTTP %d, Location %q; want 400 and no redirect", redirect, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	for _, client := range []string{"", "other", clientID + " ", strings.ToUpper(clientID)} {
		q := e.goodQuery(challenge)
		q.Set("client_id", client)
		resp, _ := e.http.Get(e.authorizeURL(q))
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
			t.Errorf("client_id %q: HTTP %d, Location %q", client, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	for _, c := range []struct {
		name   string
		change func(url.Values)
		want   string
	}{
		{"no PKCE", func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") }, "invalid_request"},
		{"plain PKCE", func(q url.Values) { q.Set("code_challenge_method", "plain") }, "invalid_request"},
		{"no PKCE method", func(q url.Values) { q.Del("code_challenge_method") }, "invalid_request"},
		{"short challenge", func(q url.Values) { q.Set("code_challenge", "abc") }, "invalid_request"},
		{"implicit flow", func(q url.Values) { q.Set("response_type", "token") }, "unsupported_response_type"},
		{"hybrid flow", func(q url.Values) { q.Set("response_type", "code id_token") }, "unsupported_response_type"},
		{"repeated state", func(q url.Values) { q.Add("state", "other") }, "invalid_request"},
		{"request object", func(q url.Values) { q.Set("request", "eyJ") }, "request_not_supported"},
	} {
		q := e.goodQuery(challenge)
		c.change(q)
		resp, _ := e.http.Get(e.authorizeURL(q))
		resp.Body.Close()
		loc, _ := resp.Location()
		if resp.StatusCode != http.StatusFound || loc == nil || !strings.HasPrefix(loc.String(), e.redirect+"?") || loc.Query().Get("error") != c.want {
			t.Errorf("%s: HTTP %d to %v, want a redirect with error=%s", c.name, resp.StatusCode, loc, c.want)
		}
	}
}

// TestCodesWorkOnceForTheirClientVerifierAndRedirect tries the ways a
// stolen or replayed code could be used; each is refused, and a refused
// attempt burns the code.
func TestCodesWorkOnceForTheirClientVerifierAndRedirect(t *testing.T) {
	e := start(t)
	for _, c := range []struct {
		name   string
		change func(f url.Values, verifier string)
		basic  []string
		status int
		want   string
	}{
		{"another verifier", func(f url.Values, _ string) { _, other := pkce(); f.Set("code_verifier", other+"a") }, nil, 400, "invalid_grant"},
		{"no verifier", func(f url.Values, _ string) { f.Del("code_verifier") }, nil, 400, "invalid_grant"},
		{"the challenge as verifier", func(f url.Values, v string) {
			sum := sha256.Sum256([]byte(v))
			f.Set("code_verifier", base64.RawURLEncoding.EncodeToString(sum[:]))
		}, nil, 400, "invalid_grant"},
		{"a verifier with a bad character", func(f url.Values, v string) { f.Set("code_verifier", v[:42]+"!") }, nil, 400, "invalid_grant"},
		{"another redirect URI", func(f url.Values, _ string) { f.Set("redirect_uri", e.redirect+"/x") }, nil, 400, "invalid_grant"},
		{"no redirect URI", func(f url.Values, _ string) { f.Del("redirect_uri") }, nil, 400, "invalid_grant"},
		{"an unknown client", func(f url.Values, _ string) { f.Set("client_id", "other") }, nil, 401, "invalid_client"},
		{"a client secret", func(f url.Values, _ string) { f.Del("client_id") }, []string{clientID, "secret"}, 401, "invalid_client"},
		{"two client ids", func(f url.Values, _ string) {}, []string{"other", ""}, 401, "invalid_client"},
		{"another grant type", func(f url.Values, _ string) { f.Set("grant_type", "password") }, nil, 400, "unsupported_grant_type"},
		{"an unknown code", func(f url.Values, _ string) { f.Set("code", "made-up") }, nil, 400, "invalid_grant"},
	} {
		code, verifier := e.code(t)
		f := e.tokenForm(code, verifier)
		c.change(f, verifier)
		status, body := e.exchange(t, f, c.basic...)
		if status != c.status || !strings.Contains(body, `"error":"`+c.want+`"`) || strings.Contains(body, "access_token") {
			t.Errorf("%s: HTTP %d %s; want %d %s", c.name, status, body, c.status, c.want)
		}
		if c.want == "invalid_grant" && c.name != "an unknown code" {
			// The attempt used the code up: the right request fails now.
			if status, body := e.exchange(t, e.tokenForm(code, verifier)); status != 400 || !strings.Contains(body, "invalid_grant") {
				t.Errorf("%s: the code still worked after a refused attempt: %d %s", c.name, status, body)
			}
		}
	}

	// A good exchange works once; Basic authentication with the client id
	// and no secret counts as the same public client.
	code, verifier := e.code(t)
	f := e.tokenForm(code, verifier)
	f.Del("client_id")
	if status, body := e.exchange(t, f, clientID, ""); status != 200 || !strings.Contains(body, "id_token") {
		t.Fatalf("a good exchange: %d %s", status, body)
	}
	if status, body := e.exchange(t, e.tokenForm(code, verifier)); status != 400 || !strings.Contains(body, "invalid_grant") {
		t.Fatalf("a code used twice: %d %s", status, body)
	}

	// A code older than a minute is refused.
	code, verifier = e.code(t)
	e.now.Add(61)
	if status, body := e.exchange(t, e.tokenForm(code, verifier)); status != 400 || !strings.Contains(body, "invalid_grant") {
		t.Fatalf("an expired code: %d %s", status, body)
	}
}

// TestTheLoginPage: cancel sends access_denied back; a pending sign-in
// works once and expires; the form carries nothing but its id; a request
// for another host (DNS rebinding) is refused.
func TestTheLoginPage(t *testing.T) {
	e := start(t)
	_, challenge := pkce()
	id := e.login(t, e.goodQuery(challenge))
	loc, status := e.decide(t, id, "deny")
	if status != http.StatusFound || loc.Query().Get("error") != "access_denied" || loc.Query().Get("state") != "st-1" || loc.Query().Get("code") != "" {
		t.Fatalf("cancel: HTTP %d to %v", status, loc)
	}
	if _, status := e.decide(t, id, "approve"); status != http.StatusBadRequest {
		t.Fatalf("a decided sign-in approved again: HTTP %d", status)
	}
	if _, status := e.decide(t, "made-up", "approve"); status != http.StatusBadRequest {
		t.Fatalf("an unknown sign-in: HTTP %d", status)
	}
	id = e.login(t, e.goodQuery(challenge))
	e.now.Add(11 * 60)
	if _, status := e.decide(t, id, "approve"); status != http.StatusBadRequest {
		t.Fatalf("a sign-in left open eleven minutes: HTTP %d", status)
	}

	resp, err := e.http.Get(e.authorizeURL(e.goodQuery(challenge)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "default-src 'none'") || strings.Contains(string(body), "<script") {
		t.Fatalf("login page headers %q", csp)
	}
	for _, want := range []string{"Sign in to the admin UI", "Dev Admin", "platform-admin", `id="sign-in"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the login page lacks %q", want)
		}
	}

	req, _ := http.NewRequest("GET", e.url+"/.well-known/openid-configuration", nil)
	req.Host = "rebound.example:80"
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("another Host: HTTP %d", resp.StatusCode)
	}
}

// TestPendingSignInsAreBounded: a script opening login pages without end
// gets a clear refusal once a thousand are pending, not a growing heap.
func TestPendingSignInsAreBounded(t *testing.T) {
	e := start(t)
	_, challenge := pkce()
	for range 1000 {
		resp, err := e.http.Get(e.authorizeURL(e.goodQuery(challenge)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("HTTP %d before the bound", resp.StatusCode)
		}
	}
	resp, _ := e.http.Get(e.authorizeURL(e.goodQuery(challenge)))
	resp.Body.Close()
	if loc, _ := resp.Location(); loc == nil || loc.Query().Get("error") != "temporarily_unavailable" {
		t.Fatalf("past the bound: HTTP %d to %v", resp.StatusCode, loc)
	}
	e.now.Add(11 * 60) // the pending ones expire: room again
	e.login(t, e.goodQuery(challenge))
}

// TestTheKeyIsKeptAndPrivate: the key file is created 0600 and read back
// as the same key, and a file that is not a P-256 key is refused.
func TestTheKeyIsKeptAndPrivate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "issuer-key.pem")
	k1, err := devissuer.LoadOrCreateKey(p)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", st.Mode().Perm())
	}
	k2, err := devissuer.LoadOrCreateKey(p)
	if err != nil || !k1.Equal(k2) {
		t.Fatalf("the key read back differs: %v", err)
	}
	_ = os.WriteFile(p, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o600)
	if _, err := devissuer.LoadOrCreateKey(p); err == nil {
		t.Fatal("a broken key file was accepted")
	}
}
