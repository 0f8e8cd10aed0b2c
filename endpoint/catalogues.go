package endpoint

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/tenant"
)

// catalogues keeps the catalogue snapshot of every tenant this replica
// serves: loaded on a tenant's first request, reloaded when its
// catalogue version moves (a change made on any replica), and
// remembered as missing or failing for one refresh interval, so a
// request never waits on the database for a tenant it already knows
// about. Loads are deduplicated per tenant: a burst of first requests
// for one tenant makes one read, and a slow load of one tenant holds up
// no other tenant's.
type catalogues struct {
	store   CatalogueStore
	log     *slog.Logger
	refresh time.Duration
	// version (the platform's, reported in serverInfo) and publicURL (the
	// base of every endpoint's URL) go into each snapshot.
	version, publicURL string
	// changed is told which lists of a tenant changed (the subscription
	// hub).
	changed func(slug string, c listChanges)

	loads singleflight.Group

	// budget bounds the snapshots' estimated bytes (snapshotSize); past
	// it the least recently used are evicted, but never a tenant pinned
	// says is in use by a stream (its changes must reach the stream).
	// 0: no bound.
	budget  int64
	pinned  func(slug string) bool
	evicted atomic.Int64 // snapshots evicted, ever
	// forget is told of the tenants evicted (their key rings go too).
	forget func(tenantID string)

	// missed counts what full checks found that the feed had not
	// delivered: it should stay zero.
	missed atomic.Int64

	// gen counts the feed's batches applied; touched holds, by slug, the
	// batch that last named it ("" for tenants created in bulk), for the
	// loads in flight then (kept two load timeouts).
	gen     uint64
	touched map[string]touch

	mu      sync.RWMutex
	cache   map[string]*snapshot
	bytes   int64             // the cached snapshots' estimated bytes
	byID    map[string]string // tenant id -> slug, of the cached snapshots
	missing map[string]bool   // slugs known not to exist, until a change names them
	failed  map[string]loadFailure
}

// maxMissing bounds the slugs remembered as missing: past it they are
// forgotten all at once (a scan of random slugs costs a read each, as a
// first request of a real tenant does, and no memory).
const maxMissing = 100_000

// touch is when the feed last named a slug.
type touch struct {
	gen uint64
	at  time.Time
}

func newCatalogues(st CatalogueStore, log *slog.Logger, refresh time.Duration, version, publicURL string, changed func(string, listChanges)) *catalogues {
	return &catalogues{
		store: st, log: log, refresh: refresh, version: version, publicURL: publicURL, changed: changed,
		cache: map[string]*snapshot{}, missing: map[string]bool{}, byID: map[string]string{}, failed: map[string]loadFailure{},
		touched: map[string]touch{},
		pinned:  func(string) bool { return false }, forget: func(string) {},
	}
}

// putLocked caches s for slug, replacing (and uncounting) what was
// there, which it returns.
func (cs *catalogues) putLocked(slug string, s *snapshot) *snapshot {
	old := cs.cache[slug]
	if old != nil {
		cs.bytes -= old.size
		delete(cs.byID, old.tenantID)
	}
	s.used.Store(time.Now().UnixNano())
	cs.cache[slug] = s
	cs.byID[s.tenantID] = slug
	cs.bytes += s.size
	return old
}

// dropLocked forgets slug's snapshot, if cached, and says whether it was.
func (cs *catalogues) dropLocked(slug string) bool {
	s, ok := cs.cache[slug]
	if ok {
		cs.bytes -= s.size
		delete(cs.cache, slug)
		delete(cs.byID, s.tenantID)
	}
	return ok
}

// evictLocked brings the cache back within its budget, keeping keep (the
// snapshot just loaded) and pinned tenants: the least recently used go
// first, until the cache is at nine tenths of the budget, so one
// eviction's scan makes room for many loads. An evicted tenant costs
// nothing until its next request, which loads it again. It returns the
// evicted tenants' ids, for their key rings to go too.
func (cs *catalogues) evictLocked(keep string) (tenantIDs []string) {
	if cs.budget <= 0 || cs.bytes <= cs.budget {
		return nil
	}
	type cand struct {
		slug, tenantID string
		used           int64
	}
	cands := make([]cand, 0, len(cs.cache))
	for slug, s := range cs.cache {
		if slug != keep && !cs.pinned(slug) {
			cands = append(cands, cand{slug, s.tenantID, s.used.Load()})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(a.used, b.used) })
	target := cs.budget / 10 * 9
	n := 0
	for _, c := range cands {
		if cs.bytes <= target {
			break
		}
		cs.dropLocked(c.slug)
		tenantIDs = append(tenantIDs, c.tenantID)
		n++
	}
	cs.evicted.Add(int64(n))
	return tenantIDs
}

// loadTimeout bounds one catalogue load.
const loadTimeout = 30 * time.Second

