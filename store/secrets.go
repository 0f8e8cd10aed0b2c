package store

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// SecretBox seals webhook secrets at rest with AES-256-GCM under keys
// derived from the platform's secrets keys: the first seals, every one
// opens, so a key can be replaced without a flag day. A sealed value is
// bound to its catalogue item: copied into another row, it no longer
// opens.
type SecretBox struct {
	aeads []cipher.AEAD
}

// sealedPrefix starts every sealed value; generated secrets never do, so
// a value without it is one written before sealing was configured.
const sealedPrefix = "sealed:v1:"

// infoWebhookSecrets separates these keys from any other derived from the
// same material, should an operator reuse it.
const infoWebhookSecrets = "opsmcp webhook secrets v1"

// ErrSecretUnreadable: a sealed webhook secret that none of the
// configured keys opens (another key, or the value was altered or moved).
var ErrSecretUnreadable = errors.New("webhook secret cannot be opened with the configured secrets keys")

// DeriveAEAD returns AES-256-GCM under a key derived from secret with
// HKDF-SHA256 and info, which keeps keys derived from one secret for
// different uses apart. What the platform seals in its database uses it:
// webhook secrets here, the local provider's key rings in package keys.
func DeriveAEAD(secret []byte, info string) (cipher.AEAD, error) {
	k, err := hkdf.Key(sha256.New, secret, nil, info, 32)
	if err != nil {
		return nil, fmt.Errorf("derive a key: %w", err)
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// NewSecretBox derives the sealing keys from keys (each at least 32
// bytes), the first of which seals.
func NewSecretBox(keys ...[]byte) (*SecretBox, error) {
	if len(keys) == 0 {
		return nil, errors.New("store: no secrets key")
	}
	b := &SecretBox{}
	for i, key := range keys {
		if len(key) < 32 {
			return nil, fmt.Errorf("store: secrets key %d is %d bytes; at least 32 are needed", i+1, len(key))
		}
		aead, err := DeriveAEAD(key, infoWebhookSecrets)
		if err != nil {
			return nil, fmt.Errorf("store: secrets key %d: %w", i+1, err)
		}
		b.aeads = append(b.aeads, aead)
	}
	return b, nil
}

// Sealed reports whether a stored value is sealed.
func Sealed(stored string) bool { return strings.HasPrefix(stored, sealedPrefix) }

func (b *SecretBox) seal(itemID, plain string) string {
	a := b.aeads[0]
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(plain)+a.Overhead())
	rand.Read(nonce)
	out := a.Seal(nonce, nonce, []byte(plain), []byte(itemID))
	return sealedPrefix + base64.RawURLEncoding.EncodeToString(out)
}

// open returns the plaintext of a sealed value and whether the sealing
// key (the first) sealed it.
func (b *SecretBox) open(itemID, stored string) (plain string, current bool, err error) {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(strings.TrimPrefix(stored, sealedPrefix))
	if err != nil {
		return "", false, ErrSecretUnreadable
	}
	for i, a := range b.aeads {
		n := a.NonceSize()
		if len(raw) < n+a.Overhead() {
			break
		}
		if pt, err := a.Open(nil, raw[:n], raw[n:], []byte(itemID)); err == nil {
			return string(pt), i == 0, nil
		}
	}
	return "", false, ErrSecretUnreadable
}

// SealSecretsWith makes the store seal every webhook secret it writes and
// open the ones LoadCatalogue returns. Call it once, before serving; nil
// keeps secrets as they are written (plaintext).
func (s *Store) SealSecretsWith(b *SecretBox) { s.box = b }

// sealForWrite returns the value to store for secret when a box is
// configured: sealed under the first key. An update writes back the value
// it read, which a reseal may have replaced in the meantime; resealing it
// here keeps an old key's value from coming back. A sealed value no key
// opens is kept as it is.
func (s *conn) sealForWrite(itemID string, secret *string) *string {
	if s.box == nil || secret == nil {
		return secret
	}
	v, _, _ := s.box.reseal(itemID, *secret)
	return &v
}

// reseal returns stored (plaintext, or sealed under any key) sealed under
// the first key, and whether that changed it. A sealed value no key opens
// is returned as it is, with ErrSecretUnreadable.
func (b *SecretBox) reseal(itemID, stored string) (string, bool, error) {
	plain := stored
	if Sealed(stored) {
		pt, current, err := b.open(itemID, stored)
		if err != nil || current {
			return stored, false, err
		}
		plain = pt
	}
	return b.seal(itemID, plain), true, nil
}

// openItems replaces the sealed webhook secrets of items with their
// plaintext. An item whose secret cannot be opened fails the load: its
// tenant fails closed rather than sign with the wrong secret.
func (s *conn) openItems(items []Item) error {
	for i := range items {
		it := &items[i]
		if it.WebhookSecret == nil || !Sealed(*it.WebhookSecret) {
			continue
		}
		if s.box == nil {
			return fmt.Errorf("%s %q: its webhook secret is sealed, and no secrets key is configured: %w", it.Kind, it.Name, ErrSecretUnreadable)
		}
		plain, _, err := s.box.open(it.ID, *it.WebhookSecret)
		if err != nil {
			return fmt.Errorf("%s %q: %w", it.Kind, it.Name, err)
		}
		it.WebhookSecret = &plain
	}
	return nil
}

// Reseal is what SealStoredSecrets did.
type Reseal struct {
	// Resealed counts secrets sealed under the first key that were in
	// plaintext or under another key.
	Resealed int
	// Unreadable counts sealed secrets that no configured key opens:
	// their tenants fail closed until a key that opens them is configured.
	Unreadable int
}

// SealStoredSecrets seals every webhook secret still stored in plaintext
// (written before a secrets key was configured) or sealed under a key
// other than the first. Each row is rewritten only if it still holds the
// value read, so every replica may run it at once. The secrets themselves
// do not change, so no catalogue version moves. A value no key opens is
// left alone and counted.
func (s Tenants) SealStoredSecrets(ctx context.Context) (Reseal, error) {
	var r Reseal
	if s.box == nil {
		return r, errors.New("store: no secrets key to seal with")
	}
	var rows []Item
	if err := s.db.WithContext(ctx).Select("id", "webhook_secret").Where("webhook_secret IS NOT NULL").Find(&rows).Error; err != nil {
		return r, fmt.Errorf("read webhook secrets: %w", err)
	}
	for _, row := range rows {
		v, changed, err := s.box.reseal(row.ID, *row.WebhookSecret)
		if err != nil {
			r.Unreadable++
		}
		if !changed {
			continue
		}
		res := s.db.WithContext(ctx).Model(&Item{}).Where("id = ? AND webhook_secret = ?", row.ID, *row.WebhookSecret).
			UpdateColumn("webhook_secret", v)
		if res.Error != nil {
			return r, fmt.Errorf("seal the webhook secret of item %s: %w", row.ID, res.Error)
		}
		r.Resealed += int(res.RowsAffected)
	}
	return r, nil
}
