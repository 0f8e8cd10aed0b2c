// Package devissuer is the OpenID Provider of `platform dev`: discovery,
// a JWKS, a login page that signs its one development user in with one
// click, the authorization code flow with PKCE for public clients, and
// access tokens minted directly for a tenant's endpoint.
//
// It signs in whoever reaches its page, so it is for development only:
// `platform dev` serves it on loopback, and `platform serve` never
// starts it. Everything else about it is as strict as a real provider:
// exact redirect URIs, PKCE with S256 required, codes that live a minute
// and work once, ES256-signed tokens.
package devissuer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// User is the one account the issuer signs in.
type User struct {
	Subject string
	Name    string
	Email   string
	// Roles go into the ID token's "roles" claim: platform-admin, viewer,
	// tenant-admin:<slug>.
	Roles []string
}

// Client is a public OAuth client (no secret: PKCE proves it).
type Client struct {
	ID string
	// Name is shown on the login page.
	Name string
	// RedirectURIs are compared exactly, as OAuth 2.1 requires.
	RedirectURIs []string
}

// Options configure an Issuer.
type Options struct {
	// Issuer is the issuer identifier, an absolute http(s) URL; the
	// handler serves under its path.
	Issuer  string
	Key     *ecdsa.PrivateKey
	User    User
	Clients []Client
	// TokenTTL bounds ID and access tokens of the code flow (default 1h).
	TokenTTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Lifetimes of the flow's intermediate steps.
const (
	requestTTL = 10 * time.Minute // a login page left open
	codeTTL    = time.Minute      // an authorization code
	// maxPending bounds requests and codes held at once, so a script
	// hammering /authorize cannot grow memory without end.
	maxPending = 1000
)

// RolesClaim is the ID-token claim carrying the user's roles.
const RolesClaim = "roles"

// Issuer is a running provider; it is an http.Handler.
type Issuer struct {
	opts    Options
	base    *url.URL
	path    string // the issuer URL's path, without a trailing slash
	signer  jose.Signer
	atSign  jose.Signer // typ at+jwt (RFC 9068)
	jwks    []byte
	clients map[string]Client

	mu      sync.Mutex
	pending map[string]*authRequest // by login page id
	codes   map[string]*grant       // by code
}

type authRequest struct {
	client      Client
	redirectURI string
	state       string
	nonce       string
	scope       []string
	challenge   string
	expires     time.Time
}

type grant struct {
	authRequest
	authTime time.Time
}

// New builds an issuer.
func New(o Options) (*Issuer, error) {
	u, err := url.Parse(o.Issuer)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("devissuer: issuer %q must be an absolute http(s) URL without query or fragment", o.Issuer)
	}
	if o.Key == nil {
		return nil, errors.New("devissuer: no signing key")
	}
	if o.User.Subject == "" {
		return nil, errors.New("devissuer: the user needs a subject")
	}
	if o.TokenTTL <= 0 {
		o.TokenTTL = time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	jwk := jose.JSONWebKey{Key: o.Key.Public(), Algorithm: string(jose.ES256), Use: "sig"}
	thumb, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("devissuer: key thumbprint: %w", err)
	}
	jwk.KeyID = base64.RawURLEncoding.EncodeToString(thumb)
	set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{jwk}})
	if err != nil {
		return nil, err
	}
	key := jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: o.Key, KeyID: jwk.KeyID}}
	signer, err := jose.NewSigner(key, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, err
	}
	atSign, err := jose.NewSigner(key, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		return nil, err
	}
	i := &Issuer{opts: o, base: u, path: strings.TrimSuffix(u.Path, "/"), signer: signer, atSign: atSign, jwks: set,
		clients: map[string]Client{}, pending: map[string]*authRequest{}, codes: map[string]*grant{}}
	for _, c := range o.Clients {
		i.clients[c.ID] = c
	}
	return i, nil
}

// URL is the issuer identifier.
func (i *Issuer) URL() string { return i.opts.Issuer }

// ServeHTTP serves discovery, the key set, the login page and the token
// endpoint under the issuer's path.
func (i *Issuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Requests naming another host (DNS rebinding from a web page) are
	// not for this issuer.
	if !strings.EqualFold(r.Host, i.base.Host) {
		http.Error(w, "unknown host", http.StatusMisdirectedRequest)
		return
	}
	route, ok := strings.CutPrefix(r.URL.Path, i.path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	switch route {
	case "/.well-known/openid-configuration":
		i.get(w, r, i.discovery)
	case "/jwks":
		i.get(w, r, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/jwk-set+json")
			_, _ = w.Write(i.jwks)
		})
	case "/authorize":
		switch r.Method {
		case http.MethodGet:
			i.authorize(w, r)
		case http.MethodPost:
			i.decide(w, r)
		default:
			w.Header().Set("Allow", "GET, POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	case "/token":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		i.token(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (i *Issuer) get(w http.ResponseWriter, r *http.Request, h http.HandlerFunc) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	h(w, r)
}

func (i *Issuer) endpoint(route string) string {
	return strings.TrimSuffix(i.opts.Issuer, "/") + route
}

func (i *Issuer) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         i.opts.Issuer,
		"authorization_endpoint":                         i.endpoint("/authorize"),
		"token_endpoint":                                 i.endpoint("/token"),
		"jwks_uri":                                       i.endpoint("/jwks"),
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{"authorization_code"},
		"subject_types_supported":                        []string{"public"},
		"id_token_signing_alg_values_supported":          []string{string(jose.ES256)},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"scopes_supported":                               []string{"openid", "profile", "email"},
		"claims_supported":                               []string{"sub", "name", "email", RolesClaim},
		"authorization_response_iss_parameter_supported": true,
	})
}

