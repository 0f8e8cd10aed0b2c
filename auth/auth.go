// Package auth verifies who is calling: OIDC bearer tokens on each
// tenant's MCP endpoint, checked against the issuers that tenant trusts,
// and the principal (issuer, subject, client) that sealed request state
// is bound to. It also answers the OAuth protected-resource metadata and
// challenges an MCP client needs to find where to get a token.
package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Principal is a verified caller.
type Principal struct {
	Issuer  string
	Subject string // empty for a machine principal
	Client  string
	Scopes  []string
	// Expires is when the token that proved the principal expires: a
	// long-lived stream it opened ends then.
	Expires time.Time
}

// Machine reports whether the principal is a client acting for itself
// (client credentials): no subject, or the subject is the client.
func (p *Principal) Machine() bool { return p.Subject == "" || p.Subject == p.Client }

// Binding is the canonical string request state is bound to: all three
// parts, so a flow started by one user of a client can never be finished
// by another user of it, nor by the same user through another client. A
// machine principal binds client-only. nil (a public tenant) binds to
// nothing.
func (p *Principal) Binding() string {
	if p == nil {
		return ""
	}
	sub := p.Subject
	if p.Machine() {
		sub = ""
	}
	b, _ := json.Marshal([3]string{p.Issuer, sub, p.Client})
	return string(b)
}

// HasScopes reports which of want the principal lacks.
func (p *Principal) HasScopes(want []string) (missing []string) {
	have := make(map[string]bool, len(p.Scopes))
	for _, s := range p.Scopes {
		have[s] = true
	}
	for _, s := range want {
		if !have[s] {
			missing = append(missing, s)
		}
	}
	return missing
}

// Issuer is one identity provider a tenant trusts.
type Issuer struct {
	// Issuer is the issuer URL (its discovery document lives under it).
	Issuer string `json:"issuer"`
	// Audiences the tenant accepts in aud; empty means the tenant
	// endpoint's canonical URL.
	Audiences []string `json:"audiences,omitempty"`
	// ClientClaim names the claim identifying the client: "azp" or
	// "client_id" (default: azp, then client_id).
	ClientClaim string `json:"clientClaim,omitempty"`
	// Algorithms are the accepted signing algorithms; default RS256 and
	// ES256. Symmetric algorithms are never accepted.
	Algorithms []string `json:"algorithms,omitempty"`
}

// Config is a tenant's authentication policy, kept in its settings.
type Config struct {
	// Public tenants take no token; their flows are bound to no user.
	Public bool `json:"public,omitempty"`
	// AllowMachinePrincipals accepts client-credential tokens, bound
	// client-only.
	AllowMachinePrincipals bool `json:"allowMachinePrincipals,omitempty"`
	// Issuers the tenant trusts. A tenant that is neither public nor
	// trusts an issuer refuses every request.
	Issuers []Issuer `json:"issuers,omitempty"`
	// Scopes are advertised in protected-resource metadata and asked for
	// in challenges.
	Scopes []string `json:"scopes,omitempty"`
}

var asymmetric = map[string]bool{
	"RS256": true, "RS384": true, "RS512": true, "PS256": true, "PS384": true, "PS512": true,
	"ES256": true, "ES384": true, "ES512": true, "EdDSA": true,
}

// DefaultAlgorithms are accepted when an issuer names none.
var DefaultAlgorithms = []string{"RS256", "ES256"}

// MaxIssuersPerTenant bounds the issuers one tenant may trust, so one
// tenant's settings cannot fill the verifier's cache of issuers.
const MaxIssuersPerTenant = 8

// FieldError names one invalid field of a Config.
type FieldError struct{ Field, Message string }

// Validate reports every problem with the policy, with field paths under
// prefix.
func (c Config) Validate(prefix string) []FieldError {
	var out []FieldError
	bad := func(f, format string, args ...any) {
		out = append(out, FieldError{prefix + f, fmt.Sprintf(format, args...)})
	}
	if c.Public && len(c.Issuers) > 0 {
		bad(".public", "a public tenant takes no tokens; remove the issuers or set public to false")
	}
	if len(c.Issuers) > MaxIssuersPerTenant {
		bad(".issuers", "at most %d issuers per tenant (%d given): each one is an identity provider the platform fetches keys from", MaxIssuersPerTenant, len(c.Issuers))
	}
	seen := map[string]bool{}
	for i, is := range c.Issuers {
		f := fmt.Sprintf(".issuers[%d]", i)
		if err := validIssuerURL(is.Issuer); err != nil {
			bad(f+".issuer", "%v", err)
		} else if seen[is.Issuer] {
			bad(f+".issuer", "listed twice")
		}
		seen[is.Issuer] = true
		for j, a := range is.Audiences {
			if strings.TrimSpace(a) == "" {
				bad(fmt.Sprintf("%s.audiences[%d]", f, j), "must not be empty")
			}
		}
		if is.ClientClaim != "" && is.ClientClaim != "azp" && is.ClientClaim != "client_id" {
			bad(f+".clientClaim", `must be "azp" or "client_id"`)
		}
		for j, a := range is.Algorithms {
			if !asymmetric[a] {
				bad(fmt.Sprintf("%s.algorithms[%d]", f, j), "%q is not an accepted asymmetric signing algorithm", a)
			}
		}
	}
	for i, s := range c.Scopes {
		if s == "" || strings.ContainsAny(s, " \"\\") {
			bad(fmt.Sprintf(".scopes[%d]", i), "must be a non-empty scope token")
		}
	}
	return out
}

// validIssuerURL checks an issuer URL statically: https, or plain http
// for a provider on this machine (development). Whether the issuer's
// address may be reached at all is decided when it is fetched, by the
// egress policy: loopback (and so every http issuer) is refused there
// unless the operator allows private targets, so an http issuer passes
// this check but works only on a platform set up for development.
func validIssuerURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Opaque != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#") {
		return errors.New("must be an absolute https URL without query or fragment")
	}
	if u.User != nil {
		return errors.New("must not carry credentials")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if loopbackHost(u.Hostname()) {
			return nil
		}
	}
	return errors.New("must use https (http only for a loopback host, and only where the operator allows private targets)")
}

// loopbackHost reports whether h (a URL's hostname) names this machine:
// "localhost", or a loopback IP literal without a zone.
func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.Zone() == "" && a.Unmap().IsLoopback()
}
