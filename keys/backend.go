package keys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	vault "github.com/hashicorp/vault/api"
)

// backend stores one record per tenant with check-and-set writes.
type backend interface {
	// name is "vault" or "local", for logs and views.
	name() string
	// load returns the stored record and its version, or ErrNoRing.
	load(ctx context.Context, tenantID string) ([]byte, int64, error)
	// version returns the stored version, 0 when there is no record: the
	// cheap check every refresh makes.
	version(ctx context.Context, tenantID string) (int64, error)
	// save writes rec if the stored version is still cas (0: only if
	// there is none) and returns the new version; errConflict otherwise.
	save(ctx context.Context, tenantID string, rec []byte, cas int64) (int64, error)
}

// ErrNoRing means a tenant has no key ring: its rounds fail closed.
var ErrNoRing = errors.New("keys: the tenant has no key ring")

// errConflict is a lost check-and-set: another writer got there first.
var errConflict = errors.New("keys: check-and-set conflict")

// kvBackend keeps records in a Vault KV v2 mount, one entry per tenant
// under the prefix.
type kvBackend struct {
	v             *vaultConn
	mount, prefix string
}

func (b *kvBackend) name() string { return "vault" }

func (b *kvBackend) path(tenantID string) string { return b.prefix + "/" + tenantID }

func (b *kvBackend) load(ctx context.Context, tenantID string) ([]byte, int64, error) {
	var s *vault.KVSecret
	err := b.v.do(ctx, func(c *vault.Client) (err error) {
		s, err = c.KVv2(b.mount).Get(ctx, b.path(tenantID))
		return err
	})
	if errors.Is(err, vault.ErrSecretNotFound) {
		return nil, 0, ErrNoRing
	}
	if err != nil {
		return nil, 0, fmt.Errorf("vault: read key ring: %w", err)
	}
	ver := int64(0)
	if s.VersionMetadata != nil {
		ver = int64(s.VersionMetadata.Version)
	}
	if s.Data == nil {
		// The latest version was deleted or destroyed: not a ring we can
		// use, and not one to silently replace.
		return nil, ver, malformed("the latest version of the entry is deleted")
	}
	raw, err := json.Marshal(s.Data)
	if err != nil {
		return nil, ver, malformed("entry data: %v", err)
	}
	return raw, ver, nil
}

func (b *kvBackend) version(ctx context.Context, tenantID string) (int64, error) {
	var s *vault.Secret
	err := b.v.do(ctx, func(c *vault.Client) (err error) {
		s, err = c.Logical().ReadWithContext(ctx, b.mount+"/metadata/"+b.path(tenantID))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("vault: read key ring metadata: %w", err)
	}
	if s == nil || s.Data == nil {
		return 0, nil
	}
	return intField(s.Data, "current_version")
}

func (b *kvBackend) save(ctx context.Context, tenantID string, rec []byte, cas int64) (int64, error) {
	var data map[string]any
	if err := json.Unmarshal(rec, &data); err != nil {
		return 0, err
	}
	var s *vault.KVSecret
	err := b.v.do(ctx, func(c *vault.Client) (err error) {
		s, err = c.KVv2(b.mount).Put(ctx, b.path(tenantID), data, vault.WithCheckAndSet(int(cas)))
		return err
	})
	if isCASError(err) {
		return 0, errConflict
	}
	if err != nil {
		return 0, fmt.Errorf("vault: write key ring: %w", err)
	}
	if s == nil || s.VersionMetadata == nil {
		return 0, errors.New("vault: write key ring: no version in the answer")
	}
	return int64(s.VersionMetadata.Version), nil
}

// isCASError recognises KV v2's answer to a stale cas.
func isCASError(err error) bool {
	var re *vault.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusBadRequest {
		return false
	}
	for _, e := range re.Errors {
		if strings.Contains(e, "check-and-set") {
			return true
		}
	}
	return false
}

// intField reads an integer from a Vault answer (json.Number, or float64
// from a client that did not ask for numbers).
func intField(data map[string]any, key string) (int64, error) {
	switch n := data[key].(type) {
	case json.Number:
		v, err := n.Int64()
		if err != nil {
			return 0, fmt.Errorf("vault: %s is %q, not an integer", key, n)
		}
		return v, nil
	case float64:
		return int64(n), nil
	}
	return 0, fmt.Errorf("vault: answer without %s", key)
}
