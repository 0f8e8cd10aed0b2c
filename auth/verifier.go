package auth

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/opsmcp/platform/egress"
	"github.com/opsmcp/platform/telemetry"
)

// MaxTokenBytes caps a bearer token; anything longer is refused unread.
const MaxTokenBytes = 8 << 10

// TokenError is a refused token. Reason is for logs and spans only; the
// client is told just that the token is not acceptable.
type TokenError struct{ Reason string }

func (e *TokenError) Error() string { return "bearer token refused: " + e.Reason }

func refuse(reason string) error { return &TokenError{Reason: reason} }

// Verifier checks bearer tokens against the issuers a tenant trusts. It
// keeps one discovery result and JWKS per issuer, shared by every tenant
// that trusts it, and remembers verified tokens for a short while. The
// zero value is not usable; call NewVerifier.
//
// One tenant cannot slow another: no lock shared across issuers is held
// while anything waits on the network. Each issuer is discovered by one
// fetch however many requests need it at once (they wait on that fetch,
// each no longer than its own context), a failed discovery is remembered
// for FailureTTL and answered from memory meanwhile, and the issuers kept
// are bounded, least recently used forgotten first.
type Verifier struct {
	opts   VerifierOptions
	client *http.Client
	// Now is the clock tokens are judged by (time.Now by default). It also
	// times the failure cache and key refetch interval. Set it before use.
	Now func() time.Time

	mu      sync.Mutex
	issuers map[string]*issuerEntry
	order   list.List // of *issuerEntry, most recently used first

	tokens *tokenCache // nil when disabled
}

// VerifierOptions configures a Verifier; zero fields take the defaults.
type VerifierOptions struct {
	// Egress is the policy discovery and JWKS fetches (and their
	// redirects) dial through. Its zero value refuses loopback, private
	// and link-local addresses; the operator's PLATFORM_ALLOW_PRIVATE_TARGETS
	// sets AllowPrivate.
	Egress egress.Policy
	// MinRefetch is the least time between JWKS fetches triggered by
	// unknown key ids. Default 30 s.
	MinRefetch time.Duration
	// FailureTTL is how long a failed discovery is remembered before the
	// issuer is asked again. Default 10 s.
	FailureTTL time.Duration
	// FetchTimeout bounds one discovery or JWKS fetch, redirects included.
	// Default 5 s.
	FetchTimeout time.Duration
	// MaxIssuers bounds the issuers kept (discovered or failed). Default
	// 1024.
	MaxIssuers int
	// TokenCacheTTL is the longest a verified token is remembered (never
	// past its expiry). 0 disables the cache.
	TokenCacheTTL time.Duration
	// TokenCacheSize bounds the tokens remembered. Default 10000.
	TokenCacheSize int
}

// Defaults of VerifierOptions.
const (
	DefaultMinRefetch     = 30 * time.Second
	DefaultFailureTTL     = 10 * time.Second
	DefaultFetchTimeout   = 5 * time.Second
	DefaultMaxIssuers     = 1024
	DefaultTokenCacheSize = 10000
)

// maxDiscoveryBytes caps a discovery document or JWKS response.
const maxDiscoveryBytes = maxKeySetBytes

// maxRedirects is how many redirects a discovery or JWKS fetch follows;
// every hop dials through the egress policy.
const maxRedirects = 3

// issuerEntry is one issuer (with one set of accepted algorithms): its
// discovered state once known, or its last failure.
type issuerEntry struct {
	key   string
	inLRU *list.Element

	// state is the discovered issuer, nil until then and once the entry is
	// forgotten (so tokens remembered under it are verified again).
	state atomic.Pointer[issuerState]

	mu        sync.Mutex
	err       error
	errAt     time.Time
	flight    *discovery
	forgotten bool // evicted: a discovery finishing late must not revive it
}

// discovery is one discovery fetch that any number of callers wait on.
type discovery struct {
	done chan struct{}
	st   *issuerState
	err  error
}

func (e *issuerEntry) current() *issuerState { return e.state.Load() }

type issuerState struct {
	verifier *oidc.IDTokenVerifier
	keys     *keySet
}

