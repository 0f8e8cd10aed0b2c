package keys

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/tenant"
)

// scheduleLoop runs a scheduler pass soon after start and then every
// ScheduleEvery (±10% jitter, so replicas do not move in lockstep).
func (m *Manager) scheduleLoop() {
	wait := min(m.opts.ScheduleEvery, m.opts.Refresh)
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-time.After(wait):
		}
		if err := m.Schedule(m.ctx); err != nil && m.ctx.Err() == nil {
			m.log.Warn("key rotation scheduler pass failed", "err", err)
		}
		j := float64(m.opts.ScheduleEvery) * (0.9 + 0.2*rand.Float64())
		wait = time.Duration(j)
	}
}

// Schedule runs one scheduler pass over the tenants whose rings are due
// (store.Tenants.KeysDue: new tenants, and rings whose next phase has
// come): it creates missing rings (unless auto-creation is off),
// advances every phase that is due, re-applies Transit floors a failed
// write left behind, and records when each ring is next due. A pass
// reads no ring that is not due, so its cost follows the rotations, not
// the tenants. While the key store is unreachable it does nothing:
// rotation pauses, and resumes one propagation margin after the store
// answers again, so replicas that missed a phase during the outage have
// read it before the next one.
func (m *Manager) Schedule(ctx context.Context) error {
	if h := m.Health(); h.Status != HealthOK {
		m.log.Debug("key rotation paused", "reason", h.Detail)
		return nil
	}
	if wait := m.health.settling(m.now(), m.Margin()); wait > 0 {
		m.log.Debug("key rotation paused", "reason", "the key store answers again; waiting out the propagation margin", "resumes_in", wait)
		return nil
	}
	if now, last := m.now(), m.lastBackfill.Load(); now.Sub(time.Unix(0, last)) >= m.opts.FullCheck {
		// The first look reads every tenant; later ones a window (see
		// backfillSlack). A failed look leaves lastBackfill as it was,
		// so the next one covers its window too.
		var since time.Time
		if last != 0 {
			since = time.Unix(0, last).Add(-backfillSlack)
		}
		if n, err := m.opts.Tenants.ScheduleUnscheduled(ctx, now, since); err != nil {
			return err
		} else if n > 0 {
			m.log.Info("key rings scheduled for tenants that had no due time", "tenants", n)
		}
		m.lastBackfill.Store(now.UnixNano())
	}
	var errs []error
	seen := map[string]bool{}
	for range schedulePages {
		page, err := m.opts.Tenants.KeysDue(ctx, m.now(), schedulePage)
		if err != nil {
			return err
		}
		fresh := 0
		for _, t := range page {
			if seen[t.ID] {
				continue // failed earlier in this pass: the next pass retries
			}
			seen[t.ID] = true
			fresh++
			if err := m.scheduleTenant(ctx, &t); err != nil {
				errs = append(errs, fmt.Errorf("tenant %s: %w", t.Slug, err))
				// Let the others go first until it can be done.
				_ = m.opts.Tenants.PostponeKeys(ctx, t.ID, m.now().Add(scheduleRetry))
			}
		}
		if len(page) < schedulePage || fresh == 0 {
			break
		}
	}
	return errors.Join(errs...)
}

// A scheduler pass reads up to schedulePages pages of schedulePage due
// rings; more wait for the next pass.
const (
	schedulePage  = 500
	schedulePages = 10
)

// scheduleRetry is how long a ring the scheduler could not read or
// advance waits before it is tried again.
const scheduleRetry = time.Minute

// backfillSlack widens each look for tenants without a due time past the
// last one: a tenant's created_at is its writer's clock, which may be
// behind ours, and its transaction may commit a while after it. An hour
// is far beyond both; a tenant outside it still gets a due time at the
// next replica's start, whose first look reads every tenant.
const backfillSlack = time.Hour

// noRingRecheck is when a tenant without a ring (auto-creation off) or
// with a refused one is looked at again; an admin's write schedules it
// at once.
const noRingRecheck = 24 * time.Hour

