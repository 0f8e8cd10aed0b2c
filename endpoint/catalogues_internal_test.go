package endpoint

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/store"
)

// cacheStore is a SQLite store holding n tenants t0000…, each with one
// tool, and counts the catalogue loads it answers.
type cacheStore struct {
	*store.Store
	loads int
	// during, when set, runs once after a load's read, before the load
	// returns: what happens while a read is in flight.
	during func()
}

func (c *cacheStore) LoadCatalogue(ctx context.Context, slug string) (*store.Catalogue, error) {
	c.loads++
	cat, err := c.Tenants().LoadCatalogue(ctx, slug)
	if f := c.during; f != nil {
		c.during = nil
		f()
	}
	return cat, err
}

func (c *cacheStore) VersionsOf(ctx context.Context, slugs []string) ([]store.TenantVersion, error) {
	return c.Tenants().VersionsOf(ctx, slugs)
}

func (c *cacheStore) Get(ctx context.Context, slug string) (*store.Tenant, error) {
	return c.Tenants().Get(ctx, slug)
}

func newCacheStore(t *testing.T, n int) *cacheStore {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "platform.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	cs := make([]store.Catalogue, n)
	for i := range cs {
		slug := fmt.Sprintf("t%04d", i)
		cs[i] = store.Catalogue{Tenant: store.Tenant{Slug: slug, DisplayName: slug}, Items: []store.Item{{Kind: "tool", Name: "echo",
			Spec: `{"name":"echo","description":"` + strings.Repeat("e", 200) + `","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}},"handler":{"url":"https://hooks.example.com/echo"}}`}}}
	}
	if err := st.Tenants().CreateCatalogues(ctx, cs); err != nil {
		t.Fatal(err)
	}
	return &cacheStore{Store: st}
}

