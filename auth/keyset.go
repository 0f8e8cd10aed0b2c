package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// keySet is an issuer's JWKS, fetched on demand and kept: if the issuer's
// JWKS endpoint goes down, verification goes on with the keys already
// held. A token whose kid is unknown triggers a refetch at most once per
// minInterval, however many such tokens arrive, so a flood of forged kids
// cannot turn into a flood of requests to the issuer.
type keySet struct {
	uri         string
	client      *http.Client
	minInterval time.Duration
	algs        []jose.SignatureAlgorithm

	mu        sync.Mutex
	keys      map[string]jose.JSONWebKey
	lastFetch time.Time
	fetches   int
}

func newKeySet(uri string, client *http.Client, minInterval time.Duration, algs []string) *keySet {
	ks := &keySet{uri: uri, client: client, minInterval: minInterval}
	for _, a := range algs {
		ks.algs = append(ks.algs, jose.SignatureAlgorithm(a))
	}
	return ks
}

var errUnknownKey = errors.New("unknown signing key")

// VerifySignature implements oidc.KeySet.
func (ks *keySet) VerifySignature(ctx context.Context, token string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(token, ks.algs)
	if err != nil {
		return nil, fmt.Errorf("malformed or disallowed algorithm: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("want exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	key, ok := ks.key(ctx, kid)
	if !ok {
		return nil, errUnknownKey
	}
	return jws.Verify(key)
}

// key finds kid, refetching the JWKS (rate-limited) when it is unknown.
func (ks *keySet) key(ctx context.Context, kid string) (jose.JSONWebKey, bool) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if k, ok := ks.keys[kid]; ok {
		return k, true
	}
	if !ks.lastFetch.IsZero() && time.Since(ks.lastFetch) < ks.minInterval {
		return jose.JSONWebKey{}, false
	}
	ks.lastFetch = time.Now()
	if keys, err := ks.fetch(ctx); err == nil {
		ks.keys = keys
	}
	k, ok := ks.keys[kid]
	return k, ok
}

func (ks *keySet) fetch(ctx context.Context) (map[string]jose.JSONWebKey, error) {
	ks.fetches++
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ks.uri, nil)
	if err != nil {
		return nil, err
	}
	resp, err := ks.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jwks: HTTP %d", resp.StatusCode)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&set); err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	keys := make(map[string]jose.JSONWebKey, len(set.Keys))
	for _, k := range set.Keys {
		if k.IsPublic() && (k.Use == "" || k.Use == "sig") {
			keys[k.KeyID] = k
		}
	}
	return keys, nil
}

// fetchCount reports how many JWKS requests were made (for tests).
func (ks *keySet) fetchCount() int {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.fetches
}