// NewVerifier returns a verifier fetching discovery documents and keys
// through the egress policy in o.
func NewVerifier(o VerifierOptions) *Verifier {
	if o.MinRefetch <= 0 {
		o.MinRefetch = DefaultMinRefetch
	}
	if o.FailureTTL <= 0 {
		o.FailureTTL = DefaultFailureTTL
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = DefaultFetchTimeout
	}
	if o.MaxIssuers <= 0 {
		o.MaxIssuers = DefaultMaxIssuers
	}
	if o.TokenCacheSize <= 0 {
		o.TokenCacheSize = DefaultTokenCacheSize
	}
	client := egress.NewClient(&o.Egress, egress.ClientOptions{
		Timeout:          o.FetchTimeout,
		MaxRedirects:     maxRedirects,
		MaxResponseBytes: maxDiscoveryBytes,
		// Discovery and JWKS fetches made while a request waits are CLIENT
		// spans under it.
		Wrap: telemetry.Transport,
	})
	v := &Verifier{opts: o, client: client, Now: time.Now, issuers: map[string]*issuerEntry{}}
	if o.TokenCacheTTL > 0 {
		v.tokens = newTokenCache(o.TokenCacheTTL, o.TokenCacheSize)
	}
	return v
}

// Verify checks raw against the tenant's policy and returns the principal.
// resource is the tenant endpoint's canonical URL, the default audience;
// it also tells tenants apart in the token cache. Every failure is a
// *TokenError.
func (v *Verifier) Verify(ctx context.Context, raw string, cfg Config, resource string) (*Principal, error) {
	if raw == "" {
		return nil, refuse("missing")
	}
	if len(raw) > MaxTokenBytes {
		return nil, refuse("oversize")
	}
	var key, settings [sha256.Size]byte
	if v.tokens != nil {
		key = sha256.Sum256([]byte(raw))
		settings = settingsFingerprint(&cfg, resource)
		if e, ok := v.tokens.get(resource, settings, key, v.Now()); ok {
			return v.recheck(e, &cfg, resource)
		}
	}
	iss, err := unverifiedIssuer(raw)
	if err != nil {
		return nil, refuse("malformed")
	}
	is := trusted(&cfg, iss)
	if is == nil {
		return nil, refuse("untrusted_issuer")
	}
	entry, st, err := v.issuer(ctx, is)
	if err != nil {
		return nil, refuse("discovery")
	}
	// The generation is read before verifying, so a key set that changes
	// meanwhile leaves the remembered token one generation behind.
	gen := st.keys.generation.Load()
	tok, err := st.verifier.Verify(ctx, raw)
	if err != nil {
		return nil, refuse(classify(err))
	}
	if tok.IssuedAt.After(v.Now().Add(time.Minute)) {
		return nil, refuse("issued_in_future")
	}
	accepted := is.Audiences
	if len(accepted) == 0 {
		accepted = []string{resource}
	}
	if !intersects(tok.Audience, accepted) {
		return nil, refuse("audience")
	}
	var claims struct {
		AZP       string          `json:"azp"`
		ClientID  string          `json:"client_id"`
		Scope     string          `json:"scope"`
		Scp       json.RawMessage `json:"scp"`
		NotBefore *jsonTime       `json:"nbf"`
	}
	if err := tok.Claims(&claims); err != nil {
		return nil, refuse("malformed")
	}
	p := &Principal{Issuer: tok.Issuer, Subject: tok.Subject, Expires: tok.Expiry}
	switch is.ClientClaim {
	case "azp":
		p.Client = claims.AZP
	case "client_id":
		p.Client = claims.ClientID
	default:
		p.Client = claims.AZP
		if p.Client == "" {
			p.Client = claims.ClientID
		}
	}
	p.Scopes = strings.Fields(claims.Scope)
	if len(p.Scopes) == 0 && len(claims.Scp) > 0 {
		_ = json.Unmarshal(claims.Scp, &p.Scopes)
	}
	if p.Machine() && !cfg.AllowMachinePrincipals {
		return nil, refuse("machine_principal")
	}
	if p.Subject == "" && p.Client == "" {
		return nil, refuse("anonymous")
	}
	if v.tokens != nil {
		e := &tokenEntry{key: key, issuer: entry, state: st, generation: gen, expiry: tok.Expiry,
			issuedAt: tok.IssuedAt, audience: tok.Audience, principal: *p}
		e.principal.Scopes = slices.Clone(p.Scopes)
		if claims.NotBefore != nil {
			e.notBefore = time.Time(*claims.NotBefore)
		}
		v.tokens.put(resource, settings, e, v.Now())
	}
	return p, nil
}

