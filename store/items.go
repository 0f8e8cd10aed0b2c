package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// withTenant runs fn in a transaction with the tenant row loaded, and
// when bump is set and fn succeeds bumps the tenant's catalogue version
// and announces the change, so every replica's cache sees it.
func (s *conn) withTenant(ctx context.Context, slug string, bump bool, fn func(tx *gorm.DB, t *Tenant) error) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var t Tenant
		if err := tx.Where("slug = ?", slug).Take(&t).Error; err != nil {
			return notFound(err, fmt.Sprintf("tenant %q", slug))
		}
		if err := fn(tx, &t); err != nil {
			return err
		}
		if !bump {
			return nil
		}
		err := tx.Model(&Tenant{}).Where("id = ?", t.ID).
			Update("catalogue_version", gorm.Expr("catalogue_version + 1")).Error
		if err != nil {
			return fmt.Errorf("bump catalogue version of %q: %w", slug, err)
		}
		return announce(tx, s.dialect, ChangeCatalogue, t.ID, t.Slug)
	})
	if err == nil && bump {
		s.notifyChanges(ctx)
	}
	return err
}

// A CatalogueCheck checks a tenant's catalogue as a write leaves it,
// inside the write's transaction: its error undoes the write and is
// returned as it is. The links between items (a tool to its view) are
// kept whole this way: writes of one tenant's catalogue that carry a
// check are serialised on the tenant's row.
type CatalogueCheck func(v CatalogueView) error

// CatalogueView reads a tenant's catalogue inside a write.
type CatalogueView struct {
	tx       *gorm.DB
	tenantID string
}

// Resource is the tenant's static resource of that URI, nil for none.
func (v CatalogueView) Resource(uri string) (*Item, error) {
	var it Item
	err := v.tx.Where("tenant_id = ? AND kind = ? AND uri = ?", v.tenantID, "resource", uri).Take(&it).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read resource %q: %w", uri, err)
	}
	return &it, nil
}

// Items are the tenant's items of a kind, by name.
func (v CatalogueView) Items(kind string) ([]Item, error) {
	var out []Item
	if err := v.tx.Where("tenant_id = ? AND kind = ?", v.tenantID, kind).Order("name").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("read %s items: %w", kind, err)
	}
	return out, nil
}

// checked runs check on the tenant's catalogue in tx; a nil check passes.
func checked(tx *gorm.DB, t *Tenant, check CatalogueCheck) error {
	if check == nil {
		return nil
	}
	return check(CatalogueView{tx: tx, tenantID: t.ID})
}

// lockTenant takes the tenant's row for the rest of the transaction.
func lockTenant(tx *gorm.DB, t *Tenant) error {
	if err := tx.Model(&Tenant{}).Where("id = ?", t.ID).Update("catalogue_version", gorm.Expr("catalogue_version")).Error; err != nil {
		return fmt.Errorf("lock tenant %q: %w", t.Slug, err)
	}
	return nil
}

// ErrQuota means a tenant is at a limit of what it may hold.
var ErrQuota = errors.New("quota reached")

// CreateItem adds a catalogue item to the tenant, unless the tenant
// already holds limit items (0: no limit), which is ErrQuota. Creations
// for one tenant are serialised on its row (its catalogue version is
// bumped first), so concurrent ones cannot pass the limit together.
// check, when set, runs on the catalogue the creation leaves.
func (s Tenants) CreateItem(ctx context.Context, slug string, it *Item, limit int, check CatalogueCheck) error {
	now := time.Now().UTC()
	it.ID, it.Version, it.CreatedAt, it.UpdatedAt = newID("ci"), 1, now, now
	return s.withTenant(ctx, slug, true, func(tx *gorm.DB, t *Tenant) error {
		it.TenantID = t.ID
		if limit > 0 || check != nil {
			// Lock the tenant's row before counting or checking (the bump
			// that follows writes it anyway).
			if err := lockTenant(tx, t); err != nil {
				return err
			}
		}
		if limit > 0 {
			var n int64
			if err := tx.Model(&Item{}).Where("tenant_id = ?", t.ID).Count(&n).Error; err != nil {
				return fmt.Errorf("count catalogue items: %w", err)
			}
			if n >= int64(limit) {
				return fmt.Errorf("tenant %q holds %d catalogue items, its limit (max-catalogue-items): %w", slug, n, ErrQuota)
			}
		}
		row := *it
		row.WebhookSecret = s.sealForWrite(it.ID, it.WebhookSecret)
		if err := tx.Create(&row).Error; err != nil {
			return conflict(err, fmt.Sprintf("%s %q", it.Kind, it.Name))
		}
		return checked(tx, t, check)
	})
}

// GetItem returns one catalogue item by kind and name.
func (s Tenants) GetItem(ctx context.Context, slug, kind, name string) (*Item, error) {
	t, err := s.Get(ctx, slug)
	if err != nil {
		return nil, err
	}
	var it Item
	err = s.db.WithContext(ctx).Where("tenant_id = ? AND kind = ? AND name = ?", t.ID, kind, name).Take(&it).Error
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("%s %q", kind, name))
	}
	return &it, nil
}

