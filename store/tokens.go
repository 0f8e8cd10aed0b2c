package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
)

// APIToken is an admin API token; only its hash is stored.
type APIToken struct {
	ID   string `gorm:"primaryKey" json:"id"`
	Name string `json:"name"`
	Hash string `json:"-"`
	Role string `json:"role"`
	// Tenants is a JSON array of the slugs named when the token was made,
	// kept for display only: grants are TenantIDs.
	Tenants string `json:"-"`
	// TenantIDs are the tenants a tenant-admin token may touch, by id. A
	// deleted tenant leaves the list, and a new tenant given its slug
	// never joins it.
	TenantIDs []string   `gorm:"-" json:"-"`
	CreatedBy string     `json:"createdBy"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt time.Time  `json:"expiresAt"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
}

// TableName is the api_tokens table.
func (APIToken) TableName() string { return "api_tokens" }

// apiTokenTenant grants a token one tenant.
type apiTokenTenant struct {
	TokenID  string `gorm:"primaryKey"`
	TenantID string `gorm:"primaryKey"`
}

func (apiTokenTenant) TableName() string { return "api_token_tenants" }

// UnknownSlugError says which slug of a list no tenant holds.
type UnknownSlugError struct {
	Index int
	Slug  string
}

func (e *UnknownSlugError) Error() string {
	return fmt.Sprintf("tenant %q: %s", e.Slug, ErrNotFound)
}

// Unwrap makes the error an ErrNotFound.
func (e *UnknownSlugError) Unwrap() error { return ErrNotFound }

// CreateAPIToken stores a token (its hash), assigns its id, and grants it
// the tenants holding slugs now, resolved in the same transaction; a slug
// no tenant holds is an *UnknownSlugError and nothing is stored.
func (s Credentials) CreateAPIToken(ctx context.Context, t *APIToken, slugs []string) error {
	t.ID = newID("tok")
	t.CreatedAt = time.Now().UTC()
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var ids []string
		for i, slug := range slugs {
			var found []string
			if err := tx.Model(&Tenant{}).Where("slug = ?", slug).Pluck("id", &found).Error; err != nil {
				return fmt.Errorf("resolve tenant %q: %w", slug, err)
			}
			if len(found) == 0 {
				return &UnknownSlugError{Index: i, Slug: slug}
			}
			if !slices.Contains(ids, found[0]) {
				ids = append(ids, found[0])
			}
		}
		if err := tx.Create(t).Error; err != nil {
			return conflict(err, "api token")
		}
		for _, id := range ids {
			if err := tx.Create(&apiTokenTenant{TokenID: t.ID, TenantID: id}).Error; err != nil {
				return fmt.Errorf("grant api token: %w", err)
			}
		}
		t.TenantIDs = ids
		return nil
	})
}

// APITokenByHash finds a live token (not revoked, not expired) with its
// grants.
func (s Credentials) APITokenByHash(ctx context.Context, hash string) (*APIToken, error) {
	var t APIToken
	db := s.db.WithContext(ctx)
	err := db.Where("hash = ? AND revoked_at IS NULL AND expires_at > ?", hash, time.Now().UTC()).Take(&t).Error
	if err != nil {
		return nil, notFound(err, "api token")
	}
	if err := db.Model(&apiTokenTenant{}).Where("token_id = ?", t.ID).Order("tenant_id").Pluck("tenant_id", &t.TenantIDs).Error; err != nil {
		return nil, fmt.Errorf("read api token grants: %w", err)
	}
	return &t, nil
}

// ListAPITokens lists every token with its grants, newest first.
func (s Credentials) ListAPITokens(ctx context.Context) ([]APIToken, error) {
	var out []APIToken
	db := s.db.WithContext(ctx)
	if err := db.Order("created_at DESC").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list api tokens: %w", err)
	}
	var grants []apiTokenTenant
	if err := db.Order("tenant_id").Find(&grants).Error; err != nil {
		return nil, fmt.Errorf("list api token grants: %w", err)
	}
	byToken := map[string][]string{}
	for _, g := range grants {
		byToken[g.TokenID] = append(byToken[g.TokenID], g.TenantID)
	}
	for i := range out {
		out[i].TenantIDs = byToken[out[i].ID]
	}
	return out, nil
}

// RevokeAPIToken revokes a token at once.
func (s Credentials) RevokeAPIToken(ctx context.Context, id string) error {
	now := time.Now().UTC()
	res := s.db.WithContext(ctx).Model(&APIToken{}).Where("id = ? AND revoked_at IS NULL", id).Update("revoked_at", now)
	if res.Error != nil {
		return fmt.Errorf("revoke api token: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("api token %q: %w", id, ErrNotFound)
	}
	return nil
}
