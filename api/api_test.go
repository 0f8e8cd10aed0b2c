package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/opsmcp/platform/testkit/platformtest"
)

// eachDialect runs f against a fresh platform on SQLite and on PostgreSQL.
func eachDialect(t *testing.T, f func(t *testing.T, p *platformtest.Platform)) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			f(t, platformtest.Start(t, d.New(t)))
		})
	}
}

func problemType(t *testing.T, r *platformtest.Response) string {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body %s", ct, r.Body)
	}
	return strings.TrimPrefix(r.JSON(t)["type"].(string), "urn:opsmcp:problem:")
}

func fieldErrors(t *testing.T, r *platformtest.Response) map[string]string {
	t.Helper()
	out := map[string]string{}
	errs, _ := r.JSON(t)["errors"].([]any)
	for _, e := range errs {
		m := e.(map[string]any)
		out[m["field"].(string)] = m["message"].(string)
	}
	return out
}

func TestTenantLifecycleRoundTrips(t *testing.T) {
	eachDialect(t, func(t *testing.T, p *platformtest.Platform) {
		created := p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{
			"slug": "acme", "displayName": "Acme Corp", "settings": map[string]any{"stateTtlSeconds": 120},
		})
		if created["endpoint"] != p.URL+"/t/acme/mcp" || created["version"].(float64) != 1 || created["access"] != "closed" {
			t.Fatalf("created tenant: %v", created)
		}
		got := p.Admin(t, "GET", "/api/v1/tenants/acme", nil)
		if got.Status != 200 || got.Header.Get("ETag") != `"1"` {
			t.Fatalf("get: %d %s etag %q", got.Status, got.Body, got.Header.Get("ETag"))
		}
		if s := got.JSON(t)["settings"].(map[string]any); s["stateTtlSeconds"].(float64) != 120 {
			t.Fatalf("settings not kept: %v", s)
		}
		patched := p.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", map[string]any{"displayName": "Acme", "disabled": true,
			"settings": map[string]any{"auth": map[string]any{"public": true}}})
		if patched["displayName"] != "Acme" || patched["disabled"] != true || patched["version"].(float64) != 2 || patched["access"] != "public" {
			t.Fatalf("patched: %v", patched)
		}
		// settings is a merge patch: what the patch names changes, the rest stays.
		if s := patched["settings"].(map[string]any); s["stateTtlSeconds"].(float64) != 120 {
			t.Fatalf("merge patch lost a setting: %v", s)
		}
		p.MustAdmin(t, 204, "DELETE", "/api/v1/tenants/acme", nil)
		if r := p.Admin(t, "GET", "/api/v1/tenants/acme", nil); r.Status != 404 || problemType(t, r) != "not-found" {
			t.Fatalf("after delete: %d %s", r.Status, r.Body)
		}
	})
}

func TestDeletedSlugIsNotReusedSilently(t *testing.T) {
	eachDialect(t, func(t *testing.T, p *platformtest.Platform) {
		p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "old", "displayName": "Old"})
		p.MustAdmin(t, 204, "DELETE", "/api/v1/tenants/old", nil)
		r := p.Admin(t, "POST", "/api/v1/tenants", map[string]any{"slug": "old", "displayName": "New"})
		if r.Status != 409 || problemType(t, r) != "slug-retired" {
			t.Fatalf("reuse without consent: %d %s", r.Status, r.Body)
		}
		p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "old", "displayName": "New", "reuseRetiredSlug": true})
	})
}

func TestDuplicateSlugIsAConflictAndChangesNothing(t *testing.T) {
	eachDialect(t, func(t *testing.T, p *platformtest.Platform) {
		p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "First"})
		r := p.Admin(t, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "Second"})
		if r.Status != 409 || problemType(t, r) != "conflict" {
			t.Fatalf("duplicate: %d %s", r.Status, r.Body)
		}
		if got := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme", nil); got["displayName"] != "First" {
			t.Fatalf("duplicate create changed the tenant: %v", got)
		}
	})
}

func TestStaleVersionIsRefusedWithPreconditionFailed(t *testing.T) {
	eachDialect(t, func(t *testing.T, p *platformtest.Platform) {
		p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "A"})
		p.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", map[string]any{"displayName": "B"})
		r := p.Admin(t, "PATCH", "/api/v1/tenants/acme", map[string]any{"displayName": "C"}, "If-Match", `"1"`)
		if r.Status != 412 || problemType(t, r) != "precondition-failed" {
			t.Fatalf("stale If-Match: %d %s", r.Status, r.Body)
		}
		r = p.Admin(t, "PATCH", "/api/v1/tenants/acme", map[string]any{"displayName": "C", "version": 1})
		if r.Status != 412 {
			t.Fatalf("stale body version: %d %s", r.Status, r.Body)
		}
		if r := p.Admin(t, "PATCH", "/api/v1/tenants/acme", map[string]any{"displayName": "C"}, "If-Match", `"2"`); r.Status != 200 {
			t.Fatalf("current If-Match: %d %s", r.Status, r.Body)
		}
		if got := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme", nil); got["displayName"] != "C" {
			t.Fatalf("got %v", got)
		}
	})
}

