package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/opsmcp/platform/store/record"
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

// ConsumeRunning is ConsumeState and the flow record's running mark of
// the round (rec, a record.EncodeRound record), in one transaction: the
// record says the tool is about to run exactly when its state is
// consumed, so a replica lost while the webhook runs leaves the flow
// running in the record, never silent. ErrConsumed writes neither.
func (s *Store) ConsumeRunning(ctx context.Context, tenantID, flowID string, round int, expires time.Time, rec []byte) error {
	first := &record.Statement{
		SQL:  "INSERT INTO consumed_states (tenant_id, flow_id, round, consumed_at, expires_at) VALUES (?, ?, ?, ?, ?)",
		Args: []any{tenantID, flowID, round, time.Now().UTC(), expires.UTC()},
	}
	_, err := s.Record().WriteEncodedAfter(ctx, first, [][]byte{rec})
	switch {
	case err == nil:
		return nil
	case uniqueViolation(err):
		return ErrConsumed
	}
	return fmt.Errorf("consume request state: %w", err)
}

// uniqueViolation reports whether err is a database's refusal of a
// duplicate consumed state (the write's first statement), in either
// dialect's words; the failure of any other statement is an error, not
// a replay.
func uniqueViolation(err error) bool {
	if !errors.Is(err, record.ErrFirst) {
		return false // a failure of the record's own writes
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "23505"
	}
	return errors.Is(err, gorm.ErrDuplicatedKey) || strings.Contains(err.Error(), "UNIQUE constraint failed")
}

// PruneConsumedStates deletes records of states that have expired (a
// replay of one is refused as expired anyway).
func (s Revocations) PruneConsumedStates(ctx context.Context, now time.Time) error {
	if err := s.db.WithContext(ctx).Where("expires_at < ?", now.UTC()).Delete(&consumedState{}).Error; err != nil {
		return fmt.Errorf("prune consumed states: %w", err)
	}
	return nil
}
