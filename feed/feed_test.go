package feed_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/opsmcp/platform/feed"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// recorder is a consumer that keeps what it is told.
type recorder struct {
	mu      sync.Mutex
	changes []store.Change
	lost    int
	got     chan struct{}
}

func newRecorder() *recorder { return &recorder{got: make(chan struct{}, 1)} }

func (r *recorder) Changed(_ context.Context, cs []store.Change) {
	r.mu.Lock()
	r.changes = append(r.changes, cs...)
	r.mu.Unlock()
	select {
	case r.got <- struct{}{}:
	default:
	}
}

func (r *recorder) Lost(context.Context) {
	r.mu.Lock()
	r.lost++
	r.mu.Unlock()
}

func (r *recorder) snapshot() ([]store.Change, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]store.Change(nil), r.changes...), r.lost
}

// waitFor waits until the recorder holds n changes.
func (r *recorder) waitFor(t *testing.T, n int, within time.Duration) []store.Change {
	t.Helper()
	deadline := time.After(within)
	for {
		cs, _ := r.snapshot()
		if len(cs) >= n {
			return cs
		}
		select {
		case <-r.got:
		case <-deadline:
			t.Fatalf("%d changes delivered in %s, want %d: %+v", len(cs), within, n, cs)
		}
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// follow runs a follower of st with poll, for the test.
func follow(t *testing.T, st *store.Store, poll time.Duration) (*feed.Follower, *recorder) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := feed.New(ctx, st.Changes(), quiet, poll)
	r := newRecorder()
	f.Add(r)
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f, r
}

// TestTheFeedDeliversEveryChangeInCommitOrder: every write that changes
// what a replica caches of a tenant (creating, changing and deleting it,
// its items, its key ring, tenants in bulk) is delivered once, in commit
// order with numbers that have no gaps, naming the tenant, and promptly
// (the poll is an hour, so only the notification, PostgreSQL's or the
// process's own on SQLite, can deliver it). Writers racing on many
// tenants are numbered without collision or gap.
func TestTheFeedDeliversEveryChangeInCommitOrder(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := platformtest.Store(t, d.New(t))
			_, r := follow(t, st, time.Hour)
			tn := &store.Tenant{Slug: "acme", DisplayName: "Acme"}
			if err := st.Tenants().Create(ctx, tn, false); err != nil {
				t.Fatal(err)
			}
			it := &store.Item{Kind: "tool", Name: "echo", Spec: `{"name":"echo"}`}
			if err := st.Tenants().CreateItem(ctx, "acme", it, 0, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Tenants().Update(ctx, "acme", 0, func(t *store.Tenant) error { t.Settings = `{"stateTtlSeconds":60}`; return nil }); err != nil {
				t.Fatal(err)
			}
			if err := st.Changes().Announce(ctx, store.ChangeKeys, tn.ID, ""); err != nil {
				t.Fatal(err)
			}
			if err := st.Tenants().DeleteItem(ctx, "acme", "tool", "echo", 0, nil); err != nil {
				t.Fatal(err)
			}
			if err := st.Tenants().CreateCatalogues(ctx, []store.Catalogue{{Tenant: store.Tenant{Slug: "bulk1", DisplayName: "B"}}}); err != nil {
				t.Fatal(err)
			}
			if err := st.Tenants().Delete(ctx, "acme", 0); err != nil {
				t.Fatal(err)
			}
			// A refused write announces nothing.
			if _, err := st.Tenants().Update(ctx, "nobody", 0, func(*store.Tenant) error { return nil }); err == nil {
				t.Fatal("updating a missing tenant succeeded")
			}
			cs := r.waitFor(t, 7, 10*time.Second)
			want := []struct{ kind, slug string }{
				{store.ChangeCatalogue, "acme"}, {store.ChangeCatalogue, "acme"}, {store.ChangeCatalogue, "acme"},
				{store.ChangeKeys, ""}, {store.ChangeCatalogue, "acme"}, {store.ChangeTenants, ""}, {store.ChangeCatalogue, "acme"},
			}
			for i, c := range cs {
				if i >= len(want) {
					t.Fatalf("unexpected change %+v", c)
				}
				if c.Kind != want[i].kind || c.Slug != want[i].slug || (c.Kind != store.ChangeTenants && c.TenantID != tn.ID) {
					t.Errorf("change %d: %+v, want %s of %q", i, c, want[i].kind, want[i].slug)
				}
				if i > 0 && c.Seq != cs[i-1].Seq+1 {
					t.Errorf("change %d numbered %d after %d", i, c.Seq, cs[i-1].Seq)
				}
			}

			// Many writers at once: every change once, numbered without a gap.
			const writers = 8
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					slug := fmt.Sprintf("w%d", w)
					if err := st.Tenants().Create(ctx, &store.Tenant{Slug: slug, DisplayName: slug}, false); err != nil {
						t.Error(err)
						return
					}
					for i := range 5 {
						if err := st.Tenants().CreateItem(ctx, slug, &store.Item{Kind: "tool", Name: fmt.Sprintf("t%d", i), Spec: `{}`}, 0, nil); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			all := r.waitFor(t, 7+writers*6, 10*time.Second)
			seen := map[int64]bool{}
			for i, c := range all {
				if seen[c.Seq] {
					t.Fatalf("change %d delivered twice", c.Seq)
				}
				seen[c.Seq] = true
				if i > 0 && c.Seq != all[i-1].Seq+1 {
					t.Fatalf("change %d followed by %d", all[i-1].Seq, c.Seq)
				}
			}
			if _, lost := r.snapshot(); lost != 0 {
				t.Fatalf("told %d times that changes were lost", lost)
			}
		})
	}
}

