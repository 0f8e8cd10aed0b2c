package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// keyDue is when a tenant's key ring is next due for the rotation
// scheduler, as worked out from a version of the ring.
type keyDue struct {
	TenantID    string `gorm:"primaryKey"`
	DueAt       time.Time
	RingVersion int64
}

// TableName is the key_schedule table.
func (keyDue) TableName() string { return "key_schedule" }

// scheduleKeys makes a new tenant's key ring due at at, in tx.
func scheduleKeys(tx *gorm.DB, tenantID string, at time.Time) error {
	if err := tx.Create(&keyDue{TenantID: tenantID, DueAt: at.UTC()}).Error; err != nil {
		return fmt.Errorf("schedule key ring: %w", err)
	}
	return nil
}

// SetKeysDue records when the tenant's key ring is next due for the
// rotation scheduler, as worked out from version of the ring: a due
// time worked out from the same version replaces it, one from a later
// version stands. Nothing is recorded for a tenant that no longer
// exists.
//
// It says whether it recorded at: false when a due time from a later
// version stands (or the tenant is gone).
func (s Tenants) SetKeysDue(ctx context.Context, tenantID string, version int64, at time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Exec(`INSERT INTO key_schedule (tenant_id, due_at, ring_version)
		SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM tenants WHERE id = ?)
		ON CONFLICT (tenant_id) DO UPDATE SET due_at = excluded.due_at, ring_version = excluded.ring_version
		WHERE key_schedule.ring_version <= excluded.ring_version`, tenantID, at.UTC(), version, tenantID)
	if res.Error != nil {
		return false, fmt.Errorf("schedule key ring: %w", res.Error)
	}
	return res.RowsAffected > 0, nil
}

// PostponeKeys moves a due tenant's key ring to at, if it is still due
// before then: a ring the scheduler cannot read or advance now waits,
// rather than stay first in line before every other.
func (s Tenants) PostponeKeys(ctx context.Context, tenantID string, at time.Time) error {
	err := s.db.WithContext(ctx).Model(&keyDue{}).Where("tenant_id = ? AND due_at < ?", tenantID, at.UTC()).
		Update("due_at", at.UTC()).Error
	if err != nil {
		return fmt.Errorf("postpone key ring: %w", err)
	}
	return nil
}

// ScheduleUnscheduled makes due now the key rings of tenants created at
// since or later that have no due time (a replica of an earlier version
// created them), and says how many. A zero since looks at every tenant;
// otherwise only those created since are read (by tenants_created), so
// a look minutes apart costs what the new tenants do, not the registry.
// The window compares created_at, stored in UTC like every time here, so
// SQLite's comparison of its text form orders as the times do.
func (s Tenants) ScheduleUnscheduled(ctx context.Context, now, since time.Time) (int64, error) {
	q := `INSERT INTO key_schedule (tenant_id, due_at, ring_version)
		SELECT id, ?, 0 FROM tenants WHERE NOT EXISTS (SELECT 1 FROM key_schedule k WHERE k.tenant_id = tenants.id)`
	args := []any{now.UTC()}
	if !since.IsZero() {
		q += ` AND created_at >= ?`
		args = append(args, since.UTC())
	}
	res := s.db.WithContext(ctx).Exec(q+` ON CONFLICT (tenant_id) DO NOTHING`, args...)
	if res.Error != nil {
		return 0, fmt.Errorf("schedule key rings: %w", res.Error)
	}
	return res.RowsAffected, nil
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
