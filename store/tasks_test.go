package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// newTask is a working task of tenant t for principal p, created now.
func newTask(tenantID, id, principal string, now time.Time) *store.Task {
	due := now.Add(time.Minute)
	return &store.Task{ID: id, TenantID: tenantID, TenantSlug: "acme", FlowID: "fl_" + id, Tool: "deploy",
		PrincipalHash: principal, Status: store.TaskWorking, Secret: "s3cret-" + id, TTLMs: 60_000,
		PollIntervalMs: 1000, DeadlineMs: 30_000, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Minute),
		DueAt: &due, Version: 1}
}

// TestTasksAreKeptSealedAndChangedWithCheckAndSet: a task's secret is
// sealed at rest and opened on read; Update retries a lost race and
// leaves the task untouched on ErrUnchanged; ByFlow finds a flow's task;
// on both dialects.
func TestTasksAreKeptSealedAndChangedWithCheckAndSet(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := d.New(t)
			st := acmeStore(t, url, true)
			acme, _ := st.Tenants().Get(ctx, "acme")
			now := time.Now().UTC().Truncate(time.Millisecond)
			tasks := st.Tasks()
			if err := tasks.Create(ctx, newTask(acme.ID, "tk_1", "p1", now), store.TaskLimits{}); err != nil {
				t.Fatal(err)
			}
			raw := platformtest.SQL(t, url).Strings(t, "SELECT secret FROM tasks WHERE id = ?", "tk_1")
			if len(raw) != 1 || !store.Sealed(raw[0]) || strings.Contains(raw[0], "s3cret") {
				t.Fatalf("the secret is stored as %q", raw)
			}
			got, err := tasks.Get(ctx, "tk_1")
			if err != nil || got.Secret != "" || got.Status != store.TaskWorking || got.FlowID != "fl_tk_1" {
				t.Fatalf("read back (without the secret): %+v %v", got, err)
			}
			if withSecret, err := tasks.GetWithSecret(ctx, "tk_1"); err != nil || withSecret.Secret != "s3cret-tk_1" {
				t.Fatalf("read back with the secret: %+v %v", withSecret, err)
			}
			if f, err := tasks.ByFlow(ctx, "fl_tk_1"); err != nil || f.ID != "tk_1" {
				t.Fatalf("by flow: %+v %v", f, err)
			}
			if _, err := tasks.Get(ctx, "tk_none"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("an unknown task: %v", err)
			}

			// Concurrent updates all land, each on the version it read.
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := tasks.Update(ctx, "tk_1", func(t *store.Task) error {
						t.Events++
						t.StatusMessage = fmt.Sprintf("update %d", i)
						return nil
					}); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			got, _ = tasks.Get(ctx, "tk_1")
			if got.Events != 8 || got.Version != 9 {
				t.Fatalf("after 8 updates: events %d, version %d", got.Events, got.Version)
			}
			same, err := tasks.Update(ctx, "tk_1", func(t *store.Task) error { t.Status = store.TaskFailed; return store.ErrUnchanged })
			if err != nil || same.Version != 9 {
				t.Fatalf("ErrUnchanged: %+v %v", same, err)
			}
			if got, _ := tasks.Get(ctx, "tk_1"); got.Status != store.TaskWorking {
				t.Fatalf("ErrUnchanged wrote %q", got.Status)
			}
			stop := errors.New("stop")
			if _, err := tasks.Update(ctx, "tk_1", func(*store.Task) error { return stop }); !errors.Is(err, stop) {
				t.Fatalf("a change's error: %v", err)
			}

			// From a version read before: changed as it is when it still
			// is the task's; read again when another change came first.
			fresh, _ := tasks.Get(ctx, "tk_1")
			seen := []int64{}
			next, err := tasks.UpdateFrom(ctx, fresh, func(t *store.Task) error { seen = append(seen, t.Version); t.Events++; return nil })
			if err != nil || fmt.Sprint(seen) != "[9]" || next.Version != 10 || next.Events != 9 {
				t.Fatalf("from the current version: saw %v, got %+v %v", seen, next, err)
			}
			seen = seen[:0]
			next, err = tasks.UpdateFrom(ctx, fresh, func(t *store.Task) error { seen = append(seen, t.Version); t.Events++; return nil })
			if err != nil || fmt.Sprint(seen) != "[9 10]" || next.Version != 11 || next.Events != 10 {
				t.Fatalf("from a stale version: saw %v, got %+v %v", seen, next, err)
			}
		})
	}
}

