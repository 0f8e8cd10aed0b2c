package server_test

import (
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/server"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// TestMountServesAPrefixAheadOfThePlatform: a mounted handler answers
// its prefix and nothing else; the platform's routes are unchanged; and a
// platform that mounts nothing (what `platform serve` runs) has no
// development issuer at the path `platform dev` uses.
func TestMountServesAPrefixAheadOfThePlatform(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg, err := config.Load(fs, nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.DatabaseURL = platformtest.SQLiteURL(t)
	cfg.PublicURL = "http://127.0.0.1:1"
	srv, err := server.New(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	get := func(path string) int {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:1"+path, nil))
		return rec.Code
	}
	if got := get("/dev/oidc/.well-known/openid-configuration"); got != http.StatusNotFound {
		t.Fatalf("a platform that mounts nothing answers the dev issuer's path: HTTP %d", got)
	}
	srv.Mount("/dev/oidc/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for path, want := range map[string]int{
		"/dev/oidc/.well-known/openid-configuration": http.StatusTeapot,
		"/dev/oidc/":  http.StatusTeapot,
		"/dev/oidc":   http.StatusNotFound, // not under the prefix
		"/dev/oidcx/": http.StatusNotFound,
		"/healthz":    http.StatusOK,
	} {
		if got := get(path); got != want {
			t.Errorf("GET %s: HTTP %d, want %d", path, got, want)
		}
	}
}
