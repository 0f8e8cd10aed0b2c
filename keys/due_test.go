package keys_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsmcp/platform/keys"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// TestASchedulerPassReadsOnlyTheRingsDue: a new tenant is due at once
// and its first pass creates its ring; after that a pass reads no ring
// that is not due, however many tenants exist; a ring rotated by hand is
// due a margin later and is the only one read then; each phase schedules
// the next; a deleted tenant is due no more. On both databases.
func TestASchedulerPassReadsOnlyTheRingsDue(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := d.New(t)
			st := platformtest.Store(t, url)
			const n = 40
			ids := make([]string, n)
			for i := range ids {
				ids[i] = addTenant(t, st, fmt.Sprintf("t%02d", i), 60)
			}
			c := newClock()
			m, ctl := controlledManager(t, url, masterKey(), c)
			var mu sync.Mutex
			reads := map[string]int{}
			ctl.FailWith(func(tenantID string) error {
				mu.Lock()
				reads[tenantID]++
				mu.Unlock()
				return nil
			})
			count := func() map[string]int {
				mu.Lock()
				defer mu.Unlock()
				out := reads
				reads = map[string]int{}
				return out
			}
			keys.RefreshAllForTest(m) // the key store answers
			c.Add(m.Margin())         // and the margin after the first answer passed
			schedule(t, m)
			created := count()
			for _, id := range ids {
				if created[id] == 0 {
					t.Fatalf("the first pass did not create tenant %s's ring", id)
				}
				if p := phase(t, m, id); p != keys.PhaseSteady {
					t.Fatalf("tenant %s: phase %s", id, p)
				}
			}
			count()
			c.Add(time.Hour)
			schedule(t, m)
			if r := count(); len(r) != 0 {
				t.Fatalf("a pass with nothing due read rings: %v", r)
			}

			// One rotated by hand: due a margin later, alone.
			if _, err := m.RotateNow(ctx, ids[7]); err != nil {
				t.Fatal(err)
			}
			count()
			schedule(t, m)
			if r := count(); len(r) != 0 {
				t.Fatalf("a pass before the promotion was due read rings: %v", r)
			}
			c.Add(m.Margin())
			schedule(t, m)
			if r := count(); len(r) != 1 || r[ids[7]] == 0 {
				t.Fatalf("the pass when the promotion was due read %v", r)
			}
			if p := phase(t, m, ids[7]); p != keys.PhasePromoted {
				t.Fatalf("phase %s after the promotion was due", p)
			}
			count()
			c.Add(time.Minute + m.Margin()) // the state TTL and the margin
			schedule(t, m)
			if p := phase(t, m, ids[7]); p != keys.PhaseSteady {
				t.Fatalf("phase %s after the retirement was due", p)
			}
			if r := count(); len(r) != 1 {
				t.Fatalf("the retirement's pass read %v", r)
			}

			// A deleted tenant is no longer scheduled.
			if err := st.Tenants().Delete(ctx, "t03", 0); err != nil {
				t.Fatal(err)
			}
			due, err := st.Tenants().KeysDue(ctx, c.Now().Add(365*24*time.Hour), 1000)
			if err != nil {
				t.Fatal(err)
			}
			if len(due) != n-1 {
				t.Fatalf("%d tenants scheduled a year on, want %d", len(due), n-1)
			}
			for _, tn := range due {
				if tn.ID == ids[3] {
					t.Fatal("the deleted tenant is still scheduled")
				}
			}
		})
	}
}

// TestTenantsCreatedInBulkAreScheduled: CreateCatalogues schedules its
// tenants' rings as Create does.
func TestTenantsCreatedInBulkAreScheduled(t *testing.T) {
	ctx := context.Background()
	st := platformtest.Store(t, platformtest.SQLiteURL(t))
	cs := make([]store.Catalogue, 3)
	for i := range cs {
		cs[i].Tenant = store.Tenant{Slug: fmt.Sprintf("b%d", i), DisplayName: "B"}
	}
	if err := st.Tenants().CreateCatalogues(ctx, cs); err != nil {
		t.Fatal(err)
	}
	due, err := st.Tenants().KeysDue(ctx, time.Now().Add(time.Second), 10)
	if err != nil || len(due) != 3 {
		t.Fatalf("%d due, %v", len(due), err)
	}
}

