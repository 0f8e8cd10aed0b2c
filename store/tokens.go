package store

import (
	"context"
	"fmt"
	"time"
)

// APIToken is an admin API token; only its hash is stored.
type APIToken struct {
	ID        string     `gorm:"primaryKey" json:"id"`
	Name      string     `json:"name"`
	Hash      string     `json:"-"`
	Role      string     `json:"role"`
	Tenants   string     `json:"-"`
	CreatedBy string     `json:"createdBy"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt time.Time  `json:"expiresAt"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
}

// TableName is the api_tokens table.
func (APIToken) TableName() string { return "api_tokens" }

// CreateAPIToken stores a token (its hash) and assigns its id.
func (s *Store) CreateAPIToken(ctx context.Context, t *APIToken) error {
	t.ID = newID("tok")
	t.CreatedAt = time.Now().UTC()
	if err := s.db.WithContext(ctx).Create(t).Error; err != nil {
		return conflict(err, "api token")
	}
	return nil
}

// APITokenByHash finds a live token: not revoked, not expired.
func (s *Store) APITokenByHash(ctx context.Context, hash string) (*APIToken, error) {
	var t APIToken
	err := s.db.WithContext(ctx).Where("hash = ? AND revoked_at IS NULL AND expires_at > ?", hash, time.Now().UTC()).Take(&t).Error
	if err != nil {
		return nil, notFound(err, "api token")
	}
	return &t, nil
}

// ListAPITokens lists every token, newest first.
func (s *Store) ListAPITokens(ctx context.Context) ([]APIToken, error) {
	var out []APIToken
	if err := s.db.WithContext(ctx).Order("created_at DESC").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list api tokens: %w", err)
	}
	return out, nil
}

// RevokeAPIToken revokes a token at once.
func (s *Store) RevokeAPIToken(ctx context.Context, id string) error {
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
