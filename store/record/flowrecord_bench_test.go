package record_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/opsmcp/platform/store/record"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// BenchmarkListFlows is the flow list the admin UI asks for, over a
// PostgreSQL record of 10,000 flows in flight and 1,000,000 recorded
// rounds (333,334 flows of 3 rounds, 20 tenants, 5,000 principals), each
// query with the counts per state the page shows. Seeding takes a few
// seconds per run.
func BenchmarkListFlows(b *testing.B) {
	ctx := context.Background()
	url := platformtest.PostgresSchemaURL(b)
	st := platformtest.Store(b, url).Record()
	seed := []string{
		`INSERT INTO flows (id, tenant_id, tenant_slug, method, target, principal_issuer, principal_subject, principal_client,
			client_name, client_version, era, state, rounds, pending_kinds, key_id, replica, trace_id, detail, started_at,
			updated_at, waiting_since, state_expires_at, server_us, client_wait_us, seq)
		SELECT 'fl_' || lpad(g::text, 16, '0'), 'tn_' || (g % 20), 'tenant' || (g % 20), 'tools/call', 'tool' || (g % 50),
			'https://id.example', 'user' || (g % 5000), 'client', 'claude', '1.0', '2026-07-28',
			CASE WHEN g <= 10000 THEN 'awaiting_input' WHEN g % 10 = 0 THEN 'failed' ELSE 'completed' END,
			3, CASE WHEN g <= 10000 THEN 'form' ELSE '' END, 'k' || (g % 3), 'r1', '', '',
			now() - (g || ' seconds')::interval, now() - (g || ' seconds')::interval,
			CASE WHEN g <= 10000 THEN now() - (g || ' seconds')::interval END,
			CASE WHEN g <= 10000 THEN now() + interval '10 minutes' END, 1500, 20000, g
		FROM generate_series(1, 333334) g`,
		`INSERT INTO flow_rounds (flow_id, seq, tenant_id, rounds) SELECT id, seq, tenant_id, '[{"n":1},{"n":2},{"n":3}]' FROM flows`,
		// A record in steady state has been vacuumed (autovacuum does it):
		// index-only scans then need no visit to the table.
		`VACUUM ANALYZE flows`, `VACUUM ANALYZE flow_rounds`,
	}
	db := platformtest.SQL(b, url)
	for _, q := range seed {
		db.Exec(b, q)
	}
	for _, tc := range []struct {
		name string
		f    record.Filter
		sort record.Sort
	}{
		{"all/updated", record.Filter{}, record.SortUpdated},
		{"in-flight/waiting", record.Filter{States: []string{record.AwaitingInput, record.Running}}, record.SortWaiting},
		{"tenant/updated", record.Filter{TenantIDs: []string{"tn_7"}}, record.SortUpdated},
		{"tenant-in-flight", record.Filter{TenantIDs: []string{"tn_7"}, States: []string{record.AwaitingInput}}, record.SortUpdated},
		{"waiting-over-1h", record.Filter{WaitingLonger: time.Hour}, record.SortWaiting},
		{"principal-in-flight", record.Filter{Subject: "user42", States: []string{record.AwaitingInput, record.Running}}, record.SortUpdated},
		{"key-in-flight", record.Filter{KeyID: "k1", States: []string{record.AwaitingInput, record.Running}}, record.SortUpdated},
		{"last-24h/updated", record.Filter{Since: time.Now().Add(-24 * time.Hour)}, record.SortUpdated},
		// Search: the start of a target (one in 50 flows), of a user (one
		// in 5000), of a flow id; every flow waiting longest first.
		{"search-target/updated", record.Filter{Prefix: "tool4"}, record.SortUpdated},
		{"search-user/updated", record.Filter{Prefix: "user4242"}, record.SortUpdated},
		{"search-id/updated", record.Filter{Prefix: "fl_00000000000042"}, record.SortUpdated},
		{"all/waiting", record.Filter{}, record.SortWaiting},
		{"activity", record.Filter{}, ""},
	} {
		if tc.name == "activity" {
			b.Run("activity-last-hour", func(b *testing.B) {
				for b.Loop() {
					if _, err := st.Activity(ctx, time.Now().Add(-time.Hour)); err != nil {
						b.Fatal(err)
					}
				}
			})
			continue
		}
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				pg, err := st.List(ctx, tc.f, tc.sort, nil, 50)
				if err != nil {
					b.Fatal(err)
				}
				if len(pg.Flows) == 0 {
					b.Fatal("no flows listed")
				}
			}
		})
		b.Run(tc.name+"/counts", func(b *testing.B) {
			for b.Loop() {
				if _, err := st.Count(ctx, tc.f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("one-flow", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := st.Get(ctx, fmt.Sprintf("fl_%016d", 4242)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