func (m *Manager) scheduleTenant(ctx context.Context, t *store.Tenant) error {
	// Read afresh, not from the cache: the due time written from it must
	// not be older than the ring.
	rec, ver, err := m.loadOrCreate(ctx, t.ID)
	switch {
	case errors.Is(err, ErrNoRing), errors.Is(err, ErrMalformed):
		if !errors.Is(err, ErrNoRing) {
			m.log.Error("tenant key ring refused: its rounds fail closed", "tenant", t.ID, "err", err)
		}
		// No version to go by: whatever stands waits.
		return m.opts.Tenants.PostponeKeys(ctx, t.ID, m.now().Add(noRingRecheck))
	case err != nil:
		return err
	}
	tm := timing{margin: m.Margin(), ttl: settingsTTL(t.Settings)}
	tr, at := rec.due(tm)
	if m.now().Before(at) {
		if !m.enforceTransit(ctx, t.ID, rec) {
			at = m.now() // the next pass tries again
		}
		return m.setDue(ctx, t.ID, ver, at)
	}
	next, ok, err := m.advance(ctx, t.ID, tm, tr, false)
	if err != nil {
		return err
	}
	if !ok && next != nil {
		// Not due after all, read afresh: come back when it is.
		_, at := next.due(tm)
		return m.setDue(ctx, t.ID, ver, at)
	}
	return nil // written: write scheduled it, here or on the replica that won
}

// dueAt is a due time not yet recorded, and the ring version it was
// worked out from.
type dueAt struct {
	version int64
	at      time.Time
}

// setDue records when a tenant's ring is next due, as worked out from
// version of it; if the database does not answer, every Refresh tries
// again (a due time from a later version, written meanwhile, stands).
func (m *Manager) setDue(ctx context.Context, tenantID string, version int64, at time.Time) error {
	set, err := m.opts.Tenants.SetKeysDue(ctx, tenantID, version, at)
	if err != nil {
		m.undue.Store(tenantID, dueAt{version, at})
		return err
	}
	m.undue.Delete(tenantID)
	if !set {
		// A due time from a later version stands (or the ring's version
		// went back, its store's history lost): if it has come, it must
		// not stay first in line.
		return m.opts.Tenants.PostponeKeys(ctx, tenantID, at)
	}
	return nil
}

// settingsTTL is a tenant's state TTL from its stored settings; settings
// that no longer parse count as the default, so rotation never waits less
// than the platform would let a state live.
func settingsTTL(raw string) time.Duration {
	s, _ := tenant.ParseSettings(raw)
	return s.StateTTL()
}

// tenantTTL reads one tenant's state TTL.
func (m *Manager) tenantTTL(ctx context.Context, tenantID string) (time.Duration, error) {
	raw, err := m.opts.Tenants.Settings(ctx, tenantID)
	if err != nil {
		return 0, err
	}
	return settingsTTL(raw), nil
}

// loadFresh reads and validates a tenant's record straight from the
// backend, bypassing the cache.
func (m *Manager) loadFresh(ctx context.Context, tenantID string) (*Record, int64, error) {
	raw, ver, err := m.be.load(ctx, tenantID)
	if err != nil {
		return nil, ver, err
	}
	rec, err := decodeRecord(raw, tenantID)
	return rec, ver, err
}

// loadOrCreate is loadFresh that, unless auto-creation is off, first
// gives a tenant without a ring its ring, as its first round would.
func (m *Manager) loadOrCreate(ctx context.Context, tenantID string) (*Record, int64, error) {
	rec, ver, err := m.loadFresh(ctx, tenantID)
	if !errors.Is(err, ErrNoRing) || m.opts.NoAutoCreate {
		return rec, ver, err
	}
	if _, err := m.create(ctx, tenantID, ""); err != nil && !errors.Is(err, ErrRingExists) {
		return nil, 0, err
	}
	return m.loadFresh(ctx, tenantID)
}

