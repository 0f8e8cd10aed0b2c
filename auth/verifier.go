package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

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
// that trusts it. The zero value is not usable; call NewVerifier.
type Verifier struct {
	client *http.Client
	// MinRefetch is the least time between JWKS fetches triggered by
	// unknown key ids.
	minRefetch time.Duration
	// Now is the clock tokens are judged by (time.Now by default).
	Now func() time.Time

	mu      sync.Mutex
	issuers map[string]*issuerState
}

type issuerState struct {
	verifier *oidc.IDTokenVerifier
	keys     *keySet
	err      error
	errAt    time.Time
}

// NewVerifier returns a verifier that fetches discovery documents and
// keys with client (nil: a client with a 10 s timeout).
func NewVerifier(client *http.Client, minRefetch time.Duration) *Verifier {
	if client == nil {
		// Discovery and JWKS fetches made while a request waits are
		// CLIENT spans under it.
		client = &http.Client{Timeout: 10 * time.Second, Transport: telemetry.Transport(nil)}
	}
	if minRefetch <= 0 {
		minRefetch = 30 * time.Second
	}
	return &Verifier{client: client, minRefetch: minRefetch, Now: time.Now, issuers: map[string]*issuerState{}}
}

// Verify checks raw against the tenant's policy and returns the principal.
// resource is the tenant endpoint's canonical URL, the default audience.
// Every failure is a *TokenError.
func (v *Verifier) Verify(ctx context.Context, raw string, cfg Config, resource string) (*Principal, error) {
	if raw == "" {
		return nil, refuse("missing")
	}
	if len(raw) > MaxTokenBytes {
		return nil, refuse("oversize")
	}
	iss, err := unverifiedIssuer(raw)
	if err != nil {
		return nil, refuse("malformed")
	}
	var is *Issuer
	for i := range cfg.Issuers {
		if cfg.Issuers[i].Issuer == iss {
			is = &cfg.Issuers[i]
		}
	}
	if is == nil {
		return nil, refuse("untrusted_issuer")
	}
	st, err := v.issuer(ctx, is)
	if err != nil {
		return nil, refuse("discovery")
	}
	tok, err := st.verifier.Verify(oidc.ClientContext(ctx, v.client), raw)
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
		AZP      string          `json:"azp"`
		ClientID string          `json:"client_id"`
		Scope    string          `json:"scope"`
		Scp      json.RawMessage `json:"scp"`
	}
	if err := tok.Claims(&claims); err != nil {
		return nil, refuse("malformed")
	}
	p := &Principal{Issuer: tok.Issuer, Subject: tok.Subject}
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
	return p, nil
}

// issuer returns the cached discovery and keys for is, discovering on
// first use. A failed discovery is retried after ten seconds, not on
// every request.
func (v *Verifier) issuer(ctx context.Context, is *Issuer) (*issuerState, error) {
	algs := is.Algorithms
	if len(algs) == 0 {
		algs = DefaultAlgorithms
	}
	key := is.Issuer + "|" + strings.Join(algs, ",")
	v.mu.Lock()
	defer v.mu.Unlock()
	if st, ok := v.issuers[key]; ok && (st.err == nil || time.Since(st.errAt) < 10*time.Second) {
		return st, st.err
	}
	st := &issuerState{}
	dctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, v.client), 10*time.Second)
	defer cancel()
	provider, err := oidc.NewProvider(dctx, is.Issuer)
	var doc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err == nil {
		err = provider.Claims(&doc)
	}
	if err == nil && doc.JWKSURI == "" {
		err = errors.New("discovery document has no jwks_uri")
	}
	if err != nil {
		st.err, st.errAt = fmt.Errorf("discover %s: %w", is.Issuer, err), time.Now()
		v.issuers[key] = st
		return st, st.err
	}
	st.keys = newKeySet(doc.JWKSURI, v.client, v.minRefetch, algs)
	st.verifier = oidc.NewVerifier(is.Issuer, st.keys, &oidc.Config{
		SkipClientIDCheck:    true, // audiences are checked against the tenant's list
		SupportedSigningAlgs: algs,
		Now:                  func() time.Time { return v.Now() },
	})
	v.issuers[key] = st
	return st, nil
}

// JWKSFetches reports how many times an issuer's keys were fetched.
func (v *Verifier) JWKSFetches(issuer string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for k, st := range v.issuers {
		if strings.HasPrefix(k, issuer+"|") && st.keys != nil {
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
