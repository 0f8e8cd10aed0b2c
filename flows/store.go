package flows

import (
	"context"
	"time"

	"github.com/opsmcp/platform/store/record"
)

// Store is the flow record's storage as this package uses it; the
// store's Record part (store.Store.Record) is one.
type Store interface {
	// WriteEncoded writes a batch of rounds record.EncodeRound encoded.
	WriteEncoded(ctx context.Context, recs [][]byte) (int, error)
	Ping(ctx context.Context) error
	Expire(ctx context.Context, now time.Time) ([]record.Change, error)
	// Prune deletes flows unchanged since before, or since own[tenant id]
	// for the tenants that keep theirs for a time of their own.
	Prune(ctx context.Context, before time.Time, own map[string]time.Time) (int64, error)
	Cancel(ctx context.Context, ids []string, reason, by string) ([]record.Change, error)
	CountAwaiting(ctx context.Context) (map[string]int64, error)
	// Notify and Listen tell and hear of committed changes across
	// replicas; LastChange and ChangedAfter read them in order.
	Notify(ctx context.Context) error
	Listen(ctx context.Context) (<-chan struct{}, error)
	LastChange(ctx context.Context) (int64, error)
	ChangedAfter(ctx context.Context, seq int64, limit int) ([]record.Flow, error)
}
