package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Tenant is one SaaS tenant. Settings is the tenant's policy as JSON,
// owned by the packages that read it.
type Tenant struct {
	ID               string `gorm:"primaryKey"`
	Slug             string
	DisplayName      string
	Disabled         bool
	Settings         string
	Version          int64
	CatalogueVersion int64
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// TableName is the tenants table.
func (Tenant) TableName() string { return "tenants" }

// Item is one catalogue entry of a tenant.
type Item struct {
	ID            string `gorm:"primaryKey"`
	TenantID      string
	Kind          string
	Name          string
	URI           *string
	Spec          string
	WebhookSecret *string
	Version       int64
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// TableName is the catalogue_items table.
func (Item) TableName() string { return "catalogue_items" }

type retiredSlug struct {
	Slug      string `gorm:"primaryKey"`
	RetiredAt time.Time
}

func (retiredSlug) TableName() string { return "retired_slugs" }

// notFound maps GORM's not-found to ErrNotFound with context.
func notFound(err error, what string) error {
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// conflict maps a unique violation to ErrConflict.
func conflict(err error, what string) error {
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return fmt.Errorf("%s: %w", what, ErrConflict)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Create inserts t, assigning its id and versions. A slug that
// belonged to a deleted tenant is refused unless reuseRetired is set, so
// no new tenant silently inherits an old one's clients.
func (s Tenants) Create(ctx context.Context, t *Tenant, reuseRetired bool) error {
	now := time.Now().UTC()
	t.ID, t.Version, t.CatalogueVersion = newID("tn"), 1, 1
	t.CreatedAt, t.UpdatedAt = now, now
	if t.Settings == "" {
		t.Settings = "{}"
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&retiredSlug{}).Where("slug = ?", t.Slug).Count(&n).Error; err != nil {
			return fmt.Errorf("check retired slugs: %w", err)
		}
		if n > 0 {
			if !reuseRetired {
				return fmt.Errorf("tenant %q: %w", t.Slug, ErrSlugRetired)
			}
			if err := tx.Where("slug = ?", t.Slug).Delete(&retiredSlug{}).Error; err != nil {
				return fmt.Errorf("release retired slug: %w", err)
			}
		}
		if err := tx.Create(t).Error; err != nil {
			return conflict(err, fmt.Sprintf("tenant %q", t.Slug))
		}
		// The scheduler gives it its key ring at once.
		if err := scheduleKeys(tx, t.ID, now); err != nil {
			return err
		}
		// A replica may remember the slug as missing.
		return announce(tx, s.dialect, ChangeCatalogue, t.ID, t.Slug)
	})
	if err == nil {
		s.notifyChanges(ctx)
	}
	return err
}

// Get returns the tenant with the given slug.
func (s Tenants) Get(ctx context.Context, slug string) (*Tenant, error) {
	var t Tenant
	if err := s.db.WithContext(ctx).Where("slug = ?", slug).Take(&t).Error; err != nil {
		return nil, notFound(err, fmt.Sprintf("tenant %q", slug))
	}
	return &t, nil
}

// IDsBySlug maps each of slugs that a tenant holds now to that
// tenant's id; slugs no tenant holds are absent.
func (s Tenants) IDsBySlug(ctx context.Context, slugs []string) (map[string]string, error) {
	out := map[string]string{}
	if len(slugs) == 0 {
		return out, nil
	}
	var rows []Tenant
	if err := s.db.WithContext(ctx).Select("id, slug").Where("slug IN ?", slugs).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("resolve tenant slugs: %w", err)
	}
	for _, t := range rows {
		out[t.Slug] = t.ID
	}
	return out, nil
}

// SlugsByID maps each of ids that is a tenant now to its slug;
// deleted tenants are absent.
func (s Tenants) SlugsByID(ctx context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []Tenant
	if err := s.db.WithContext(ctx).Select("id, slug").Where("id IN ?", ids).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("resolve tenant ids: %w", err)
	}
	for _, t := range rows {
		out[t.ID] = t.Slug
	}
	return out, nil
}

// List returns up to limit tenants ordered by slug, after the
// given slug (exclusive) for cursor pagination.
func (s Tenants) List(ctx context.Context, after string, limit int) ([]Tenant, error) {
	var out []Tenant
	err := s.db.WithContext(ctx).Where("slug > ?", after).Order("slug").Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	return out, nil
}

