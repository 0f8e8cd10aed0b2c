package endpoint

import (
	"context"
	"time"

	"github.com/opsmcp/platform/store"
)

// The parts of the database the endpoint uses, each narrowed to the
// methods it calls. store.Store's Tenants, Revocations and Legacy parts
// satisfy them.

// CatalogueStore is where tenants and their catalogues are read.
type CatalogueStore interface {
	Get(ctx context.Context, slug string) (*store.Tenant, error)
	LoadCatalogue(ctx context.Context, slug string) (*store.Catalogue, error)
	VersionsOf(ctx context.Context, slugs []string) ([]store.TenantVersion, error)
}

// RevocationStore keeps what sealed request state may no longer do: the
// single-use states consumed, and the flows an admin cancelled.
type RevocationStore interface {
	ConsumeState(ctx context.Context, tenantID, flowID string, round int, expires time.Time) error
	PruneConsumedStates(ctx context.Context, now time.Time) error
	RevokeFlow(ctx context.Context, tenantID, flowID string, expires time.Time) error
	RevokedFlows(ctx context.Context) ([]store.RevokedFlow, error)
}

// SessionStore keeps legacy sessions, and the messages their clients
// send to a replica other than the one holding the call.
type SessionStore interface {
	Create(ctx context.Context, ls *store.LegacySession) error
	Get(ctx context.Context, tenantID, id string) (*store.LegacySession, error)
	SetLogLevel(ctx context.Context, tenantID, id, level string) error
	UpdateSubscriptions(ctx context.Context, tenantID, id string, change func(uris []string) ([]string, error)) error
	End(ctx context.Context, tenantID, id, by string) error
	EndAll(ctx context.Context, tenantID, by string) (int64, error)
	EndedSince(ctx context.Context, since time.Time) ([]store.EndedLegacySession, error)
	CountLive(ctx context.Context, tenantID, caller string) (tenant, byCaller int64, err error)
	Touch(ctx context.Context, ids []string, at time.Time) error
	EndIdle(ctx context.Context, before time.Time) (int64, error)
	Prune(ctx context.Context, maxRelayAge time.Duration) (sessions, relay int64, err error)
	// ReportStreams replaces this replica's report of its open streams
	// per session, for the admin API.
	ReportStreams(ctx context.Context, replica string, counts map[string]int, expires time.Time) error
	// Shared reports whether replicas share the database, so a message
	// may have to be relayed (PostgreSQL; never on SQLite's one node).
	Shared() bool
	Relay(ctx context.Context, tenantID, sessionID, target string, body []byte) error
	ListenRelayed(ctx context.Context) (<-chan string, error)
	TakeRelayed(ctx context.Context, targets []string) ([]store.LegacyRelay, error)
	// Calls keep the streams of bridged calls, and what a replica needs
	// to take a call over (legacyresume.go).
	WriteCall(ctx context.Context, callID, holder string, w store.CallWrite) error
	SaveAnswers(ctx context.Context, callID, holder, answers string, running bool) error
	ReleaseCall(ctx context.Context, callID, holder string) error
	EndCall(ctx context.Context, callID, holder string, expires time.Time) error
	Call(ctx context.Context, tenantID, sessionID, id string) (*store.LegacyCall, error)
	CallEvents(ctx context.Context, callID string, after int64, limit int) ([]store.LegacyEvent, error)
	RenewCalls(ctx context.Context, holder string, ids []string, until time.Time) (int64, error)
	TakeOver(ctx context.Context, callID, from, holder string, now, until time.Time) error
	PruneCalls(ctx context.Context) (int64, error)
}

// TaskStore keeps tasks: created before the client hears of them,
// changed with check-and-set writes, swept by their due time.
type TaskStore interface {
	Create(ctx context.Context, t *store.Task, limits store.TaskLimits) error
	Get(ctx context.Context, id string) (*store.Task, error)
	GetWithSecret(ctx context.Context, id string) (*store.Task, error)
	ByFlow(ctx context.Context, flowID string) (*store.Task, error)
	Update(ctx context.Context, id string, change func(*store.Task) error) (*store.Task, error)
	UpdateFrom(ctx context.Context, t *store.Task, change func(*store.Task) error) (*store.Task, error)
	Delete(ctx context.Context, id string) error
	Due(ctx context.Context, now time.Time, limit int) ([]store.Task, error)
	DeleteExpired(ctx context.Context, now time.Time, limit int) (int64, error)
	List(ctx context.Context, tenantID, principalHash, sessionID, after string, limit int) ([]store.Task, error)
	ChangedSince(ctx context.Context, tenantID, principalHash, sessionID string, since time.Time, limit int) ([]store.Task, error)
	Counts(ctx context.Context) (map[string]*store.TaskCounts, error)
}
