package api_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// TestViewersCauseNoWrites: a viewer's every read, the key ring of a
// tenant without one included, and every refused write, leave every
// table as it was: no ring is created (a clear 404 says there is none
// yet), no audit entry written. Reading a ring does not create it for a
// platform admin either; creating one is an explicit change.
func TestViewersCauseNoWrites(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			mk := make([]byte, 32)
			_, _ = rand.Read(mk)
			p := platformtest.Start(t, d.New(t), platformtest.WithConfig(func(c *config.Config) {
				c.Keys.Provider = "local"
				c.Keys.MasterKey = base64.StdEncoding.EncodeToString(mk)
				c.Keys.Refresh = 100 * time.Millisecond
				c.Keys.ClockSkew = 100 * time.Millisecond
			}))
			id := p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "Acme"})["id"].(string)
			p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/tools", validTool("weather"))
			viewer := mintToken(t, p, "viewer")
			noRing := func() {
				t.Helper()
				if _, err := p.Server.Store().KeyRings().Get(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("acme has a key ring: %v", err)
				}
			}
			noRing()
			db := platformtest.SQL(t, p.DatabaseURL)
			before := dbState(t, db)

			for _, path := range []string{"/api/v1/me", "/api/v1/audit", "/api/v1/audit?tenant=acme", "/api/v1/tenants", "/api/v1/tenants/acme",
				"/api/v1/tenants/acme/tools", "/api/v1/tenants/acme/tools/weather", "/api/v1/tenants/acme/prompts",
				"/api/v1/tenants/acme/resources", "/api/v1/tenants/acme/resource-templates", "/api/v1/tenants/ghost"} {
				if r := as(t, p, viewer, "GET", path, nil); r.Status != 200 && r.Status != 404 {
					t.Errorf("viewer GET %s: %d %s", path, r.Status, r.Body)
				}
			}
			for range 3 {
				r := as(t, p, viewer, "GET", "/api/v1/tenants/acme/keys", nil)
				if r.Status != 404 || problemType(t, r) != "not-found" || !strings.Contains(string(r.Body), "no key ring yet") {
					t.Fatalf("viewer reading a ring that does not exist: %d %s", r.Status, r.Body)
				}
			}
			for _, w := range []struct{ method, path string }{
				{"POST", "/api/v1/tenants/acme/keys"}, {"POST", "/api/v1/tenants/acme/keys/rotate"}, {"PATCH", "/api/v1/tenants/acme/keys"},
				{"POST", "/api/v1/tenants/acme/keys/k1/revoke"}, {"PATCH", "/api/v1/tenants/acme"}, {"DELETE", "/api/v1/tenants/acme"},
				{"POST", "/api/v1/tenants/acme/tools"}, {"PUT", "/api/v1/tenants/acme/tools/weather"}, {"DELETE", "/api/v1/tenants/acme/tools/weather"},
				{"POST", "/api/v1/tenants/acme/tools/weather/webhook-secret"}, {"POST", "/api/v1/tenants/acme/flows/fl_x/cancel"},
				{"POST", "/api/v1/tenants"}, {"POST", "/api/v1/tokens"}, {"GET", "/api/v1/tokens"}, {"DELETE", "/api/v1/tokens/tok_x"},
			} {
				if r := as(t, p, viewer, w.method, w.path, map[string]any{"custody": "aes"}); r.Status != 403 {
					t.Errorf("viewer %s %s: %d, want 403", w.method, w.path, r.Status)
				}
			}
			// A platform admin's read does not create a ring either.
			if r := p.Admin(t, "GET", "/api/v1/tenants/acme/keys", nil); r.Status != 404 {
				t.Fatalf("admin reading a ring that does not exist: %d %s", r.Status, r.Body)
			}
			noRing()
			if after := dbState(t, db); after != before {
				t.Fatalf("reads and refused writes changed the database:\nbefore %s\nafter  %s", before, after)
			}

			// Once a ring exists, the viewer reads it, and still writes nothing.
			p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/keys", map[string]any{})
			before = dbState(t, db)
			if r := as(t, p, viewer, "GET", "/api/v1/tenants/acme/keys", nil); r.Status != 200 || !strings.Contains(string(r.Body), `"phase":"steady"`) {
				t.Fatalf("viewer reading the ring: %d %s", r.Status, r.Body)
			}
			if after := dbState(t, db); after != before {
				t.Fatalf("a viewer's read of the ring wrote:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}
