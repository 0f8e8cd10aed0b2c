package keys

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opsmcp/platform/feed"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/store"
)

// Providers.
const (
	ProviderLocal = "local"
	ProviderVault = "vault"
)

// Options configures a Manager.
type Options struct {
	// Provider is local or vault.
	Provider string
	// Tenants lists tenants, for the scheduler and their state TTLs.
	Tenants Tenants
	// Rings holds the rings with the local provider.
	Rings RingStore
	// Logger; nil is slog.Default().
	Logger *slog.Logger
	// ReplicaID names this replica in records; default host name + pid.
	ReplicaID string

	// Refresh is how often every replica re-checks every ring it serves
	// (one metadata read per tenant) when it has no change feed, or the
	// feed is behind. With a current feed only the rings it names are
	// read, and one read a Refresh says the key store answers. Default 1s.
	Refresh time.Duration
	// Feed, when set, says how current this replica's change feed is:
	// rings are read again when the feed names them (Changed), and every
	// FullCheck, instead of every Refresh.
	Feed interface{ CurrentAt() time.Time }
	// FeedPoll is how often the feed is read when no notification comes
	// (--catalogue-refresh): the margin counts on the slower of it and
	// Refresh.
	FeedPoll time.Duration
	// Changes, when set, is told of every ring this manager writes, for
	// the feed.
	Changes interface {
		Announce(ctx context.Context, kind, tenantID, slug string) error
	}
	// FullCheck is how often every cached ring is read again with a
	// current feed: the feed's safety net. Default feed.DefaultFullCheck.
	FullCheck time.Duration
	// ClockSkew is the largest clock difference assumed between replicas
	// (and Vault). The propagation margin is Refresh + ClockSkew. Default 5s.
	ClockSkew time.Duration
	// Staleness is how long a replica keeps serving a ring it cannot
	// re-check (Vault unreachable); past it, the tenant fails closed.
	// Default 5m.
	Staleness time.Duration
	// ScheduleEvery is how often the scheduler looks for due phases.
	// Default 10s.
	ScheduleEvery time.Duration
	// Period is the rotation period of new rings. Default 30 days.
	Period time.Duration
	// Custody is the kind of key new rings (and rotations of rings that
	// do not say otherwise) use: aes or transit (Vault only). Default aes.
	Custody string
	// NoAutoCreate stops the manager from creating a ring for a tenant
	// that has none: such a tenant fails closed until an admin creates
	// one.
	NoAutoCreate bool
	// NoScheduler disables the scheduler on this replica (rings are
	// still refreshed and served).
	NoScheduler bool

	// MasterKey seals rings in the database (local provider; ≥ 32 bytes).
	MasterKey []byte
	// Vault configures the Vault provider.
	Vault VaultOptions

	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Manager serves every tenant's ring from a cache that it refreshes on a
// short interval, runs the rotation scheduler, and performs the admin
// operations. It implements endpoint.KeyRings (the Codec method).
type Manager struct {
	opts    Options
	log     *slog.Logger
	be      backend
	vault   *vaultConn
	transit *transitEngine

	mu      sync.Mutex
	entries map[string]*entry

	health  healthState
	rescued atomic.Int64 // rounds opened only thanks to a refresh on an unknown key
	// vouched (unix nanos): every ring not marked dirty is as current as
	// of then: the feed had delivered every change committed before it,
	// and the key store answered.
	vouched  atomic.Int64
	missed   atomic.Int64 // rings a full check found moved that the feed had not named
	lastFull time.Time    // the refresh loop's last full check (its goroutine only)
	// lastBackfill (unix nanos) is the scheduler's last look for
	// tenants without a due time.
	lastBackfill atomic.Int64
	kick         chan struct{} // the feed named rings: read them now
	// unannounced holds the tenants whose written ring the feed has not
	// been told of yet (the database did not answer): retried each
	// Refresh.
	unannounced sync.Map
	// undue holds the due times (tenant id → time.Time) the database
	// did not take: retried each Refresh.
	undue    sync.Map
	enforced sync.Map // tenant id → generation whose Transit floor is applied

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// entry is one tenant's cached ring.
type entry struct {
	tenant string
	snap   atomic.Pointer[snapshot]
	load   sync.Mutex // serialises reads from the backend

	// The refresh a token under an unknown key forces (see
	// tenantCodec.refreshForUnknownKey).
	forceMu   sync.Mutex
	lastForce time.Time
	forcing   chan struct{} // closed when the forced refresh ends; nil when none runs

	// failingAlone: the ring could not be re-read while others could
	// (logged once per episode).
	failingAlone atomic.Bool
	// dirty: the feed named the ring, or a read of it failed, and it has
	// not been read since; the feed does not vouch for it.
	dirty atomic.Bool
	// touched (unix nanos): when the feed last named the ring or this
	// replica last wrote it, so a full check does not count as missed
	// what it was told of.
	touched atomic.Int64
	// since (unix nanos): while the ring is not verified (dirty since the
	// feed named it or a read failed), the last time the feed vouched for
	// it, which its staleness counts from; 0 once it is read.
	since atomic.Int64
}

// snapshot is one observed state of a tenant's record. Immutable.
type snapshot struct {
	rec     *Record
	version int64 // backend version; -1 when nothing could be read
	codec   bindingCodec
	err     error // the tenant fails closed with it
	checked time.Time
}

// New builds a manager. It does not contact Vault: a replica starts even
// when Vault is down, reports degraded, and catches up when it returns.
// Call Start to run the refresh loop and the scheduler, Close to stop.
func New(opts Options) (*Manager, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Tenants == nil {
		return nil, errors.New("keys: a tenant store is required")
	}
	if opts.Refresh <= 0 {
		opts.Refresh = time.Second
	}
	if opts.ClockSkew < 0 {
		return nil, errors.New("keys: clock skew must not be negative")
	}
	if opts.ClockSkew == 0 {
		opts.ClockSkew = 5 * time.Second
	}
	if opts.Staleness <= 0 {
		opts.Staleness = 5 * time.Minute
	}
	if opts.FullCheck <= 0 {
		opts.FullCheck = feed.DefaultFullCheck
	}
	if opts.Staleness < 2*opts.Refresh {
		return nil, fmt.Errorf("keys: staleness (%s) must be at least twice the refresh interval (%s)", opts.Staleness, opts.Refresh)
	}
	if opts.ScheduleEvery <= 0 {
		opts.ScheduleEvery = 10 * time.Second
	}
	if opts.Period == 0 {
		opts.Period = 30 * 24 * time.Hour
	}
	if opts.Period < MinPeriod || opts.Period > MaxPeriod {
		return nil, fmt.Errorf("keys: rotation period %s out of range (%s to %s)", opts.Period, MinPeriod, MaxPeriod)
	}
	if opts.Custody == "" {
		opts.Custody = KindAES
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ReplicaID == "" {
		host, _ := os.Hostname()
		opts.ReplicaID = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	m := &Manager{opts: opts, log: opts.Logger.With("component", "keys"), entries: map[string]*entry{}, kick: make(chan struct{}, 1)}
	switch opts.Provider {
	case ProviderLocal:
		if opts.Custody != KindAES {
			return nil, fmt.Errorf("keys: the local provider holds aes keys only, not %q", opts.Custody)
		}
		if opts.Rings == nil {
			return nil, errors.New("keys: the local provider needs a ring store")
		}
		be, err := newLocalBackend(opts.Rings, opts.MasterKey)
		if err != nil {
			return nil, err
		}
		m.be = be
	case ProviderVault:
		switch opts.Custody {
		case KindAES, KindTransit:
		default:
			return nil, fmt.Errorf("keys: custody must be aes or transit, not %q", opts.Custody)
		}
		v, err := newVaultConn(opts.Vault, m.log)
		if err != nil {
			return nil, err
		}
		m.vault = v
		m.be = &kvBackend{v: v, mount: v.opts.KVMount, prefix: v.opts.Prefix}
		m.transit = &transitEngine{v: v, mount: v.opts.TransitMount, prefix: v.opts.TransitPrefix}
	default:
		return nil, fmt.Errorf("keys: provider must be local or vault, not %q", opts.Provider)
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.health.since = opts.Now()
	return m, nil
}

// Margin is the propagation margin: the refresh interval (or the
// feed's poll, if slower) plus the clock skew. Promotion waits it out
// after staging; retirement adds it to the state TTL after promotion.
func (m *Manager) Margin() time.Duration {
	return max(m.opts.Refresh, m.opts.FeedPoll) + m.opts.ClockSkew
}

// Rescued counts tokens this replica could open only after refreshing a
// ring on an unknown key id: zero in a healthy scheduled rotation, where
// the propagation margin means every replica verifies a key before any
// replica mints with it.
func (m *Manager) Rescued() int64 { return m.rescued.Load() }

// Provider names the backend: local or vault.
func (m *Manager) Provider() string { return m.be.name() }

// Start runs the refresh loop, the scheduler (unless disabled) and, with
// Vault, the token keeper. Idempotent; a nil Manager is a no-op.
func (m *Manager) Start() {
	if m == nil {
		return
	}
	m.once.Do(func() {
		if m.vault != nil {
			m.wg.Go(func() { m.vault.keepAlive(m.ctx) })
		}
		m.wg.Go(m.refreshLoop)
		if !m.opts.NoScheduler {
			m.wg.Go(m.scheduleLoop)
		}
	})
}

// Close stops background work and waits for it. A nil Manager is a no-op.
func (m *Manager) Close() {
	if m == nil {
		return
	}
	m.cancel()
	m.wg.Wait()
}

func (m *Manager) now() time.Time { return m.opts.Now() }

func (m *Manager) entry(tenantID string) *entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[tenantID]
	if !ok {
		e = &entry{tenant: tenantID}
		m.entries[tenantID] = e
	}
	return e
}

// Forget drops a tenant's ring from the cache (the endpoint evicted the
// tenant): it is no longer refreshed, and its next use reads it again.
func (m *Manager) Forget(tenantID string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, tenantID)
}

func (m *Manager) allEntries() []*entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*entry, 0, len(m.entries))
	for _, e := range m.entries {
		out = append(out, e)
	}
	return out
}

// RingStatus is one cached ring as the metrics report it.
type RingStatus struct {
	TenantID string
	Phase    Phase
	// MinterSince is when the minting key began minting.
	MinterSince time.Time
	// Keys is how many keys the ring holds.
	Keys int
}

// Rings calls fn for every ring this replica holds in its cache. It
// reads no backend: metric collection calls it, and must stay cheap.
func (m *Manager) Rings(fn func(RingStatus)) {
	if m == nil {
		return
	}
	for _, e := range m.allEntries() {
		s := e.snap.Load()
		if s == nil || s.rec == nil || len(s.rec.Keys) == 0 {
			continue
		}
		a := s.rec.Active()
		since := a.Promoted
		if since.IsZero() {
			since = a.Created
		}
		fn(RingStatus{TenantID: e.tenant, Phase: s.rec.Phase, MinterSince: since, Keys: len(s.rec.Keys)})
	}
}

// ErrStale means a tenant's ring could not be re-checked for longer than
// the configured staleness: it fails closed until the backend answers.
var ErrStale = errors.New("keys: the tenant's key ring is stale (the key store has not answered within the staleness limit)")

// Codec implements endpoint.KeyRings: the tenant's ring from the cache,
// loaded (or created) on first use. An error means the tenant fails
// closed: no ring, a malformed or foreign record, or a ring too stale.
func (m *Manager) Codec(ctx context.Context, tenantID string) (mrtr.Codec, error) {
	e := m.entry(tenantID)
	s := e.snap.Load()
	if s == nil {
		m.refresh(ctx, e)
		if s = e.snap.Load(); s == nil {
			return nil, fmt.Errorf("keys: tenant %s: ring not loaded", tenantID)
		}
	}
	if s.err != nil {
		return nil, fmt.Errorf("tenant %s: %w", tenantID, s.err)
	}
	checked := s.checked
	// The feed vouches for a clean ring up to now; for one not verified
	// since the feed named it or a read of it failed, only up to then.
	v := m.vouched.Load()
	if e.dirty.Load() {
		v = e.since.Load()
	}
	if v > checked.UnixNano() {
		checked = time.Unix(0, v)
	}
	if age := m.now().Sub(checked); age > m.opts.Staleness {
		return nil, fmt.Errorf("tenant %s: %w (last checked %s ago)", tenantID, ErrStale, age.Round(time.Second))
	}
	return &tenantCodec{m: m, e: e, snap: s}, nil
}

// refresh re-checks one tenant's ring: a cheap version read, and a full
// read only when the version moved. A backend that does not answer
// leaves the snapshot as it was (it goes stale in time); a malformed or
// foreign record replaces it with a fail-closed one.
func (m *Manager) refresh(ctx context.Context, e *entry) error {
	e.load.Lock()
	defer e.load.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.requestTimeout())
	defer cancel()
	cur := e.snap.Load()
	if cur != nil && cur.version >= 0 {
		v, err := m.be.version(ctx, e.tenant)
		if err != nil && !errors.Is(err, ErrMalformed) {
			return err
		}
		if err == nil && v == cur.version {
			m.health.noteOK(m.now())
			n := *cur
			n.checked = m.now()
			e.snap.CompareAndSwap(cur, &n)
			return nil
		}
	}
	s, err := m.read(ctx, e.tenant)
	if err != nil {
		if cur == nil || cur.version < 0 {
			// Nothing to serve yet: the tenant fails closed with the
			// reason until a refresh succeeds.
			e.snap.CompareAndSwap(cur, &snapshot{version: -1, err: fmt.Errorf("key store unavailable: %w", err), checked: m.now()})
		}
		return err
	}
	if s.err != nil && (cur == nil || cur.err == nil || cur.err.Error() != s.err.Error()) {
		if errors.Is(s.err, ErrNoRing) {
			m.log.Warn("tenant has no key ring: its rounds fail closed", "tenant", e.tenant)
		} else {
			m.log.Error("tenant key ring refused: its rounds fail closed", "tenant", e.tenant, "err", s.err)
		}
	}
	m.health.noteOK(m.now())
	// A write on this replica during the read published a newer
	// snapshot: keep it.
	e.snap.CompareAndSwap(cur, s)
	return nil
}

