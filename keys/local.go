package keys

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/opsmcp/platform/store"
)

// localBackend keeps records in the platform's database (the store's
// key rings), each sealed with AES-256-GCM under a key derived from the
// configured master key, with the tenant id as associated data: a row
// copied onto another tenant, or written under another master key, does
// not open, and that tenant fails closed.
type localBackend struct {
	st   RingStore
	aead cipher.AEAD
}

const localInfo = "opsmcp/keys/local-ring/v1"

func newLocalBackend(st RingStore, master []byte) (*localBackend, error) {
	if len(master) < 32 {
		return nil, fmt.Errorf("keys-master-key must be at least 32 bytes of random data, base64-encoded (got %d bytes): "+
			"generate one with `openssl rand -base64 32`", len(master))
	}
	aead, err := store.DeriveAEAD(master, localInfo)
	if err != nil {
		return nil, err
	}
	return &localBackend{st: st, aead: aead}, nil
}

func (b *localBackend) name() string { return "local" }

func (b *localBackend) aad(tenantID string) []byte { return []byte(localInfo + ":" + tenantID) }

func (b *localBackend) load(ctx context.Context, tenantID string) ([]byte, int64, error) {
	row, err := b.st.Get(ctx, tenantID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, ErrNoRing
	}
	if err != nil {
		return nil, 0, err
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
	return b.st.Version(ctx, tenantID)
}

func (b *localBackend) save(ctx context.Context, tenantID string, rec []byte, cas int64) (int64, error) {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(rec)+b.aead.Overhead())
	rand.Read(nonce)
	sealed := base64.StdEncoding.EncodeToString(b.aead.Seal(nonce, nonce, rec, b.aad(tenantID)))
	v, err := b.st.Save(ctx, tenantID, sealed, cas)
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrVersionMismatch) {
		return 0, errConflict
	}
	return v, err
}
