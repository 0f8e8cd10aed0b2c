package api

import (
	"context"
	"time"

	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/store/record"
)

// The parts of the database the admin API reads and changes, each
// narrowed to the methods it calls. store.Store's Tenants, Record,
// Credentials, Audit and Legacy parts satisfy them.

// TenantStore keeps tenants and their catalogues.
type TenantStore interface {
	Create(ctx context.Context, t *store.Tenant, reuseRetired bool) error
	Get(ctx context.Context, slug string) (*store.Tenant, error)
	List(ctx context.Context, after string, limit int) ([]store.Tenant, error)
	Update(ctx context.Context, slug string, ifVersion int64, mutate func(*store.Tenant) error) (*store.Tenant, error)
	Delete(ctx context.Context, slug string, ifVersion int64) error
	IDsBySlug(ctx context.Context, slugs []string) (map[string]string, error)
	SlugsByID(ctx context.Context, ids []string) (map[string]string, error)
	CreateItem(ctx context.Context, slug string, it *store.Item, limit int, check store.CatalogueCheck) error
	GetItem(ctx context.Context, slug, kind, name string) (*store.Item, error)
	ListItems(ctx context.Context, slug, kind, after string, limit int) ([]store.Item, error)
	UpdateItem(ctx context.Context, slug, kind, name string, ifVersion int64, mutate func(*store.Item) error, check store.CatalogueCheck) (*store.Item, error)
	DeleteItem(ctx context.Context, slug, kind, name string, ifVersion int64, check store.CatalogueCheck) error
	CatalogueCounts(ctx context.Context) (map[string]map[string]int64, error)
}

// FlowRecord reads the flow record.
type FlowRecord interface {
	List(ctx context.Context, f record.Filter, sort record.Sort, after *record.Cursor, limit int) (*record.Page, error)
	Count(ctx context.Context, f record.Filter) (map[string]int64, error)
	IDs(ctx context.Context, f record.Filter, limit int) ([]record.Flow, error)
	Get(ctx context.Context, flowID string) (*record.Flow, []record.Round, error)
	CountsByTenant(ctx context.Context) (map[string]map[string]int64, error)
	Activity(ctx context.Context, since time.Time) (map[string]*record.Activity, error)
	TargetActivities(ctx context.Context, tenantID string, since time.Time) ([]record.TargetActivity, error)
	InFlightByKey(ctx context.Context) (map[string]map[string]int64, error)
}

// TokenStore keeps API tokens, hashed.
type TokenStore interface {
	CreateAPIToken(ctx context.Context, t *store.APIToken, slugs []string) error
	APITokenByHash(ctx context.Context, hash string) (*store.APIToken, error)
	ListAPITokens(ctx context.Context) ([]store.APIToken, error)
	RevokeAPIToken(ctx context.Context, id string) error
}

// AuditLog keeps the admin actions.
type AuditLog interface {
	Write(ctx context.Context, e store.AuditEntry, detail map[string]any) error
	List(ctx context.Context, tenantID string, before time.Time, limit int) ([]store.AuditEntry, error)
}

// SessionLister lists a tenant's legacy sessions.
type SessionLister interface {
	List(ctx context.Context, tenantID, after string, limit int) ([]store.LegacySession, error)
	CallsInFlight(ctx context.Context, tenantID string, sessionIDs []string) (map[string]int, error)
	OpenStreams(ctx context.Context, sessionIDs []string) (map[string]int, error)
}
