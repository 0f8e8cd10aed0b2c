package auth

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sync"
	"time"
)

// tokenCache remembers verified tokens, so a client presenting the same
// token on every round pays for its signature check once. It is keyed by
// the SHA-256 of the whole token (the token itself is never stored) within
// a bucket per tenant, and holds what verification concluded: the
// principal, and the claims the checks that depend on the moment and the
// request need again (expiry, not-before, issued-at, audience).
//
// An entry is used only while all of these hold, and otherwise verified
// afresh:
//   - the tenant's auth settings are the ones it was verified under (a
//     fingerprint of the settings and the endpoint; a change drops the
//     tenant's bucket);
//   - its issuer's key set is the same object at the same generation (a
//     refetch that changed the keys, or the issuer forgotten and
//     rediscovered, moves it);
//   - the token has not expired and the cache's TTL since verification
//     has not passed.
//
// The cache holds at most size entries. When full, a tenant holding at
// least its fair share (size divided by the tenants with entries) evicts
// its own least recently used entry, and any other tenant evicts the
// least recently used entry overall: a tenant whose issuer mints floods of
// valid tokens churns its own share, not the others'.
type tokenCache struct {
	ttl  time.Duration
	size int

	mu      sync.Mutex
	all     list.List // of *tokenEntry, most recently used first
	tenants map[string]*tokenBucket
}

type tokenBucket struct {
	tenant  string
	config  [sha256.Size]byte // fingerprint of the settings its entries were verified under
	entries map[[sha256.Size]byte]*tokenEntry
	lru     list.List // of *tokenEntry, most recently used first
}

type tokenEntry struct {
	key    [sha256.Size]byte
	bucket *tokenBucket
	inAll  *list.Element
	inLRU  *list.Element

	issuer     *issuerEntry
	state      *issuerState
	generation uint64
	until      time.Time // the cache's own bound: verification time + ttl
	expiry     time.Time
	notBefore  time.Time // zero when the token has none
	issuedAt   time.Time
	audience   []string
	principal  Principal
}

func newTokenCache(ttl time.Duration, size int) *tokenCache {
	return &tokenCache{ttl: ttl, size: size, tenants: map[string]*tokenBucket{}}
}

// get returns the entry for token key under the tenant's settings
// fingerprint, if it is still good at now. The entry is shared: callers
// copy what they return.
func (c *tokenCache) get(tenant string, config, key [sha256.Size]byte, now time.Time) (*tokenEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.tenants[tenant]
	if b == nil {
		return nil, false
	}
	if b.config != config {
		// The tenant's auth settings changed: nothing verified under the
		// old ones is used again.
		c.dropBucket(b)
		return nil, false
	}
	e := b.entries[key]
	if e == nil {
		return nil, false
	}
	if !now.Before(e.until) || e.issuer.current() != e.state || e.state.keys.generation.Load() != e.generation {
		c.remove(e)
		return nil, false
	}
	c.all.MoveToFront(e.inAll)
	b.lru.MoveToFront(e.inLRU)
	return e, true
}

// put remembers e (its key, issuer, state, generation and claims set)
// for tenant under the settings fingerprint config.
func (c *tokenCache) put(tenant string, config [sha256.Size]byte, e *tokenEntry, now time.Time) {
	e.until = now.Add(c.ttl)
	if e.expiry.Before(e.until) {
		e.until = e.expiry
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.tenants[tenant]; b != nil {
		if b.config != config {
			c.dropBucket(b)
		} else if old := b.entries[e.key]; old != nil {
			c.remove(old)
		}
	}
	if c.all.Len() >= c.size {
		c.evictFor(tenant)
	}
	b := c.tenants[tenant]
	if b == nil {
		b = &tokenBucket{tenant: tenant, config: config, entries: map[[sha256.Size]byte]*tokenEntry{}}
		c.tenants[tenant] = b
	}
	e.bucket = b
	b.entries[e.key] = e
	e.inAll = c.all.PushFront(e)
	e.inLRU = b.lru.PushFront(e)
}

// evictFor makes room for one more entry of tenant: from the tenant's own
// entries when it holds its fair share or more, else the least recently
// used entry of all.
func (c *tokenCache) evictFor(tenant string) {
	held, tenants := 0, len(c.tenants)
	if b := c.tenants[tenant]; b != nil {
		held = b.lru.Len()
	} else {
		tenants++ // about to have entries
	}
	if held > 0 && held >= c.size/tenants {
		c.remove(c.tenants[tenant].lru.Back().Value.(*tokenEntry))
		return
	}
	c.remove(c.all.Back().Value.(*tokenEntry))
}

func (c *tokenCache) remove(e *tokenEntry) {
	b := e.bucket
	c.all.Remove(e.inAll)
	b.lru.Remove(e.inLRU)
	delete(b.entries, e.key)
	if len(b.entries) == 0 && c.tenants[b.tenant] == b {
		delete(c.tenants, b.tenant)
	}
}

func (c *tokenCache) dropBucket(b *tokenBucket) {
	for _, e := range b.entries {
		c.all.Remove(e.inAll)
	}
	delete(c.tenants, b.tenant)
}

// len reports how many tokens are remembered (for tests).
func (c *tokenCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.all.Len()
}

// settingsFingerprint identifies a tenant's auth settings and endpoint:
// every field, length-prefixed, hashed. Any change to them gives another
// fingerprint, so tokens verified under the old settings are verified
// again.
func settingsFingerprint(cfg *Config, resource string) [sha256.Size]byte {
	var stack [512]byte
	b := stack[:0]
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	list := func(ss []string) {
		b = binary.AppendUvarint(b, uint64(len(ss)))
		for _, s := range ss {
			str(s)
		}
	}
	str(resource)
	flags := byte(0)
	if cfg.Public {
		flags |= 1
	}
	if cfg.AllowMachinePrincipals {
		flags |= 2
	}
	b = append(b, flags)
	list(cfg.Scopes)
	b = binary.AppendUvarint(b, uint64(len(cfg.Issuers)))
	for i := range cfg.Issuers {
		is := &cfg.Issuers[i]
		str(is.Issuer)
		list(is.Audiences)
		str(is.ClientClaim)
		list(is.Algorithms)
	}
	return sha256.Sum256(b)
}

// principalCopy returns a copy of the entry's principal the caller may
// keep and change.
func (e *tokenEntry) principalCopy() *Principal {
	p := e.principal
	p.Scopes = slices.Clone(p.Scopes)
	return &p
}