func TestListsPaginateWithCursors(t *testing.T) {
	eachDialect(t, func(t *testing.T, p *platformtest.Platform) {
		for i := 0; i < 5; i++ {
			p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": fmt.Sprintf("t%d", i), "displayName": "T"})
		}
		var seen []string
		path := "/api/v1/tenants?limit=2"
		for pages := 0; ; pages++ {
			page := p.MustAdmin(t, 200, "GET", path, nil)
			for _, it := range page["items"].([]any) {
				seen = append(seen, it.(map[string]any)["slug"].(string))
			}
			next, _ := page["nextCursor"].(string)
			if next == "" {
				break
			}
			if pages > 5 {
				t.Fatal("pagination does not end")
			}
			path = "/api/v1/tenants?limit=2&cursor=" + next
		}
		if strings.Join(seen, ",") != "t0,t1,t2,t3,t4" {
			t.Fatalf("pages gave %v", seen)
		}
		for _, q := range []string{"limit=0", "limit=abc", "limit=500", "cursor=!!!", "cursor=bm9wZQ"} {
			r := p.Admin(t, "GET", "/api/v1/tenants?"+q, nil)
			if r.Status != 422 {
				t.Errorf("%s: status %d, want 422", q, r.Status)
			}
		}
	})
}

func TestAdminAPIRefusesMissingAndWrongTokens(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	for name, h := range map[string]http.Header{
		"none":   {},
		"wrong":  {"Authorization": {"Bearer nope"}},
		"basic":  {"Authorization": {"Basic " + platformtest.AdminToken}},
		"prefix": {"Authorization": {"Bearer " + platformtest.AdminToken[:10]}},
	} {
		r := platformtest.Do(t, "GET", p.URL+"/api/v1/tenants", h, nil)
		if r.Status != 401 || r.Header.Get("WWW-Authenticate") == "" || problemType(t, r) != "unauthorized" {
			t.Errorf("%s: status %d, challenge %q", name, r.Status, r.Header.Get("WWW-Authenticate"))
		}
	}
}

func TestBadBodiesGetPreciseProblemsAndChangeNothing(t *testing.T) {
	eachDialect(t, func(t *testing.T, p *platformtest.Platform) {
		cases := []struct {
			name, body, ctype string
			status            int
			typ, field        string
		}{
			{"malformed", `{"slug": "a",`, "", 400, "malformed-request", ""},
			{"not an object", `[1,2]`, "", 400, "malformed-request", ""},
			{"empty", ``, "", 400, "malformed-request", ""},
			{"trailing data", `{"slug":"a","displayName":"A"} {}`, "", 400, "malformed-request", ""},
			{"unknown field", `{"slug":"a","displayName":"A","colour":"red"}`, "", 422, "validation-failed", "colour"},
			{"wrong type", `{"slug":5,"displayName":"A"}`, "", 422, "validation-failed", "slug"},
			{"bad slug", `{"slug":"Not_A-Label","displayName":"A"}`, "", 422, "validation-failed", "slug"},
			{"hostile slug", `{"slug":"../../etc","displayName":"A"}`, "", 422, "validation-failed", "slug"},
			{"blank name", `{"slug":"a","displayName":"   "}`, "", 422, "validation-failed", "displayName"},
			{"bad setting", `{"slug":"a","displayName":"A","settings":{"stateTtlSeconds":-1}}`, "", 422, "validation-failed", "settings.stateTtlSeconds"},
			{"bad origin", `{"slug":"a","displayName":"A","settings":{"allowedOrigins":["javascript:x"]}}`, "", 422, "validation-failed", "settings.allowedOrigins[0]"},
			{"wrong media type", `{"slug":"a","displayName":"A"}`, "text/plain", 415, "unsupported-media-type", ""},
			{"oversize", `{"slug":"a","displayName":"` + strings.Repeat("x", 2<<20) + `"}`, "", 413, "body-too-large", ""},
		}
		for _, tc := range cases {
			var hdr []string
			if tc.ctype != "" {
				hdr = []string{"Content-Type", tc.ctype}
			}
			r := p.Admin(t, "POST", "/api/v1/tenants", tc.body, hdr...)
			if r.Status != tc.status {
				t.Errorf("%s: status %d, want %d: %s", tc.name, r.Status, tc.status, r.Body)
				continue
			}
			if got := problemType(t, r); got != tc.typ {
				t.Errorf("%s: type %q, want %q", tc.name, got, tc.typ)
			}
			if d, ok := r.JSON(t)["detail"].(string); !ok || strings.TrimSpace(d) == "" {
				t.Errorf("%s: detail %#v, want a non-empty string", tc.name, r.JSON(t)["detail"])
			}
			if tc.field != "" {
				if _, ok := fieldErrors(t, r)[tc.field]; !ok {
					t.Errorf("%s: no error for field %q in %s", tc.name, tc.field, r.Body)
				}
			}
		}
		list := p.MustAdmin(t, 200, "GET", "/api/v1/tenants", nil)
		if n := len(list["items"].([]any)); n != 0 {
			t.Fatalf("bad requests created %d tenants", n)
		}
	})
}

func TestUnknownTenantIsNotFound(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	for _, path := range []string{"/api/v1/tenants/ghost", "/api/v1/tenants/ghost/tools", "/api/v1/tenants/ghost/tools/x"} {
		if r := p.Admin(t, "GET", path, nil); r.Status != 404 || problemType(t, r) != "not-found" {
			t.Errorf("%s: %d %s", path, r.Status, r.Body)
		}
	}
	r := p.Admin(t, "POST", "/api/v1/tenants/ghost/tools", validTool("x"))
	if r.Status != 404 {
		t.Errorf("create under unknown tenant: %d %s", r.Status, r.Body)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	eachDialect(t, func(t *testing.T, p *platformtest.Platform) {
		if r := platformtest.Do(t, "GET", p.URL+"/healthz", nil, nil); r.Status != 200 {
			t.Fatalf("healthz %d", r.Status)
		}
		r := platformtest.Do(t, "GET", p.URL+"/readyz", nil, nil)
		checks := r.JSON(t)["checks"].(map[string]any)
		if r.Status != 200 || checks["database"] != "ok" || checks["migrations"] != "ok" {
			t.Fatalf("readyz %d %s", r.Status, r.Body)
		}
	})
}
