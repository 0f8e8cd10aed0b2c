package keys_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/opsmcp/platform/keys"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
)

// controlledManager is a local manager whose key store the test can slow
// down or take down. Its refresh loop is idle (an hour apart): the test
// decides when rings are re-read.
func controlledManager(t *testing.T, url string, mk []byte, c *clock) (*keys.Manager, *keys.Backend) {
	t.Helper()
	st := platformtest.Store(t, url)
	o := keys.Options{
		Provider: keys.ProviderLocal, Tenants: st.Tenants(), Rings: st.KeyRings(), MasterKey: mk, Logger: testLogger(t),
		Refresh: time.Hour, ClockSkew: 100 * time.Millisecond, Staleness: 3 * time.Hour,
		NoScheduler: true,
	}
	if c != nil {
		o.Now = c.Now
	}
	m, err := keys.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctl := keys.ControlBackendForTest(m)
	m.Start()
	t.Cleanup(m.Close)
	return m, ctl
}

// TestRoundsDuringARescuingRefreshWaitForIt: a replica receives, all at
// once, many tokens under a key it has not loaded yet (another replica
// revoked the old key). One of them re-reads the ring, slowly; the
// others must wait for that read and open under the new ring, not be
// answered from the ring it is replacing.
func TestRoundsDuringARescuingRefreshWaitForIt(t *testing.T) {
	ctx := context.Background()
	url := platformtest.SQLiteURL(t)
	mk := masterKey()
	st := platformtest.Store(t, url)
	id := addTenant(t, st, "acme", 60)
	a := localManager(t, st, mk, nil)
	b, ctl := controlledManager(t, url, mk, nil)

	stale := sealer(t, b, id, time.Minute, nil) // b's ring: the first key only
	_, k1 := seal(t, stale, id)
	if _, err := a.Revoke(ctx, id, k1, k1); err != nil {
		t.Fatal(err)
	}
	tok, k2 := seal(t, sealer(t, a, id, time.Minute, nil), id)
	if k2 == k1 {
		t.Fatalf("a still mints under the revoked key %s", k1)
	}

	ctl.Slow(300 * time.Millisecond)
	const rounds = 12
	reasons := make([]string, rounds)
	var wg sync.WaitGroup
	for i := range rounds {
		wg.Go(func() { reasons[i] = rejection(stale.Open(ctx, tok, binding(id))) })
	}
	wg.Wait()
	for i, r := range reasons {
		if r != "" {
			t.Errorf("round %d under %s, not yet loaded by this replica: rejected (%s)", i, k2, r)
		}
	}
	if n := b.Rescued(); n != rounds {
		t.Fatalf("Rescued() = %d, want %d", n, rounds)
	}

	// A round that cannot wait as long as the read takes gives up with
	// its own context, rejected, while the read goes on for the others.
	// The read is held until that round has given up: a round waiting
	// for the read instead of its context would never return.
	k3 := revokeKey(t, a, id, k2)
	tok3, _ := seal(t, sealer(t, a, id, time.Minute, nil), id)
	ctl.Slow(0)
	release := ctl.Hold()
	defer release()
	stale = sealer(t, b, id, time.Minute, nil)
	forced := make(chan string, 1)
	go func() { forced <- rejection(stale.Open(ctx, tok3, binding(id))) }() // forces the held read
	waitFor(t, "the forced ring read is running", func() bool { return keys.ForcedReadRunning(b, id) })
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := stale.Open(short, tok3, binding(id)); err == nil {
		t.Fatalf("a round under %s opened before the read that loads it ended", k3)
	}
	if !keys.ForcedReadRunning(b, id) || len(forced) != 0 {
		t.Fatal("the held read ended before the round that gave up returned")
	}
	release()
	if r := testwait.Recv(t, forced, "the round that forced the read"); r != "" {
		t.Fatalf("the round that forced the read: rejected (%s)", r)
	}

}

// rejection is "" for an opened token, else the rejection's reason.
func rejection(_ *mrtr.Claims, err error) string {
	var rej *mrtr.Rejection
	switch {
	case err == nil:
		return ""
	case errors.As(err, &rej):
		return rej.Reason
	}
	return err.Error()
}

// phase is the tenant's rotation phase, read afresh.
func phase(t *testing.T, m *keys.Manager, tenantID string) keys.Phase {
	t.Helper()
	v, err := m.Show(context.Background(), tenantID)
	if err != nil {
		t.Fatal(err)
	}
	return v.Phase
}