// TestTheFeedCatchesUpAfterAMissedNotification: the follower's
// connections (its listener's among them) are cut, a change is committed
// while they are down, so its notification reaches no one, and the
// follower reads exactly that change once it reconnects, though its poll
// is an hour: the reconnection itself makes it read what it missed.
func TestTheFeedCatchesUpAfterAMissedNotification(t *testing.T) {
	ctx := context.Background()
	url := platformtest.PostgresSchemaURL(t)
	direct := platformtest.Store(t, url)
	relayed, relay := platformtest.PostgresThroughRelay(t, url)
	st := platformtest.Store(t, relayed)
	f, r := follow(t, st, time.Hour)
	if err := direct.Tenants().Create(ctx, &store.Tenant{Slug: "before", DisplayName: "B"}, false); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, 1, 10*time.Second)
	relay.Cut()
	if err := direct.Tenants().Create(ctx, &store.Tenant{Slug: "during", DisplayName: "D"}, false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the listener's reconnections are refused meanwhile
	if cs, _ := r.snapshot(); len(cs) != 1 {
		t.Fatalf("%d changes delivered while cut off", len(cs))
	}
	relay.Restore()
	cs := r.waitFor(t, 2, 20*time.Second)
	if len(cs) != 2 || cs[1].Slug != "during" || cs[1].Seq != cs[0].Seq+1 {
		t.Fatalf("after the reconnection: %+v", cs)
	}
	if _, lost := r.snapshot(); lost != 0 {
		t.Fatalf("told %d times that changes were lost, for one missed notification", lost)
	}
	if time.Since(f.CurrentAt()) > 10*time.Second {
		t.Fatalf("the follower says it is current as of %s", f.CurrentAt())
	}
}

// TestAChangeFromAnotherProcessArrivesByPolling: on SQLite a write by
// another process (here another connection to the same file, as the
// platform's own commands make) is not notified here; the poll reads it.
func TestAChangeFromAnotherProcessArrivesByPolling(t *testing.T) {
	ctx := context.Background()
	url := platformtest.SQLiteURL(t)
	st := platformtest.Store(t, url)
	other := platformtest.Store(t, url)
	_, r := follow(t, st, 50*time.Millisecond)
	if err := other.Tenants().Create(ctx, &store.Tenant{Slug: "elsewhere", DisplayName: "E"}, false); err != nil {
		t.Fatal(err)
	}
	if cs := r.waitFor(t, 1, 10*time.Second); cs[0].Slug != "elsewhere" {
		t.Fatalf("delivered %+v", cs)
	}
}

// TestAFollowerBehindThePrunedFeedChecksEverything: when the changes a
// follower has not read were pruned, it tells its consumers they may
// have lost changes (they check all they cache), once, and goes on with
// what is left; pruning always keeps the newest change, so numbering
// continues.
func TestAFollowerBehindThePrunedFeedChecksEverything(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := platformtest.Store(t, d.New(t))
			if err := st.Tenants().Create(ctx, &store.Tenant{Slug: "a", DisplayName: "A"}, false); err != nil {
				t.Fatal(err)
			}
			for _, slug := range []string{"b", "c", "d"} {
				if err := st.Tenants().Create(ctx, &store.Tenant{Slug: slug, DisplayName: slug}, false); err != nil {
					t.Fatal(err)
				}
			}
			// Of b, c and d only d, the newest, stays.
			n, err := st.Changes().Prune(ctx, time.Now().Add(time.Hour))
			if err != nil || n != 3 {
				t.Fatalf("pruned %d, %v", n, err)
			}
			// A follower that last read a's change, then was away.
			r := newRecorder()
			st2 := &staleSource{Changes: st.Changes(), last: 1}
			g := feed.New(ctx, st2, quiet, time.Hour)
			g.Add(r)
			gctx, gcancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); g.Run(gctx) }()
			t.Cleanup(func() { gcancel(); <-done })
			g.Wake()
			cs := r.waitFor(t, 1, 10*time.Second)
			if _, lost := r.snapshot(); lost != 1 || len(cs) != 1 || cs[0].Slug != "d" || cs[0].Seq != 4 {
				t.Fatalf("after the pruning: lost %d, changes %+v", lost, cs)
			}
			if err := st.Tenants().Create(ctx, &store.Tenant{Slug: "e", DisplayName: "e"}, false); err != nil {
				t.Fatal(err)
			}
			if cs := r.waitFor(t, 2, 10*time.Second); cs[1].Seq != 5 {
				t.Fatalf("numbering after the pruning: %+v", cs)
			}
		})
	}
}

// staleSource is the feed as a follower that last read change last sees
// it when it starts.
type staleSource struct {
	store.Changes
	last int64
	once sync.Once
}

func (s *staleSource) Last(ctx context.Context) (int64, error) {
	var last int64 = -1
	s.once.Do(func() { last = s.last })
	if last >= 0 {
		return last, nil
	}
	return s.Changes.Last(ctx)
}
