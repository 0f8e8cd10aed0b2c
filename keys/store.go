package keys

import (
	"context"

	"github.com/opsmcp/platform/store"
)

// Tenants is where the manager reads which tenants exist and their state
// TTLs (store.Store's Tenants part).
type Tenants interface {
	List(ctx context.Context, after string, limit int) ([]store.Tenant, error)
	Settings(ctx context.Context, tenantID string) (string, error)
}

// RingStore keeps the local provider's sealed rings (store.Store's
// KeyRings part).
type RingStore interface {
	Get(ctx context.Context, tenantID string) (*store.KeyRing, error)
	Version(ctx context.Context, tenantID string) (int64, error)
	Save(ctx context.Context, tenantID, sealed string, cas int64) (int64, error)
}
