package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/testkit/oidctest"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// as calls the admin API with a bearer token.
func as(t *testing.T, p *platformtest.Platform, token, method, path string, body any) *platformtest.Response {
	t.Helper()
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	h := http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}}
	return platformtest.Do(t, method, p.URL+path, h, raw)
}

func mintToken(t *testing.T, p *platformtest.Platform, role string, tenants ...string) string {
	t.Helper()
	body := map[string]any{"name": role, "role": role}
	if len(tenants) > 0 {
		body["tenants"] = tenants
	}
	m := p.MustAdmin(t, 201, "POST", "/api/v1/tokens", body)
	return m["token"].(string)
}

func TestRolesLimitWhatEachAdminMaySeeAndDo(t *testing.T) {
	eachDialect(t, func(t *testing.T, p *platformtest.Platform) {
		for _, s := range []string{"alpha", "beta"} {
			p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": s, "displayName": s})
		}
		ta := mintToken(t, p, "tenant-admin", "alpha")
		viewer := mintToken(t, p, "viewer")

		// A tenant admin works on its tenant and cannot tell the other exists.
		if r := as(t, p, ta, "PATCH", "/api/v1/tenants/alpha", map[string]any{"displayName": "A"}); r.Status != 200 {
			t.Fatalf("tenant admin on own tenant: %d %s", r.Status, r.Body)
		}
		for _, probe := range []struct{ method, path string }{
			{"GET", "/api/v1/tenants/beta"}, {"PATCH", "/api/v1/tenants/beta"}, {"GET", "/api/v1/tenants/beta/tools"},
			{"POST", "/api/v1/tenants/beta/tools"}, {"DELETE", "/api/v1/tenants/beta"},
		} {
			r := as(t, p, ta, probe.method, probe.path, map[string]any{"displayName": "x"})
			ghost := as(t, p, ta, probe.method, strings.Replace(probe.path, "beta", "ghost", 1), map[string]any{"displayName": "x"})
			if r.Status != 404 || ghost.Status != 404 || problemType(t, r) != problemType(t, ghost) {
				t.Errorf("%s %s: %d (unknown tenant: %d); another tenant must look like no tenant", probe.method, probe.path, r.Status, ghost.Status)
			}
		}
		list := as(t, p, ta, "GET", "/api/v1/tenants", nil).JSON(t)["items"].([]any)
		if len(list) != 1 || list[0].(map[string]any)["slug"] != "alpha" {
			t.Fatalf("tenant admin lists %v", list)
		}
		if r := as(t, p, ta, "POST", "/api/v1/tenants", map[string]any{"slug": "gamma", "displayName": "g"}); r.Status != 403 {
			t.Fatalf("tenant admin created a tenant: %d", r.Status)
		}
		// A viewer reads everything and changes nothing.
		if r := as(t, p, viewer, "GET", "/api/v1/tenants/beta", nil); r.Status != 200 {
			t.Fatalf("viewer read: %d", r.Status)
		}
		if r := as(t, p, viewer, "PATCH", "/api/v1/tenants/beta", map[string]any{"displayName": "x"}); r.Status != 403 {
			t.Fatalf("viewer write: %d", r.Status)
		}
		if r := as(t, p, viewer, "POST", "/api/v1/tokens", map[string]any{"name": "x", "role": "platform-admin"}); r.Status != 403 {
			t.Fatalf("viewer minted a token: %d", r.Status)
		}
		if got := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/beta", nil)["displayName"]; got != "beta" {
			t.Fatalf("refused writes changed beta: %v", got)
		}
	})
}