func (m *Manager) requestTimeout() time.Duration {
	if m.vault != nil {
		return m.vault.opts.Timeout + time.Second
	}
	return 10 * time.Second
}

// read loads, validates and builds a tenant's ring, creating it when
// there is none (unless auto-creation is off). A transient failure is an
// error; a missing, malformed or foreign ring is a snapshot that fails
// closed.
func (m *Manager) read(ctx context.Context, tenantID string) (*snapshot, error) {
	raw, ver, err := m.be.load(ctx, tenantID)
	if errors.Is(err, ErrNoRing) && !m.opts.NoAutoCreate {
		if _, cerr := m.create(ctx, tenantID, ""); cerr != nil && !errors.Is(cerr, ErrRingExists) {
			return nil, cerr
		}
		raw, ver, err = m.be.load(ctx, tenantID)
	}
	switch {
	case errors.Is(err, ErrNoRing):
		return &snapshot{err: fmt.Errorf("%w: create one with `platform keys rotate` or POST …/keys", ErrNoRing), checked: m.now()}, nil
	case errors.Is(err, ErrMalformed):
		return &snapshot{version: ver, err: err, checked: m.now()}, nil
	case err != nil:
		return nil, err
	}
	rec, err := decodeRecord(raw, tenantID)
	if err != nil {
		return &snapshot{version: ver, err: err, checked: m.now()}, nil
	}
	return m.build(ctx, rec, ver)
}