// loadFailure is a tenant whose catalogue could not be loaded: its
// requests get the same error, without another read, until the next
// refresh interval. One busy tenant that cannot load (a database error, a
// webhook secret no configured key opens) then costs one read per
// interval, not one per request.
type loadFailure struct {
	err   error
	until time.Time
}

// errStillFailing wraps a remembered load failure: the failure was
// logged when the load ran, so a request that meets it need not log it
// again.
type errStillFailing struct{ err error }

func (e errStillFailing) Error() string { return e.err.Error() }
func (e errStillFailing) Unwrap() error { return e.err }

// lookup returns the tenant's snapshot, loading it on first use. It
// returns nil for a tenant that does not exist.
func (cs *catalogues) lookup(ctx context.Context, slug string) (*snapshot, error) {
	if s, ok, err := cs.known(slug); ok {
		return s, err
	}
	if !tenant.ValidSlug(slug) {
		return nil, nil
	}
	// Callers waiting for another request's load of the same tenant share
	// its result. The load is traced under the first caller's request but
	// outlives it: its client leaving must not fail the others.
	v, err, _ := cs.loads.Do(slug, func() (any, error) {
		if s, ok, err := cs.known(slug); ok {
			return s, err
		}
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
		defer cancel()
		return cs.load(lctx, slug)
	})
	s, _ := v.(*snapshot)
	return s, err
}

// known answers for slug without a read when it can: its cached
// snapshot, a slug known not to exist, or the failure of a load that
// failed within the interval.
func (cs *catalogues) known(slug string) (*snapshot, bool, error) {
	cs.mu.RLock()
	defer cs.mu.RUnlock()
	if s, ok := cs.cache[slug]; ok {
		if cs.budget > 0 {
			s.used.Store(time.Now().UnixNano())
		}
		return s, true, nil
	}
	if cs.missing[slug] {
		return nil, true, nil
	}
	if f, ok := cs.failed[slug]; ok && time.Now().Before(f.until) {
		return nil, true, errStillFailing{f.err}
	}
	return nil, false, nil
}

// load reads a tenant's catalogue into the cache. A change the feed
// delivers while the read is in flight may have committed after it: the
// tenant is then read again, so what is cached is never older than a
// change already applied.
func (cs *catalogues) load(ctx context.Context, slug string) (*snapshot, error) {
	for range 3 {
		gen := cs.generation()
		s, err := cs.loadOnce(ctx, slug)
		if !cs.touchedSince(slug, gen) {
			return s, err
		}
	}
	return cs.loadOnce(ctx, slug)
}

// generation is the count of the feed's batches applied.
func (cs *catalogues) generation() uint64 {
	cs.mu.RLock()
	defer cs.mu.RUnlock()
	return cs.gen
}

// touchedSince says whether a batch applied after generation gen named
// slug (or created tenants in bulk).
func (cs *catalogues) touchedSince(slug string, gen uint64) bool {
	cs.mu.RLock()
	defer cs.mu.RUnlock()
	return cs.touched[slug].gen > gen || cs.touched[""].gen > gen
}

// loadOnce reads a tenant's catalogue into the cache.
func (cs *catalogues) loadOnce(ctx context.Context, slug string) (*snapshot, error) {
	c, err := cs.store.LoadCatalogue(ctx, slug)
	if errors.Is(err, store.ErrNotFound) {
		cs.mu.Lock()
		old := cs.cache[slug]
		cs.dropLocked(slug)
		delete(cs.failed, slug)
		if len(cs.missing) >= maxMissing {
			clear(cs.missing)
		}
		cs.missing[slug] = true
		cs.mu.Unlock()
		if old != nil {
			cs.forget(old.tenantID) // deleted: its key ring goes too
			cs.changed(slug, everything)
		}
		return nil, nil
	}
	if err != nil {
		cs.mu.Lock()
		cs.failed[slug] = loadFailure{err: err, until: time.Now().Add(cs.refresh)}
		if errors.Is(err, store.ErrSecretUnreadable) {
			// Not a passing failure: a webhook secret written under a key
			// this replica lacks. Serving the cached catalogue would sign
			// with a secret that may have been replaced (rotated after a
			// leak, say), so the tenant fails closed here until it loads.
			cs.dropLocked(slug)
		}
		cs.mu.Unlock()
		return nil, err
	}
	s, errs := buildSnapshot(c, cs.version, cs.publicURL)
	for _, e := range errs {
		cs.log.ErrorContext(ctx, "catalogue item skipped", "tenant", slug, "err", e)
	}
	cs.mu.Lock()
	old := cs.putLocked(slug, s)
	delete(cs.missing, slug)
	delete(cs.failed, slug)
	evicted := cs.evictLocked(slug)
	cs.mu.Unlock()
	for _, id := range evicted {
		cs.forget(id)
	}
	if old != nil && old.version != s.version {
		cs.changed(slug, changes(old, s))
	}
	return s, nil
}

