package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm/clause"
)

// RevokedFlow is a cancelled flow, refused until ExpiresAt.
type RevokedFlow struct {
	FlowID    string `gorm:"primaryKey"`
	TenantID  string
	RevokedAt time.Time
	ExpiresAt time.Time
}

// TableName is the revoked_flows table.
func (RevokedFlow) TableName() string { return "revoked_flows" }

// RevokeFlow records that a flow of the tenant with id tenantID is
// cancelled until expires. Revoking twice is not an error.
func (s Revocations) RevokeFlow(ctx context.Context, tenantID, flowID string, expires time.Time) error {
	row := RevokedFlow{FlowID: flowID, TenantID: tenantID, RevokedAt: time.Now().UTC(), ExpiresAt: expires.UTC()}
	if err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error; err != nil {
		return fmt.Errorf("revoke flow: %w", err)
	}
	return nil
}

// RevokedFlows lists revocations still in force, and deletes expired ones.
func (s Revocations) RevokedFlows(ctx context.Context) ([]RevokedFlow, error) {
	now := time.Now().UTC()
	db := s.db.WithContext(ctx)
	if err := db.Where("expires_at <= ?", now).Delete(&RevokedFlow{}).Error; err != nil {
		return nil, fmt.Errorf("prune revoked flows: %w", err)
	}
	var out []RevokedFlow
	if err := db.Where("expires_at > ?", now).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("read revoked flows: %w", err)
	}
	return out, nil
}
