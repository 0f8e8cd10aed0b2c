package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeRefusesAWeakOrLeftoverBootstrapToken: `platform serve` does
// not start with a bootstrap token under 32 characters, nor with one
// beside an admin issuer unless kept explicitly; it says why and what to
// do, without echoing the token, and touches no database.
func TestServeRefusesAWeakOrLeftoverBootstrapToken(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PLATFORM_DATABASE_URL", "sqlite:"+filepath.Join(dir, "db", "platform.db"))
	t.Setenv("PLATFORM_LISTEN", "127.0.0.1:0")
	for _, c := range []struct {
		token, issuer, want string
	}{
		{"change-me", "", "bootstrap-token must be at least 32 characters"},
		{strings.Repeat("a", 31), "", "bootstrap-token must be at least 32 characters"},
		{strings.Repeat("a", 40), "https://id.example", "PLATFORM_KEEP_BOOTSTRAP_TOKEN=true"},
	} {
		t.Setenv("PLATFORM_BOOTSTRAP_TOKEN", c.token)
		t.Setenv("PLATFORM_ADMIN_ISSUER", c.issuer)
		var out, errb bytes.Buffer
		if code := run([]string{"serve"}, &out, &errb); code != 2 {
			t.Fatalf("serve with %q: exit %d, want 2\n%s", c.token, code, errb.String())
		}
		if !strings.Contains(errb.String(), c.want) || strings.Contains(errb.String(), c.token) {
			t.Fatalf("serve with %q said:\n%s\nwant %q, and never the token", c.token, errb.String(), c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "db")); !os.IsNotExist(err) {
		t.Fatalf("a refused start created the database: %v", err)
	}
}
