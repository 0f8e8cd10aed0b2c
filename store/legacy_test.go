package store_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// legacySessions makes n sessions of tenantID expiring at exp, named by
// prefix.
func legacySessions(tenantID, prefix string, n int, exp time.Time) []store.LegacySession {
	out := make([]store.LegacySession, n)
	for i := range out {
		out[i] = store.LegacySession{ID: fmt.Sprintf("%s%07d", prefix, i), TenantID: tenantID, ProtocolVersion: "2025-11-25",
			CreatedAt: exp.Add(-24 * time.Hour).UTC(), ExpiresAt: exp.UTC()}
	}
	return out
}

// TestPruneDeletesInBoundedBatches: a sweep with more expired sessions
// than one statement deletes goes on until none is left, keeps every
// live session, ended or not, and deletes only relay messages past
// their age, on both databases.
func TestPruneDeletesInBoundedBatches(t *testing.T) {
	defer store.SetPruneBatch(100)()
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			ctx := context.Background()
			st := acmeStore(t, d.New(t), false)
			acme, err := st.Tenants().Get(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			ls := st.Legacy()
			now := time.Now()
			// 350 expired (three full batches and a part), 7 live, 1 live
			// but ended by its client.
			if err := ls.CreateMany(ctx, legacySessions(acme.ID, "old", 350, now.Add(-time.Minute))); err != nil {
				t.Fatal(err)
			}
			if err := ls.CreateMany(ctx, legacySessions(acme.ID, "new", 8, now.Add(time.Hour))); err != nil {
				t.Fatal(err)
			}
			if err := ls.End(ctx, acme.ID, "new0000000", "client"); err != nil {
				t.Fatal(err)
			}
			for i := range 250 {
				if err := ls.CreateRelay(ctx, fmt.Sprintf("stale%03d", i), acme.ID, now.Add(-2*time.Hour)); err != nil {
					t.Fatal(err)
				}
			}
			if err := ls.CreateRelay(ctx, "fresh", acme.ID, now); err != nil {
				t.Fatal(err)
			}
			// The sessions go in bounded statements: three full, one part.
			if n, statements, err := ls.PruneExpiredSessions(ctx); err != nil || n != 350 || statements != 4 {
				t.Fatalf("pruned %d sessions in %d statements (%v); want 350 in 4 of at most 100", n, statements, err)
			}
			if err := ls.CreateMany(ctx, legacySessions(acme.ID, "old", 350, now.Add(-time.Minute))); err != nil {
				t.Fatal(err)
			}
			sessions, relay, err := ls.Prune(ctx, time.Hour)
			if err != nil || sessions != 350 || relay != 250 {
				t.Fatalf("pruned %d sessions and %d relay messages (%v); want 350 and 250", sessions, relay, err)
			}
			for _, id := range []string{"new0000001", "new0000007"} {
				if _, err := ls.Get(ctx, acme.ID, id); err != nil {
					t.Errorf("a live session %s was pruned: %v", id, err)
				}
			}
			if _, err := ls.Get(ctx, acme.ID, "old0000349"); err == nil {
				t.Error("an expired session outlived the sweep")
			}
			// Nothing left to delete: a second sweep deletes nothing.
			if sessions, relay, err := ls.Prune(ctx, time.Hour); err != nil || sessions != 0 || relay != 0 {
				t.Fatalf("a second sweep pruned %d and %d (%v)", sessions, relay, err)
			}
			// A sweep whose context ends stops, with what it did.
			cancelled, cancel := context.WithCancel(ctx)
			cancel()
			if _, _, err := ls.Prune(cancelled, time.Hour); err == nil {
				t.Error("a sweep with its context ended reported success")
			}
		})
	}
}

// BenchmarkPruneLegacy times a sweep of 1,000,000 expired sessions
// (LEGACY_PRUNE_ROWS to change it), in batches of the default size
// (LEGACY_PRUNE_BATCH to change it): the sweep's total time, and so what
// each statement holds the writer for.
//
//	go test -run XXX -bench PruneLegacy -benchtime 1x ./store
func BenchmarkPruneLegacy(b *testing.B) {
	rows := 1_000_000
	if v := os.Getenv("LEGACY_PRUNE_ROWS"); v != "" {
		rows, _ = strconv.Atoi(v)
	}
	batch := store.PruneBatch
	if v := os.Getenv("LEGACY_PRUNE_BATCH"); v != "" {
		// As the sweep was before it went in batches: one statement.
		batch, _ = strconv.Atoi(v)
		defer store.SetPruneBatch(batch)()
	}
	for _, d := range platformtest.Dialects() {
		b.Run(d.Name, func(b *testing.B) {
			ctx := context.Background()
			st := acmeStore(b, d.New(b), false)
			acme, err := st.Tenants().Get(ctx, "acme")
			if err != nil {
				b.Fatal(err)
			}
			ls := st.Legacy()
			for b.Loop() {
				b.StopTimer()
				for i := 0; i < rows; i += 50_000 {
					if err := ls.CreateMany(ctx, legacySessions(acme.ID, fmt.Sprintf("s%07d-", i), min(50_000, rows-i), time.Now().Add(-time.Minute))); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				n, _, err := ls.Prune(ctx, time.Hour)
				if err != nil || n != int64(rows) {
					b.Fatalf("pruned %d of %d: %v", n, rows, err)
				}
			}
			statements := float64(b.N) * float64((rows+batch-1)/batch)
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/statements, "ms/statement")
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// TestStreamReportsSumAcrossReplicasAndExpire: each replica's report of
// its open streams replaces its last one; the count of a session sums
// the replicas' unexpired reports; a withdrawn report counts no more;
// an expired one (a killed replica's) counts no more and the sweep
// deletes it, in bounded statements, leaving the live ones; on both
// databases.
func TestStreamReportsSumAcrossReplicasAndExpire(t *testing.T) {
	defer store.SetPruneBatch(100)()
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			ctx := context.Background()
			ls := acmeStore(t, d.New(t), false).Legacy()
			now := time.Now()
			count := func(want map[string]int) {
				t.Helper()
				got, err := ls.OpenStreams(ctx, []string{"s1", "s2", "s3", "s4"})
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("open streams %v, want %v", got, want)
				}
			}
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(ls.ReportStreams(ctx, "r1", map[string]int{"s1": 2, "s2": 1}, now.Add(time.Minute)))
			must(ls.ReportStreams(ctx, "r2", map[string]int{"s1": 1, "s3": 0}, now.Add(time.Minute)))
			count(map[string]int{"s1": 3, "s2": 1})
			// r1's next report replaces its last: s2's stream closed.
			must(ls.ReportStreams(ctx, "r1", map[string]int{"s1": 1}, now.Add(time.Minute)))
			count(map[string]int{"s1": 2})
			// r2 leaves: it withdraws its report.
			must(ls.ReportStreams(ctx, "r2", nil, now.Add(time.Minute)))
			count(map[string]int{"s1": 1})
			// A killed replica's report, expired, counts no more, and the
			// sweep deletes it.
			dead := map[string]int{"s4": 5}
			for i := range 249 {
				dead[fmt.Sprintf("gone%03d", i)] = 1
			}
			must(ls.ReportStreams(ctx, "r3", dead, now.Add(-time.Second)))
			count(map[string]int{"s1": 1})
			if _, _, err := ls.Prune(ctx, time.Hour); err != nil {
				t.Fatal(err)
			}
			if n, err := ls.StreamReports(ctx); err != nil || n != 1 {
				t.Fatalf("%d stream reports left after the sweep (%v), want r1's 1", n, err)
			}
			count(map[string]int{"s1": 1})
		})
	}
}
