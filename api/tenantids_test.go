package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/testkit/oidctest"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// caller is one admin credential: a bearer token or a signed-in
// session's client.
type caller struct {
	name  string
	token string
	web   *http.Client
}

func (c caller) do(t *testing.T, p *platformtest.Platform, method, path string, body any) *platformtest.Response {
	t.Helper()
	if c.token != "" {
		return as(t, p, c.token, method, path, body)
	}
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(`{"displayName":"x"}`)
	}
	req, _ := http.NewRequest(method, p.URL+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method != "GET" {
		// A browser session's change comes from the admin UI, with the
		// session's CSRF token.
		req.Header.Set("Origin", p.URL)
		req.Header.Set("X-CSRF-Token", csrfToken(t, p, c.web))
	}
	resp, err := c.web.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return &platformtest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// TestGrantsBindTheTenantNotItsSlug: a tenant admin's API token and
// signed-in session are granted the tenant acme; acme is deleted and a
// new tenant is given the slug. Neither credential reaches the new acme
// (it looks exactly like a tenant that does not exist), and the old
// acme's audit entries do not show under the new acme. A token made for
// the new acme, and a fresh sign-in whose claim names the slug, do reach
// it.
func TestGrantsBindTheTenantNotItsSlug(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			op := oidctest.Start(t)
			oidctest.SetRoles("id1", "tenant-admin:acme")
			clientID := "platform-admin-grants-" + d.Name
			p := platformtest.Start(t, d.New(t), platformtest.WithConfig(func(c *config.Config) {
				c.AdminIssuer, c.AdminClientID, c.AdminClientSecret = op.Issuer, clientID, "s3cret"
				c.KeepBootstrapToken = true
			}))
			oidctest.RegisterWebClient(clientID, "s3cret", p.URL+"/admin/callback")

			oldID := p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "Old"})["id"].(string)
			p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "other", "displayName": "Other"})
			tok := mintToken(t, p, "tenant-admin", "acme")
			web, resp := signIn(t, p, op, op.UserName(1))
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("sign-in: %d", resp.StatusCode)
			}
			old := []caller{{name: "token", token: tok}, {name: "session", web: web}}
			for _, c := range old {
				if r := c.do(t, p, "PATCH", "/api/v1/tenants/acme", map[string]any{"displayName": "x"}); r.Status != 200 {
					t.Fatalf("%s on its tenant: %d %s", c.name, r.Status, r.Body)
				}
			}

			p.MustAdmin(t, 204, "DELETE", "/api/v1/tenants/acme", nil)
			newID := p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "New", "reuseRetiredSlug": true})["id"].(string)
			if newID == oldID {
				t.Fatal("the new tenant has the old one's id")
			}

			for _, c := range old {
				for _, probe := range []struct{ method, path string }{
					{"GET", "/api/v1/tenants/acme"}, {"PATCH", "/api/v1/tenants/acme"}, {"DELETE", "/api/v1/tenants/acme"},
					{"GET", "/api/v1/tenants/acme/tools"}, {"POST", "/api/v1/tenants/acme/tools"},
					{"GET", "/api/v1/audit?tenant=acme"}, {"GET", "/api/v1/audit?tenantId=" + newID}, {"GET", "/api/v1/audit?tenantId=" + oldID},
				} {
					r := c.do(t, p, probe.method, probe.path, map[string]any{"displayName": "x"})
					ghost := c.do(t, p, probe.method, strings.NewReplacer("acme", "ghost", newID, "tn_ghost", oldID, "tn_ghost").Replace(probe.path), map[string]any{"displayName": "x"})
					if r.Status != 404 || ghost.Status != 404 || problemType(t, r) != "not-found" || problemType(t, ghost) != "not-found" {
						t.Errorf("%s: %s %s after the slug was reused: %d (a tenant that does not exist: %d) %s", c.name, probe.method, probe.path, r.Status, ghost.Status, r.Body)
					}
				}
				if items := c.do(t, p, "GET", "/api/v1/tenants", nil).JSON(t)["items"].([]any); len(items) != 0 {
					t.Errorf("%s lists %v", c.name, items)
				}
				if me := c.do(t, p, "GET", "/api/v1/me", nil).JSON(t); len(me["tenants"].([]any)) != 0 {
					t.Errorf("%s: me %v", c.name, me)
				}
			}
			if got := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme", nil)["displayName"]; got != "New" {
				t.Fatalf("the refused requests changed the new acme: %v", got)
			}
			for _, tk := range p.MustAdmin(t, 200, "GET", "/api/v1/tokens", nil)["items"].([]any) {
				m := tk.(map[string]any)
				if ids := m["tenantIds"].([]any); len(ids) != 0 {
					t.Fatalf("the deleted tenant's grant is still listed: %v", m)
				}
			}

			// The audit log under the new acme holds only the new acme's entries.
			entries := p.MustAdmin(t, 200, "GET", "/api/v1/audit?tenant=acme", nil)["items"].([]any)
			if len(entries) != 1 || entries[0].(map[string]any)["action"] != "POST /api/v1/tenants" {
				t.Fatalf("audit under the new acme: %v", entries)
			}
			for _, e := range entries {
				if e.(map[string]any)["tenantId"] != newID {
					t.Fatalf("an entry of another tenant under the new acme: %v", e)
				}
			}
			oldEntries := p.MustAdmin(t, 200, "GET", "/api/v1/audit?tenantId="+oldID, nil)["items"].([]any)
			var actions []string
			for _, e := range oldEntries {
				actions = append(actions, e.(map[string]any)["action"].(string))
			}
			if !slices.Contains(actions, "DELETE /api/v1/tenants/:slug") || !slices.Contains(actions, "PATCH /api/v1/tenants/:slug") {
				t.Fatalf("the old acme's history: %v", actions)
			}

			// Grants made for the new tenant reach it: a new token, and a fresh
			// sign-in whose claim names the slug (the provider's grant).
			fresh := []caller{{name: "new token", token: mintToken(t, p, "tenant-admin", "acme")}}
			web2, resp := signIn(t, p, op, op.UserName(1))
			resp.Body.Close()
			fresh = append(fresh, caller{name: "new session", web: web2})
			for _, c := range fresh {
				if r := c.do(t, p, "GET", "/api/v1/tenants/acme", nil); r.Status != 200 {
					t.Fatalf("%s on the new acme: %d %s", c.name, r.Status, r.Body)
				}
				if r := c.do(t, p, "GET", "/api/v1/tenants/other", nil); r.Status != 404 {
					t.Fatalf("%s on another tenant: %d", c.name, r.Status)
				}
			}
		})
	}
}