// TestARingTheSchedulerCannotReadWaitsBehindTheOthers: a due ring whose
// read fails is postponed, so it does not stay first in line: the
// others due with it are scheduled in the same pass, and the failing one
// is not due again until its retry.
func TestARingTheSchedulerCannotReadWaitsBehindTheOthers(t *testing.T) {
	ctx := context.Background()
	url := platformtest.SQLiteURL(t)
	st := platformtest.Store(t, url)
	bad, good := addTenant(t, st, "bad", 60), addTenant(t, st, "good", 60)
	c := newClock()
	m, ctl := controlledManager(t, url, masterKey(), c)
	keys.RefreshAllForTest(m)
	c.Add(m.Margin())
	ctl.FailWith(func(tenantID string) error {
		if tenantID == bad {
			return errors.New("test: cannot read this ring")
		}
		return nil
	})
	if err := m.Schedule(ctx); err == nil || !strings.Contains(err.Error(), "bad") {
		t.Fatalf("the pass: %v", err)
	}
	if p := phase(t, m, good); p != keys.PhaseSteady {
		t.Fatalf("the readable tenant was not scheduled: %s", p)
	}
	due, err := st.Tenants().KeysDue(ctx, c.Now(), 10)
	if err != nil || len(due) != 0 {
		t.Fatalf("due right after the pass: %d %v", len(due), err)
	}
	due, err = st.Tenants().KeysDue(ctx, c.Now().Add(2*time.Minute), 10)
	if err != nil || len(due) != 1 || due[0].ID != bad {
		t.Fatalf("due after the retry time: %+v %v", due, err)
	}
}

// TestTenantsAnEarlierVersionCreatedAreScheduled: a replica of an
// earlier version creates tenants without a due time. The scheduler's
// first look, at the start, finds every such tenant, however old; later
// looks, a full check apart, read only the tenants created since the
// last, with an hour's slack for a writer whose clock is behind: so one
// created since, or stamped half an hour early, gets its ring, and one
// stamped three hours early is not read (the next replica's start finds
// it).
func TestTenantsAnEarlierVersionCreatedAreScheduled(t *testing.T) {
	url := platformtest.SQLiteURL(t)
	platformtest.Store(t, url) // the schema
	db := platformtest.SQL(t, url)
	c := newClock()
	insert := func(id string, at time.Time) {
		db.Exec(t, `INSERT INTO tenants (id, slug, display_name, settings, version, catalogue_version, created_at, updated_at)
			VALUES (?, ?, 'Earlier', '{}', 1, 1, ?, ?)`, id, id, at.UTC(), at.UTC())
	}
	scheduled := func(id string) bool {
		return len(db.Rows(t, "SELECT tenant_id FROM key_schedule WHERE tenant_id = ?", id)) == 1
	}
	insert("tn_years", c.Now().Add(-3*365*24*time.Hour))
	m, _ := controlledManager(t, url, masterKey(), c)
	keys.RefreshAllForTest(m)
	c.Add(m.Margin())
	schedule(t, m)
	if !scheduled("tn_years") || phase(t, m, "tn_years") != keys.PhaseSteady {
		t.Fatal("the first look did not schedule a tenant created years ago")
	}
	insert("tn_since", c.Now())
	insert("tn_skewed", c.Now().Add(-30*time.Minute))
	insert("tn_outside", c.Now().Add(-3*time.Hour))
	schedule(t, m) // within a full check of the first look: no look
	if scheduled("tn_since") {
		t.Fatal("a look came before a full check had passed")
	}
	c.Add(10 * time.Minute)
	schedule(t, m)
	for _, id := range []string{"tn_since", "tn_skewed"} {
		if !scheduled(id) || phase(t, m, id) != keys.PhaseSteady {
			t.Fatalf("%s, created since the last look, was not scheduled", id)
		}
	}
	if scheduled("tn_outside") {
		t.Fatal("a later look read a tenant created before its window: it reads every tenant")
	}
}

// TestAFailedLookLeavesItsWindowToTheNext: when the look for tenants
// without a due time fails (here the tenants table is renamed away, as
// a real failure of the database would answer), the next look still
// reads from the last look that succeeded, so a tenant created between
// the two is scheduled rather than left behind the moved window.
func TestAFailedLookLeavesItsWindowToTheNext(t *testing.T) {
	url := platformtest.SQLiteURL(t)
	platformtest.Store(t, url) // the schema
	db := platformtest.SQL(t, url)
	c := newClock()
	m, _ := controlledManager(t, url, masterKey(), c)
	keys.RefreshAllForTest(m)
	c.Add(m.Margin())
	schedule(t, m) // the first look, which succeeds

	c.Add(time.Minute)
	at := c.Now().UTC()
	db.Exec(t, `INSERT INTO tenants (id, slug, display_name, settings, version, catalogue_version, created_at, updated_at)
		VALUES ('tn_between', 'tn_between', 'Earlier', '{}', 1, 1, ?, ?)`, at, at)

	c.Add(3 * time.Hour)
	db.Exec(t, `ALTER TABLE tenants RENAME TO tenants_away`)
	if err := m.Schedule(context.Background()); err == nil {
		t.Fatal("the look succeeded with the tenants table away")
	}
	db.Exec(t, `ALTER TABLE tenants_away RENAME TO tenants`)

	c.Add(10 * time.Minute)
	schedule(t, m)
	if len(db.Rows(t, "SELECT tenant_id FROM key_schedule WHERE tenant_id = 'tn_between'")) != 1 {
		t.Fatal("a tenant created before the failed look was left unscheduled: the failed look moved the window")
	}
}
