package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// bulkRows is how many rows one INSERT of CreateCatalogues carries. The
// SQLite driver looks each parameter up in the whole argument list, in
// time quadratic in their number, so a statement stays at a couple of
// thousand of them;
// beyond a few hundred rows a statement saves no more round trips worth
// having on either dialect.
const bulkRows = 200

// CreateCatalogues inserts many tenants, each with its catalogue items,
// in one transaction of multi-row INSERTs: seeding a large platform
// (benchmarks, imports) in seconds, where CreateTenant and CreateItem
// take a transaction, and a retired-slug check or a tenant lock, per row.
// Each Catalogue's Tenant and Items are filled in as CreateTenant and
// CreateItem fill them (ids, versions, times, the items' tenant id);
// webhook secrets are sealed as CreateItem seals them. It checks no
// item quota, and the whole call fails, inserting nothing, if any slug
// is taken (ErrConflict) or belonged to a deleted tenant
// (ErrSlugRetired). Items are not validated: they must be what the
// admin API would have stored.
func (s Tenants) CreateCatalogues(ctx context.Context, cs []Catalogue) error {
	now := time.Now().UTC()
	tenants := make([]Tenant, len(cs))
	var items []Item
	slugs := make([]string, len(cs))
	for i := range cs {
		t := &cs[i].Tenant
		t.ID, t.Version, t.CatalogueVersion = newID("tn"), 1, 1
		t.CreatedAt, t.UpdatedAt = now, now
		if t.Settings == "" {
			t.Settings = "{}"
		}
		tenants[i], slugs[i] = *t, t.Slug
		for j := range cs[i].Items {
			it := &cs[i].Items[j]
			it.ID, it.TenantID, it.Version, it.CreatedAt, it.UpdatedAt = newID("ci"), t.ID, 1, now, now
			row := *it
			row.WebhookSecret = s.sealForWrite(it.ID, it.WebhookSecret)
			items = append(items, row)
		}
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for start := 0; start < len(slugs); start += bulkRows {
			batch := slugs[start:min(start+bulkRows, len(slugs))]
			var retired []string
			if err := tx.Model(&retiredSlug{}).Where("slug IN ?", batch).Limit(1).Pluck("slug", &retired).Error; err != nil {
				return fmt.Errorf("check retired slugs: %w", err)
			}
			if len(retired) > 0 {
				return fmt.Errorf("tenant %q: %w", retired[0], ErrSlugRetired)
			}
		}
		// GORM refuses to insert an empty slice.
		if len(tenants) > 0 {
			if err := tx.CreateInBatches(tenants, bulkRows).Error; err != nil {
				return conflict(err, fmt.Sprintf("create %d tenants", len(tenants)))
			}
		}
		if len(tenants) > 0 {
			due := make([]keyDue, len(tenants))
			for i, t := range tenants {
				due[i] = keyDue{TenantID: t.ID, DueAt: now}
			}
			if err := tx.CreateInBatches(due, bulkRows).Error; err != nil {
				return fmt.Errorf("schedule %d key rings: %w", len(due), err)
			}
		}
		if len(items) > 0 {
			if err := tx.CreateInBatches(items, bulkRows).Error; err != nil {
				return conflict(err, fmt.Sprintf("create %d catalogue items", len(items)))
			}
		}
		// One change for them all: replicas forget the slugs they
		// remember as missing.
		return announce(tx, s.dialect, ChangeTenants, "", "")
	})
	if err == nil {
		s.notifyChanges(ctx)
	}
	return err
}
