package keys

import (
	"errors"
	"fmt"
	"time"
)

// Transition names a phase change.
type Transition string

// The transitions, in rotation order.
const (
	Stage   Transition = "stage"   // steady → staged
	Promote Transition = "promote" // staged → promoted
	Retire  Transition = "retire"  // promoted → steady
)

// Errors of admin operations.
var (
	// ErrRotationInProgress: "rotate now" while a rotation is running.
	ErrRotationInProgress = errors.New("keys: a rotation is already in progress")
	// ErrUnknownKey: the key id is not in the tenant's ring.
	ErrUnknownKey = errors.New("keys: no such key in the tenant's ring")
	// ErrNotConfirmed: a revocation without the matching confirmation.
	ErrNotConfirmed = errors.New("keys: revocation not confirmed")
	// ErrBadPeriod: a rotation period out of range.
	ErrBadPeriod = errors.New("keys: rotation period out of range")
)

// Period bounds.
const (
	MinPeriod = time.Second
	MaxPeriod = 10 * 365 * 24 * time.Hour
)

// timing is what deciding a transition needs besides the record.
type timing struct {
	// margin is the propagation margin: refresh interval + clock skew.
	margin time.Duration
	// ttl is the tenant's current state TTL.
	ttl time.Duration
}

// Due returns the record's next transition and when it is due: staging
// at NextAt; promotion no sooner than the margin after staging; retirement
// no sooner than the state TTL (the larger of the one at promotion and
// the current one) plus the margin after promotion.
func (r *Record) due(t timing) (Transition, time.Time) {
	switch r.Phase {
	case PhaseStaged:
		return Promote, later(r.NextAt, r.PhaseSince.Add(t.margin))
	case PhasePromoted:
		ttl := max(time.Duration(r.TTLSeconds)*time.Second, t.ttl)
		return Retire, later(r.NextAt, r.PhaseSince.Add(ttl+t.margin))
	default:
		return Stage, r.NextAt
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// newRecord is a fresh steady ring of one key.
func newRecord(tenantID, custody, transitKey string, k Key, now time.Time, period time.Duration) *Record {
	k.State, k.Promoted = StateActive, now
	return &Record{
		Format:        recordFormat,
		Tenant:        tenantID,
		Custody:       custody,
		TransitKey:    transitKey,
		Keys:          []Key{k},
		Phase:         PhaseSteady,
		PhaseSince:    now,
		NextAt:        now.Add(period),
		PeriodSeconds: int64(period / time.Second),
	}
}

// stage adds k as verify-only: [active, k].
func stage(r *Record, k Key, now time.Time, t timing) *Record {
	n := r.clone()
	k.State = StateStaged
	n.Keys = append(n.Keys[:1], k)
	n.Phase, n.PhaseSince, n.NextAt = PhaseStaged, now, now.Add(t.margin)
	return n
}

// promote makes the staged key mint: [new, old].
func promote(r *Record, now time.Time, t timing) *Record {
	n := r.clone()
	old, k := n.Keys[0], n.Keys[1]
	k.State, k.Promoted = StateActive, now
	old.State = StateRetiring
	n.Keys = []Key{k, old}
	n.TTLSeconds = int64(t.ttl / time.Second)
	n.Phase, n.PhaseSince, n.NextAt = PhasePromoted, now, now.Add(t.ttl+t.margin)
	return n
}

// retire drops every retiring key: [new].
func retire(r *Record, now time.Time) *Record {
	n := r.clone()
	n.Keys = n.Keys[:1]
	n.TTLSeconds = 0
	n.Phase, n.PhaseSince = PhaseSteady, now
	n.NextAt = n.Keys[0].Created.Add(n.Period())
	return n
}

// advance applies the due transition; newKey makes the key to stage.
func advance(r *Record, tr Transition, now time.Time, t timing, newKey func() (Key, error)) (*Record, error) {
	switch tr {
	case Stage:
		k, err := newKey()
		if err != nil {
			return nil, err
		}
		return stage(r, k, now, t), nil
	case Promote:
		return promote(r, now, t), nil
	case Retire:
		return retire(r, now), nil
	}
	return nil, fmt.Errorf("keys: unknown transition %q", tr)
}

// revoke retires keyID at once. Revoking the active key makes the staged
// key (if any) or a fresh one from newKey the minter immediately, without
// waiting for propagation: tokens under the revoked key are refused from
// now on, and until every replica refreshes some rounds may be too. That
// is the price of an emergency.
func revoke(r *Record, keyID string, now time.Time, newKey func() (Key, error)) (*Record, error) {
	idx := -1
	for i, k := range r.Keys {
		if k.ID == keyID {
			idx = i
		}
	}
	if idx < 0 {
		return nil, ErrUnknownKey
	}
	n := r.clone()
	rest := append(append([]Key(nil), n.Keys[:idx]...), n.Keys[idx+1:]...)
	if idx == 0 {
		switch n.Phase {
		case PhaseStaged:
			// The staged key becomes the minter; nothing else is left.
			k := rest[0]
			k.State, k.Promoted = StateActive, now
			n.Keys = []Key{k}
		default:
			k, err := newKey()
			if err != nil {
				return nil, err
			}
			k.State, k.Promoted = StateActive, now
			n.Keys = append([]Key{k}, rest...)
		}
	} else {
		n.Keys = rest
	}
	if len(n.Keys) == 1 {
		n.Phase, n.PhaseSince, n.TTLSeconds = PhaseSteady, now, 0
		n.NextAt = n.Keys[0].Created.Add(n.Period())
	}
	// A promoted ring keeps its retirement schedule: the retiring keys
	// last minted before the earlier promotion.
	return n, nil
}

// setPeriod changes the rotation period; a steady ring's next staging
// moves with it.
func setPeriod(r *Record, period time.Duration) (*Record, error) {
	if period < MinPeriod || period > MaxPeriod {
		return nil, fmt.Errorf("%w: %s (want %s to %s)", ErrBadPeriod, period, MinPeriod, MaxPeriod)
	}
	n := r.clone()
	n.PeriodSeconds = int64(period / time.Second)
	if n.Phase == PhaseSteady {
		n.NextAt = n.Keys[0].Created.Add(period)
	}
	return n, nil
}
