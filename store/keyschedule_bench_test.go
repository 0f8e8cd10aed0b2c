package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/opsmcp/platform/testkit/platformtest"
)

// BenchmarkScheduleUnscheduled is the rotation scheduler's look for
// tenants without a due time, which every replica makes a full check
// apart, among 100,000 tenants that all have one: reading every tenant
// (the first look, at a replica's start) and reading only those created
// in the last hour and a full check (every later look). Its time a look
// is wall time, on PostgreSQL mostly the database's.
func BenchmarkScheduleUnscheduled(b *testing.B) {
	ctx := context.Background()
	for _, d := range platformtest.Dialects() {
		st := platformtest.Store(b, d.New(b))
		seedTenants(b, st, 100_000)
		// The registry was made a day ago, as far as the look is concerned.
		now := time.Now().Add(24 * time.Hour)
		for _, look := range []struct {
			name  string
			since time.Time
		}{{"every-tenant", time.Time{}}, {"since-last", now.Add(-time.Hour - 5*time.Minute)}} {
			b.Run(d.Name+"/"+look.name, func(b *testing.B) {
				for b.Loop() {
					if n, err := st.Tenants().ScheduleUnscheduled(ctx, now, look.since); err != nil || n != 0 {
						b.Fatalf("scheduled %d (%v)", n, err)
					}
				}
			})
		}
	}
}