// TestTokensNameExistingTenantsOnly: a tenant-admin token is granted
// tenants that exist when it is made; a slug no tenant holds (a deleted
// tenant's, or one never used) is refused, not held for later.
func TestTokensNameExistingTenantsOnly(t *testing.T) {
	eachDialect(t, func(t *testing.T, p *platformtest.Platform) {
		p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "Acme"})
		p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "gone", "displayName": "Gone"})
		p.MustAdmin(t, 204, "DELETE", "/api/v1/tenants/gone", nil)
		for _, tenants := range [][]string{{"nobody"}, {"acme", "gone"}} {
			r := p.Admin(t, "POST", "/api/v1/tokens", map[string]any{"name": "x", "role": "tenant-admin", "tenants": tenants})
			field := "tenants[" + map[int]string{1: "0", 2: "1"}[len(tenants)] + "]"
			if r.Status != 422 || fieldErrors(t, r)[field] == "" {
				t.Fatalf("token for %v: %d %s", tenants, r.Status, r.Body)
			}
		}
		if n := len(p.MustAdmin(t, 200, "GET", "/api/v1/tokens", nil)["items"].([]any)); n != 0 {
			t.Fatalf("a refused token was stored: %d tokens", n)
		}
		m := p.MustAdmin(t, 201, "POST", "/api/v1/tokens", map[string]any{"name": "x", "role": "tenant-admin", "tenants": []string{"acme", "acme"}})
		if ids := m["tenantIds"].([]any); len(ids) != 1 {
			t.Fatalf("token for acme twice: %v", m)
		}
		me := as(t, p, m["token"].(string), "GET", "/api/v1/me", nil).JSON(t)
		if tn := me["tenants"].([]any); len(tn) != 1 || tn[0] != "acme" {
			t.Fatalf("me: %v", me)
		}
	})
}

// csrfToken reads a signed-in session's CSRF token from GET /me.
func csrfToken(t *testing.T, p *platformtest.Platform, web *http.Client) string {
	t.Helper()
	resp, err := web.Get(p.URL + "/api/v1/me")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var me struct {
		CSRFToken string `json:"csrfToken"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&me)
	return me.CSRFToken
}