// Update applies mutate to the tenant and saves it if its version
// still equals ifVersion (0 skips the check). The version is bumped.
func (s Tenants) Update(ctx context.Context, slug string, ifVersion int64, mutate func(*Tenant) error) (*Tenant, error) {
	var t Tenant
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("slug = ?", slug).Take(&t).Error; err != nil {
			return notFound(err, fmt.Sprintf("tenant %q", slug))
		}
		if ifVersion != 0 && t.Version != ifVersion {
			return fmt.Errorf("tenant %q is at version %d: %w", slug, t.Version, ErrVersionMismatch)
		}
		if err := mutate(&t); err != nil {
			return err
		}
		old := t.Version
		t.Version++
		t.UpdatedAt = time.Now().UTC()
		res := tx.Model(&Tenant{}).Where("id = ? AND version = ?", t.ID, old).Updates(map[string]any{
			"display_name": t.DisplayName,
			"disabled":     t.Disabled,
			"settings":     t.Settings,
			"version":      t.Version,
			// Settings shape what the endpoint serves, so readers of the
			// catalogue version must see a change here too.
			"catalogue_version": gorm.Expr("catalogue_version + 1"),
			"updated_at":        t.UpdatedAt,
		})
		if res.Error != nil {
			return fmt.Errorf("update tenant %q: %w", slug, res.Error)
		}
		if res.RowsAffected != 1 {
			return fmt.Errorf("tenant %q changed concurrently: %w", slug, ErrVersionMismatch)
		}
		t.CatalogueVersion++
		if t.Disabled {
			// A disabled tenant's legacy sessions end with it, so they do
			// not come back if it is enabled again.
			if _, err := endLegacySessions(tx, t.ID, "tenant disabled"); err != nil {
				return err
			}
		}
		return announce(tx, s.dialect, ChangeCatalogue, t.ID, t.Slug)
	})
	if err != nil {
		return nil, err
	}
	s.notifyChanges(ctx)
	return &t, nil
}

// Delete removes a tenant and its catalogue and retires its slug.
func (s Tenants) Delete(ctx context.Context, slug string, ifVersion int64) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var t Tenant
		if err := tx.Where("slug = ?", slug).Take(&t).Error; err != nil {
			return notFound(err, fmt.Sprintf("tenant %q", slug))
		}
		if ifVersion != 0 && t.Version != ifVersion {
			return fmt.Errorf("tenant %q is at version %d: %w", slug, t.Version, ErrVersionMismatch)
		}
		if err := tx.Where("tenant_id = ?", t.ID).Delete(&Item{}).Error; err != nil {
			return fmt.Errorf("delete catalogue of %q: %w", slug, err)
		}
		if err := tx.Where("id = ?", t.ID).Delete(&Tenant{}).Error; err != nil {
			return fmt.Errorf("delete tenant %q: %w", slug, err)
		}
		if err := tx.Where("tenant_id = ?", t.ID).Delete(&keyDue{}).Error; err != nil {
			return fmt.Errorf("unschedule key ring of %q: %w", slug, err)
		}
		if err := tx.Create(&retiredSlug{Slug: slug, RetiredAt: time.Now().UTC()}).Error; err != nil {
			return fmt.Errorf("retire slug %q: %w", slug, err)
		}
		return announce(tx, s.dialect, ChangeCatalogue, t.ID, t.Slug)
	})
	if err == nil {
		s.notifyChanges(ctx)
	}
	return err
}

// TenantVersion is a tenant's catalogue version, the cheap marker a
// replica compares with its cached catalogue.
type TenantVersion struct {
	ID               string
	Slug             string
	CatalogueVersion int64
}

// versionsBatch is how many slugs one statement of VersionsOf names.
const versionsBatch = 500

// VersionsOf reads the catalogue versions of the tenants holding slugs,
// a few hundred slugs a statement; slugs no tenant holds are absent. A
// replica's rare full check reads the tenants it caches this way, so its
// cost follows what it caches, not the registry. It scans rows itself:
// GORM's reflective scan added about 40% to such reads.
func (s Tenants) VersionsOf(ctx context.Context, slugs []string) ([]TenantVersion, error) {
	var out []TenantVersion
	for start := 0; start < len(slugs); start += versionsBatch {
		part := slugs[start:min(start+versionsBatch, len(slugs))]
		rows, err := s.db.WithContext(ctx).Raw(`SELECT id, slug, catalogue_version FROM tenants WHERE slug IN ?`, part).Rows()
		if err != nil {
			return nil, fmt.Errorf("read tenant versions: %w", err)
		}
		for rows.Next() {
			var v TenantVersion
			if err := rows.Scan(&v.ID, &v.Slug, &v.CatalogueVersion); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read tenant versions: %w", err)
			}
			out = append(out, v)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("read tenant versions: %w", err)
		}
	}
	return out, nil
}

// Settings reads the stored settings document of the tenant with id
// tenantID (package tenant parses it).
func (s Tenants) Settings(ctx context.Context, tenantID string) (string, error) {
	var settings []string
	err := s.db.WithContext(ctx).Model(&Tenant{}).Where("id = ?", tenantID).Pluck("settings", &settings).Error
	if err != nil {
		return "", fmt.Errorf("read tenant settings: %w", err)
	}
	if len(settings) == 0 {
		return "", fmt.Errorf("tenant %s: %w", tenantID, ErrNotFound)
	}
	return settings[0], nil
}

// SettingsMentioning reads the settings documents that mention key, by
// tenant id: the few tenants that set a rare setting, found without
// reading every tenant's (package tenant parses them; a document that
// mentions key only in a value is read and parsed all the same).
func (s Tenants) SettingsMentioning(ctx context.Context, key string) (map[string]string, error) {
	var rows []struct{ ID, Settings string }
	err := s.db.WithContext(ctx).Model(&Tenant{}).Select("id, settings").
		Where("settings LIKE ?", "%"+`"`+key+`"`+"%").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("read tenant settings: %w", err)
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Settings
	}
	return out, nil
}
