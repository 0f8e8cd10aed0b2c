package endpoint_test

import (
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// TestAnotherReplicaServesAChangeFromTheFeed: with the change feed's poll
// an hour long, so only PostgreSQL's notification can tell it, replica B
// serves what replica A changed, for every kind of change it caches: a
// tool added, the tenant's settings (its server instructions), the
// tenant disabled, then deleted; and a slug B had found missing serves
// the tenant created there since.
func TestAnotherReplicaServesAChangeFromTheFeed(t *testing.T) {
	db := platformtest.PostgresSchemaURL(t)
	hourly := platformtest.WithConfig(func(c *config.Config) { c.CatalogueRefresh = time.Hour })
	a := platformtest.Start(t, db, hourly)
	b := platformtest.Start(t, db, hourly)
	h := newHook(t, replyText("x"))
	a.Tenant(t, "acme")
	a.Tool(t, "acme", echoTool("first", h.URL))
	tools := func() int {
		r := b.MCP(t, "acme", "tools/list", nil)
		if r.Status != 200 {
			return -r.Status
		}
		return len(platformtest.Result(t, r)["tools"].([]any))
	}
	if n := tools(); n != 1 {
		t.Fatalf("replica B lists %d tools", n)
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("replica B: %s, not within 10 s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	a.Tool(t, "acme", echoTool("second", h.URL))
	eventually("two tools", func() bool { return tools() == 2 })

	a.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", obj{"settings": obj{"auth": obj{"public": true}, "instructions": "Use the echo tools."}})
	eventually("the new instructions", func() bool {
		r := b.MCP(t, "acme", "server/discover", nil)
		return r.Status == 200 && platformtest.Result(t, r)["instructions"] == "Use the echo tools."
	})

	a.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", obj{"disabled": true})
	eventually("the tenant disabled", func() bool { return tools() < 0 })

	a.MustAdmin(t, 204, "DELETE", "/api/v1/tenants/acme", nil)
	eventually("the tenant gone", func() bool { return tools() == -404 })

	if r := b.MCP(t, "later", "tools/list", nil); r.Status != 404 {
		t.Fatalf("a tenant that does not exist yet: %d", r.Status)
	}
	a.Tenant(t, "later")
	eventually("the tenant created since", func() bool { return b.MCP(t, "later", "tools/list", nil).Status == 200 })
}
