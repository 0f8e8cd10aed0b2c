package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/opsmcp/platform/store/internal/sqldb"
)

// Change is one entry of the change feed: something replicas cache of a
// tenant changed, and must be read again.
type Change struct {
	// Seq numbers the change in commit order across the fleet.
	Seq int64 `gorm:"primaryKey;autoIncrement:false"`
	// Kind says what changed: ChangeCatalogue, ChangeKeys or
	// ChangeTenants.
	Kind string
	// TenantID and Slug name the tenant (both empty for ChangeTenants).
	TenantID string
	Slug     string
	// At is when the change was committed, by the writer's clock.
	At time.Time
}

// TableName is the changes table.
func (Change) TableName() string { return "changes" }

// The kinds of change.
const (
	// ChangeCatalogue: a tenant was created, changed (settings, issuers,
	// disabled) or deleted, or an item of its catalogue was.
	ChangeCatalogue = "catalogue"
	// ChangeKeys: a tenant's key ring was written.
	ChangeKeys = "keys"
	// ChangeTenants: tenants were created in bulk (slugs that did not
	// exist may exist now).
	ChangeTenants = "tenants"
)

// changeSeq numbers the feed.
var changeSeq = sqldb.NewSequence(0x6f70736d63700002, "changes", "seq")

// changeChannel wakes the feed's readers: PostgreSQL's notifications
// across the fleet, in process on SQLite.
const changeChannel = "opsmcp_changes"

// announce writes a change in tx, numbered after every change committed
// before it. Writers of different tenants serialise here until they
// commit, on PostgreSQL: catalogue and key writes are rare, and numbering
// in commit order is what lets a reader resume after a number.
func announce(tx *gorm.DB, d Dialect, kind, tenantID, slug string) error {
	seq, err := changeSeq.Next(tx, d)
	if err != nil {
		return fmt.Errorf("announce change: %w", err)
	}
	c := Change{Seq: seq, Kind: kind, TenantID: tenantID, Slug: slug, At: time.Now().UTC()}
	if err := tx.Create(&c).Error; err != nil {
		return fmt.Errorf("announce change: %w", err)
	}
	return nil
}

// notifyChanges wakes the feed's readers after a commit that announced
// changes. A lost notification delays them by one poll at most.
func (s *conn) notifyChanges(ctx context.Context) {
	_ = s.shared.Notify(context.WithoutCancel(ctx), changeChannel, "")
}

// Changes is the change feed: what replicas cache of tenants, changed
// anywhere in the fleet, in commit order.
func (s *Store) Changes() Changes { return Changes{s.conn} }

// Changes is the change feed's part of the store.
type Changes struct{ *conn }

// Last is the newest change's number, 0 when there is none.
func (s Changes) Last(ctx context.Context) (int64, error) {
	var last int64
	if err := s.db.WithContext(ctx).Raw(changeSeq.LastQuery).Scan(&last).Error; err != nil {
		return 0, fmt.Errorf("read last change: %w", err)
	}
	return last, nil
}

// After reads up to limit changes after seq, in order.
func (s Changes) After(ctx context.Context, seq int64, limit int) ([]Change, error) {
	var out []Change
	if err := s.db.WithContext(ctx).Where("seq > ?", seq).Order("seq").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("read changes: %w", err)
	}
	return out, nil
}

// Listen returns a channel that receives a value whenever a change may
// have been committed (PostgreSQL notifications; this process's own
// writes on SQLite), and after the listening connection was lost and
// re-established, until ctx ends.
func (s Changes) Listen(ctx context.Context) (<-chan struct{}, error) {
	wakes, err := s.shared.Wakes(ctx, changeChannel, true)
	if err != nil {
		return nil, fmt.Errorf("listen for changes: %w", err)
	}
	return wakes, nil
}

// Announce records a change made outside the database (a key ring kept
// in Vault) and wakes the feed's readers.
func (s Changes) Announce(ctx context.Context, kind, tenantID, slug string) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return announce(tx, s.dialect, kind, tenantID, slug)
	})
	if err != nil {
		return err
	}
	s.notifyChanges(ctx)
	return nil
}

// Prune deletes the changes committed before before, in bounded
// batches, by number (a writer's clock may lag another's: deleting by
// time could leave a gap a follower would not see), and never the
// newest: numbering continues from it.
func (s Changes) Prune(ctx context.Context, before time.Time) (int64, error) {
	var cut, newest int64
	err := s.db.WithContext(ctx).Raw("SELECT COALESCE(MAX(seq), 0) FROM changes WHERE at < ?", before.UTC()).Scan(&cut).Error
	if err == nil {
		err = s.db.WithContext(ctx).Raw(changeSeq.LastQuery).Scan(&newest).Error
	}
	if err != nil {
		return 0, fmt.Errorf("prune changes: %w", err)
	}
	cut = min(cut, newest-1)
	var n int64
	for cut > 0 {
		res := s.db.WithContext(ctx).Exec("DELETE FROM changes WHERE seq IN (SELECT seq FROM changes WHERE seq <= ? ORDER BY seq LIMIT ?)", cut, pruneBatch)
		if res.Error != nil {
			return n, fmt.Errorf("prune changes: %w", res.Error)
		}
		n += res.RowsAffected
		if res.RowsAffected < int64(pruneBatch) {
			break
		}
	}
	return n, nil
}
