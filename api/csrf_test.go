package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/testkit/oidctest"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// TestABrowserSessionChangesNothingCrossSite tries every way a page on
// another site could ride a signed-in admin's cookie: each is refused and
// changes nothing; only a request from the platform's own origin with the
// session's token goes through.
func TestABrowserSessionChangesNothingCrossSite(t *testing.T) {
	op := oidctest.Start(t)
	oidctest.SetRoles("id1", "platform-admin")
	clientID := "platform-admin-csrf"
	p := platformtest.Start(t, platformtest.SQLiteURL(t), platformtest.WithConfig(func(c *config.Config) {
		c.AdminIssuer, c.AdminClientID, c.AdminClientSecret = op.Issuer, clientID, "s3cret"
		c.KeepBootstrapToken = true
	}))
	oidctest.RegisterWebClient(clientID, "s3cret", p.URL+"/admin/callback")
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "Acme"})
	web, resp := signIn(t, p, op, op.UserName(1))
	resp.Body.Close()
	token := csrfToken(t, p, web)
	other, resp := signIn(t, p, op, op.UserName(1)) // a second session of the same admin
	resp.Body.Close()
	otherToken := csrfToken(t, p, other)
	if token == "" || otherToken == "" || token == otherToken {
		t.Fatalf("sessions' CSRF tokens %q and %q: want two different ones", token, otherToken)
	}
	host := strings.TrimPrefix(p.URL, "http://")
	port := host[strings.LastIndex(host, ":")+1:]
	patch := func(header http.Header) int {
		req, _ := http.NewRequest("PATCH", p.URL+"/api/v1/tenants/acme", strings.NewReader(`{"displayName":"Pwned"}`))
		req.Header.Set("Content-Type", "application/json")
		for k, vs := range header {
			req.Header[k] = vs
		}
		r, err := web.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
		return r.StatusCode
	}
	for _, tc := range []struct {
		name   string
		header http.Header
	}{
		{"no origin, no referer", http.Header{"X-Csrf-Token": {token}}},
		{"another site", http.Header{"Origin": {"https://evil.example"}, "X-Csrf-Token": {token}}},
		{"opaque origin", http.Header{"Origin": {"null"}, "X-Csrf-Token": {token}}},
		{"another port", http.Header{"Origin": {"http://127.0.0.1:1"}, "X-Csrf-Token": {token}}},
		{"another scheme", http.Header{"Origin": {"https://" + host}, "X-Csrf-Token": {token}}},
		{"a suffix of the origin", http.Header{"Origin": {p.URL + ".evil.example"}, "X-Csrf-Token": {token}}},
		{"another site's referer", http.Header{"Referer": {"https://evil.example/" + host}, "X-Csrf-Token": {token}}},
		{"no token", http.Header{"Origin": {p.URL}}},
		{"empty token", http.Header{"Origin": {p.URL}, "X-Csrf-Token": {""}}},
		{"forged token", http.Header{"Origin": {p.URL}, "X-Csrf-Token": {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}},
		{"another session's token", http.Header{"Origin": {p.URL}, "X-Csrf-Token": {otherToken}}},
		{"token in the wrong header", http.Header{"Origin": {p.URL}, "X-Xsrf-Token": {token}}},
		{"localhost for 127.0.0.1", http.Header{"Origin": {"http://localhost:" + port}, "X-Csrf-Token": {token}}},
	} {
		if st := patch(tc.header); st != 403 {
			t.Errorf("%s: %d, want 403", tc.name, st)
		}
	}
	if got := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme", nil)["displayName"]; got != "Acme" {
		t.Fatalf("a refused request changed the tenant: %v", got)
	}
	// From the platform's own pages, with the token: by Origin, or by
	// Referer when a browser sends no Origin.
	if st := patch(http.Header{"Origin": {p.URL}, "X-Csrf-Token": {token}}); st != 200 {
		t.Fatalf("same-origin change with the token: %d", st)
	}
	if st := patch(http.Header{"Referer": {p.URL + "/admin/tenants"}, "X-Csrf-Token": {token}}); st != 200 {
		t.Fatalf("same-origin change (referer) with the token: %d", st)
	}
	// Reads need no token; bearer credentials, which browsers never send
	// by themselves, need none either.
	if r, _ := web.Get(p.URL + "/api/v1/tenants/acme"); r.StatusCode != 200 {
		t.Fatalf("session read: %d", r.StatusCode)
	}
	p.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", map[string]any{"displayName": "Acme Inc"})
}
