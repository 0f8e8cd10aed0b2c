package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// keyDue is when a tenant's key ring is next due for the rotation
// scheduler.
type keyDue struct {
	TenantID string `gorm:"primaryKey"`
	DueAt    time.Time
}

// TableName is the key_schedule table.
func (keyDue) TableName() string { return "key_schedule" }

// scheduleKeys makes a tenant's key ring due at at, in tx.
func scheduleKeys(tx *gorm.DB, tenantID string, at time.Time) error {
	err := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "tenant_id"}}, DoUpdates: clause.AssignmentColumns([]string{"due_at"})}).
		Create(&keyDue{TenantID: tenantID, DueAt: at.UTC()}).Error
	if err != nil {
		return fmt.Errorf("schedule key ring: %w", err)
	}
	return nil
}

// SetKeysDue records when the tenant's key ring is next due for the
// rotation scheduler.
func (s Tenants) SetKeysDue(ctx context.Context, tenantID string, at time.Time) error {
	return scheduleKeys(s.db.WithContext(ctx), tenantID, at)
}

// KeysDue lists up to limit tenants whose key rings are due at now, the
// longest due first.
func (s Tenants) KeysDue(ctx context.Context, now time.Time, limit int) ([]Tenant, error) {
	var out []Tenant
	err := s.db.WithContext(ctx).Model(&Tenant{}).Select("tenants.*").
		Joins("JOIN key_schedule ON key_schedule.tenant_id = tenants.id").
		Where("key_schedule.due_at <= ?", now.UTC()).Order("key_schedule.due_at").Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("read key rings due: %w", err)
	}
	return out, nil
}