func TestAPITokensAreShownOnceStoredHashedAndRevocable(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	created := p.MustAdmin(t, 201, "POST", "/api/v1/tokens", map[string]any{"name": "ci", "role": "platform-admin", "expiresInSeconds": 3600})
	tok := created["token"].(string)
	if r := as(t, p, tok, "GET", "/api/v1/me", nil); r.Status != 200 || r.JSON(t)["role"] != "platform-admin" {
		t.Fatalf("token use: %d %s", r.Status, r.Body)
	}
	list := p.Admin(t, "GET", "/api/v1/tokens", nil)
	if strings.Contains(string(list.Body), tok) {
		t.Fatal("the token is shown again")
	}
	if stored := platformtest.SQL(t, p.DatabaseURL).Strings(t, "SELECT id FROM api_tokens WHERE hash = ?", tok); len(stored) != 0 {
		t.Fatal("the token is stored in the clear")
	}
	for _, bad := range []map[string]any{
		{"name": "x", "role": "root"},
		{"name": "x", "role": "tenant-admin"},
		{"name": "x", "role": "viewer", "expiresInSeconds": 10},
		{"name": "", "role": "viewer"},
	} {
		if r := p.Admin(t, "POST", "/api/v1/tokens", bad); r.Status != 422 {
			t.Errorf("%v: %d", bad, r.Status)
		}
	}
	p.MustAdmin(t, 204, "DELETE", "/api/v1/tokens/"+created["id"].(string), nil)
	if r := as(t, p, tok, "GET", "/api/v1/me", nil); r.Status != 401 {
		t.Fatalf("revoked token still works: %d", r.Status)
	}
	if strings.Contains(p.Logs.String(), tok) {
		t.Fatal("the token reached the log")
	}
}

func TestAdminActionsAreAuditedWithWhoWhatWhereAndWhen(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "Acme"})
	// The audit time is stored to the second or finer: the entry must fall
	// between the second before the change and the moment after it.
	before := time.Now().Truncate(time.Second)
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/tools", validTool("weather"))
	after := time.Now()
	p.Admin(t, "POST", "/api/v1/tenants/acme/tools", map[string]any{"name": "bad"}) // refused: not audited
	ta := mintToken(t, p, "tenant-admin", "acme")
	entries := as(t, p, ta, "GET", "/api/v1/audit?tenant=acme", nil).JSON(t)["items"].([]any)
	if len(entries) != 2 { // the tool, then the tenant's creation
		t.Fatalf("audit entries for acme: %v", entries)
	}
	e := entries[0].(map[string]any)
	if e["actor"] != "bootstrap" || e["action"] != "POST /api/v1/tenants/:slug/tools" || e["tenant"] != "acme" || e["remoteAddr"] != "127.0.0.1" ||
		e["object"] != "tool weather" { // a creation names what it created, though its path does not
		t.Fatalf("entry %v", e)
	}
	if created := entries[1].(map[string]any); created["action"] != "POST /api/v1/tenants" || created["tenant"] != "acme" || created["tenantId"] != e["tenantId"] || e["tenantId"] == nil ||
		created["object"] != "acme" {
		t.Fatalf("the tenant's creation is not audited under its id: %v", created)
	}
	at, ok := e["at"].(string)
	when, err := time.Parse(time.RFC3339Nano, at)
	if !ok || err != nil || when.Before(before) || when.After(after) {
		t.Fatalf("entry time %#v (%v): want the time of the change, between %s and %s", e["at"], err, before, after)
	}
	all := p.MustAdmin(t, 200, "GET", "/api/v1/audit", nil)["items"].([]any)
	if len(all) < 3 { // tenant, tool, token
		t.Fatalf("platform audit log %v", all)
	}
	if r := as(t, p, ta, "GET", "/api/v1/audit", nil); r.Status != 422 {
		t.Fatalf("tenant admin reading the whole log: %d", r.Status)
	}
}

// signIn walks the admin sign-in at p through the provider's login page
// as user, and returns the client holding the session and the answer
// the sign-in ended with.
func signIn(t *testing.T, p *platformtest.Platform, op *oidctest.Provider, user string) (*http.Client, *http.Response) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(p.URL + "/admin/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	authID := resp.Request.URL.Query().Get("authRequestID")
	if authID == "" {
		t.Fatalf("the sign-in did not reach the provider's login page: %s", resp.Request.URL)
	}
	resp, err = c.PostForm(op.Issuer+"/login/username", url.Values{"id": {authID}, "username": {user}, "password": {oidctest.Password}})
	if err != nil {
		t.Fatal(err)
	}
	return c, resp
}