// stats says what the cache holds: tenants, their estimated bytes, and
// the evictions since the start.
func (cs *catalogues) stats() (tenants, bytes, evictions int64) {
	cs.mu.RLock()
	defer cs.mu.RUnlock()
	return int64(len(cs.cache)), cs.bytes, cs.evicted.Load()
}

// slug returns the slug of the cached tenant with id tenantID (no
// database read).
func (cs *catalogues) slug(tenantID string) (string, bool) {
	cs.mu.RLock()
	defer cs.mu.RUnlock()
	slug, ok := cs.byID[tenantID]
	return slug, ok
}

// invalidate reloads a tenant now, if this replica serves it: the admin
// API calls it after a change, so a replica serves its own writes at
// once.
func (cs *catalogues) invalidate(ctx context.Context, slug string) {
	cs.mu.Lock()
	delete(cs.missing, slug)
	delete(cs.failed, slug) // the change may be what it needed
	_, cached := cs.cache[slug]
	cs.mu.Unlock()
	if !cached {
		return
	}
	if _, err := cs.load(ctx, slug); err != nil {
		cs.log.WarnContext(ctx, "catalogue reload failed", "tenant", slug, "err", err)
	}
}

// apply reloads the cached tenants a batch of the change feed names,
// and forgets what it remembered of the others (a slug missing, a load
// that failed): the change may be what they needed. A change to a
// tenant this replica does not cache costs nothing more.
func (cs *catalogues) apply(ctx context.Context, changes []store.Change) {
	var reload []string
	cs.mu.Lock()
	cs.gen++
	now := time.Now()
	for _, c := range changes {
		switch c.Kind {
		case store.ChangeTenants:
			clear(cs.missing)
			cs.touched[""] = touch{cs.gen, now}
		case store.ChangeCatalogue:
			delete(cs.missing, c.Slug)
			delete(cs.failed, c.Slug)
			cs.touched[c.Slug] = touch{cs.gen, now}
			if _, ok := cs.cache[c.Slug]; ok && !slices.Contains(reload, c.Slug) {
				reload = append(reload, c.Slug)
			}
		}
	}
	cs.mu.Unlock()
	for _, slug := range reload {
		cs.reload(ctx, slug)
	}
}

// reload loads a cached tenant again, and drops it if it is gone. A
// tenant that changed but cannot be read now is dropped too: what
// changed may be its disabling, or an issuer removed, so it is not
// served as it was; its requests get the load's error and try again
// each refresh interval, as a tenant not yet loaded does.
func (cs *catalogues) reload(ctx context.Context, slug string) {
	lctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	_, err := cs.load(lctx, slug)
	if err == nil || ctx.Err() != nil {
		return
	}
	cs.log.Warn("catalogue reload failed; the tenant is served again once it loads", "tenant", slug, "err", err)
	cs.mu.Lock()
	old := cs.cache[slug]
	cs.dropLocked(slug)
	cs.mu.Unlock()
	if old != nil {
		cs.forget(old.tenantID)
		// Its streams check whether they may stay open.
		cs.changed(slug, everything)
	}
}

// checkAll compares every cached tenant's catalogue version with the
// database's, reloads those that moved and drops those gone, and says
// how many it found: the feed's safety net, run minutes apart and when
// the feed may have lost changes. It also forgets every slug remembered
// as missing.
func (cs *catalogues) checkAll(ctx context.Context) (found int, err error) {
	cs.mu.RLock()
	slugs := make([]string, 0, len(cs.cache))
	for slug := range cs.cache {
		slugs = append(slugs, slug)
	}
	cs.mu.RUnlock()
	vs, err := cs.store.VersionsOf(ctx, slugs)
	if err != nil {
		return 0, err
	}
	current := make(map[string]int64, len(vs))
	for _, v := range vs {
		current[v.Slug] = v.CatalogueVersion
	}
	var stale []string
	cs.mu.Lock()
	clear(cs.missing)
	for _, slug := range slugs {
		if s, ok := cs.cache[slug]; ok {
			if v, ok := current[slug]; !ok || v != s.version {
				stale = append(stale, slug)
			}
		}
	}
	cs.mu.Unlock()
	for _, slug := range stale {
		cs.reload(ctx, slug)
	}
	return len(stale), nil
}

// sweep forgets load failures whose interval passed, and changes older
// than any load in flight.
func (cs *catalogues) sweep() {
	now := time.Now()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for slug, f := range cs.failed {
		if !now.Before(f.until) {
			delete(cs.failed, slug)
		}
	}
	for slug, t := range cs.touched {
		if now.Sub(t.at) > 2*loadTimeout {
			delete(cs.touched, slug)
		}
	}
}

// CatalogueCache says what the catalogue cache holds (the metrics'
// source): tenants, their estimated bytes, evictions since the start.
func (e *Handler) CatalogueCache() (tenants, bytes, evictions int64) {
	return e.catalogues.stats()
}
