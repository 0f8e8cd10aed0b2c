package auth

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// keySet is an issuer's JWKS, fetched on demand and kept: if the issuer's
// JWKS endpoint goes down, verification goes on with the keys already
// held. A token whose kid is unknown triggers a refetch at most once per
// minInterval, however many such tokens arrive, so a flood of forged kids
// cannot turn into a flood of requests to the issuer.
//
// No lock is held while a fetch waits on the network: a token whose key
// is held verifies at once while a refetch for an unknown kid hangs, and
// concurrent callers that need the same fetch share it instead of
// queueing for a lock.
type keySet struct {
	uri         string
	client      *http.Client
	minInterval time.Duration
	timeout     time.Duration
	now         func() time.Time
	algs        []jose.SignatureAlgorithm

	// generation counts changes of the key set: verified tokens remembered
	// under one generation are verified again once it moves.
	generation atomic.Uint64

	mu        sync.Mutex
	keys      map[string]jose.JSONWebKey
	print     string // thumbprints of keys, to tell a change from a refetch
	lastFetch time.Time
	fetches   int
	flight    *keyFetch // the fetch in progress, if any
}

// keyFetch is one JWKS fetch that any number of callers wait on.
type keyFetch struct{ done chan struct{} }

func newKeySet(uri string, client *http.Client, minInterval, timeout time.Duration, now func() time.Time, algs []string) *keySet {
	ks := &keySet{uri: uri, client: client, minInterval: minInterval, timeout: timeout, now: now}
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

// key finds kid, refetching the JWKS (rate-limited, shared by concurrent
// callers) when it is unknown. It waits for a fetch no longer than ctx
// allows; the fetch itself runs to its own timeout for the callers after.
func (ks *keySet) key(ctx context.Context, kid string) (jose.JSONWebKey, bool) {
	ks.mu.Lock()
	if k, ok := ks.keys[kid]; ok {
		ks.mu.Unlock()
		return k, true
	}
	f := ks.flight
	if f == nil {
		now := ks.now()
		if !ks.lastFetch.IsZero() && now.Sub(ks.lastFetch) < ks.minInterval {
			ks.mu.Unlock()
			return jose.JSONWebKey{}, false
		}
		ks.lastFetch = now
		ks.fetches++
		f = &keyFetch{done: make(chan struct{})}
		ks.flight = f
		// Detached from this caller: if it gives up, the others waiting on
		// the fetch still get its result. The fetch ends by its timeout.
		go ks.refresh(context.WithoutCancel(ctx), f)
	}
	ks.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return jose.JSONWebKey{}, false
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	k, ok := ks.keys[kid]
	return k, ok
}

// refresh fetches the JWKS and installs it when the fetch succeeds; a
// failed fetch keeps the keys held.
func (ks *keySet) refresh(ctx context.Context, f *keyFetch) {
	keys, err := ks.fetch(ctx)
	ks.mu.Lock()
	if err == nil {
		if p := thumbprints(keys); p != ks.print {
			ks.keys, ks.print = keys, p
			ks.generation.Add(1)
		}
	}
	ks.flight = nil
	ks.mu.Unlock()
	close(f.done)
}

// maxKeySetBytes caps a JWKS document; real ones are a few kilobytes.
const maxKeySetBytes = 1 << 20

func (ks *keySet) fetch(ctx context.Context) (map[string]jose.JSONWebKey, error) {
	ctx, cancel := context.WithTimeout(ctx, ks.timeout)
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
	// The client caps the body (egress.ErrTooLarge past maxKeySetBytes).
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
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

// thumbprints identifies a key set by its key ids and RFC 7638
// thumbprints, so a refetch that returns the same keys is no change.
func thumbprints(keys map[string]jose.JSONWebKey) string {
	parts := make([]string, 0, len(keys))
	for kid, k := range keys {
		tp, err := k.Thumbprint(crypto.SHA256)
		if err != nil {
			tp = []byte("?")
		}
		parts = append(parts, fmt.Sprintf("%q=%x", kid, tp))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// fetchCount reports how many JWKS requests were made (for tests).
func (ks *keySet) fetchCount() int {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.fetches
}