func (m *Manager) build(ctx context.Context, rec *Record, ver int64) (*snapshot, error) {
	codec, err := buildCodec(ctx, m.transit, rec)
	if errors.Is(err, ErrMalformed) {
		return &snapshot{version: ver, err: err, checked: m.now()}, nil
	}
	if err != nil {
		return nil, err
	}
	return &snapshot{rec: rec, version: ver, codec: codec, checked: m.now()}, nil
}

// refreshLoop keeps the cached rings current and the health state, every
// Refresh: from the change feed while it is current (one read says the
// key store answers; rings the feed named are read at once, on a kick,
// and again each Refresh until they read; every FullCheck, all of them),
// else by re-checking every cached ring, a few tenants at a time.
func (m *Manager) refreshLoop() {
	t := time.NewTicker(m.opts.Refresh)
	defer t.Stop()
	// The first full check is a FullCheck after the start: every ring
	// held by then was read when it was loaded, or since.
	m.lastFull = m.now()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.kick:
			m.refreshDirty(m.ctx)
			continue
		case <-t.C:
		}
		m.announcePending(m.ctx)
		now := m.now()
		current := m.feedCurrent(now)
		switch {
		case !current:
			m.refreshAll(m.ctx, now)
		case now.Sub(m.lastFull) >= m.opts.FullCheck:
			moved, err := m.refreshAll(m.ctx, now)
			m.lastFull = now
			if moved > 0 {
				m.missed.Add(int64(moved))
				m.log.Warn("key ring check found rings changed that the change feed had not named", "rings", moved)
			}
			if err == nil {
				m.vouch(now)
			}
		default:
			m.refreshDirty(m.ctx)
			_, err := m.be.version(m.ctx, "_health")
			m.health.record(m, err)
			if err == nil {
				m.vouch(now)
			}
		}
	}
}

