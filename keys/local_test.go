package keys_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/opsmcp/platform/keys"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
)

// clock is a settable clock shared by managers and sealers.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now().UTC().Truncate(time.Millisecond)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func addTenant(t testing.TB, st *store.Store, slug string, ttlSeconds int) string {
	t.Helper()
	tn := &store.Tenant{Slug: slug, DisplayName: slug, Settings: fmt.Sprintf(`{"stateTtlSeconds":%d}`, ttlSeconds)}
	if err := st.Tenants().Create(context.Background(), tn, false); err != nil {
		t.Fatal(err)
	}
	return tn.ID
}

func masterKey() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testLogger sends a manager's log to the test log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tlogWriter struct{ t testing.TB }

func (w tlogWriter) Write(b []byte) (int, error) {
	defer func() { _ = recover() }()
	w.t.Log(string(b))
	return len(b), nil
}

func localManager(t testing.TB, st *store.Store, mk []byte, c *clock, mut ...func(*keys.Options)) *keys.Manager {
	t.Helper()
	o := keys.Options{
		Provider: keys.ProviderLocal, Tenants: st.Tenants(), Rings: st.KeyRings(), MasterKey: mk, Logger: testLogger(t),
		Refresh: 100 * time.Millisecond, ClockSkew: 100 * time.Millisecond, Staleness: time.Hour,
		NoScheduler: true,
	}
	if c != nil {
		o.Now = c.Now
	}
	for _, f := range mut {
		f(&o)
	}
	m, err := keys.New(o)
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	t.Cleanup(m.Close)
	return m
}

// sealer is the endpoint's sealing policy over a tenant's codec.
func sealer(t testing.TB, m *keys.Manager, tenantID string, ttl time.Duration, now func() time.Time) *mrtr.Sealer {
	t.Helper()
	codec, err := m.Codec(context.Background(), tenantID)
	if err != nil {
		t.Fatalf("codec for %s: %v", tenantID, err)
	}
	return &mrtr.Sealer{Codec: codec, Policy: mrtr.Policy{TTL: ttl}, Now: now}
}

func binding(tenantID string) mrtr.Binding {
	return mrtr.Binding{Tenant: tenantID, Audience: "https://mcp.example/t/x/mcp", Method: "tools/call", Target: "order",
		Args: json.RawMessage(`{"n":1}`), Principal: `["https://idp.example","alice","app"]`}
}

func seal(t testing.TB, s *mrtr.Sealer, tenantID string) (string, string) {
	t.Helper()
	tok, kid, err := s.Seal(context.Background(), binding(tenantID), &mrtr.Claims{FlowID: "fl_test", Round: 1})
	if err != nil {
		t.Fatalf("seal: %v", err)
	}
	return tok, kid
}

// openReason opens tok and returns "" or the rejection reason.
func openReason(t testing.TB, s *mrtr.Sealer, tenantID, tok string) string {
	t.Helper()
	_, err := s.Open(context.Background(), tok, binding(tenantID))
	if err == nil {
		return ""
	}
	var rej *mrtr.Rejection
	if !errors.As(err, &rej) {
		t.Fatalf("open: %v is not a rejection", err)
	}
	return rej.Reason
}