// schedule runs one scheduler pass.
func schedule(t *testing.T, m *keys.Manager) {
	t.Helper()
	if err := m.Schedule(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// revokeKey revokes keyID through m and returns the new minting key.
func revokeKey(t *testing.T, m *keys.Manager, tenantID, keyID string) string {
	t.Helper()
	v, err := m.Revoke(context.Background(), tenantID, keyID, keyID)
	if err != nil {
		t.Fatal(err)
	}
	return v.Keys[0].ID
}

// TestRotationWaitsAMarginAfterTheKeyStoreReturns: a promotion that came
// due while the key store was down does not happen on the first pass
// after it answers again, but a propagation margin later, so replicas
// that missed the staging during the outage have read it before anyone
// mints under the new key.
func TestRotationWaitsAMarginAfterTheKeyStoreReturns(t *testing.T) {
	ctx := context.Background()
	url := platformtest.SQLiteURL(t)
	st := platformtest.Store(t, url)
	id := addTenant(t, st, "acme", 60)
	c := newClock()
	m, ctl := controlledManager(t, url, masterKey(), c)

	if _, err := m.Codec(ctx, id); err != nil {
		t.Fatal(err)
	}
	if v, err := m.RotateNow(ctx, id); err != nil || v.Phase != keys.PhaseStaged {
		t.Fatalf("rotate now: %+v %v", v, err)
	}

	ctl.Down(true)
	keys.RefreshAllForTest(m)
	if h := m.Health(); h.Status != keys.HealthDegraded {
		t.Fatalf("health with the store down: %+v", h)
	}
	c.Add(10 * m.Margin()) // the promotion is long due
	schedule(t, m)

	ctl.Down(false)
	keys.RefreshAllForTest(m)
	if h := m.Health(); h.Status != keys.HealthOK {
		t.Fatalf("health with the store back: %+v", h)
	}
	schedule(t, m)
	if p := phase(t, m, id); p != keys.PhaseStaged {
		t.Fatalf("promoted on the first pass after the store returned (phase %s)", p)
	}
	c.Add(m.Margin() - time.Millisecond)
	schedule(t, m)
	if p := phase(t, m, id); p != keys.PhaseStaged {
		t.Fatalf("promoted before a margin had passed (phase %s)", p)
	}
	c.Add(time.Millisecond)
	schedule(t, m)
	if p := phase(t, m, id); p != keys.PhasePromoted {
		t.Fatalf("not promoted a margin after the store returned (phase %s)", p)
	}
}

// TestRefreshFailuresOfDifferentTypesInOnePass: when several tenants'
// refreshes fail in the same pass, with errors of different types, the
// replica reports the key store as failing; it does not crash.
func TestRefreshFailuresOfDifferentTypesInOnePass(t *testing.T) {
	ctx := context.Background()
	url := platformtest.SQLiteURL(t)
	st := platformtest.Store(t, url)
	m, ctl := controlledManager(t, url, masterKey(), nil)
	var ids []string
	for _, slug := range []string{"acme", "globex", "initech"} {
		id := addTenant(t, st, slug, 60)
		if _, err := m.Codec(ctx, id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	plain := errors.New("plain failure")
	ctl.FailWith(func(tenantID string) error {
		switch tenantID {
		case ids[0]:
			return plain
		case ids[1]:
			return fmt.Errorf("wrapped: %w", plain)
		}
		return &net.OpError{Op: "dial", Err: plain}
	})
	keys.RefreshAllForTest(m)
	if h := m.Health(); h.Status != keys.HealthDegraded {
		t.Fatalf("health after every tenant failed: %+v", h)
	}
}

// TestAStartingReplicaWaitsAMarginBeforeRotating: a replica advances no
// phase before the key store first answers it, and then not before a
// margin has passed, so a phase that came due before it started (perhaps
// during an outage that also kept its peers from reading the ring) waits
// until they have.
func TestAStartingReplicaWaitsAMarginBeforeRotating(t *testing.T) {
	ctx := context.Background()
	url := platformtest.SQLiteURL(t)
	st := platformtest.Store(t, url)
	id := addTenant(t, st, "acme", 60)
	c := newClock()
	mk := masterKey()
	first, _ := controlledManager(t, url, mk, c)
	if _, err := first.Codec(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := first.RotateNow(ctx, id); err != nil {
		t.Fatal(err)
	}
	c.Add(10 * first.Margin()) // the promotion is long due

	m, _ := controlledManager(t, url, mk, c) // a replica starting now
	schedule(t, m)
	if p := phase(t, m, id); p != keys.PhaseStaged {
		t.Fatalf("promoted before the key store first answered this replica (phase %s)", p)
	}
	keys.RefreshAllForTest(m)
	schedule(t, m)
	if p := phase(t, m, id); p != keys.PhaseStaged {
		t.Fatalf("promoted on the first pass after the key store first answered (phase %s)", p)
	}
	c.Add(m.Margin())
	schedule(t, m)
	if p := phase(t, m, id); p != keys.PhasePromoted {
		t.Fatalf("not promoted a margin after the key store first answered (phase %s)", p)
	}
}

// TestATenantWhoseRingCannotBeReadFailsClosedAlone: one tenant's ring
// cannot be re-read (its Transit key deleted, say) while the key store
// answers for the others. The replica stays healthy, rotation goes on
// for the others, and only that tenant fails closed once its ring is
// stale.
func TestATenantWhoseRingCannotBeReadFailsClosedAlone(t *testing.T) {
	ctx := context.Background()
	url := platformtest.SQLiteURL(t)
	st := platformtest.Store(t, url)
	bad, good := addTenant(t, st, "acme", 60), addTenant(t, st, "globex", 60)
	c := newClock()
	m, ctl := controlledManager(t, url, masterKey(), c)
	for _, id := range []string{bad, good} {
		if _, err := m.Codec(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.RotateNow(ctx, good); err != nil {
		t.Fatal(err)
	}
	ctl.FailWith(func(tenantID string) error {
		if tenantID == bad {
			return errors.New("transit key not found")
		}
		return nil
	})
	keys.RefreshAllForTest(m)
	if h := m.Health(); h.Status != keys.HealthOK {
		t.Fatalf("health with one tenant's ring unreadable: %+v", h)
	}
	c.Add(10 * m.Margin())
	schedule(t, m)
	if p := phase(t, m, good); p != keys.PhasePromoted {
		t.Fatalf("the other tenant's rotation: phase %s", p)
	}

	c.Add(3*time.Hour + time.Minute) // past the staleness limit
	keys.RefreshAllForTest(m)
	if _, err := m.Codec(ctx, bad); !errors.Is(err, keys.ErrStale) {
		t.Fatalf("the unreadable tenant past staleness: %v", err)
	}
	if _, err := m.Codec(ctx, good); err != nil {
		t.Fatalf("the other tenant: %v", err)
	}
	if h := m.Health(); h.Status != keys.HealthOK {
		t.Fatalf("health: %+v", h)
	}
}
