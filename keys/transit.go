package keys

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	vault "github.com/hashicorp/vault/api"

	"github.com/opsmcp/platform/mrtr"
)

// transitEngine drives a Vault Transit mount: one key per tenant, whose
// versions are the tenant's ring keys. Key material never leaves Vault.
type transitEngine struct {
	v      *vaultConn
	mount  string
	prefix string

	mu      sync.Mutex
	binding map[string][]byte // key id → binding key; immutable per version
}

// bindingLabel is the input of the Transit HMAC that derives a key
// version's principal-binding key.
const bindingLabel = "opsmcp/request-state/v1/binding"

func (t *transitEngine) keyName(tenantID string) string { return t.prefix + tenantID }

// transitInfo is the part of a Transit key's description we use.
type transitInfo struct {
	latest, minDecrypt, minEncrypt int
}

func (t *transitEngine) info(ctx context.Context, name string) (*transitInfo, error) {
	var s *vault.Secret
	err := t.v.do(ctx, func(c *vault.Client) (err error) {
		s, err = c.Logical().ReadWithContext(ctx, t.mount+"/keys/"+name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("vault transit: read key %s: %w", name, err)
	}
	if s == nil || s.Data == nil {
		return nil, nil
	}
	var in transitInfo
	for _, f := range []struct {
		key string
		dst *int
	}{{"latest_version", &in.latest}, {"min_decryption_version", &in.minDecrypt}, {"min_encryption_version", &in.minEncrypt}} {
		n, err := intField(s.Data, f.key)
		if err != nil {
			return nil, err
		}
		*f.dst = int(n)
	}
	return &in, nil
}

// newVersion returns a key version no record has used: the newest one
// if it is above high (a version an earlier, lost race created and no
// one ever encrypted with), else a fresh one from a rotation. It creates
// the tenant's Transit key on first use.
func (t *transitEngine) newVersion(ctx context.Context, name string, high int) (int, error) {
	in, err := t.info(ctx, name)
	if err != nil {
		return 0, err
	}
	if in == nil {
		err := t.v.do(ctx, func(c *vault.Client) error {
			_, err := c.Logical().WriteWithContext(ctx, t.mount+"/keys/"+name, map[string]any{"type": "aes256-gcm96"})
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("vault transit: create key %s: %w", name, err)
		}
		if in, err = t.info(ctx, name); err != nil {
			return 0, err
		}
		if in == nil {
			return 0, fmt.Errorf("vault transit: key %s missing after creation", name)
		}
	}
	if in.latest > high {
		return in.latest, nil
	}
	err = t.v.do(ctx, func(c *vault.Client) error {
		_, err := c.Logical().WriteWithContext(ctx, t.mount+"/keys/"+name+"/rotate", nil)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("vault transit: rotate key %s: %w", name, err)
	}
	if in, err = t.info(ctx, name); err != nil {
		return 0, err
	}
	if in == nil || in.latest <= high {
		return 0, fmt.Errorf("vault transit: key %s did not rotate", name)
	}
	return in.latest, nil
}

// enforce makes Vault itself refuse versions below minVersion for both
// encryption and decryption: done once no replica can still mint with
// them (after retirement or a revocation). Versions never go down.
func (t *transitEngine) enforce(ctx context.Context, name string, minVersion int) error {
	in, err := t.info(ctx, name)
	if err != nil || in == nil {
		return err
	}
	if in.minDecrypt >= minVersion && in.minEncrypt >= minVersion {
		return nil
	}
	body := map[string]any{
		"min_decryption_version": max(in.minDecrypt, minVersion),
		"min_encryption_version": max(in.minEncrypt, minVersion),
	}
	return t.v.do(ctx, func(c *vault.Client) error {
		_, err := c.Logical().WriteWithContext(ctx, t.mount+"/keys/"+name+"/config", body)
		return err
	})
}

// bindingKey returns the principal-binding key of one key version: the
// Transit HMAC of a fixed label under that version, computed once per
// process and cached. It never changes for a version, and like the
// version it stops being usable once Vault refuses the version.
func (t *transitEngine) bindingKey(ctx context.Context, name string, version int) ([]byte, error) {
	id := transitKeyID(name, version)
	t.mu.Lock()
	b, ok := t.binding[id]
	t.mu.Unlock()
	if ok {
		return b, nil
	}
	var s *vault.Secret
	err := t.v.do(ctx, func(c *vault.Client) (err error) {
		s, err = c.Logical().WriteWithContext(ctx, t.mount+"/hmac/"+name+"/sha2-256", map[string]any{
			"input":       base64.StdEncoding.EncodeToString([]byte(bindingLabel)),
			"key_version": version,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("vault transit: derive binding key of %s: %w", id, err)
	}
	mac, _ := s.Data["hmac"].(string)
	v, raw, ok := splitVaultValue(mac)
	if !ok || v != version {
		return nil, fmt.Errorf("vault transit: unexpected hmac answer for %s", id)
	}
	b, err = base64.StdEncoding.DecodeString(raw)
	if err != nil || len(b) < 32 {
		return nil, fmt.Errorf("vault transit: unexpected hmac answer for %s", id)
	}
	t.mu.Lock()
	if t.binding == nil {
		t.binding = map[string][]byte{}
	}
	t.binding[id] = b
	t.mu.Unlock()
	return b, nil
}

// splitVaultValue splits "vault:vN:payload".
func splitVaultValue(s string) (int, string, bool) {
	rest, ok := strings.CutPrefix(s, "vault:v")
	if !ok {
		return 0, "", false
	}
	num, payload, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, "", false
	}
	v, err := strconv.Atoi(num)
	if err != nil || v < 1 {
		return 0, "", false
	}
	return v, payload, true
}

// transitCodec seals with Transit encrypt under the tenant key's minting
// version (pinned with key_version, so a rotation in Vault never changes
// which version mints) and opens with Transit decrypt, for the versions
// in the ring only.
//
//	token = "t1." || base64url-nopad( version[4] || Transit ciphertext )
//
// The Transit ciphertext is AES-256-GCM96 with its nonce; the version is
// checked against the ring before Vault is asked. Each Seal and each
// Unseal is one request to Vault.
type transitCodec struct {
	t        *transitEngine
	name     string
	minter   int // 0 when the ring's minter is not a Transit key
	minterID string
	verify   map[int]string // version → key id
	binding  map[string][]byte
}

const transitPrefix = "t1."

// newTransitCodec builds the codec of the ring's Transit keys, deriving
// their binding keys (cached after the first time).
func newTransitCodec(ctx context.Context, t *transitEngine, name string, keys []Key) (*transitCodec, error) {
	c := &transitCodec{t: t, name: name, verify: map[int]string{}, binding: map[string][]byte{}}
	for i, k := range keys {
		if k.Kind != KindTransit {
			continue
		}
		b, err := t.bindingKey(ctx, name, k.Version)
		if err != nil {
			return nil, err
		}
		c.verify[k.Version] = k.ID
		c.binding[k.ID] = b
		if i == 0 {
			c.minter, c.minterID = k.Version, k.ID
		}
	}
	return c, nil
}

// MinterID implements mrtr.BindingKeyer.
func (c *transitCodec) MinterID() string { return c.minterID }

// BindingKey implements mrtr.BindingKeyer.
func (c *transitCodec) BindingKey(keyID string) ([]byte, bool) {
	b, ok := c.binding[keyID]
	return b, ok
}

// Seal implements mrtr.Codec.
func (c *transitCodec) Seal(ctx context.Context, plaintext []byte) (string, string, error) {
	if c.minter == 0 {
		return "", "", errors.New("keys: transit codec has no minting version")
	}
	var s *vault.Secret
	err := c.t.v.do(ctx, func(vc *vault.Client) (err error) {
		s, err = vc.Logical().WriteWithContext(ctx, c.t.mount+"/encrypt/"+c.name, map[string]any{
			"plaintext":   base64.StdEncoding.EncodeToString(plaintext),
			"key_version": c.minter,
		})
		return err
	})
	if err != nil {
		return "", "", fmt.Errorf("vault transit encrypt: %w", err)
	}
	ct, _ := s.Data["ciphertext"].(string)
	v, payload, ok := splitVaultValue(ct)
	if !ok || v != c.minter {
		return "", "", errors.New("vault transit encrypt: unexpected ciphertext")
	}
	raw, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return "", "", errors.New("vault transit encrypt: unexpected ciphertext")
	}
	buf := make([]byte, 4, 4+len(raw))
	binary.BigEndian.PutUint32(buf, uint32(v))
	buf = append(buf, raw...)
	return transitPrefix + base64.RawURLEncoding.EncodeToString(buf), c.minterID, nil
}

// Unseal implements mrtr.Codec.
func (c *transitCodec) Unseal(ctx context.Context, token string) ([]byte, string, error) {
	body, ok := strings.CutPrefix(token, transitPrefix)
	if !ok {
		return nil, "", &mrtr.Rejection{Reason: mrtr.ReasonMalformed}
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(body)
	if err != nil || len(raw) < 4+12+16 {
		return nil, "", &mrtr.Rejection{Reason: mrtr.ReasonMalformed}
	}
	v := int(binary.BigEndian.Uint32(raw))
	id, ok := c.verify[v]
	if !ok {
		return nil, "", &mrtr.Rejection{Reason: mrtr.ReasonUnknownKey}
	}
	var s *vault.Secret
	err = c.t.v.do(ctx, func(vc *vault.Client) (err error) {
		s, err = vc.Logical().WriteWithContext(ctx, c.t.mount+"/decrypt/"+c.name, map[string]any{
			"ciphertext": fmt.Sprintf("vault:v%d:%s", v, base64.StdEncoding.EncodeToString(raw[4:])),
		})
		return err
	})
	if err != nil {
		var re *vault.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusBadRequest {
			// Vault refused the ciphertext itself: tampered, or a
			// version its policy no longer allows.
			reason := mrtr.ReasonAuthentication
			if strings.Contains(strings.Join(re.Errors, " "), "disallowed by policy") {
				reason = mrtr.ReasonUnknownKey
			}
			return nil, "", &mrtr.Rejection{Reason: reason}
		}
		return nil, "", fmt.Errorf("vault transit decrypt: %w", err)
	}
	pt, _ := s.Data["plaintext"].(string)
	out, err := base64.StdEncoding.DecodeString(pt)
	if err != nil {
		return nil, "", fmt.Errorf("vault transit decrypt: unexpected plaintext encoding")
	}
	return out, id, nil
}
