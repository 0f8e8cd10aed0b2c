package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// AuditEntry is one admin action.
type AuditEntry struct {
	ID     string    `gorm:"primaryKey" json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	// TenantID is the tenant acted on; TenantSlug is its slug then, for
	// display (a slug can pass to a new tenant, an id never does).
	TenantID   string `json:"tenantId,omitempty"`
	TenantSlug string `json:"tenant,omitempty"`
	Object     string `json:"object,omitempty"`
	// RemoteAddr is the client's address: the connecting peer's, or,
	// when the peer is a trusted proxy, the one its X-Forwarded-For
	// reports.
	RemoteAddr string `json:"remoteAddr,omitempty"`
	// Detail is a JSON object of non-secret facts about the action.
	Detail string `json:"-"`
}

// TableName is the audit_log table.
func (AuditEntry) TableName() string { return "audit_log" }

// Write records an admin action. detail must hold no secrets.
func (s Audit) Write(ctx context.Context, e AuditEntry, detail map[string]any) error {
	e.ID = newID("au")
	if e.At.IsZero() {
		e.At = time.Now().UTC()
	}
	e.Detail = "{}"
	if len(detail) > 0 {
		b, err := json.Marshal(detail)
		if err != nil {
			return fmt.Errorf("audit detail: %w", err)
		}
		e.Detail = string(b)
	}
	if err := s.db.WithContext(ctx).Create(&e).Error; err != nil {
		return fmt.Errorf("write audit entry: %w", err)
	}
	return nil
}

// List lists entries newest first, optionally for one tenant (by
// id), before the given time (exclusive) for pagination.
func (s Audit) List(ctx context.Context, tenantID string, before time.Time, limit int) ([]AuditEntry, error) {
	q := s.db.WithContext(ctx).Order("at DESC, id DESC").Limit(limit)
	if tenantID != "" {
		q = q.Where("tenant_id = ?", tenantID)
	}
	if !before.IsZero() {
		q = q.Where("at < ?", before)
	}
	var out []AuditEntry
	if err := q.Find(&out).Error; err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return out, nil
}
