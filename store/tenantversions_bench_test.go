package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// BenchmarkTenantVersions is a replica's full check, the change feed's
// safety net, run minutes apart: the catalogue versions of the 10,000
// tenants it caches, of 100,000 registered. It reports the CPU per
// tenant read.
func BenchmarkTenantVersions(b *testing.B) {
	ctx := context.Background()
	for _, d := range platformtest.Dialects() {
		b.Run(d.Name, func(b *testing.B) {
			st := platformtest.Store(b, d.New(b))
			const n, cached = 100_000, 10_000
			cs := seedTenants(b, st, n)
			slugs := make([]string, cached)
			for i := range slugs {
				slugs[i] = cs[i*(n/cached)].Tenant.Slug
			}
			cpu0 := platformtest.CPUTime()
			for b.Loop() {
				vs, err := st.Tenants().VersionsOf(ctx, slugs)
				if err != nil || len(vs) != cached {
					b.Fatalf("%d versions, %v", len(vs), err)
				}
			}
			b.ReportMetric(float64((platformtest.CPUTime()-cpu0).Nanoseconds())/float64(b.N)/cached, "cpu-ns/tenant")
		})
	}
}

// seedTenants registers n tenants without items in one bulk call, as a
// large platform's registry.
func seedTenants(b *testing.B, st *store.Store, n int) []store.Catalogue {
	b.Helper()
	cs := make([]store.Catalogue, n)
	for i := range cs {
		cs[i].Tenant = store.Tenant{Slug: fmt.Sprintf("t%06d", i), DisplayName: "T"}
	}
	if err := st.Tenants().CreateCatalogues(context.Background(), cs); err != nil {
		b.Fatal(err)
	}
	return cs
}