// ListItems returns up to limit items of one kind ordered by name, after
// the given name (exclusive).
func (s Tenants) ListItems(ctx context.Context, slug, kind, after string, limit int) ([]Item, error) {
	t, err := s.Get(ctx, slug)
	if err != nil {
		return nil, err
	}
	var out []Item
	err = s.db.WithContext(ctx).Where("tenant_id = ? AND kind = ? AND name > ?", t.ID, kind, after).
		Order("name").Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("list %s items: %w", kind, err)
	}
	return out, nil
}

// UpdateItem applies mutate to an item and saves it if its version still
// equals ifVersion (0 skips the check); check, when set, runs on the
// catalogue the change leaves.
func (s Tenants) UpdateItem(ctx context.Context, slug, kind, name string, ifVersion int64, mutate func(*Item) error, check CatalogueCheck) (*Item, error) {
	var it Item
	err := s.withTenant(ctx, slug, true, func(tx *gorm.DB, t *Tenant) error {
		if check != nil {
			if err := lockTenant(tx, t); err != nil {
				return err
			}
		}
		err := tx.Where("tenant_id = ? AND kind = ? AND name = ?", t.ID, kind, name).Take(&it).Error
		if err != nil {
			return notFound(err, fmt.Sprintf("%s %q", kind, name))
		}
		if ifVersion != 0 && it.Version != ifVersion {
			return fmt.Errorf("%s %q is at version %d: %w", kind, name, it.Version, ErrVersionMismatch)
		}
		if err := mutate(&it); err != nil {
			return err
		}
		if it.Name != name {
			return fmt.Errorf("renaming is not supported: %w", ErrConflict)
		}
		old := it.Version
		it.Version++
		it.UpdatedAt = time.Now().UTC()
		res := tx.Model(&Item{}).Where("id = ? AND version = ?", it.ID, old).Updates(map[string]any{
			"uri":            it.URI,
			"spec":           it.Spec,
			"webhook_secret": s.sealForWrite(it.ID, it.WebhookSecret),
			"version":        it.Version,
			"updated_at":     it.UpdatedAt,
		})
		if res.Error != nil {
			return conflict(res.Error, fmt.Sprintf("%s %q", kind, name))
		}
		if res.RowsAffected != 1 {
			return fmt.Errorf("%s %q changed concurrently: %w", kind, name, ErrVersionMismatch)
		}
		return checked(tx, t, check)
	})
	if err != nil {
		return nil, err
	}
	return &it, nil
}

// DeleteItem removes an item; check, when set, runs on the catalogue
// the deletion leaves.
func (s Tenants) DeleteItem(ctx context.Context, slug, kind, name string, ifVersion int64, check CatalogueCheck) error {
	return s.withTenant(ctx, slug, true, func(tx *gorm.DB, t *Tenant) error {
		if check != nil {
			if err := lockTenant(tx, t); err != nil {
				return err
			}
		}
		var it Item
		err := tx.Where("tenant_id = ? AND kind = ? AND name = ?", t.ID, kind, name).Take(&it).Error
		if err != nil {
			return notFound(err, fmt.Sprintf("%s %q", kind, name))
		}
		if ifVersion != 0 && it.Version != ifVersion {
			return fmt.Errorf("%s %q is at version %d: %w", kind, name, it.Version, ErrVersionMismatch)
		}
		if err := tx.Where("id = ?", it.ID).Delete(&Item{}).Error; err != nil {
			return err
		}
		return checked(tx, t, check)
	})
}

// Catalogue is a consistent read of a tenant and all of its items.
type Catalogue struct {
	Tenant Tenant
	Items  []Item
}

// LoadCatalogue reads a tenant and its whole catalogue, webhook secrets
// opened (the one read that needs them: other reads return them as
// stored, since the admin API never shows them). The read is
// optimistic rather than a transaction (which would take SQLite's write
// lock): it is retried until the tenant's catalogue version is the same
// before and after, so the items match the version reported.
func (s Tenants) LoadCatalogue(ctx context.Context, slug string) (*Catalogue, error) {
	for attempt := 0; ; attempt++ {
		t, err := s.Get(ctx, slug)
		if err != nil {
			return nil, err
		}
		c := &Catalogue{Tenant: *t}
		err = s.db.WithContext(ctx).Where("tenant_id = ?", t.ID).Order("kind, name").Find(&c.Items).Error
		if err != nil {
			return nil, fmt.Errorf("load catalogue of %q: %w", slug, err)
		}
		if err := s.openItems(c.Items); err != nil {
			return nil, fmt.Errorf("load catalogue of %q: %w", slug, err)
		}
		after, err := s.Get(ctx, slug)
		if err != nil {
			return nil, err
		}
		if after.CatalogueVersion == t.CatalogueVersion || attempt == 4 {
			// After a few tries under constant churn, serve what was read:
			// the next poll sees the newer version and reloads.
			return c, nil
		}
	}
}

// CatalogueCounts counts every tenant's catalogue items, by tenant id and
// kind.
func (s Tenants) CatalogueCounts(ctx context.Context) (map[string]map[string]int64, error) {
	var rows []struct {
		TenantID string
		Kind     string
		N        int64
	}
	if err := s.db.WithContext(ctx).Model(&Item{}).Select("tenant_id, kind, COUNT(*) AS n").Group("tenant_id, kind").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("count catalogue items: %w", err)
	}
	out := map[string]map[string]int64{}
	for _, r := range rows {
		if out[r.TenantID] == nil {
			out[r.TenantID] = map[string]int64{}
		}
		out[r.TenantID][r.Kind] = r.N
	}
	return out, nil
}