// recheck runs, on a remembered token, every check that depends on the
// moment or the request, exactly as verification runs them: expiry and
// not-before (with go-oidc's leeway), issued-at, the audience, the issuer
// still trusted, machine principals still allowed.
func (v *Verifier) recheck(e *tokenEntry, cfg *Config, resource string) (*Principal, error) {
	now := v.Now()
	switch {
	case e.expiry.Before(now):
		return nil, refuse("expired")
	case !e.notBefore.IsZero() && now.Add(notBeforeLeeway).Before(e.notBefore):
		return nil, refuse("not_yet_valid")
	case e.issuedAt.After(now.Add(time.Minute)):
		return nil, refuse("issued_in_future")
	}
	is := trusted(cfg, e.principal.Issuer)
	if is == nil {
		return nil, refuse("untrusted_issuer")
	}
	accepted := is.Audiences
	if len(accepted) == 0 {
		accepted = []string{resource}
	}
	if !intersects(e.audience, accepted) {
		return nil, refuse("audience")
	}
	if e.principal.Machine() && !cfg.AllowMachinePrincipals {
		return nil, refuse("machine_principal")
	}
	return e.principalCopy(), nil
}

// notBeforeLeeway is the clock skew go-oidc allows on nbf; remembered
// tokens are held to the same.
const notBeforeLeeway = 5 * time.Minute

// jsonTime is a NumericDate claim.
type jsonTime time.Time

func (t *jsonTime) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	f, err := n.Float64()
	if err != nil {
		return err
	}
	sec, frac := math.Modf(f)
	*t = jsonTime(time.Unix(int64(sec), int64(frac*1e9)))
	return nil
}

// trusted returns the tenant's entry for issuer iss, or nil.
func trusted(cfg *Config, iss string) *Issuer {
	for i := range cfg.Issuers {
		if cfg.Issuers[i].Issuer == iss {
			return &cfg.Issuers[i]
		}
	}
	return nil
}

// issuer returns the discovered state of is, discovering it on first use.
// Concurrent first uses share one discovery; a failure is answered from
// memory for FailureTTL. Only the issuer's own entry is locked, and never
// across the fetch; a caller waits for a discovery no longer than ctx.
func (v *Verifier) issuer(ctx context.Context, is *Issuer) (*issuerEntry, *issuerState, error) {
	algs := is.Algorithms
	if len(algs) == 0 {
		algs = DefaultAlgorithms
	}
	key := is.Issuer + "|" + strings.Join(algs, ",")
	e := v.entry(key)
	if st := e.current(); st != nil {
		return e, st, nil
	}
	e.mu.Lock()
	if st := e.current(); st != nil {
		e.mu.Unlock()
		return e, st, nil
	}
	if e.err != nil && v.Now().Sub(e.errAt) < v.opts.FailureTTL {
		err := e.err
		e.mu.Unlock()
		return nil, nil, err
	}
	f := e.flight
	if f == nil {
		f = &discovery{done: make(chan struct{})}
		e.flight = f
		// Detached from this caller, so one impatient caller cannot fail
		// the discovery for the others; it ends by FetchTimeout.
		go v.discover(context.WithoutCancel(ctx), e, f, is.Issuer, algs)
	}
	e.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	if f.err != nil {
		return nil, nil, f.err
	}
	return e, f.st, nil
}

// entry returns the entry for key, creating it, and marks it recently
// used. The lock guards the map alone.
func (v *Verifier) entry(key string) *issuerEntry {
	v.mu.Lock()
	defer v.mu.Unlock()
	if e, ok := v.issuers[key]; ok {
		v.order.MoveToFront(e.inLRU)
		return e
	}
	e := &issuerEntry{key: key}
	e.inLRU = v.order.PushFront(e)
	v.issuers[key] = e
	for v.order.Len() > v.opts.MaxIssuers {
		old := v.order.Back().Value.(*issuerEntry)
		v.order.Remove(old.inLRU)
		delete(v.issuers, old.key)
		// Tokens remembered under a forgotten issuer are verified again.
		old.mu.Lock()
		old.forgotten = true
		old.state.Store(nil)
		old.mu.Unlock()
	}
	return e
}