// advance performs transition want on the tenant's ring if, read afresh,
// it is still the due one (or, with force, a staging that is not due
// yet). Concurrent callers on any replicas all write with the version
// they read: exactly one write wins, and the others report false.
func (m *Manager) advance(ctx context.Context, tenantID string, tm timing, want Transition, force bool) (*Record, bool, error) {
	rec, ver, err := m.loadFresh(ctx, tenantID)
	if err != nil {
		return nil, false, err
	}
	tr, at := rec.due(tm)
	now := m.now()
	if tr != want || (now.Before(at) && !(force && tr == Stage)) {
		return rec, false, nil // another replica got there, or not due
	}
	next, err := advance(rec, tr, now, tm, func() (Key, error) { return m.newKey(ctx, rec) })
	if err != nil {
		return nil, false, err
	}
	if _, err := m.write(ctx, tenantID, next, ver); err != nil {
		if errors.Is(err, errConflict) {
			_ = m.refresh(ctx, m.entry(tenantID))
			return nil, false, nil
		}
		return nil, false, err
	}
	m.log.Info("key ring phase advanced", "tenant", tenantID, "transition", string(tr), "phase", string(next.Phase),
		"keys", keyIDs(next), "next_at", next.NextAt, "forced", force)
	return next, true, nil
}

func keyIDs(r *Record) []string {
	out := make([]string, len(r.Keys))
	for i, k := range r.Keys {
		out[i] = k.ID + "(" + string(k.State) + ")"
	}
	return out
}

// Advance performs the tenant's due transition now if it is due; it
// reports which transition that was and whether this call made it (with
// several replicas racing, exactly one does). Unlike Schedule it does not
// wait out the key store's health or the margin after an outage: it is
// for callers that decide that themselves.
func (m *Manager) Advance(ctx context.Context, tenantID string) (Transition, bool, error) {
	ttl, err := m.tenantTTL(ctx, tenantID)
	if err != nil {
		return "", false, err
	}
	rec, _, err := m.loadFresh(ctx, tenantID)
	if err != nil {
		return "", false, err
	}
	tm := timing{margin: m.Margin(), ttl: ttl}
	tr, _ := rec.due(tm)
	_, ok, err := m.advance(ctx, tenantID, tm, tr, false)
	return tr, ok, err
}

// KeyView is one key as the admin API shows it: never its material.
type KeyView struct {
	ID         string    `json:"id"`
	Kind       string    `json:"kind"`
	State      KeyState  `json:"state"`
	Mints      bool      `json:"mints"`
	Created    time.Time `json:"created"`
	AgeSeconds int64     `json:"ageSeconds"`
	Promoted   time.Time `json:"promoted,omitzero"`
}

// NextView is the next scheduled transition.
type NextView struct {
	Transition Transition `json:"transition"`
	At         time.Time  `json:"at"`
}

// View is a tenant's ring and rotation state as the admin API shows it.
type View struct {
	Provider                 string    `json:"provider"`
	Custody                  string    `json:"custody"`
	Phase                    Phase     `json:"phase"`
	PhaseSince               time.Time `json:"phaseSince"`
	Next                     NextView  `json:"next"`
	RotationPeriodSeconds    int64     `json:"rotationPeriodSeconds"`
	PropagationMarginSeconds float64   `json:"propagationMarginSeconds"`
	StateTTLSeconds          int64     `json:"stateTtlSeconds"`
	Keys                     []KeyView `json:"keys"`
	Generation               int64     `json:"generation"`
	UpdatedBy                string    `json:"updatedBy,omitempty"`
}

func (m *Manager) view(r *Record, ttl time.Duration) *View {
	now := m.now()
	tr, at := r.due(timing{margin: m.Margin(), ttl: ttl})
	v := &View{
		Provider:                 m.be.name(),
		Custody:                  r.Custody,
		Phase:                    r.Phase,
		PhaseSince:               r.PhaseSince,
		Next:                     NextView{Transition: tr, At: at},
		RotationPeriodSeconds:    r.PeriodSeconds,
		PropagationMarginSeconds: m.Margin().Seconds(),
		StateTTLSeconds:          int64(ttl / time.Second),
		Generation:               r.Generation,
		UpdatedBy:                r.UpdatedBy,
	}
	for i, k := range r.Keys {
		v.Keys = append(v.Keys, KeyView{
			ID: k.ID, Kind: k.Kind, State: k.State, Mints: i == 0,
			Created: k.Created, AgeSeconds: int64(now.Sub(k.Created) / time.Second), Promoted: k.Promoted,
		})
	}
	return v
}