// refreshDirty reads again the rings the feed named, or whose read
// failed, a few at a time; one that cannot be read stays dirty.
func (m *Manager) refreshDirty(ctx context.Context) {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, e := range m.allEntries() {
		if ctx.Err() != nil {
			break
		}
		if !e.dirty.Swap(false) {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			m.verified(e, m.refresh(ctx, e))
		})
	}
	wg.Wait()
}

// markDirty takes e out of what the feed vouches for: its staleness
// counts from the last time the feed vouched for it.
func (m *Manager) markDirty(e *entry) {
	e.since.CompareAndSwap(0, m.vouched.Load())
	e.dirty.Store(true)
}

// verified records the outcome of a read of e made after its dirty flag
// was cleared: a ring read is clean (unless the feed named it again
// meanwhile), one that could not be read is dirty again.
func (m *Manager) verified(e *entry, err error) {
	if err != nil {
		m.markDirty(e)
		return
	}
	if !e.dirty.Load() {
		e.since.Store(0)
	}
}

// feedCurrent says whether the change feed has delivered everything
// committed up to two intervals ago (the slower of Refresh and the
// feed's poll): it is followed.
func (m *Manager) feedCurrent(now time.Time) bool {
	if m.opts.Feed == nil {
		return false
	}
	at := m.opts.Feed.CurrentAt()
	return !at.IsZero() && now.Sub(at) <= 2*max(m.opts.Refresh, m.opts.FeedPoll)
}