// TestLiveTasksAreBoundedPerTenantAndPerPrincipal: creations past a
// limit are ErrQuota, counted among live tasks only, and another
// tenant's or principal's are unaffected; concurrent creations do not
// pass a limit together.
func TestLiveTasksAreBoundedPerTenantAndPerPrincipal(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := acmeStore(t, d.New(t), false)
			acme, _ := st.Tenants().Get(ctx, "acme")
			beta := &store.Tenant{Slug: "beta", DisplayName: "Beta", Settings: "{}"}
			if err := st.Tenants().Create(ctx, beta, false); err != nil {
				t.Fatal(err)
			}
			tasks := st.Tasks()
			now := time.Now().UTC()
			limits := store.TaskLimits{PerTenant: 6, PerPrincipal: 3}
			var wg sync.WaitGroup
			var mu sync.Mutex
			made, quota := 0, 0
			for i := range 10 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := tasks.Create(ctx, newTask(acme.ID, fmt.Sprintf("tk_a%d", i), "p1", now), limits)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						made++
					case errors.Is(err, store.ErrQuota):
						if qe, ok := errors.AsType[*store.TaskQuotaError](err); !ok || !qe.Caller || qe.Live != 3 {
							t.Errorf("the principal's limit, as %#v", err)
						}
						quota++
					default:
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if made != 3 || quota != 7 {
				t.Fatalf("one principal, 10 at once with a limit of 3: %d made, %d refused", made, quota)
			}
			for i := range 3 {
				if err := tasks.Create(ctx, newTask(acme.ID, fmt.Sprintf("tk_b%d", i), "p2", now), limits); err != nil {
					t.Fatal(err)
				}
			}
			if err := tasks.Create(ctx, newTask(acme.ID, "tk_c", "p3", now), limits); !errors.Is(err, store.ErrQuota) {
				t.Fatalf("a seventh live task of the tenant: %v", err)
			} else if qe, ok := errors.AsType[*store.TaskQuotaError](err); !ok || qe.Caller || qe.Live != 6 {
				t.Fatalf("the tenant's limit, as %#v", err)
			}
			if err := tasks.Create(ctx, newTask(beta.ID, "tk_beta", "p1", now), limits); err != nil {
				t.Fatalf("another tenant: %v", err)
			}
			// A finished task frees its place.
			if _, err := tasks.Update(ctx, "tk_b0", func(t *store.Task) error { t.Status = store.TaskCompleted; return nil }); err != nil {
				t.Fatal(err)
			}
			if err := tasks.Create(ctx, newTask(acme.ID, "tk_c", "p3", now), limits); err != nil {
				t.Fatalf("after one finished: %v", err)
			}
		})
	}
}

// TestDueAndExpiredTasksAreFoundByTheirTimes: Due lists what is due now
// (and nothing else) in due order; DeleteExpired removes what is past its
// expiry, in batches; List pages a principal's own tasks, newest first.
func TestDueAndExpiredTasksAreFoundByTheirTimes(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := acmeStore(t, d.New(t), false)
			acme, _ := st.Tenants().Get(ctx, "acme")
			tasks := st.Tasks()
			now := time.Now().UTC().Truncate(time.Millisecond)
			for i := range 5 {
				tk := newTask(acme.ID, fmt.Sprintf("tk_%d", i), "p1", now.Add(time.Duration(i)*time.Second))
				due := now.Add(time.Duration(i-2) * time.Minute) // tk_0 and tk_1 past, tk_2 now, the rest later
				tk.DueAt = &due
				tk.ExpiresAt = now.Add(time.Duration(i-2) * time.Hour)
				if i == 4 {
					tk.DueAt = nil
				}
				if err := tasks.Create(ctx, tk, store.TaskLimits{}); err != nil {
					t.Fatal(err)
				}
			}
			due, err := tasks.Due(ctx, now, 10)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, tk := range due {
				ids = append(ids, tk.ID)
			}
			if fmt.Sprint(ids) != "[tk_0 tk_1 tk_2]" || due[0].Secret != "" {
				t.Fatalf("due now: %v", ids)
			}
			if due, _ := tasks.Due(ctx, now, 1); len(due) != 1 || due[0].ID != "tk_0" {
				t.Fatalf("due, one at most: %v", due)
			}
			page, err := tasks.List(ctx, acme.ID, "p1", "", "", 2)
			if err != nil || len(page) != 2 || page[0].ID != "tk_4" || page[1].ID != "tk_3" {
				t.Fatalf("first page: %v %v", page, err)
			}
			if page[0].Secret != "" {
				t.Fatal("a listed task carries its secret")
			}
			next, err := tasks.List(ctx, acme.ID, "p1", "", page[1].ID, 10)
			if err != nil || len(next) != 3 || next[0].ID != "tk_2" {
				t.Fatalf("next page: %v %v", next, err)
			}
			if other, _ := tasks.List(ctx, acme.ID, "p2", "", "", 10); len(other) != 0 {
				t.Fatalf("another principal's list: %v", other)
			}
			n, err := tasks.DeleteExpired(ctx, now, 1)
			if err != nil || n != 1 {
				t.Fatalf("one expired at most: %d %v", n, err)
			}
			if n, err := tasks.DeleteExpired(ctx, now, 10); err != nil || n != 2 { // tk_0, tk_1 and tk_2 (at now) expired
				t.Fatalf("the other expired: %d %v", n, err)
			}
			left, _ := tasks.List(ctx, acme.ID, "p1", "", "", 10)
			if len(left) != 2 || left[1].ID != "tk_3" {
				t.Fatalf("left after expiry: %v", left)
			}
		})
	}
}
