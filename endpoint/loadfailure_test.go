package endpoint_test

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// TestATenantThatCannotLoadIsReadOncePerInterval: a tenant whose
// catalogue cannot be loaded (here a webhook secret sealed under a key
// this replica lacks) answers every request with 503, but its catalogue is
// read once per refresh interval, not once per request; a change made
// through this replica's admin API is tried at once.
func TestATenantThatCannotLoadIsReadOncePerInterval(t *testing.T) {
	rec, with := traced(t)
	db := platformtest.SQLiteURL(t)
	a := platformtest.Start(t, db, with, platformtest.WithConfig(func(c *config.Config) { c.CatalogueRefresh = time.Hour }))
	other := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{5}, 32))
	b := platformtest.Start(t, db, platformtest.WithConfig(func(c *config.Config) { c.SecretsKeys = other }))
	b.Tenant(t, "acme")
	b.Tool(t, "acme", echoTool("echo", "http://127.0.0.1:1/hook")) // sealed under a key a lacks

	catalogueReads := func() int {
		n := 0
		for _, s := range rec.Ended() {
			if s.Name() == "SELECT catalogue_items" {
				n++
			}
		}
		return n
	}
	for i := range 20 {
		if r := a.MCP(t, "acme", "tools/list", nil); r.Status != 503 {
			t.Fatalf("request %d: %d %s", i, r.Status, r.Body)
		}
	}
	if n := catalogueReads(); n != 1 {
		t.Fatalf("20 requests within one interval read the catalogue %d times", n)
	}
	if n := strings.Count(a.Logs.String(), `"level":"ERROR","msg":"tenant lookup failed"`); n != 1 {
		t.Fatalf("the failure was logged as an error %d times for one failed read", n)
	}

	// A fix made through a's admin API (here: the secret rotated, so a
	// seals it under its own key) is picked up by the next request.
	a.MustAdmin(t, 200, "POST", "/api/v1/tenants/acme/tools/echo/webhook-secret", nil)
	if r := a.MCP(t, "acme", "tools/list", nil); r.Status != 200 {
		t.Fatalf("after the fix: %d %s", r.Status, r.Body)
	}
}