// Show returns a tenant's ring, read afresh: ids, ages, phase and the
// next transition; never key material. It only reads: a tenant without a
// ring is ErrNoRing (its first round, or an admin's create or rotate,
// makes one), so a viewer's read never writes.
func (m *Manager) Show(ctx context.Context, tenantID string) (*View, error) {
	ttl, err := m.tenantTTL(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	rec, _, err := m.loadFresh(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	return m.view(rec, ttl), nil
}

// Create gives a tenant a fresh ring of the given custody ("" for the
// default). ErrRingExists when it has one.
func (m *Manager) Create(ctx context.Context, tenantID, custody string) (*View, error) {
	ttl, err := m.tenantTTL(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	rec, err := m.create(ctx, tenantID, custody)
	if err != nil {
		return nil, err
	}
	return m.view(rec, ttl), nil
}

// RotateNow stages a new key at once instead of at the end of the
// period; promotion and retirement then follow on the usual schedule
// (the propagation margin, then the state TTL plus the margin). A tenant
// without a ring gets one. ErrRotationInProgress when a rotation is
// already running (or another replica just started one).
func (m *Manager) RotateNow(ctx context.Context, tenantID string) (*View, error) {
	ttl, err := m.tenantTTL(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	rec, _, err := m.loadFresh(ctx, tenantID)
	if errors.Is(err, ErrNoRing) {
		return m.Create(ctx, tenantID, "")
	}
	if err != nil {
		return nil, err
	}
	if rec.Phase != PhaseSteady {
		return m.view(rec, ttl), ErrRotationInProgress
	}
	tm := timing{margin: m.Margin(), ttl: ttl}
	next, ok, err := m.advance(ctx, tenantID, tm, Stage, true)
	if err != nil {
		return nil, err
	}
	if !ok {
		v, _ := m.Show(ctx, tenantID)
		return v, ErrRotationInProgress
	}
	return m.view(next, ttl), nil
}

// Update changes the rotation period and/or the custody of future keys
// (nil leaves a setting as it is). A custody change takes effect at the
// next rotation: the new key is staged under the new custody while the
// old keys keep verifying, so switching never fails a round.
func (m *Manager) Update(ctx context.Context, tenantID string, period *time.Duration, custody *string) (*View, error) {
	ttl, err := m.tenantTTL(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	if custody != nil {
		if err := m.checkCustody(*custody); err != nil {
			return nil, err
		}
	}
	return m.retryWrite(ctx, tenantID, ttl, func(r *Record) (*Record, error) {
		n := r.clone()
		if period != nil {
			var err error
			if n, err = setPeriod(n, *period); err != nil {
				return nil, err
			}
		}
		if custody != nil {
			n.Custody = *custody
			if n.Custody == KindTransit && n.TransitKey == "" {
				n.TransitKey = m.transit.keyName(tenantID)
			}
		}
		return n, nil
	})
}

// Revoke retires keyID at once (an emergency): confirm must repeat the
// key id. Flows sealed under it get the frozen rejection from then on.
func (m *Manager) Revoke(ctx context.Context, tenantID, keyID, confirm string) (*View, error) {
	if keyID == "" || confirm != keyID {
		return nil, ErrNotConfirmed
	}
	ttl, err := m.tenantTTL(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	v, err := m.retryWrite(ctx, tenantID, ttl, func(r *Record) (*Record, error) {
		return revoke(r, keyID, m.now(), func() (Key, error) { return m.newKey(ctx, r) })
	})
	if err == nil {
		m.log.Warn("key revoked: flows sealed under it are refused", "tenant", tenantID, "key", keyID)
	}
	return v, err
}

// retryWrite applies change to the current record and writes it with
// check-and-set, re-reading and re-applying on a conflict (an admin's
// intent does not depend on which phase write won).
func (m *Manager) retryWrite(ctx context.Context, tenantID string, ttl time.Duration, change func(*Record) (*Record, error)) (*View, error) {
	for range 5 {
		rec, ver, err := m.loadOrCreate(ctx, tenantID)
		if err != nil {
			return nil, err
		}
		next, err := change(rec)
		if err != nil {
			return nil, err
		}
		if _, err := m.write(ctx, tenantID, next, ver); err != nil {
			if errors.Is(err, errConflict) {
				continue
			}
			return nil, err
		}
		return m.view(next, ttl), nil
	}
	return nil, fmt.Errorf("keys: tenant %s: the ring kept changing; try again", tenantID)
}

// Health states.
const (
	HealthOK          = "ok"
	HealthDegraded    = "degraded"
	HealthUnavailable = "unavailable"
)

// Health is the key store's state for the readiness probe.
type Health struct {
	// Status is ok; degraded (the key store does not answer: cached rings
	// are served up to the staleness limit and rotation is paused); or
	// unavailable (nothing usable: past the staleness limit, or never
	// reached).
	Status string
	// Detail says why, for the probe's answer and logs.
	Detail string
}

// Ready reports whether the replica can serve: degraded still can.
func (h Health) Ready() bool { return h.Status != HealthUnavailable }

type healthState struct {
	mu           sync.Mutex
	since        time.Time // manager start
	lastOK       time.Time
	failingSince time.Time
	// recovered is when the key store first answered, or answered again
	// after failing.
	recovered time.Time
	lastErr   string
	checked   bool
}

func (h *healthState) record(m *Manager, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := m.now()
	first := !h.checked
	h.checked = true
	if err == nil {
		if first {
			// A replica that starts may have missed phases written while
			// it was down, as may its peers if the store was down too.
			h.recovered = now
		}
		if !h.failingSince.IsZero() {
			h.recovered = now
			m.log.Info("key store reachable again: rotation resumes after the propagation margin",
				"after", now.Sub(h.failingSince).Round(time.Millisecond), "margin", m.Margin())
		}
		h.lastOK, h.failingSince, h.lastErr = now, time.Time{}, ""
		return
	}
	if h.failingSince.IsZero() {
		h.failingSince = now
		m.log.Error("key store unreachable: serving cached rings, rotation paused", "provider", m.be.name(), "err", err)
	}
	h.lastErr = err.Error()
}

// settling is how long rotation still waits after the key store came
// back (or first answered this replica): a propagation margin from then. Every replica that could
// not reach the store during the outage may have missed a phase written
// just before it (a staging, say), and only re-reads its rings once the
// store answers; a phase due during the outage must not advance before
// they have.
func (h *healthState) settling(now time.Time, margin time.Duration) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.checked {
		return margin // not yet a first answer: the wait has not begun
	}
	if h.recovered.IsZero() {
		return 0
	}
	return max(0, h.recovered.Add(margin).Sub(now))
}

// noteOK records that the key store answered (a load or a refresh), so a
// replica that loaded its rings just before an outage counts as fresh.
func (h *healthState) noteOK(now time.Time) {
	h.mu.Lock()
	if now.After(h.lastOK) {
		h.lastOK = now
	}
	h.mu.Unlock()
}

// Health reports the key store's state.
func (m *Manager) Health() Health {
	h := &m.health
	h.mu.Lock()
	defer h.mu.Unlock()
	now := m.now()
	switch {
	case !h.checked:
		if now.Sub(h.since) < m.opts.Staleness {
			return Health{Status: HealthOK, Detail: "starting"}
		}
		return Health{Status: HealthUnavailable, Detail: "the key store has not been checked"}
	case h.failingSince.IsZero():
		return Health{Status: HealthOK}
	case h.lastOK.IsZero() || now.Sub(h.lastOK) > m.opts.Staleness:
		return Health{Status: HealthUnavailable, Detail: fmt.Sprintf("the %s key store has not answered for %s (staleness limit %s): tenants fail closed",
			m.be.name(), now.Sub(h.failingSince).Round(time.Second), m.opts.Staleness)}
	default:
		return Health{Status: HealthDegraded, Detail: fmt.Sprintf("the %s key store has not answered for %s: serving cached rings until %s, rotation paused",
			m.be.name(), now.Sub(h.failingSince).Round(time.Second), h.lastOK.Add(m.opts.Staleness).UTC().Format(time.RFC3339))}
	}
}
