package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Get is a tenant's key ring record as the local keys provider keeps
// it: sealed by that provider (the store never sees key material in the
// clear), versioned for check-and-set writes.
type KeyRing struct {
	TenantID  string `gorm:"primaryKey"`
	Version   int64
	Sealed    string
	UpdatedAt time.Time
}

// TableName is the key_rings table.
func (KeyRing) TableName() string { return "key_rings" }

// Get reads a tenant's sealed key ring; ErrNotFound when it has none.
func (s KeyRings) Get(ctx context.Context, tenantID string) (*KeyRing, error) {
	var row KeyRing
	err := s.db.WithContext(ctx).Where("tenant_id = ?", tenantID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read key ring: %w", err)
	}
	return &row, nil
}

// Version reads the version of a tenant's key ring record without
// the record: 0 when it has none.
func (s KeyRings) Version(ctx context.Context, tenantID string) (int64, error) {
	var vs []int64
	err := s.db.WithContext(ctx).Model(&KeyRing{}).Where("tenant_id = ?", tenantID).Pluck("version", &vs).Error
	if err != nil {
		return 0, fmt.Errorf("read key ring version: %w", err)
	}
	if len(vs) == 0 {
		return 0, nil
	}
	return vs[0], nil
}

// Save writes a tenant's sealed key ring if its stored version is
// still cas (0: the tenant has no ring yet) and returns the new version.
// A lost race is ErrVersionMismatch (ErrConflict when creating).
func (s KeyRings) Save(ctx context.Context, tenantID, sealed string, cas int64) (int64, error) {
	now := time.Now().UTC()
	db := s.db.WithContext(ctx)
	if cas == 0 {
		err := db.Create(&KeyRing{TenantID: tenantID, Version: 1, Sealed: sealed, UpdatedAt: now}).Error
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			return 0, ErrConflict
		}
		if err != nil {
			return 0, fmt.Errorf("write key ring: %w", err)
		}
		return 1, nil
	}
	res := db.Model(&KeyRing{}).Where("tenant_id = ? AND version = ?", tenantID, cas).
		Updates(map[string]any{"version": cas + 1, "sealed": sealed, "updated_at": now})
	if res.Error != nil {
		return 0, fmt.Errorf("write key ring: %w", res.Error)
	}
	if res.RowsAffected != 1 {
		return 0, ErrVersionMismatch
	}
	return cas + 1, nil
}
