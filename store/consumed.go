package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// consumedState is a request state a single-use round consumed.
type consumedState struct {
	TenantID   string `gorm:"primaryKey"`
	FlowID     string `gorm:"primaryKey"`
	Round      int    `gorm:"primaryKey;autoIncrement:false"`
	ConsumedAt time.Time
	ExpiresAt  time.Time
}

func (consumedState) TableName() string { return "consumed_states" }

// ErrConsumed means a request state was consumed already.
var ErrConsumed = errors.New("request state already consumed")

// ConsumeState records that round of a tenant's flow used its request
// state, which stays valid until expires; a second consumption of the
// same round, on any replica, is ErrConsumed. The insert is the atomic
// test: exactly one of concurrent replays wins.
func (s Revocations) ConsumeState(ctx context.Context, tenantID, flowID string, round int, expires time.Time) error {
	row := consumedState{TenantID: tenantID, FlowID: flowID, Round: round, ConsumedAt: time.Now().UTC(), ExpiresAt: expires.UTC()}
	err := s.db.WithContext(ctx).Create(&row).Error
	switch {
	case errors.Is(err, gorm.ErrDuplicatedKey):
		return ErrConsumed
	case err != nil:
		return fmt.Errorf("consume request state: %w", err)
	}
	return nil
}

// PruneConsumedStates deletes records of states that have expired (a
// replay of one is refused as expired anyway).
func (s Revocations) PruneConsumedStates(ctx context.Context, now time.Time) error {
	if err := s.db.WithContext(ctx).Where("expires_at < ?", now.UTC()).Delete(&consumedState{}).Error; err != nil {
		return fmt.Errorf("prune consumed states: %w", err)
	}
	return nil
}
