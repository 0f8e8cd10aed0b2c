package keys

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/opsmcp/platform/store"
)

// localBackend keeps records in the platform's database (table
// key_rings), each sealed with AES-256-GCM under a key derived from the
// configured master key, with the tenant id as associated data: a row
// copied onto another tenant, or written under another master key, does
// not open, and that tenant fails closed.
type localBackend struct {
	db   *gorm.DB
	aead cipher.AEAD
}

// keyRingRow is a row of key_rings.
type keyRingRow struct {
	TenantID  string `gorm:"primaryKey"`
	Version   int64
	Sealed    string
	UpdatedAt time.Time
}

func (keyRingRow) TableName() string { return "key_rings" }

const localInfo = "opsmcp/keys/local-ring/v1"

func newLocalBackend(st *store.Store, master []byte) (*localBackend, error) {
	if len(master) < 32 {
		return nil, fmt.Errorf("keys-master-key must be at least 32 bytes of random data, base64-encoded (got %d bytes): "+
			"generate one with `openssl rand -base64 32`", len(master))
	}
	aead, err := store.DeriveAEAD(master, localInfo)
	if err != nil {
		return nil, err
	}
	return &localBackend{db: st.DB(), aead: aead}, nil
}

func (b *localBackend) name() string { return "local" }

func (b *localBackend) aad(tenantID string) []byte { return []byte(localInfo + ":" + tenantID) }

func (b *localBackend) load(ctx context.Context, tenantID string) ([]byte, int64, error) {
	var row keyRingRow
	err := b.db.WithContext(ctx).Where("tenant_id = ?", tenantID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, 0, ErrNoRing
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read key ring: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(row.Sealed)
	ns := b.aead.NonceSize()
	if err != nil || len(raw) < ns+b.aead.Overhead() {
		return nil, row.Version, malformed("stored ring is not sealed data")
	}
	pt, err := b.aead.Open(nil, raw[:ns], raw[ns:], b.aad(tenantID))
	if err != nil {
		return nil, row.Version, malformed("stored ring does not open under the master key for this tenant")
	}
	return pt, row.Version, nil
}

func (b *localBackend) version(ctx context.Context, tenantID string) (int64, error) {
	var vs []int64
	err := b.db.WithContext(ctx).Model(&keyRingRow{}).Where("tenant_id = ?", tenantID).Pluck("version", &vs).Error
	if err != nil {
		return 0, fmt.Errorf("read key ring version: %w", err)
	}
	if len(vs) == 0 {
		return 0, nil
	}
	return vs[0], nil
}

func (b *localBackend) save(ctx context.Context, tenantID string, rec []byte, cas int64) (int64, error) {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(rec)+b.aead.Overhead())
	rand.Read(nonce)
	sealed := base64.StdEncoding.EncodeToString(b.aead.Seal(nonce, nonce, rec, b.aad(tenantID)))
	now := time.Now().UTC()
	db := b.db.WithContext(ctx)
	if cas == 0 {
		err := db.Create(&keyRingRow{TenantID: tenantID, Version: 1, Sealed: sealed, UpdatedAt: now}).Error
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			return 0, errConflict
		}
		if err != nil {
			return 0, fmt.Errorf("write key ring: %w", err)
		}
		return 1, nil
	}
	res := db.Model(&keyRingRow{}).Where("tenant_id = ? AND version = ?", tenantID, cas).
		Updates(map[string]any{"version": cas + 1, "sealed": sealed, "updated_at": now})
	if res.Error != nil {
		return 0, fmt.Errorf("write key ring: %w", res.Error)
	}
	if res.RowsAffected != 1 {
		return 0, errConflict
	}
	return cas + 1, nil
}
