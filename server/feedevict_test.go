package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/opsmcp/platform/endpoint"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// TestAChangeToAnEvictedTenantCostsNothing: on both databases, a
// replica whose cache holds one tenant at a time (the last served) reads
// a change to a tenant it evicted from the change feed and does not load
// it: its evictions do not move, though the feed delivered the change.
// A change to the tenant it holds is loaded at once.
func TestAChangeToAnEvictedTenantCostsNothing(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := d.New(t)
			p := platformtest.Start(t, url, platformtest.WithServer(func(o *endpoint.Options) { o.CatalogueBytes = 1 }))
			writer := p.Server.Store()
			if d.Name == "postgres" {
				writer = platformtest.Store(t, url) // another replica's writes
			}
			for _, slug := range []string{"one", "two"} {
				p.Tenant(t, slug)
				if r := p.MCP(t, slug, "tools/list", nil); r.Status != 200 {
					t.Fatalf("%s: %d", slug, r.Status)
				}
			}
			metric := func(name string) int64 {
				r := platformtest.Do(t, http.MethodGet, p.URL+"/metrics", nil, nil)
				m := regexp.MustCompile(`(?m)^` + name + `(?:\{[^}]*\})? (\d+)`).FindSubmatch(r.Body)
				if m == nil {
					t.Fatalf("/metrics has no %s", name)
				}
				n, _ := strconv.ParseInt(string(m[1]), 10, 64)
				return n
			}
			evictions, changes := metric("opsmcp_catalogue_cache_evictions_total"), metric("opsmcp_feed_changes_total")
			// "one" was evicted when "two" loaded.
			if _, err := writer.Tenants().Update(ctx, "one", 0, func(t *store.Tenant) error {
				var settings map[string]any
				if err := json.Unmarshal([]byte(t.Settings), &settings); err != nil {
					return err
				}
				settings["instructions"] = "changed"
				raw, err := json.Marshal(settings)
				t.Settings = string(raw)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for metric("opsmcp_feed_changes_total") == changes {
				if time.Now().After(deadline) {
					t.Fatal("the feed did not deliver the change")
				}
				time.Sleep(20 * time.Millisecond)
			}
			if n := metric("opsmcp_catalogue_cache_evictions_total"); n != evictions {
				t.Fatalf("the change to an evicted tenant loaded it (%d evictions, was %d)", n, evictions)
			}
			// The next request of "one" serves the change.
			r := p.MCP(t, "one", "server/discover", nil)
			if got := platformtest.Result(t, r)["instructions"]; got != "changed" {
				t.Fatalf("instructions after the change: %v", got)
			}
		})
	}
}
