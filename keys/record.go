package keys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/opsmcp/platform/mrtr"
)

// recordFormat names the stored record's layout. A record with any other
// format is foreign: its tenant fails closed.
const recordFormat = "opsmcp.keyring/v1"

// Phase is where a tenant's ring stands in its rotation.
type Phase string

// The three phases.
const (
	// PhaseSteady: one active key mints and verifies.
	PhaseSteady Phase = "steady"
	// PhaseStaged: a new key verifies but does not mint yet, until every
	// replica has seen it.
	PhaseStaged Phase = "staged"
	// PhasePromoted: the new key mints; the old one still verifies until
	// no token it minted can be valid.
	PhasePromoted Phase = "promoted"
)

// KeyState is one key's role in the ring.
type KeyState string

// Key states.
const (
	StateActive   KeyState = "active"   // mints and verifies
	StateStaged   KeyState = "staged"   // verifies only; will mint
	StateRetiring KeyState = "retiring" // verifies only; will be removed
)

// Key kinds: where the key material lives.
const (
	// KindAES keys are secrets held in the record, used by mrtr's
	// built-in AES-256-GCM ring.
	KindAES = "aes"
	// KindTransit keys are versions of the tenant's Vault Transit key;
	// their material never leaves Vault.
	KindTransit = "transit"
)

// Key is one key of a tenant's ring.
type Key struct {
	ID    string   `json:"id"`
	Kind  string   `json:"kind"`
	State KeyState `json:"state"`
	// Secret is an AES key's material (≥ 32 bytes); base64 in JSON.
	Secret []byte `json:"secret,omitempty"`
	// Version is a Transit key's version.
	Version  int       `json:"version,omitempty"`
	Created  time.Time `json:"created"`
	Promoted time.Time `json:"promoted,omitzero"`
}

// Record is a tenant's ring and rotation state: the whole stored entry.
// Keys are in ring order: the active key first.
type Record struct {
	Format string `json:"format"`
	Tenant string `json:"tenant"`
	// Custody is the kind of the next key a rotation stages.
	Custody string `json:"custody"`
	// TransitKey is the tenant's Transit key name, when any key is or
	// will be a Transit key.
	TransitKey string `json:"transitKey,omitempty"`
	// TransitHigh is the highest Transit version the ring ever used; a
	// rotation never hands out a version at or below it again.
	TransitHigh int       `json:"transitHigh,omitempty"`
	Keys        []Key     `json:"keys"`
	Phase       Phase     `json:"phase"`
	PhaseSince  time.Time `json:"phaseSince"`
	// NextAt is when the next transition is due.
	NextAt time.Time `json:"nextAt"`
	// PeriodSeconds is the rotation period.
	PeriodSeconds int64 `json:"periodSeconds"`
	// TTLSeconds is the tenant's state TTL as it was at promotion; the
	// retirement waits for the larger of it and the current one.
	TTLSeconds int64 `json:"ttlSeconds,omitempty"`
	// Generation counts writes; UpdatedBy names the replica that wrote.
	Generation int64  `json:"generation"`
	UpdatedBy  string `json:"updatedBy,omitempty"`
}

// Period is the rotation period.
func (r *Record) Period() time.Duration { return time.Duration(r.PeriodSeconds) * time.Second }

// Active returns the minting key.
func (r *Record) Active() *Key { return &r.Keys[0] }

// clone returns a deep copy, so a cached record is never mutated.
func (r *Record) clone() *Record {
	c := *r
	c.Keys = make([]Key, len(r.Keys))
	for i, k := range r.Keys {
		k.Secret = bytes.Clone(k.Secret)
		c.Keys[i] = k
	}
	return &c
}

// ErrMalformed wraps every reason a stored record is refused: it is not
// ours, belongs to another tenant, or is inconsistent. Its tenant fails
// closed; no other tenant is affected.
var ErrMalformed = errors.New("keys: malformed or foreign key ring record")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

// decodeRecord parses and validates a stored record for tenantID.
func decodeRecord(raw []byte, tenantID string) (*Record, error) {
	var r Record
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, malformed("not a record: %v", err)
	}
	if err := r.validate(tenantID); err != nil {
		return nil, err
	}
	return &r, nil
}

// transitKeyID is the key id of a Transit key version.
func transitKeyID(name string, version int) string { return fmt.Sprintf("%s:v%d", name, version) }

// aesKeyID is mrtr's key id for an AES secret.
func aesKeyID(secret []byte) (string, error) {
	r, err := mrtr.NewRing(secret)
	if err != nil {
		return "", err
	}
	return r.MinterID(), nil
}

// validate checks that the record is ours, for tenantID, and consistent.
func (r *Record) validate(tenantID string) error {
	if r.Format != recordFormat {
		return malformed("format %q, want %q", r.Format, recordFormat)
	}
	if r.Tenant != tenantID {
		return malformed("record is for tenant %q, not %q", r.Tenant, tenantID)
	}
	switch r.Custody {
	case KindAES, KindTransit:
	default:
		return malformed("custody %q", r.Custody)
	}
	if r.Custody == KindTransit && r.TransitKey == "" {
		return malformed("transit custody without a transit key name")
	}
	if r.PeriodSeconds <= 0 {
		return malformed("rotation period %ds", r.PeriodSeconds)
	}
	if r.PhaseSince.IsZero() || r.NextAt.IsZero() {
		return malformed("phase times missing")
	}
	if len(r.Keys) == 0 {
		return malformed("no keys")
	}
	seen := map[string]bool{}
	count := map[KeyState]int{}
	for i, k := range r.Keys {
		if seen[k.ID] {
			return malformed("key id %q twice", k.ID)
		}
		seen[k.ID] = true
		count[k.State]++
		if k.Created.IsZero() {
			return malformed("key %d has no creation time", i)
		}
		switch k.Kind {
		case KindAES:
			if len(k.Secret) < 32 {
				return malformed("key %q: secret of %d bytes", k.ID, len(k.Secret))
			}
			id, err := aesKeyID(k.Secret)
			if err != nil || id != k.ID {
				return malformed("key %q: id does not match its secret", k.ID)
			}
		case KindTransit:
			if len(k.Secret) != 0 || k.Version < 1 || k.Version > r.TransitHigh || r.TransitKey == "" || k.ID != transitKeyID(r.TransitKey, k.Version) {
				return malformed("transit key %q is inconsistent", k.ID)
			}
		default:
			return malformed("key %q: kind %q", k.ID, k.Kind)
		}
		switch k.State {
		case StateActive, StateStaged, StateRetiring:
		default:
			return malformed("key %q: state %q", k.ID, k.State)
		}
	}
	if r.Keys[0].State != StateActive || count[StateActive] != 1 {
		return malformed("the first key must be the only active one")
	}
	switch r.Phase {
	case PhaseSteady:
		if len(r.Keys) != 1 {
			return malformed("steady phase with %d keys", len(r.Keys))
		}
	case PhaseStaged:
		if len(r.Keys) != 2 || r.Keys[1].State != StateStaged {
			return malformed("staged phase must be [active, staged]")
		}
	case PhasePromoted:
		if count[StateStaged] != 0 || count[StateRetiring] == 0 {
			return malformed("promoted phase must be [active, retiring…]")
		}
	default:
		return malformed("phase %q", r.Phase)
	}
	return nil
}
