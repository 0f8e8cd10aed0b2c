package flows

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/opsmcp/platform/store/record"
)

// Revoker refuses a flow's next round on every replica, and cancels the
// task a flow became (the MCP endpoint's cancellation). The flow is the
// tenant's with id tenantID, which slug named when it was recorded; by
// is who cancelled.
type Revoker interface {
	CancelFlow(ctx context.Context, tenantID, slug, flowID, by string) error
}

// Service is what the admin API does with flows beyond reading the
// record: cancelling them (the record and the endpoint's revocation
// together) and watching changes.
type Service struct {
	Store   Store
	Revoker Revoker
	Watcher *Watcher

	awaiting awaitingCache
}

// Cancel cancels flows: each is revoked (its next round, on any replica,
// gets the frozen rejection) and marked cancelled in the record with the
// reason and who did it. Flows no longer awaiting input or running are
// left as they are. It reports how many it cancelled.
func (s *Service) Cancel(ctx context.Context, flows []record.Flow, reason, by string) (int, error) {
	ids := make([]string, 0, len(flows))
	for _, f := range flows {
		if f.State != record.AwaitingInput && f.State != record.Running {
			continue
		}
		if err := s.Revoker.CancelFlow(ctx, f.TenantID, f.TenantSlug, f.ID, by); err != nil {
			return 0, fmt.Errorf("revoke flow %s: %w", f.ID, err)
		}
		ids = append(ids, f.ID)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	changes, err := s.Store.Cancel(ctx, ids, reason, by)
	if err != nil {
		return 0, err
	}
	if len(changes) > 0 {
		if s.Watcher != nil {
			s.Watcher.Wake()
		}
		_ = s.Store.Notify(ctx)
	}
	return len(changes), nil
}

// Watch follows the flow changes the caller may see, after change after.
func (s *Service) Watch(ctx context.Context, after int64, visible func(tenantID string) bool) (<-chan record.Change, error) {
	return s.Watcher.Subscribe(ctx, after, visible)
}

// awaitingCache keeps the fleet-wide count of flows awaiting input for
// the metric, read at most every awaitingTTL.
type awaitingCache struct {
	mu     sync.Mutex
	at     time.Time
	counts map[string]int64
}

const awaitingTTL = 5 * time.Second

// ReportAwaiting reports, per tenant, the flows awaiting input (the
// opsmcp.flows.awaiting_input gauge), from a count at most a few seconds
// old; a failed count reports the last one.
func (s *Service) ReportAwaiting(ctx context.Context, report func(tenant string, n int64)) {
	c := &s.awaiting
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) > awaitingTTL {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		counts, err := s.Store.CountAwaiting(qctx)
		cancel()
		if err == nil {
			c.counts, c.at = counts, time.Now()
		}
	}
	for t, n := range c.counts {
		report(t, n)
	}
}
