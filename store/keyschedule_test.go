package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// TestTheMigrationSchedulesExistingTenantsRings: tenants that existed
// before the key schedule are due at once after the migration, so the
// scheduler's first pass reads their rings (and creates missing ones),
// then records when each is next due; a due time in the future hides a
// tenant until then.
func TestTheMigrationSchedulesExistingTenantsRings(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := d.New(t)
			st, err := store.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if _, err := st.MigrateTo(ctx, 19); err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC().Truncate(time.Second)
			platformtest.SQL(t, url).Exec(t, `INSERT INTO tenants (id, slug, display_name, settings, version, catalogue_version, created_at, updated_at) VALUES ('tn_old', 'old', 'Old', '{}', 1, 1, ?, ?)`, now, now)
			if _, err := st.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			due, err := st.Tenants().KeysDue(ctx, now, 10)
			if err != nil || len(due) != 1 || due[0].ID != "tn_old" || due[0].Slug != "old" {
				t.Fatalf("due after the migration: %+v %v", due, err)
			}
			if set, err := st.Tenants().SetKeysDue(ctx, "tn_old", 1, now.Add(time.Hour)); err != nil || !set {
				t.Fatal(set, err)
			}
			if due, err := st.Tenants().KeysDue(ctx, now.Add(59*time.Minute), 10); err != nil || len(due) != 0 {
				t.Fatalf("due before its time: %+v %v", due, err)
			}
			if due, err := st.Tenants().KeysDue(ctx, now.Add(time.Hour), 10); err != nil || len(due) != 1 {
				t.Fatalf("due at its time: %+v %v", due, err)
			}
		})
	}
}

// TestADueTimeFromAnOlderRingNeverReplacesANewerOne: SetKeysDue keeps
// the due time worked out from the latest version of a ring (a slow
// writer, or a retry, cannot push a newer phase back); PostponeKeys moves
// only a ring still due before then; a deleted tenant gets no row; and
// ScheduleUnscheduled makes due the tenants without one, once, and with
// a since reads only those created at since or later. On both databases.
func TestADueTimeFromAnOlderRingNeverReplacesANewerOne(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := d.New(t)
			st := platformtest.Store(t, url)
			tn := &store.Tenant{Slug: "acme", DisplayName: "A"}
			if err := st.Tenants().Create(ctx, tn, false); err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC().Truncate(time.Second)
			dueAt := func(at time.Time) bool {
				due, err := st.Tenants().KeysDue(ctx, at, 10)
				if err != nil {
					t.Fatal(err)
				}
				return len(due) == 1 && due[0].ID == tn.ID
			}
			set := func(version int64, at time.Time, want bool) {
				t.Helper()
				if set, err := st.Tenants().SetKeysDue(ctx, tn.ID, version, at); err != nil || set != want {
					t.Fatalf("version %d: recorded %v, want %v (%v)", version, set, want, err)
				}
			}
			set(5, now.Add(time.Minute), true)
			set(4, now.Add(30*24*time.Hour), false) // from an older ring: ignored
			if !dueAt(now.Add(time.Minute)) {
				t.Fatal("a due time from an older ring replaced the newer one")
			}
			set(6, now.Add(2*time.Hour), true)
			if dueAt(now.Add(time.Hour)) || !dueAt(now.Add(2*time.Hour)) {
				t.Fatal("a due time from a newer ring did not replace the older one")
			}
			// Postponing moves only what is due before then.
			if err := st.Tenants().PostponeKeys(ctx, tn.ID, now.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if dueAt(now.Add(time.Hour)) || !dueAt(now.Add(2*time.Hour)) {
				t.Fatal("postponing brought a later due time forward")
			}
			if err := st.Tenants().PostponeKeys(ctx, tn.ID, now.Add(3*time.Hour)); err != nil {
				t.Fatal(err)
			}
			if dueAt(now.Add(2*time.Hour)) || !dueAt(now.Add(3*time.Hour)) {
				t.Fatal("postponing did not move a due ring")
			}
			// A tenant gone: no row comes back.
			if err := st.Tenants().Delete(ctx, "acme", 0); err != nil {
				t.Fatal(err)
			}
			set(7, now, false)
			if n := platformtest.SQL(t, url).Rows(t, "SELECT tenant_id FROM key_schedule"); len(n) != 0 {
				t.Fatalf("rows for a deleted tenant: %v", n)
			}
			// Tenants without a due time (an earlier version created
			// them): one created now, one two hours ago, one three. A look
			// since an hour ago finds only the first, once; one since two
			// hours ago the second (created at that very time); a look at
			// every tenant the last, once.
			db := platformtest.SQL(t, url)
			for id, at := range map[string]time.Time{"tn_new": now, "tn_edge": now.Add(-2 * time.Hour), "tn_old": now.Add(-3 * time.Hour)} {
				db.Exec(t, `INSERT INTO tenants (id, slug, display_name, settings, version, catalogue_version, created_at, updated_at) VALUES (?, ?, 'Old', '{}', 1, 1, ?, ?)`, id, id, at, at)
			}
			for _, c := range []struct {
				since time.Time
				want  int64
			}{{now.Add(-time.Hour), 1}, {now.Add(-time.Hour), 0}, {now.Add(-2 * time.Hour), 1}, {time.Time{}, 1}, {time.Time{}, 0}} {
				if n, err := st.Tenants().ScheduleUnscheduled(ctx, now, c.since); err != nil || n != c.want {
					t.Fatalf("since %v: scheduled %d, want %d (%v)", c.since, n, c.want, err)
				}
			}
			if due, err := st.Tenants().KeysDue(ctx, now, 10); err != nil || len(due) != 3 {
				t.Fatalf("due: %+v %v", due, err)
			}
		})
	}
}