// authorize checks an authorization request and shows the login page.
// A bad client or redirect URI is shown here, never redirected to (RFC
// 6749 §4.1.2.1); every other problem goes back to the client.
func (i *Issuer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c, ok := i.clients[q.Get("client_id")]
	if !ok {
		page(w, http.StatusBadRequest, "Unknown client", "This sign-in names a client the development issuer does not know.", nil)
		return
	}
	redirect := q.Get("redirect_uri")
	if !slices.Contains(c.RedirectURIs, redirect) {
		page(w, http.StatusBadRequest, "Unknown redirect URI", "The client asked to return to an address it did not register.", nil)
		return
	}
	back := func(code, desc string) {
		http.Redirect(w, r, i.redirectError(redirect, q.Get("state"), code, desc), http.StatusFound)
	}
	for _, p := range []string{"client_id", "redirect_uri", "response_type", "state", "nonce", "scope", "code_challenge", "code_challenge_method"} {
		if len(q[p]) > 1 {
			back("invalid_request", p+" is repeated")
			return
		}
	}
	switch {
	case q.Get("response_type") != "code":
		back("unsupported_response_type", "only the authorization code flow is supported")
	case q.Get("code_challenge") == "":
		back("invalid_request", "PKCE is required: send code_challenge with code_challenge_method=S256")
	case q.Get("code_challenge_method") != "S256":
		back("invalid_request", "code_challenge_method must be S256")
	case !validChallenge(q.Get("code_challenge")):
		back("invalid_request", "code_challenge must be a base64url SHA-256")
	case q.Has("request") || q.Has("request_uri"):
		back("request_not_supported", "request objects are not supported")
	default:
		id := random()
		ar := &authRequest{client: c, redirectURI: redirect, state: q.Get("state"), nonce: q.Get("nonce"),
			scope: strings.Fields(q.Get("scope")), challenge: q.Get("code_challenge"), expires: i.opts.Now().Add(requestTTL)}
		if !i.hold(func() bool { return putBounded(i.pending, id, ar) }) {
			back("temporarily_unavailable", "too many sign-ins in progress; try again shortly")
			return
		}
		i.loginPage(w, id, ar)
	}
}

// decide completes the login page: the user signs in (a code goes back
// to the client) or cancels (access_denied).
func (i *Issuer) decide(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		page(w, http.StatusBadRequest, "Bad request", "The sign-in form could not be read.", nil)
		return
	}
	id := r.PostForm.Get("request")
	var ar *authRequest
	i.hold(func() bool {
		ar = i.pending[id]
		delete(i.pending, id)
		return true
	})
	if ar == nil || i.opts.Now().After(ar.expires) {
		page(w, http.StatusBadRequest, "Sign-in expired", "This sign-in is no longer pending. Go back to the application and start again.", nil)
		return
	}
	if r.PostForm.Get("decision") != "approve" {
		http.Redirect(w, r, i.redirectError(ar.redirectURI, ar.state, "access_denied", "the user cancelled the sign-in"), http.StatusFound)
		return
	}
	code := random()
	g := &grant{authRequest: *ar, authTime: i.opts.Now()}
	g.expires = i.opts.Now().Add(codeTTL)
	if !i.hold(func() bool { return putBounded(i.codes, code, g) }) {
		http.Redirect(w, r, i.redirectError(ar.redirectURI, ar.state, "temporarily_unavailable", "too many sign-ins in progress"), http.StatusFound)
		return
	}
	u, _ := url.Parse(ar.redirectURI)
	v := u.Query()
	v.Set("code", code)
	if ar.state != "" {
		v.Set("state", ar.state)
	}
	v.Set("iss", i.opts.Issuer) // RFC 9207
	u.RawQuery = v.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

func (i *Issuer) redirectError(redirect, state, code, desc string) string {
	u, _ := url.Parse(redirect)
	v := u.Query()
	v.Set("error", code)
	v.Set("error_description", desc)
	if state != "" {
		v.Set("state", state)
	}
	v.Set("iss", i.opts.Issuer)
	u.RawQuery = v.Encode()
	return u.String()
}