// TestLocalRotationPhases walks a ring through a whole rotation on both
// databases, checking at every phase which key mints and which verify.
func TestLocalRotationPhases(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			ctx := context.Background()
			st := platformtest.Store(t, d.New(t))
			id := addTenant(t, st, "acme", 60)
			c := newClock()
			m := localManager(t, st, masterKey(), c)
			ttl := time.Minute

			// First use creates the ring.
			s := sealer(t, m, id, ttl, c.Now)
			tokOld, k1 := seal(t, s, id)
			v, err := m.Show(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if v.Phase != keys.PhaseSteady || len(v.Keys) != 1 || v.Keys[0].ID != k1 || v.Provider != "local" {
				t.Fatalf("new ring: %+v", v)
			}

			// Rotate now: staged, the old key still mints.
			v, err = m.RotateNow(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if v.Phase != keys.PhaseStaged || len(v.Keys) != 2 || v.Keys[0].ID != k1 || v.Keys[1].State != keys.StateStaged {
				t.Fatalf("staged: %+v", v)
			}
			k2 := v.Keys[1].ID
			if _, err := m.RotateNow(ctx, id); !errors.Is(err, keys.ErrRotationInProgress) {
				t.Fatalf("second rotate now: %v", err)
			}
			s = sealer(t, m, id, ttl, c.Now)
			if _, kid := seal(t, s, id); kid != k1 {
				t.Fatalf("staged ring minted under %s, want %s", kid, k1)
			}
			// Promotion is not due before the margin.
			if tr, ok, err := m.Advance(ctx, id); err != nil || ok || tr != keys.Promote {
				t.Fatalf("early promote: %s %v %v", tr, ok, err)
			}
			c.Add(m.Margin())
			if tr, ok, err := m.Advance(ctx, id); err != nil || !ok || tr != keys.Promote {
				t.Fatalf("promote: %s %v %v", tr, ok, err)
			}
			s = sealer(t, m, id, ttl, c.Now)
			tokNew, kid := seal(t, s, id)
			if kid != k2 {
				t.Fatalf("promoted ring minted under %s, want %s", kid, k2)
			}
			if r := openReason(t, s, id, tokOld); r != "" {
				t.Fatalf("token under the retiring key refused: %s", r)
			}
			// Retirement waits for TTL + margin after promotion.
			c.Add(ttl)
			if tr, ok, err := m.Advance(ctx, id); err != nil || ok || tr != keys.Retire {
				t.Fatalf("early retire: %s %v %v", tr, ok, err)
			}
			c.Add(m.Margin())
			if tr, ok, err := m.Advance(ctx, id); err != nil || !ok || tr != keys.Retire {
				t.Fatalf("retire: %s %v %v", tr, ok, err)
			}
			v, _ = m.Show(ctx, id)
			if v.Phase != keys.PhaseSteady || len(v.Keys) != 1 || v.Keys[0].ID != k2 {
				t.Fatalf("after retirement: %+v", v)
			}
			s = sealer(t, m, id, ttl, c.Now)
			if r := openReason(t, s, id, tokOld); r != mrtr.ReasonUnknownKey {
				t.Fatalf("token under the retired key: %q, want unknown_key", r)
			}
			_ = tokNew

			// The period moves the next staging.
			p := 2 * time.Hour
			v, err = m.Update(ctx, id, &p, nil)
			if err != nil || v.RotationPeriodSeconds != 7200 || !v.Next.At.Equal(v.Keys[0].Created.Add(p)) {
				t.Fatalf("period: %+v %v", v, err)
			}
			c.Add(p)
			if tr, ok, err := m.Advance(ctx, id); err != nil || !ok || tr != keys.Stage {
				t.Fatalf("scheduled stage after the period: %s %v %v", tr, ok, err)
			}
		})
	}
}

// TestLocalCASRaceExactlyOneAdvances: several managers (replicas) on one
// database try the same due phase at once; exactly one write wins, for
// every transition.
func TestLocalCASRaceExactlyOneAdvances(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			ctx := context.Background()
			url := d.New(t)
			st := platformtest.Store(t, url)
			id := addTenant(t, st, "acme", 1)
			c := newClock()
			mk := masterKey()
			var ms []*keys.Manager
			for range 4 {
				ms = append(ms, localManager(t, platformtest.Store(t, url), mk, c))
			}
			if _, err := ms[0].Create(ctx, id, ""); err != nil {
				t.Fatal(err)
			}
			p := time.Second
			if _, err := ms[0].Update(ctx, id, &p, nil); err != nil {
				t.Fatal(err)
			}
			for _, want := range []keys.Transition{keys.Stage, keys.Promote, keys.Retire} {
				if want == keys.Retire {
					// So that the next staging is not due right after.
					long := time.Hour
					if _, err := ms[0].Update(ctx, id, &long, nil); err != nil {
						t.Fatal(err)
					}
				}
				c.Add(2 * time.Second)
				var wg sync.WaitGroup
				var mu sync.Mutex
				won := 0
				start := make(chan struct{})
				for _, m := range ms {
					for range 3 {
						wg.Go(func() {
							<-start
							tr, ok, err := m.Advance(ctx, id)
							if err != nil {
								t.Errorf("advance: %v", err)
							}
							if ok {
								if tr != want {
									t.Errorf("advanced %s, want %s", tr, want)
								}
								mu.Lock()
								won++
								mu.Unlock()
							}
						})
					}
				}
				close(start)
				wg.Wait()
				if won != 1 {
					t.Fatalf("%s: %d callers advanced the phase, want exactly 1", want, won)
				}
			}
		})
	}
}

