package keys_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsmcp/platform/feed"
	"github.com/opsmcp/platform/keys"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// followFeed runs a change feed follower of st, reading at least every
// poll, with consumers, until the test ends or stop is called.
func followFeed(t *testing.T, st *store.Store, poll time.Duration, consumers ...feed.Consumer) (f *feed.Follower, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f = feed.New(ctx, st.Changes(), quietLog(), poll)
	for _, c := range consumers {
		f.Add(c)
	}
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return f, stop
}

// fedManager is a local-provider manager whose key store the test
// controls, refreshing every interval, following st's change feed
// (polled every interval) with the staleness limit and full check
// given; stop stops the feed.
func fedManager(t *testing.T, st *store.Store, interval, staleness, fullCheck time.Duration) (m *keys.Manager, ctl *keys.Backend, f *feed.Follower, stop func()) {
	t.Helper()
	m, err := keys.New(keys.Options{
		Provider: keys.ProviderLocal, Tenants: st.Tenants(), Rings: st.KeyRings(), MasterKey: masterKey(), Logger: quietLog(),
		Refresh: interval, ClockSkew: 50 * time.Millisecond, Staleness: staleness, FullCheck: fullCheck,
		NoScheduler: true, Feed: feedClock{&f}, Changes: st.Changes(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctl = keys.ControlBackendForTest(m)
	m.Start()
	t.Cleanup(m.Close)
	f, stop = followFeed(t, st, interval, m)
	return m, ctl, f, stop
}

// ringKeys is how many keys m's cached ring of tenantID holds (0: none
// cached).
func ringKeys(m *keys.Manager, tenantID string) int {
	n := 0
	m.Rings(func(r keys.RingStatus) {
		if r.TenantID == tenantID {
			n = r.Keys
		}
	})
	return n
}

// TestARingWrittenElsewhereArrivesByTheFeed: a rotation on one replica
// is announced on the change feed and read by another replica's manager
// at once, though that manager re-checks rings only every hour; a third
// replica without the feed still holds the old ring, so it is the feed
// that delivered the change. On both databases (on SQLite the replicas
// share the one process, as a SQLite deployment does).
func TestARingWrittenElsewhereArrivesByTheFeed(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := d.New(t)
			stA := platformtest.Store(t, url)
			stB := stA
			if d.Name == "postgres" {
				stB = platformtest.Store(t, url)
			}
			acme := addTenant(t, stA, "acme", 60)
			mk := masterKey()
			a := localManager(t, stA, mk, nil, func(o *keys.Options) { o.Changes = stA.Changes() })
			if _, err := a.Create(ctx, acme, ""); err != nil {
				t.Fatal(err)
			}
			hourly := func(o *keys.Options) { o.Refresh, o.FullCheck, o.Staleness = time.Hour, time.Hour, 3*time.Hour }
			var fb *feed.Follower
			b := localManager(t, stB, mk, nil, hourly, func(o *keys.Options) { o.Feed = feedClock{&fb} })
			fb, _ = followFeed(t, stB, time.Hour, b)
			without := localManager(t, stB, mk, nil, hourly)
			for _, m := range []*keys.Manager{b, without} {
				if _, err := m.Codec(ctx, acme); err != nil {
					t.Fatal(err)
				}
				if n := ringKeys(m, acme); n != 1 {
					t.Fatalf("%d keys cached before the rotation", n)
				}
			}
			if _, err := a.RotateNow(ctx, acme); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the staged key on the replica with the feed", func() bool { return ringKeys(b, acme) == 2 })
			if n := ringKeys(without, acme); n != 1 {
				t.Fatalf("the replica without the feed holds %d keys: something other than the feed delivered the change", n)
			}
			if b.Missed() != 0 {
				t.Fatalf("missed %d", b.Missed())
			}
		})
	}
}

// feedClock is the follower behind p, once it exists (the manager is
// built before its follower).
type feedClock struct{ p **feed.Follower }

func (c feedClock) CurrentAt() time.Time {
	if *c.p == nil {
		return time.Time{}
	}
	return (*c.p).CurrentAt()
}

// TestACurrentFeedKeepsRingsFreshWithoutReadingThem: while the change
// feed is current and the key store answers, a ring the feed has not
// named stays fresh past the staleness limit though it is never read
// again (its own reads fail here); once the feed stops, the manager goes
// back to reading every ring, the failing ring goes stale, and its
// tenant fails closed.
func TestACurrentFeedKeepsRingsFreshWithoutReadingThem(t *testing.T) {
	ctx := context.Background()
	st := platformtest.Store(t, platformtest.SQLiteURL(t))
	acme := addTenant(t, st, "acme", 60)
	// The feed counts as current for two intervals after its last read:
	// intervals long enough that a busy machine's pauses do not make it
	// look behind (the manager would then read the failing ring, rightly
	// taking it out of what the feed vouches for).
	m, ctl, f, stop := fedManager(t, st, 250*time.Millisecond, time.Second, time.Hour)
	if _, err := m.Codec(ctx, acme); err != nil { // creates the ring
		t.Fatal(err)
	}
	created := time.Now()
	waitFor(t, "the feed to deliver the ring's creation", func() bool {
		n, _ := f.Stats()
		return n == 1 && f.CurrentAt().After(created)
	})
	broken := errors.New("test: this ring cannot be read")
	ctl.FailWith(func(tenantID string) error {
		if tenantID == acme {
			return broken
		}
		return nil
	})
	time.Sleep(3200 * time.Millisecond) // over three staleness limits
	if _, err := m.Codec(ctx, acme); err != nil {
		t.Fatalf("with a current feed the unread ring went stale: %v", err)
	}
	stop()
	waitFor(t, "the ring to go stale without the feed", func() bool {
		_, err := m.Codec(ctx, acme)
		return err != nil && strings.Contains(err.Error(), "stale")
	})
}

