package server_test

import (
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/endpoint"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
)

// TestTheCatalogueCacheIsMeasured: /metrics says how many tenants' catalogues
// a replica holds, their estimated bytes, and how many were evicted: with
// a budget smaller than one catalogue, each tenant's first request
// evicts the one before. The change feed is measured beside it.
func TestTheCatalogueCacheIsMeasured(t *testing.T) {
	const token = "metrics-token-0123456789"
	p := platformtest.Start(t, platformtest.SQLiteURL(t), platformtest.WithConfig(func(c *config.Config) { c.MetricsToken = token }),
		platformtest.WithServer(func(o *endpoint.Options) { o.CatalogueBytes = 1 }))
	for _, slug := range []string{"one", "two", "three"} {
		p.Tenant(t, slug)
		if r := p.MCP(t, slug, "tools/list", nil); r.Status != 200 {
			t.Fatalf("%s: tools/list %d", slug, r.Status)
		}
	}
	// The feed reads a change after its notification, on its own: the
	// metrics are read once it has read the three creations.
	var r *platformtest.Response
	changes := regexp.MustCompile(`(?m)^opsmcp_feed_changes_total(?:\{[^}]*\})? ([3-9]|\d\d+)$`)
	testwait.Until(t, "the feed to read the three creations", func() bool {
		r = platformtest.Do(t, http.MethodGet, p.URL+"/metrics", http.Header{"Authorization": {"Bearer " + token}}, nil)
		return changes.Match(r.Body)
	})
	value := func(name string) int64 {
		m := regexp.MustCompile(`(?m)^` + name + `(?:\{[^}]*\})? (\d+)`).FindSubmatch(r.Body)
		if m == nil {
			t.Fatalf("/metrics has no %s:\n%s", name, r.Body)
		}
		n, _ := strconv.ParseInt(string(m[1]), 10, 64)
		return n
	}
	if n := value("opsmcp_catalogue_cache_tenants"); n != 1 {
		t.Errorf("tenants held: %d, want 1 (the last)", n)
	}
	if n := value("opsmcp_catalogue_cache_bytes"); n < 2560 {
		t.Errorf("bytes held: %d", n)
	}
	if n := value("opsmcp_catalogue_cache_evictions_total"); n < 2 {
		t.Errorf("evictions: %d, want at least 2", n)
	}
	// The change feed: the three tenants' creations read, nothing lost
	// or missed, and read to its end moments ago.
	if n := value("opsmcp_feed_changes_total"); n < 3 {
		t.Errorf("feed changes: %d, want at least 3", n)
	}
	for _, name := range []string{"opsmcp_feed_lost_total", "opsmcp_feed_missed_total"} {
		if n := value(name); n != 0 {
			t.Errorf("%s: %d", name, n)
		}
	}
	m := regexp.MustCompile(`(?m)^opsmcp_feed_behind_seconds(?:\{[^}]*\})? ([0-9.e+-]+)`).FindSubmatch(r.Body)
	if m == nil {
		t.Fatalf("/metrics has no opsmcp_feed_behind_seconds")
	}
	if behind, _ := strconv.ParseFloat(string(m[1]), 64); behind < 0 || behind > 5 {
		t.Errorf("the feed is %v s behind", behind)
	}
}