// TestLocalMalformedOrForeignRecordFailsClosedAlone: a record that does
// not open (corrupt, copied from another tenant, another master key) fails
// that tenant closed and no other.
func TestLocalMalformedOrForeignRecordFailsClosedAlone(t *testing.T) {
	ctx := context.Background()
	url := platformtest.SQLiteURL(t)
	st := platformtest.Store(t, url)
	a, b := addTenant(t, st, "alpha", 60), addTenant(t, st, "beta", 60)
	mk := masterKey()
	m := localManager(t, st, mk, nil)
	for _, id := range []string{a, b} {
		if _, err := m.Codec(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	tokB, _ := seal(t, sealer(t, m, b, time.Minute, nil), b)

	// Copy beta's sealed ring onto alpha: foreign.
	db := platformtest.SQL(t, url)
	sealedB := db.Strings(t, `SELECT sealed FROM key_rings WHERE tenant_id = ?`, b)[0]
	db.Exec(t, `UPDATE key_rings SET sealed = ?, version = version + 1 WHERE tenant_id = ?`, sealedB, a)
	waitFor(t, "the corrupted ring is refused as malformed", func() bool {
		_, err := m.Codec(ctx, a)
		return errors.Is(err, keys.ErrMalformed)
	})
	if r := openReason(t, sealer(t, m, b, time.Minute, nil), b, tokB); r != "" {
		t.Fatalf("beta affected: %s", r)
	}
	// Garbage.
	db.Exec(t, `UPDATE key_rings SET sealed = 'bm90IGEgcmluZw==', version = version + 1 WHERE tenant_id = ?`, a)
	waitFor(t, "the corrupted ring is refused as malformed", func() bool {
		_, err := m.Codec(ctx, a)
		return errors.Is(err, keys.ErrMalformed)
	})
	if _, err := m.Show(ctx, a); !errors.Is(err, keys.ErrMalformed) {
		t.Fatalf("show of a malformed ring: %v", err)
	}

	// Another master key opens nothing: every tenant fails closed.
	other := localManager(t, st, masterKey(), nil)
	if _, err := other.Codec(ctx, b); !errors.Is(err, keys.ErrMalformed) {
		t.Fatalf("ring under another master key: %v", err)
	}
}

func TestLocalNoRingFailsClosed(t *testing.T) {
	ctx := context.Background()
	st := platformtest.Store(t, platformtest.SQLiteURL(t))
	id := addTenant(t, st, "acme", 60)
	m := localManager(t, st, masterKey(), nil, func(o *keys.Options) { o.NoAutoCreate = true })
	_, err := m.Codec(ctx, id)
	if !errors.Is(err, keys.ErrNoRing) {
		t.Fatalf("codec without a ring: %v", err)
	}
	if _, err := m.Show(ctx, id); !errors.Is(err, keys.ErrNoRing) {
		t.Fatalf("show without a ring: %v", err)
	}
	if _, err := m.Create(ctx, id, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, id, ""); !errors.Is(err, keys.ErrRingExists) {
		t.Fatalf("second create: %v", err)
	}
	waitFor(t, "the ring is readable", func() bool { _, err := m.Codec(ctx, id); return err == nil })
}

func TestLocalRevokeIsImmediate(t *testing.T) {
	ctx := context.Background()
	st := platformtest.Store(t, platformtest.SQLiteURL(t))
	id := addTenant(t, st, "acme", 60)
	m := localManager(t, st, masterKey(), nil)
	tok, k1 := seal(t, sealer(t, m, id, time.Minute, nil), id)
	if _, err := m.Revoke(ctx, id, k1, "yes"); !errors.Is(err, keys.ErrNotConfirmed) {
		t.Fatalf("unconfirmed revoke: %v", err)
	}
	if _, err := m.Revoke(ctx, id, "deadbeef", "deadbeef"); !errors.Is(err, keys.ErrUnknownKey) {
		t.Fatalf("revoke of an unknown key: %v", err)
	}
	v, err := m.Revoke(ctx, id, k1, k1)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Keys) != 1 || v.Keys[0].ID == k1 || v.Phase != keys.PhaseSteady {
		t.Fatalf("after revocation: %+v", v)
	}
	s := sealer(t, m, id, time.Minute, nil)
	if r := openReason(t, s, id, tok); r != mrtr.ReasonUnknownKey {
		t.Fatalf("token under the revoked key: %q", r)
	}
	if _, kid := seal(t, s, id); kid != v.Keys[0].ID {
		t.Fatalf("minted under %s", kid)
	}
}

// waitFor polls cond until it holds, bounded only by the test binary's
// deadline: background work (refreshes, rotations) takes what the
// machine gives it.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, what, cond)
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

// TestAForgottenRingIsNoLongerKeptAndReadsAgainOnUse: a ring the
// endpoint forgets (its tenant evicted from the catalogue cache) leaves
// the cache, so it is neither refreshed nor reported; the tenant's next
// round reads it again, and what it sealed before still opens.
func TestAForgottenRingIsNoLongerKeptAndReadsAgainOnUse(t *testing.T) {
	st := platformtest.Store(t, platformtest.SQLiteURL(t))
	acme, other := addTenant(t, st, "acme", 60), addTenant(t, st, "other", 60)
	m := localManager(t, st, masterKey(), nil)
	tok, _ := seal(t, sealer(t, m, acme, time.Minute, time.Now), acme)
	sealer(t, m, other, time.Minute, time.Now)
	held := func() map[string]bool {
		out := map[string]bool{}
		m.Rings(func(r keys.RingStatus) { out[r.TenantID] = true })
		return out
	}
	if h := held(); !h[acme] || !h[other] {
		t.Fatalf("rings held before: %v", h)
	}
	m.Forget(acme)
	if h := held(); h[acme] || !h[other] {
		t.Fatalf("rings held after forgetting acme: %v", h)
	}
	if reason := openReason(t, sealer(t, m, acme, time.Minute, time.Now), acme, tok); reason != "" {
		t.Fatalf("a state sealed before the ring was forgotten: %s", reason)
	}
	if h := held(); !h[acme] {
		t.Fatalf("acme's ring after its next use: %v", h)
	}
}