// discover fetches is's discovery document and makes its verifier.
func (v *Verifier) discover(ctx context.Context, e *issuerEntry, f *discovery, issuer string, algs []string) {
	ctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, v.client), v.opts.FetchTimeout)
	defer cancel()
	st, err := v.newIssuerState(ctx, issuer, algs)
	e.mu.Lock()
	if err != nil {
		f.err = fmt.Errorf("discover %s: %w", issuer, err)
		e.err, e.errAt = f.err, v.Now()
	} else {
		f.st = st
		e.err = nil
		if !e.forgotten {
			e.state.Store(st)
		}
	}
	e.flight = nil
	e.mu.Unlock()
	close(f.done)
}

func (v *Verifier) newIssuerState(ctx context.Context, issuer string, algs []string) (*issuerState, error) {
	provider, err := oidc.NewProvider(ctx, issuer)
	if err != nil {
		return nil, err
	}
	var doc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := provider.Claims(&doc); err != nil {
		return nil, err
	}
	if doc.JWKSURI == "" {
		return nil, errors.New("discovery document has no jwks_uri")
	}
	keys := newKeySet(doc.JWKSURI, v.client, v.opts.MinRefetch, v.opts.FetchTimeout, func() time.Time { return v.Now() }, algs)
	return &issuerState{
		keys: keys,
		verifier: oidc.NewVerifier(issuer, keys, &oidc.Config{
			SkipClientIDCheck:    true, // audiences are checked against the tenant's list
			SupportedSigningAlgs: algs,
			Now:                  func() time.Time { return v.Now() },
		}),
	}, nil
}

// JWKSFetches reports how many times an issuer's keys were fetched.
func (v *Verifier) JWKSFetches(issuer string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for k, e := range v.issuers {
		if st := e.current(); strings.HasPrefix(k, issuer+"|") && st != nil {
			n += st.keys.fetchCount()
		}
	}
	return n
}

func classify(err error) string {
	var exp *oidc.TokenExpiredError
	switch {
	case errors.As(err, &exp):
		return "expired"
	case errors.Is(err, errUnknownKey), strings.Contains(err.Error(), errUnknownKey.Error()):
		return "unknown_key"
	case strings.Contains(err.Error(), "nbf"):
		return "not_yet_valid"
	case strings.Contains(err.Error(), "id token issued by a different provider"):
		return "issuer"
	case strings.Contains(err.Error(), "malformed or disallowed algorithm"), strings.Contains(err.Error(), "malformed jwt"):
		return "malformed"
	}
	return "signature"
}

func intersects(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

// unverifiedIssuer reads iss from a JWT payload without trusting it: it
// only picks which issuer's keys to verify with.
func unverifiedIssuer(raw string) (string, error) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return "", errors.New("not a compact JWS")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", err
	}
	var c struct {
		Iss string `json:"iss"`
	}
	if err := json.Unmarshal(payload, &c); err != nil || c.Iss == "" {
		return "", errors.New("no issuer")
	}
	return c.Iss, nil
}

// Challenge is the WWW-Authenticate value of a 401: where the protected
// resource metadata is, and the scopes to ask for.
func Challenge(metadataURL string, scopes []string) string {
	v := `Bearer resource_metadata="` + metadataURL + `"`
	if len(scopes) > 0 {
		v += `, scope="` + strings.Join(scopes, " ") + `"`
	}
	return v
}

// InsufficientScope is the WWW-Authenticate value of a 403 naming every
// scope the request needs at once.
func InsufficientScope(metadataURL string, scopes []string) string {
	return `Bearer error="insufficient_scope", scope="` + strings.Join(scopes, " ") + `", resource_metadata="` + metadataURL + `"`
}

// Metadata is the RFC 9728 protected-resource metadata of a tenant
// endpoint.
func Metadata(resource string, cfg Config, scopes []string) map[string]any {
	servers := make([]string, 0, len(cfg.Issuers))
	for _, is := range cfg.Issuers {
		servers = append(servers, is.Issuer)
	}
	m := map[string]any{
		"resource":                 resource,
		"authorization_servers":    servers,
		"bearer_methods_supported": []string{"header"},
	}
	if len(scopes) > 0 {
		m["scopes_supported"] = scopes
	}
	return m
}