// TestTheCatalogueCacheStaysWithinItsBudget: under a stream of distinct
// tenants the cache never holds more than its budget (by its estimate),
// evicting the least recently used: a tenant used all along stays, one
// with a stream open stays however old, and an evicted tenant's next
// request loads it again, once; a change to an evicted tenant, delivered
// by the change feed, costs nothing.
func TestTheCatalogueCacheStaysWithinItsBudget(t *testing.T) {
	ctx := context.Background()
	st := newCacheStore(t, 300)
	cs := newCatalogues(st, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Second, "test", "http://127.0.0.1", func(string, listChanges) {})
	one, err := cs.lookup(ctx, "t0000")
	if err != nil || one == nil {
		t.Fatal(err)
	}
	cs.budget = 40 * one.size // about forty tenants
	cs.pinned = func(slug string) bool { return slug == "t0001" }
	forgotten := map[string]bool{}
	cs.forget = func(id string) { forgotten[id] = true } // the key rings
	if _, err := cs.lookup(ctx, "t0001"); err != nil {
		t.Fatal(err)
	}
	for i := 2; i < 300; i++ {
		if _, err := cs.lookup(ctx, fmt.Sprintf("t%04d", i)); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.lookup(ctx, "t0000"); err != nil { // used all along
			t.Fatal(err)
		}
		cs.mu.RLock()
		over, bytes, n := cs.bytes > cs.budget, cs.bytes, len(cs.cache)
		cs.mu.RUnlock()
		if over {
			t.Fatalf("after %d tenants the cache holds %d bytes in %d snapshots, over its budget of %d", i+1, bytes, n, cs.budget)
		}
	}
	cs.mu.RLock()
	_, hot := cs.cache["t0000"]
	_, pinned := cs.cache["t0001"]
	_, cold := cs.cache["t0002"]
	var sum int64
	for _, s := range cs.cache {
		sum += s.size
	}
	counted := cs.bytes
	cs.mu.RUnlock()
	if !hot || !pinned || cold {
		t.Fatalf("cached: the tenant in use %v, the pinned one %v, the oldest %v", hot, pinned, cold)
	}
	if sum != counted {
		t.Fatalf("the cache counts %d bytes; its snapshots hold %d", counted, sum)
	}
	if cs.evicted.Load() < 200 {
		t.Fatalf("%d evictions for 300 tenants in a cache of about 40", cs.evicted.Load())
	}
	if int64(len(forgotten)) != cs.evicted.Load() {
		t.Fatalf("%d key rings forgotten for %d evictions", len(forgotten), cs.evicted.Load())
	}
	cs.mu.RLock()
	for _, s := range cs.cache {
		if forgotten[s.tenantID] && s.slug != "t0002" {
			// Forgotten, then loaded again: only by a request.
			t.Errorf("tenant %s is cached and its ring forgotten", s.slug)
		}
	}
	cs.mu.RUnlock()
	// An evicted tenant loads again on its next request, once.
	before := st.loads
	for range 3 {
		if s, err := cs.lookup(ctx, "t0002"); err != nil || s == nil || s.slug != "t0002" {
			t.Fatalf("the evicted tenant: %v %v", s, err)
		}
	}
	if st.loads != before+1 {
		t.Fatalf("%d loads for an evicted tenant's three requests", st.loads-before)
	}
	// A change to an evicted tenant, as the feed delivers it: no
	// catalogue is read, and the full check does not count it either.
	last, err := st.Changes().Last(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Tenants().UpdateItem(ctx, "t0100", "tool", "echo", 0, func(it *store.Item) error {
		it.Spec = strings.Replace(it.Spec, `"description":"e`, `"description":"E`, 1)
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	changes, err := st.Changes().After(ctx, last, 10)
	if err != nil || len(changes) != 1 || changes[0].Slug != "t0100" {
		t.Fatalf("the feed after the change: %+v %v", changes, err)
	}
	before = st.loads
	cs.apply(ctx, changes)
	if found, err := cs.checkAll(ctx); err != nil || found != 0 {
		t.Fatalf("the full check found %d stale tenants (%v)", found, err)
	}
	if st.loads != before {
		t.Fatalf("%d catalogues loaded for a change to an evicted tenant", st.loads-before)
	}
}

// TestAChangeDuringALoadIsNotLost: a change committed and delivered by
// the feed while a tenant's first load is reading (so the read may be
// older than the change, and the tenant was not yet cached for the
// change to reload it) makes the load read again: the cache never keeps
// a catalogue older than a change it has applied. The same for a slug
// found missing while the tenant is being created.
func TestAChangeDuringALoadIsNotLost(t *testing.T) {
	ctx := context.Background()
	st := newCacheStore(t, 1)
	cs := newCatalogues(st, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Second, "test", "http://127.0.0.1", func(string, listChanges) {})
	deliver := func(change func()) {
		last, err := st.Changes().Last(ctx)
		if err != nil {
			t.Fatal(err)
		}
		change()
		changes, err := st.Changes().After(ctx, last, 10)
		if err != nil || len(changes) == 0 {
			t.Fatalf("the feed: %v %v", changes, err)
		}
		cs.apply(ctx, changes)
	}
	st.during = func() {
		deliver(func() {
			if _, err := st.Tenants().UpdateItem(ctx, "t0000", "tool", "echo", 0, func(it *store.Item) error {
				it.Spec = strings.Replace(it.Spec, `"description":"e`, `"description":"E`, 1)
				return nil
			}, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
	s, err := cs.lookup(ctx, "t0000")
	if err != nil || s == nil {
		t.Fatal(err)
	}
	current, err := st.Tenants().VersionsOf(ctx, []string{"t0000"})
	if err != nil || len(current) != 1 {
		t.Fatal(err)
	}
	if s.version != current[0].CatalogueVersion || st.loads != 2 {
		t.Fatalf("cached version %d after %d loads; the database is at %d", s.version, st.loads, current[0].CatalogueVersion)
	}

	st.during = func() {
		deliver(func() {
			if err := st.Tenants().Create(ctx, &store.Tenant{Slug: "fresh", DisplayName: "F"}, false); err != nil {
				t.Fatal(err)
			}
		})
	}
	if s, err := cs.lookup(ctx, "fresh"); err != nil || s == nil {
		t.Fatalf("the tenant created during its lookup: %v %v", s, err)
	}
}

// BenchmarkSnapshotSize calibrates snapshotSize: it loads tenants of the
// scale benchmark's shape (tools with a declared form question, one or
// three a tenant) and reports the heap each holds after a collection
// (heap-B/tenant) beside the estimate (estimate-B/tenant).
func BenchmarkSnapshotSize(b *testing.B) {
	for _, tools := range []int{1, 3} {
		b.Run(fmt.Sprintf("tools=%d", tools), func(b *testing.B) { benchSnapshotSize(b, tools) })
	}
}

func benchSnapshotSize(b *testing.B, tools int) {
	ctx := context.Background()
	const n = 2000
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "platform.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	spec := `{"name":"order","description":"Orders a coffee","inputSchema":{"type":"object","properties":{"size":{"type":"string","enum":["small","large"]}},"required":["size"]},` +
		`"handler":{"url":"https://hooks.example.com/order","timeoutMs":5000},"inputs":[{"name":"milk","kind":"form","message":"Which milk?",` +
		`"requestedSchema":{"type":"object","properties":{"milk":{"type":"string","enum":["none","oat","whole"]}},"required":["milk"]}}]}`
	secret := "whsec_" + strings.Repeat("s", 43)
	cats := make([]store.Catalogue, n)
	for i := range cats {
		slug := fmt.Sprintf("t%05d", i)
		cats[i] = store.Catalogue{Tenant: store.Tenant{Slug: slug, DisplayName: slug}}
		for j := range tools {
			name := fmt.Sprintf("order%d", j)
			cats[i].Items = append(cats[i].Items, store.Item{Kind: "tool", Name: name, Spec: strings.Replace(spec, `"order"`, `"`+name+`"`, 1), WebhookSecret: &secret})
		}
	}
	if err := st.Tenants().CreateCatalogues(ctx, cats); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		cs := newCatalogues(&cacheStore{Store: st}, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Second, "test", "http://127.0.0.1", func(string, listChanges) {})
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range n {
			if _, err := cs.lookup(ctx, fmt.Sprintf("t%05d", i)); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/tenant")
		cs.mu.RLock()
		b.ReportMetric(float64(cs.bytes)/n, "estimate-B/tenant")
		cs.mu.RUnlock()
		runtime.KeepAlive(cs)
	}
}
