package endpoint

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/opsmcp/platform/mrtr"
)

// KeyRings gives each tenant the codec its request state is sealed with.
// The keys package provides Vault-backed and local rings with scheduled
// rotation; without one, every tenant shares the configured ring.
type KeyRings interface {
	// Codec returns the tenant's current codec. An error means the tenant
	// has no usable ring: its rounds fail closed.
	Codec(ctx context.Context, tenantID string) (mrtr.Codec, error)
}

// staticRings serves one ring to every tenant; bindings still keep
// tenants apart (the tenant id is sealed into every state).
type staticRings struct{ ring *mrtr.Ring }

func (s staticRings) Codec(context.Context, string) (mrtr.Codec, error) { return s.ring, nil }

// ringFromConfig builds the shared key ring from the configured secrets,
// minting key first, or a random per-process ring when none are given (a
// single replica, or a test; several replicas must share configured keys).
func ringFromConfig(secrets [][]byte) (*mrtr.Ring, error) {
	if len(secrets) == 0 {
		return mrtr.Ephemeral(), nil
	}
	ring, err := mrtr.NewRing(secrets...)
	if err != nil {
		return nil, fmt.Errorf("state-keys: %w", err)
	}
	return ring, nil
}

// revocations is the set of cancelled flows, per tenant, as of the last
// refresh (and this replica's own cancellations since).
type revocations struct {
	mu  sync.RWMutex
	set map[string]map[string]bool // tenant id -> flow ids
}

func (r *revocations) revoked(tenantID, flowID string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.set[tenantID][flowID]
}

func (r *revocations) add(tenantID, flowID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.set == nil {
		r.set = map[string]map[string]bool{}
	}
	if r.set[tenantID] == nil {
		r.set[tenantID] = map[string]bool{}
	}
	r.set[tenantID][flowID] = true
}

// replace installs the set read from the store.
func (r *revocations) replace(set map[string]map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.set = set
}

// sealing makes the sealer of each round from the tenant's key ring and
// policy.
type sealing struct {
	rings   KeyRings
	revoked *revocations
	now     func() time.Time
}

// roundSealer is the sealer of one round, made on first use and then
// reused: a round that opens a state and seals the next uses one codec
// (one ring lookup) and one policy, revocation check included.
type roundSealer struct {
	s      *sealing
	snap   *snapshot
	sealer *mrtr.Sealer
	err    error
}

func (s *sealing) forRound(snap *snapshot) roundSealer {
	return roundSealer{s: s, snap: snap}
}

// get returns the round's sealer. An error means the tenant has no
// usable key ring.
func (rs *roundSealer) get(ctx context.Context) (*mrtr.Sealer, error) {
	if rs.sealer != nil || rs.err != nil {
		return rs.sealer, rs.err
	}
	codec, err := rs.s.rings.Codec(ctx, rs.snap.tenantID)
	if err != nil {
		rs.err = fmt.Errorf("key ring: %w", err)
		return nil, rs.err
	}
	tenantID, revoked := rs.snap.tenantID, rs.s.revoked
	rs.sealer = &mrtr.Sealer{
		Codec: codec,
		Policy: mrtr.Policy{
			TTL:           rs.snap.settings.StateTTL(),
			MaxStateBytes: rs.snap.settings.StateBytes(),
			MaxRounds:     rs.snap.settings.Rounds(),
		},
		Now:     rs.s.now,
		Revoked: func(_ context.Context, flowID string) bool { return revoked.revoked(tenantID, flowID) },
	}
	return rs.sealer, nil
}
