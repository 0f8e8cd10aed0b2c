package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// BenchmarkTenantVersions is the read every replica makes each refresh
// interval, whatever its traffic: every tenant's catalogue version, here
// of 100,000 tenants. It reports the CPU per tenant read.
func BenchmarkTenantVersions(b *testing.B) {
	ctx := context.Background()
	for _, d := range platformtest.Dialects() {
		b.Run(d.Name, func(b *testing.B) {
			st := platformtest.Store(b, d.New(b))
			const n = 100_000
			cs := make([]store.Catalogue, n)
			for i := range cs {
				cs[i].Tenant = store.Tenant{Slug: fmt.Sprintf("t%06d", i), DisplayName: "T"}
			}
			if err := st.Tenants().CreateCatalogues(ctx, cs); err != nil {
				b.Fatal(err)
			}
			cpu0 := platformtest.CPUTime()
			for b.Loop() {
				vs, err := st.Tenants().Versions(ctx)
				if err != nil || len(vs) != n {
					b.Fatalf("%d versions, %v", len(vs), err)
				}
			}
			b.ReportMetric(float64((platformtest.CPUTime()-cpu0).Nanoseconds())/float64(b.N)/n, "cpu-ns/tenant")
		})
	}
}