// TestARingThatCannotBeReadFailsClosedEvenWithTheFeed: a full check that
// cannot read one tenant's ring (its Vault path denied, say) while the
// key store answers for the others leaves that ring out of what the
// feed vouches for: it goes stale and its tenant fails closed alone,
// though the feed stays current; the other tenant is served throughout.
func TestARingThatCannotBeReadFailsClosedEvenWithTheFeed(t *testing.T) {
	ctx := context.Background()
	st := platformtest.Store(t, platformtest.SQLiteURL(t))
	acme, other := addTenant(t, st, "acme", 60), addTenant(t, st, "other", 60)
	m, ctl, f, _ := fedManager(t, st, 50*time.Millisecond, 300*time.Millisecond, 100*time.Millisecond)
	for _, id := range []string{acme, other} {
		if _, err := m.Codec(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	ctl.FailWith(func(tenantID string) error {
		if tenantID == acme {
			return errors.New("test: permission denied on this ring")
		}
		return nil
	})
	waitFor(t, "acme's ring to go stale", func() bool {
		_, err := m.Codec(ctx, acme)
		return err != nil && strings.Contains(err.Error(), "stale")
	})
	if time.Since(f.CurrentAt()) > time.Second {
		t.Fatal("the feed fell behind: the test proves nothing")
	}
	if _, err := m.Codec(ctx, other); err != nil {
		t.Fatalf("the other tenant: %v", err)
	}
}

// TestARingThatStopsReadingKeepsItsStalenessLimit: with the feed
// current, a ring that cannot be read at a full check is served for the
// staleness limit counted from when the feed last vouched for it, as
// before the feed; not from its own last read, a full check ago, which
// with the defaults (both five minutes) would fail every tenant closed at
// once when the key store is down at a full check. Past the limit it
// fails closed.
func TestARingThatStopsReadingKeepsItsStalenessLimit(t *testing.T) {
	ctx := context.Background()
	st := platformtest.Store(t, platformtest.SQLiteURL(t))
	acme := addTenant(t, st, "acme", 60)
	m, ctl, _, _ := fedManager(t, st, 50*time.Millisecond, 1500*time.Millisecond, time.Second)
	if _, err := m.Codec(ctx, acme); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // past the limit since the ring's creation: only the feed keeps it fresh
	if _, err := m.Codec(ctx, acme); err != nil {
		t.Fatalf("vouched for by the feed: %v", err)
	}
	var firstFailure atomic.Int64
	ctl.FailWith(func(tenantID string) error {
		if tenantID != acme {
			return nil
		}
		firstFailure.CompareAndSwap(0, time.Now().UnixNano())
		return errors.New("test: this ring cannot be read")
	})
	waitFor(t, "a full check to fail to read the ring", func() bool { return firstFailure.Load() != 0 })
	failed := time.Unix(0, firstFailure.Load())
	time.Sleep(800 * time.Millisecond)
	if _, err := m.Codec(ctx, acme); err != nil {
		t.Fatalf("%s after its read failed, under the staleness limit: %v", time.Since(failed).Round(time.Millisecond), err)
	}
	waitFor(t, "the ring to go stale", func() bool {
		_, err := m.Codec(ctx, acme)
		return err != nil && strings.Contains(err.Error(), "stale")
	})
	if d := time.Since(failed); d < 1200*time.Millisecond {
		t.Fatalf("stale %s after its read failed, under the limit", d)
	}
}

// announceWatch is the store's change feed, noting how many keys the
// writer's cached ring holds as each announcement is made.
type announceWatch struct {
	st     *store.Store
	m      **keys.Manager
	mu     sync.Mutex
	cached []int
}

func (w *announceWatch) Announce(ctx context.Context, kind, tenantID, slug string) error {
	w.mu.Lock()
	w.cached = append(w.cached, ringKeys(*w.m, tenantID))
	w.mu.Unlock()
	return w.st.Changes().Announce(ctx, kind, tenantID, slug)
}

// TestAWriterServesItsRingBeforeAnnouncingIt: the replica that writes a
// ring serves it from then on, before it tells the feed. The
// announcement is a database round trip, and with the database away a
// timeout: a key retired meanwhile would still open on the writer.
func TestAWriterServesItsRingBeforeAnnouncingIt(t *testing.T) {
	ctx := context.Background()
	st := platformtest.Store(t, platformtest.SQLiteURL(t))
	acme := addTenant(t, st, "acme", 60)
	var m *keys.Manager
	w := &announceWatch{st: st, m: &m}
	m = localManager(t, st, masterKey(), nil, func(o *keys.Options) { o.Changes = w })
	if _, err := m.Create(ctx, acme, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Codec(ctx, acme); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RotateNow(ctx, acme); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.cached) != 2 || w.cached[1] != 2 {
		t.Fatalf("keys cached as each write was announced: %v; want the staged ring's 2 at the rotation's", w.cached)
	}
}
