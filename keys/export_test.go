package keys

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// RefreshForTest re-checks one tenant's ring now.
func RefreshForTest(m *Manager, tenantID string) error {
	return m.refresh(context.Background(), m.entry(tenantID))
}

// RefreshAllForTest runs one pass of the refresh loop now, health
// bookkeeping included.
func RefreshAllForTest(m *Manager) { _, _ = m.refreshAll(context.Background(), m.now()) }

// Backend is a handle on a manager's key store that a test can slow
// down or take down, to stand in for a key store that cannot be made
// slow on demand (the local provider's database answers at once).
type Backend struct {
	delay atomic.Int64
	hold  atomic.Pointer[chan struct{}]
	down  atomic.Bool
	fail  atomic.Pointer[func(tenantID string) error]
}

// Slow makes every call wait d first.
func (b *Backend) Slow(d time.Duration) { b.delay.Store(int64(d)) }

// Hold makes every call wait until release is called (or the call's
// context ends): a read that takes exactly as long as the test wants.
func (b *Backend) Hold() (release func()) {
	ch := make(chan struct{})
	b.hold.Store(&ch)
	var once sync.Once
	return func() {
		once.Do(func() {
			b.hold.CompareAndSwap(&ch, nil)
			close(ch)
		})
	}
}

// Down makes every call fail (true) or pass through (false).
func (b *Backend) Down(down bool) { b.down.Store(down) }

// FailWith makes every call for a tenant fail with fn's error, when fn
// returns one; nil ends it.
func (b *Backend) FailWith(fn func(tenantID string) error) {
	if fn == nil {
		b.fail.Store(nil)
		return
	}
	b.fail.Store(&fn)
}

// ForcedReadRunning reports whether a ring read forced by a token under
// an unknown key is in flight for the tenant.
func ForcedReadRunning(m *Manager, tenantID string) bool {
	e := m.entry(tenantID)
	e.forceMu.Lock()
	defer e.forceMu.Unlock()
	return e.forcing != nil
}

// ControlBackendForTest wraps the manager's key store before Start.
func ControlBackendForTest(m *Manager) *Backend {
	c := &controlledBackend{backend: m.be}
	m.be = c
	return &c.ctl
}

type controlledBackend struct {
	backend
	ctl Backend
}

var errTestDown = errors.New("test: key store down")

func (b *controlledBackend) gate(ctx context.Context, tenantID string) error {
	if h := b.ctl.hold.Load(); h != nil {
		select {
		case <-*h:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if d := time.Duration(b.ctl.delay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if b.ctl.down.Load() {
		return errTestDown
	}
	if fn := b.ctl.fail.Load(); fn != nil {
		return (*fn)(tenantID)
	}
	return nil
}

func (b *controlledBackend) load(ctx context.Context, tenantID string) ([]byte, int64, error) {
	if err := b.gate(ctx, tenantID); err != nil {
		return nil, 0, err
	}
	return b.backend.load(ctx, tenantID)
}

func (b *controlledBackend) version(ctx context.Context, tenantID string) (int64, error) {
	if err := b.gate(ctx, tenantID); err != nil {
		return 0, err
	}
	return b.backend.version(ctx, tenantID)
}

func (b *controlledBackend) save(ctx context.Context, tenantID string, rec []byte, cas int64) (int64, error) {
	if err := b.gate(ctx, tenantID); err != nil {
		return 0, err
	}
	return b.backend.save(ctx, tenantID, rec, cas)
}