// token exchanges a code for tokens, once, for the client it was issued
// to, with the redirect URI and the PKCE verifier that match it.
func (i *Issuer) token(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "the body must be a form")
		return
	}
	f := r.PostForm
	clientID := f.Get("client_id")
	if id, secret, ok := r.BasicAuth(); ok {
		// A public client has no secret; some libraries still send its
		// id this way, with an empty password.
		id, _ = url.QueryUnescape(id)
		if secret != "" || (clientID != "" && clientID != id) {
			oauthError(w, http.StatusUnauthorized, "invalid_client", "public clients authenticate with PKCE, not a secret")
			return
		}
		clientID = id
	}
	c, ok := i.clients[clientID]
	if !ok {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "unknown client")
		return
	}
	if f.Get("grant_type") != "authorization_code" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "only authorization_code is supported")
		return
	}
	code := f.Get("code")
	var g *grant
	i.hold(func() bool {
		g = i.codes[code]
		delete(i.codes, code) // a code works once, whatever happens next
		return true
	})
	switch {
	case g == nil || i.opts.Now().After(g.expires):
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the code is unknown, used or expired")
	case g.client.ID != c.ID:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the code was issued to another client")
	case f.Get("redirect_uri") != g.redirectURI:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "redirect_uri differs from the authorization request's")
	case !pkceMatches(f.Get("code_verifier"), g.challenge):
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the code_verifier does not match the code_challenge")
	default:
		i.issue(w, g)
	}
}

func (i *Issuer) issue(w http.ResponseWriter, g *grant) {
	now := i.opts.Now()
	exp := now.Add(i.opts.TokenTTL)
	at, err := i.accessToken(g.client.ID, g.client.ID, strings.Join(g.scope, " "), now, exp)
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", "signing failed")
		return
	}
	out := map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": int(i.opts.TokenTTL / time.Second)}
	if len(g.scope) > 0 {
		out["scope"] = strings.Join(g.scope, " ")
	}
	if slices.Contains(g.scope, "openid") {
		claims := map[string]any{
			"iss": i.opts.Issuer, "sub": i.opts.User.Subject, "aud": g.client.ID, "azp": g.client.ID,
			"iat": now.Unix(), "exp": exp.Unix(), "auth_time": g.authTime.Unix(),
			"name": i.opts.User.Name, RolesClaim: i.opts.User.Roles,
		}
		if i.opts.User.Email != "" {
			claims["email"], claims["email_verified"] = i.opts.User.Email, true
		}
		if g.nonce != "" {
			claims["nonce"] = g.nonce
		}
		idt, err := jwt.Signed(i.signer).Claims(claims).Serialize()
		if err != nil {
			oauthError(w, http.StatusInternalServerError, "server_error", "signing failed")
			return
		}
		out["id_token"] = idt
	}
	writeJSON(w, http.StatusOK, out)
}

// AccessToken mints an access token for the user, as client clientID,
// for the resource audience (a tenant's endpoint URL), valid for ttl.
func (i *Issuer) AccessToken(audience, clientID string, ttl time.Duration) (string, time.Time, error) {
	now := i.opts.Now()
	exp := now.Add(ttl)
	tok, err := i.accessToken(audience, clientID, "", now, exp)
	return tok, exp, err
}

func (i *Issuer) accessToken(audience, clientID, scope string, now, exp time.Time) (string, error) {
	claims := map[string]any{
		"iss": i.opts.Issuer, "sub": i.opts.User.Subject, "aud": audience,
		"client_id": clientID, "azp": clientID, "jti": random(),
		"iat": now.Unix(), "nbf": now.Unix(), "exp": exp.Unix(),
	}
	if scope != "" {
		claims["scope"] = scope
	}
	return jwt.Signed(i.atSign).Claims(claims).Serialize()
}

// hold runs f under the lock, first dropping what has expired.
func (i *Issuer) hold(f func() bool) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	now := i.opts.Now()
	for k, v := range i.pending {
		if now.After(v.expires) {
			delete(i.pending, k)
		}
	}
	for k, v := range i.codes {
		if now.After(v.expires) {
			delete(i.codes, k)
		}
	}
	return f()
}

// putBounded adds v under k unless the map is full.
func putBounded[V any](m map[string]V, k string, v V) bool {
	if len(m) >= maxPending {
		return false
	}
	m[k] = v
	return true
}

// validChallenge: a S256 challenge is 43 base64url characters.
func validChallenge(c string) bool {
	b, err := base64.RawURLEncoding.DecodeString(c)
	return err == nil && len(b) == sha256.Size
}

// pkceMatches checks a verifier (RFC 7636 §4.1: 43 to 128 unreserved
// characters) against the S256 challenge.
func pkceMatches(verifier, challenge string) bool {
	if len(verifier) < 43 || len(verifier) > 128 {
		return false
	}
	for _, r := range verifier {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~", r)) {
			return false
		}
	}
	sum := sha256.Sum256([]byte(verifier))
	got := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(got), []byte(challenge)) == 1
}

func random() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="devissuer"`)
	}
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}
