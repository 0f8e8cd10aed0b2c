package keys

import (
	"context"
	"time"

	"github.com/opsmcp/platform/store"
)

// Tenants is where the manager reads tenants' state TTLs and keeps when
// each ring is next due, so a scheduler pass reads only the rings due
// (store.Store's Tenants part).
type Tenants interface {
	Settings(ctx context.Context, tenantID string) (string, error)
	KeysDue(ctx context.Context, now time.Time, limit int) ([]store.Tenant, error)
	SetKeysDue(ctx context.Context, tenantID string, version int64, at time.Time) (bool, error)
	PostponeKeys(ctx context.Context, tenantID string, at time.Time) error
	ScheduleUnscheduled(ctx context.Context, now, since time.Time) (int64, error)
}

// RingStore keeps the local provider's sealed rings (store.Store's
// KeyRings part).
type RingStore interface {
	Get(ctx context.Context, tenantID string) (*store.KeyRing, error)
	Version(ctx context.Context, tenantID string) (int64, error)
	Save(ctx context.Context, tenantID, sealed string, cas int64) (int64, error)
}