func TestAdminsSignInWithTheOIDCCodeFlowAndPKCE(t *testing.T) {
	op := oidctest.Start(t)
	oidctest.SetRoles("id1", "tenant-admin:acme")
	oidctest.SetRoles("id2") // no admin role
	clientID := "platform-admin-" + strings.ToLower(t.Name()[len(t.Name())-6:])
	p := platformtest.Start(t, platformtest.SQLiteURL(t), platformtest.WithConfig(func(c *config.Config) {
		c.AdminIssuer, c.AdminClientID, c.AdminClientSecret = op.Issuer, clientID, "s3cret"
		c.KeepBootstrapToken = true // the test sets up tenants with it
	}))
	oidctest.RegisterWebClient(clientID, "s3cret", p.URL+"/admin/callback")
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "Acme"})

	signIn := func(user string) (*http.Client, *http.Response) { return signIn(t, p, op, user) }
	c, resp := signIn(op.UserName(1))
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Request.URL.Path != "/admin/" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("after sign-in: %d at %s (%s), want the admin UI", resp.StatusCode, resp.Request.URL, resp.Header.Get("Content-Type"))
	}
	resp, err := c.Get(p.URL + "/api/v1/me")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var me map[string]any
	_ = json.Unmarshal(body, &me)
	if me["role"] != "tenant-admin" || me["tenants"].([]any)[0] != "acme" {
		t.Fatalf("me: %v", me)
	}
	u, _ := url.Parse(p.URL)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "opsmcp_admin" && !strings.Contains(ck.Value, ".") {
			t.Fatalf("session cookie is not signed: %q", ck.Value)
		}
	}
	if r, _ := c.Get(p.URL + "/api/v1/tenants/acme"); r.StatusCode != 200 {
		t.Fatalf("signed-in tenant admin reading its tenant: %d", r.StatusCode)
	}
	// A tampered cookie is refused.
	var tampered []*http.Cookie
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "opsmcp_admin" {
			ck.Value = strings.Replace(ck.Value, ck.Value[:4], "eyJy", 1)
			tampered = append(tampered, ck)
		}
	}
	req, _ := http.NewRequest("GET", p.URL+"/api/v1/me", nil)
	for _, ck := range tampered {
		req.AddCookie(ck)
	}
	if r, _ := http.DefaultClient.Do(req); r.StatusCode != 401 {
		t.Fatalf("tampered session: %d", r.StatusCode)
	}
	// Sign-out is a POST from the platform's own pages with the
	// session's CSRF token, and ends the session on the server: the old
	// cookie, replayed, is refused.
	var kept []*http.Cookie
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "opsmcp_admin" {
			kept = append(kept, ck)
		}
	}
	if r, _ := c.Get(p.URL + "/admin/logout"); r.StatusCode != 405 {
		t.Fatalf("sign-out by GET: %d", r.StatusCode)
	}
	logout := func(origin, token string) int {
		req, _ := http.NewRequest("POST", p.URL+"/admin/logout", nil)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		req.Header.Set("X-CSRF-Token", token)
		r, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		return r.StatusCode
	}
	csrf, _ := me["csrfToken"].(string)
	if csrf == "" || me["session"] != true {
		t.Fatalf("me of a session has no CSRF token: %v", me)
	}
	if st := logout("https://evil.example", csrf); st != 403 {
		t.Fatalf("sign-out from another origin: %d", st)
	}
	if st := logout(p.URL, "forged"); st != 403 {
		t.Fatalf("sign-out with a forged token: %d", st)
	}
	if r, _ := c.Get(p.URL + "/api/v1/me"); r.StatusCode != 200 {
		t.Fatalf("a refused sign-out ended the session: %d", r.StatusCode)
	}
	if st := logout(p.URL, csrf); st != 204 {
		t.Fatalf("sign-out: %d", st)
	}
	if r, _ := c.Get(p.URL + "/api/v1/me"); r.StatusCode != 401 {
		t.Fatalf("after sign-out: %d", r.StatusCode)
	}
	replay, _ := http.NewRequest("GET", p.URL+"/api/v1/me", nil)
	for _, ck := range kept {
		replay.AddCookie(ck)
	}
	if r, _ := http.DefaultClient.Do(replay); r.StatusCode != 401 {
		t.Fatalf("the signed-out session's cookie, replayed: %d", r.StatusCode)
	}
	// A user without an admin role is refused.
	_, resp = signIn(op.UserName(2))
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("user without a role: %d", resp.StatusCode)
	}
}
