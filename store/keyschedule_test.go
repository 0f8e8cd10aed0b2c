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
			if err := st.Tenants().SetKeysDue(ctx, "tn_old", now.Add(time.Hour)); err != nil {
				t.Fatal(err)
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