// vouch records that every clean ring is current as of the feed's time
// (no later than now, when the key store answered).
func (m *Manager) vouch(now time.Time) {
	at := m.opts.Feed.CurrentAt()
	if at.After(now) {
		at = now
	}
	m.vouched.Store(at.UnixNano())
}

// Changed marks the cached rings a batch of the change feed names as
// dirty, no longer vouched for by the feed, and has the refresh loop
// read them at once (a feed.Consumer). It reads nothing itself: a slow
// key store must not hold up the feed, whose next batch may be a
// catalogue's.
func (m *Manager) Changed(_ context.Context, cs []store.Change) {
	named := false
	for _, c := range cs {
		if c.Kind != store.ChangeKeys {
			continue
		}
		m.mu.Lock()
		e, ok := m.entries[c.TenantID]
		m.mu.Unlock()
		if ok { // a ring not cached here is read on its next use
			e.touched.Store(m.now().UnixNano())
			m.markDirty(e)
			named = true
		}
	}
	if named {
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
}

// Lost marks every cached ring dirty and has them read again (a
// feed.Consumer): the feed may have lost changes.
func (m *Manager) Lost(context.Context) {
	for _, e := range m.allEntries() {
		m.markDirty(e)
	}
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Missed counts the rings full checks found changed though the change
// feed had not named them: zero while the feed works.
func (m *Manager) Missed() int64 {
	if m == nil {
		return 0
	}
	return m.missed.Load()
}

// announce tells the change feed a tenant's ring was written; if the
// database does not answer, every Refresh tries again.
func (m *Manager) announce(ctx context.Context, tenantID string) {
	if m.opts.Changes == nil {
		return
	}
	if err := m.opts.Changes.Announce(ctx, store.ChangeKeys, tenantID, ""); err != nil {
		m.unannounced.Store(tenantID, struct{}{})
		m.log.Warn("could not announce a key ring change; retrying", "tenant", tenantID, "err", err)
	}
}

// announcePending retries the announcements and due times the database
// did not take.
func (m *Manager) announcePending(ctx context.Context) {
	m.undue.Range(func(k, v any) bool {
		d := v.(dueAt)
		return m.setDue(ctx, k.(string), d.version, d.at) == nil
	})
	m.unannounced.Range(func(k, _ any) bool {
		tenantID := k.(string)
		if err := m.opts.Changes.Announce(ctx, store.ChangeKeys, tenantID, ""); err != nil {
			return false // the database is still away
		}
		m.unannounced.Delete(tenantID)
		return true
	})
}

// refreshAll re-checks every cached ring now; the refresh loop calls it
// every Refresh while the change feed is behind, and at each full check.
// The key store counts as failing only when no ring
// could be re-read: one tenant whose ring cannot be (its Transit key
// deleted, say) must not pause rotation for every tenant, nor take the
// replica out of service; its own ring goes stale and fails closed alone.
//
// It says how many rings it found moved that nothing had told this
// replica of since start (the feed did not name them, this replica did
// not write them), and whether the key store answered.
func (m *Manager) refreshAll(ctx context.Context, start time.Time) (moved int, err error) {
	entries := m.allEntries()
	before := make(map[*entry]int64, len(entries))
	told := make(map[*entry]bool) // named by the feed before the check, not read yet
	for _, e := range entries {
		if s := e.snap.Load(); s != nil {
			before[e] = s.version
		}
		if e.dirty.Load() {
			told[e] = true
		}
	}
	defer func() {
		for _, e := range entries {
			if told[e] || e.touched.Load() >= start.UnixNano() {
				continue
			}
			if s := e.snap.Load(); s != nil && s.version >= 0 {
				if v, ok := before[e]; ok && v >= 0 && v != s.version {
					moved++
				}
			}
		}
	}()
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	var mu sync.Mutex
	// err is the pass's first refresh error.
	type failure struct {
		e   *entry
		err error
	}
	var failed []failure
	for _, e := range entries {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			e.dirty.Store(false)
			rerr := m.refresh(ctx, e)
			m.verified(e, rerr)
			if rerr == nil {
				if e.failingAlone.Swap(false) {
					m.log.Info("tenant key ring re-read again", "tenant", e.tenant)
				}
				return
			}
			// Not read (verified marked it dirty): the feed does not vouch
			// for it, so it goes stale and fails closed alone, a staleness
			// limit after it was last vouched for, unless a read succeeds
			// first.
			mu.Lock()
			if err == nil {
				err = rerr
			}
			failed = append(failed, failure{e, rerr})
			mu.Unlock()
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if len(failed) < len(entries) {
		// The store answers: the failures are the tenants' own.
		for _, f := range failed {
			if !f.e.failingAlone.Swap(true) {
				m.log.Warn("tenant key ring could not be re-read while the key store answers for others: serving its cached ring until it is stale",
					"tenant", f.e.tenant, "staleness", m.opts.Staleness, "err", f.err)
			}
		}
		err = nil
	}
	if len(entries) == 0 && m.vault != nil {
		// Nothing cached yet: still find out whether Vault answers.
		_, err = m.be.version(ctx, "_health")
	}
	m.health.record(m, err)
	return moved, err
}

// create writes a fresh steady ring for a tenant with check-and-set 0.
// custody "" means the configured default.
func (m *Manager) create(ctx context.Context, tenantID, custody string) (*Record, error) {
	if custody == "" {
		custody = m.opts.Custody
	}
	if err := m.checkCustody(custody); err != nil {
		return nil, err
	}
	rec := &Record{Custody: custody, Tenant: tenantID}
	if custody == KindTransit {
		rec.TransitKey = m.transit.keyName(tenantID)
	}
	k, err := m.newKey(ctx, rec)
	if err != nil {
		return nil, err
	}
	n := newRecord(tenantID, custody, rec.TransitKey, k, m.now(), m.opts.Period)
	if _, err := m.write(ctx, tenantID, n, 0); err != nil {
		if errors.Is(err, errConflict) {
			return nil, ErrRingExists
		}
		return nil, err
	}
	m.log.Info("key ring created", "tenant", tenantID, "custody", custody, "key", k.ID)
	return n, nil
}

// ErrRingExists: creating a ring for a tenant that has one.
var ErrRingExists = errors.New("keys: the tenant already has a key ring")

// ErrBadCustody: a custody the provider cannot hold.
var ErrBadCustody = errors.New("keys: unsupported custody")

func (m *Manager) checkCustody(custody string) error {
	switch custody {
	case KindAES:
		return nil
	case KindTransit:
		if m.transit == nil {
			return fmt.Errorf("%w: transit custody needs the vault provider", ErrBadCustody)
		}
		return nil
	}
	return fmt.Errorf("%w: custody must be aes or transit, not %q", ErrBadCustody, custody)
}

// newKey makes a key of the record's custody: 32 bytes from crypto/rand,
// or a Transit key version no record has used.
func (m *Manager) newKey(ctx context.Context, r *Record) (Key, error) {
	now := m.now()
	if r.Custody == KindTransit {
		if r.TransitKey == "" {
			r.TransitKey = m.transit.keyName(r.Tenant)
		}
		v, err := m.transit.newVersion(ctx, r.TransitKey, highestTransit(r))
		if err != nil {
			return Key{}, err
		}
		return Key{ID: transitKeyID(r.TransitKey, v), Kind: KindTransit, Version: v, Created: now}, nil
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	id, err := aesKeyID(secret)
	if err != nil {
		return Key{}, err
	}
	return Key{ID: id, Kind: KindAES, Secret: secret, Created: now}, nil
}

// highestTransit is the highest Transit version the record has ever
// referenced, so a revoked version is never handed out again.
func highestTransit(r *Record) int {
	h := r.TransitHigh
	for _, k := range r.Keys {
		if k.Kind == KindTransit {
			h = max(h, k.Version)
		}
	}
	return h
}

// write saves next over the version cas, updates the cache, and applies
// Transit floors the new ring allows.
func (m *Manager) write(ctx context.Context, tenantID string, next *Record, cas int64) (int64, error) {
	next.TransitHigh = highestTransit(next)
	next.Generation++
	next.UpdatedBy = m.opts.ReplicaID
	if err := next.validate(tenantID); err != nil {
		return 0, fmt.Errorf("keys: refusing to write an invalid ring: %w", err)
	}
	raw, err := json.Marshal(next)
	if err != nil {
		return 0, err
	}
	ver, err := m.be.save(ctx, tenantID, raw, cas)
	if err != nil {
		return 0, err
	}
	// This replica serves the saved ring before the others are told of
	// it: the announcement is a database round trip (a timeout, with the
	// database away), during which a retired key would still open here.
	e := m.entry(tenantID)
	e.touched.Store(m.now().UnixNano())
	if s, err := m.build(ctx, next, ver); err == nil {
		// Lock-free: write may run under a refresh that holds e.load.
		for {
			cur := e.snap.Load()
			if (cur != nil && cur.version >= ver) || e.snap.CompareAndSwap(cur, s) {
				break
			}
		}
	}
	m.announce(ctx, tenantID)
	due := next.NextAt
	if !m.enforceTransit(ctx, tenantID, next) {
		due = m.now() // the next scheduler pass tries again
	}
	if err := m.setDue(ctx, tenantID, ver, due); err != nil {
		m.log.Warn("could not record when the key ring is next due; retrying", "tenant", tenantID, "err", err)
	}
	return ver, nil
}

// enforceTransit raises the Transit key's minimum encryption and
// decryption versions to the ring's oldest Transit version, once per
// generation, and says whether they are applied; a failure is retried by
// the next scheduler pass.
func (m *Manager) enforceTransit(ctx context.Context, tenantID string, r *Record) bool {
	if m.transit == nil || r.TransitKey == "" {
		return true
	}
	if g, ok := m.enforced.Load(tenantID); ok && g.(int64) >= r.Generation {
		return true
	}
	floor := 0
	for _, k := range r.Keys {
		if k.Kind == KindTransit && (floor == 0 || k.Version < floor) {
			floor = k.Version
		}
	}
	if floor == 0 {
		// No Transit key left in the ring (it moved to aes custody):
		// refuse everything below the last one it used.
		if floor = r.TransitHigh; floor == 0 {
			return true
		}
	}
	if err := m.transit.enforce(ctx, r.TransitKey, floor); err != nil {
		m.log.Warn("could not apply the transit key's minimum versions; will retry", "tenant", tenantID, "err", err)
		return false
	}
	m.enforced.Store(tenantID, r.Generation)
	return true
}
