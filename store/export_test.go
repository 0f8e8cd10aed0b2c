package store

import (
	"context"
	"time"
)

// PruneBatch is pruneBatch's default.
var PruneBatch = pruneBatch

// SetPruneBatch makes a sweep delete n rows a statement, so a test need
// not write thousands of rows to see several.
func SetPruneBatch(n int) (restore func()) {
	old := pruneBatch
	pruneBatch = n
	return func() { pruneBatch = old }
}

// CreateMany inserts sessions in few statements, for tests and
// benchmarks that need many.
func (s LegacySessions) CreateMany(ctx context.Context, rows []LegacySession) error {
	return s.db.WithContext(ctx).CreateInBatches(rows, 500).Error
}

// CreateRelay inserts a relay message written at created.
func (s LegacySessions) CreateRelay(ctx context.Context, id, tenantID string, created time.Time) error {
	return s.db.WithContext(ctx).Create(&LegacyRelay{ID: id, TenantID: tenantID, SessionID: "s", Target: "r1", Body: "{}", CreatedAt: created.UTC()}).Error
}

// PruneExpiredSessions is the sessions' part of a sweep: the rows it
// deleted, and in how many statements.
func (s LegacySessions) PruneExpiredSessions(ctx context.Context) (rows, statements int64, err error) {
	return s.deleteInBatches(ctx, "legacy_sessions", "id", "expires_at", time.Now().UTC())
}

// StreamReports counts the rows of every replica's stream reports.
func (s LegacySessions) StreamReports(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&LegacySessionStreams{}).Count(&n).Error
	return n, err
}

// Pragma reads an integer pragma on one of the store's connections.
func (s *Store) Pragma(ctx context.Context, name string) (int, error) {
	var v int
	err := s.conn.db.WithContext(ctx).Raw("PRAGMA " + name).Scan(&v).Error
	return v, err
}
