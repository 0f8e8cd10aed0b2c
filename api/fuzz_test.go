package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/opsmcp/platform/api"
	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/server"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// fuzzRoutes are the admin API's routes that decode a JSON body into a
// tenant, a change to one, a catalogue definition or a token.
var fuzzRoutes = []struct{ method, path string }{
	{"POST", "/api/v1/tenants"},
	{"PATCH", "/api/v1/tenants/acme"},
	{"POST", "/api/v1/tenants/acme/tools"},
	{"PUT", "/api/v1/tenants/acme/tools/weather"},
	{"POST", "/api/v1/tenants/acme/prompts"},
	{"PUT", "/api/v1/tenants/acme/prompts/greet"},
	{"POST", "/api/v1/tenants/acme/resources"},
	{"PUT", "/api/v1/tenants/acme/resources/readme"},
	{"POST", "/api/v1/tenants/acme/resource-templates"},
	{"PUT", "/api/v1/tenants/acme/resource-templates/files"},
	{"POST", "/api/v1/tokens"},
}

// fuzzPlatform is a platform on a fresh database of dialect d, served
// in process (no listener: every input is one handler call), holding the
// tenant acme with one item of each kind the routes above name.
func fuzzPlatform(f *testing.F, d platformtest.Dialect) fuzzTarget {
	cfg, err := config.Load(flag.NewFlagSet("fuzz", flag.ContinueOnError), nil, func(string) string { return "" })
	if err != nil {
		f.Fatal(err)
	}
	cfg.DatabaseURL = d.New(f)
	cfg.BootstrapToken = platformtest.AdminToken
	cfg.SecretsKeys = platformtest.SecretsKey
	cfg.Metrics = false
	srv, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler), "fuzz")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	h := srv.Handler()
	for _, c := range []struct {
		path string
		body any
	}{
		{"/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "Acme"}},
		{"/api/v1/tenants/acme/tools", validTool("weather")},
		{"/api/v1/tenants/acme/prompts", kindCases[1].def("greet")},
		{"/api/v1/tenants/acme/resources", kindCases[2].def("readme")},
		{"/api/v1/tenants/acme/resource-templates", kindCases[3].def("files")},
	} {
		b, _ := json.Marshal(c.body)
		if rec := serve(h, "POST", c.path, "application/json", "", b); rec.Code != 201 {
			f.Fatalf("fixture %s: %d %s", c.path, rec.Code, rec.Body)
		}
	}
	return fuzzTarget{d.Name, h, platformtest.SQL(f, cfg.DatabaseURL)}
}

// fuzzTarget is one platform the fuzzer drives.
type fuzzTarget struct {
	dialect string
	h       http.Handler
	db      *platformtest.DB // the database, read apart from the platform
}

func serve(h http.Handler, method, path, contentType, ifMatch string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+platformtest.AdminToken)
	req.Header.Set("Content-Type", contentType)
	if ifMatch != "" {
		req.Header.Set("If-Match", ifMatch)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// FuzzAdminJSON feeds arbitrary bodies (and Content-Type and If-Match
// headers) to every admin route that decodes JSON, through the real
// handlers and a real store, on SQLite and on PostgreSQL (what one
// database stores the other may refuse: a NUL character, an over-long
// indexed value). Properties: no panic and no 5xx; every
// refusal is an RFC 9457 problem whose status is the answer's; a refused
// request changes nothing in the database. Accepted changes are undone
// so the database stays small. The seed corpus is in
// testdata/fuzz/FuzzAdminJSON; plain `go test` runs it.
func FuzzAdminJSON(f *testing.F) {
	var targets []fuzzTarget
	for _, d := range platformtest.Dialects() {
		targets = append(targets, fuzzPlatform(f, d))
	}
	for i := range fuzzRoutes {
		f.Add(uint8(i), "application/json", "", []byte(`{}`))
	}
	f.Fuzz(func(t *testing.T, route uint8, contentType, ifMatch string, body []byte) {
		r := fuzzRoutes[int(route)%len(fuzzRoutes)]
		for _, tg := range targets {
			checkAdminJSON(t, tg, r.method, r.path, contentType, ifMatch, body)
		}
	})
}

// checkAdminJSON sends one input to one platform and checks the
// properties FuzzAdminJSON states.
func checkAdminJSON(t *testing.T, tg fuzzTarget, method, path, contentType, ifMatch string, body []byte) {
	t.Helper()
	before := dbState(t, tg.db)
	rec := serve(tg.h, method, path, contentType, ifMatch, body)
	what := fmt.Sprintf("%s: %s %s %q", tg.dialect, method, path, body)
	if rec.Code >= 500 {
		t.Fatalf("%s: %d %s", what, rec.Code, rec.Body)
	}
	if rec.Code >= 400 {
		var p api.Problem
		dec := json.NewDecoder(rec.Body)
		dec.DisallowUnknownFields()
		if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("%s: %d with Content-Type %q", what, rec.Code, ct)
		}
		if err := dec.Decode(&p); err != nil || p.Status != rec.Code || !strings.HasPrefix(p.Type, "urn:opsmcp:problem:") || p.Title == "" {
			t.Fatalf("%s: %d answered a malformed problem (%v): %+v", what, rec.Code, err, p)
		}
		if !utf8.ValidString(p.Detail) {
			t.Fatalf("%s: a problem detail that is not UTF-8: %q", what, p.Detail)
		}
		if after := dbState(t, tg.db); after != before {
			t.Fatalf("%s: refused with %d, yet the database changed:\nbefore %s\nafter  %s", what, rec.Code, before, after)
		}
		return
	}
	if !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("%s: %d with a body that is not JSON: %s", what, rec.Code, rec.Body)
	}
	undo(t, tg.h, tg.db, method, path, rec.Body.Bytes())
}

// undo removes what an accepted request created, and the records it left
// (audit entries, the retired slug, tokens), so inputs do not pile up.
// Replacements and tenant changes stay: they are valid states too.
func undo(t *testing.T, h http.Handler, db *platformtest.DB, method, path string, answer []byte) {
	t.Helper()
	var created struct {
		Slug string `json:"slug"`
		Name string `json:"name"`
	}
	_ = json.Unmarshal(answer, &created)
	switch {
	case method == "POST" && path == "/api/v1/tenants":
		if rec := serve(h, "DELETE", path+"/"+created.Slug, "", "", nil); rec.Code != 204 {
			t.Fatalf("undo tenant %q: %d %s", created.Slug, rec.Code, rec.Body)
		}
	case method == "POST" && strings.HasPrefix(path, "/api/v1/tenants/acme/"):
		if rec := serve(h, "DELETE", path+"/"+url.PathEscape(created.Name), "", "", nil); rec.Code != 204 {
			t.Fatalf("undo item %q: %d %s", created.Name, rec.Code, rec.Body)
		}
	}
	for _, table := range []string{"audit_log", "retired_slugs", "api_token_tenants", "api_tokens"} {
		db.Exec(t, "DELETE FROM "+table)
	}
}
