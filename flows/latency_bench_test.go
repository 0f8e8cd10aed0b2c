package flows_test

import (
	"slices"
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
)

// BenchmarkChangeReachesAnotherReplica measures the time from a round's
// answer on replica B to its change on a stream held by replica A (both
// on one PostgreSQL): B's batch delay, the write, the notification, A's
// read. It reports the median and the 99th percentile.
func BenchmarkChangeReachesAnotherReplica(b *testing.B) {
	keys := newKey()
	db := platformtest.PostgresSchemaURL(b)
	a := platformtest.Start(b, db, platformtest.WithStateKeys(keys))
	rb := platformtest.Start(b, db, platformtest.WithStateKeys(keys), platformtest.WithConfig(func(c *config.Config) { c.PublicURL = a.URL }))
	a.Tenant(b, "acme")
	a.Tool(b, "acme", orderTool("order", backend(b)))
	testwait.Until(b, "replica b never served the tenant", func() bool {
		return rb.MCP(b, "acme", "tools/list", obj{"_meta": platformtest.Meta(caps)}).Status == 200
	})
	s := openStream(b, a, "", "")
	var lat []time.Duration
	for b.Loop() {
		res, _ := call(b, rb, "acme", "order", nil, "")
		answered := time.Now()
		if res["resultType"] != "input_required" {
			b.Fatalf("round: %v", res)
		}
		ev := s.nextAny(b)
		lat = append(lat, time.Since(answered))
		_ = ev
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
