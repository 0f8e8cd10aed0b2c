package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm/clause"
)

// EndedSession is an admin session ended before it expired.
type EndedSession struct {
	ID        string `gorm:"primaryKey"`
	EndedAt   time.Time
	ExpiresAt time.Time
}

// TableName is the ended_sessions table.
func (EndedSession) TableName() string { return "ended_sessions" }

// EndSession records that session id is over (until expires, when its
// cookie would stop working anyway); rows past their expiry go.
func (s Credentials) EndSession(ctx context.Context, id string, expires time.Time) error {
	now := time.Now().UTC()
	db := s.db.WithContext(ctx)
	if err := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&EndedSession{ID: id, EndedAt: now, ExpiresAt: expires.UTC()}).Error; err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	if err := db.Where("expires_at < ?", now).Delete(&EndedSession{}).Error; err != nil {
		return fmt.Errorf("prune ended sessions: %w", err)
	}
	return nil
}

// SessionEnded reports whether session id was ended.
func (s Credentials) SessionEnded(ctx context.Context, id string) (bool, error) {
	var n int64
	if err := s.db.WithContext(ctx).Model(&EndedSession{}).Where("id = ?", id).Count(&n).Error; err != nil {
		return false, fmt.Errorf("read ended sessions: %w", err)
	}
	return n > 0, nil
}
