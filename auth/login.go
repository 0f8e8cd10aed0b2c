package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Cookie names.
const (
	SessionCookie = "opsmcp_admin"
	loginCookie   = "opsmcp_login"
)

// AdminLogin signs admins in to the admin UI and API with the OIDC
// authorization code flow and PKCE against the platform's own issuer, and
// keeps them signed in with an HTTP-only, signed session cookie.
type AdminLogin struct {
	Issuer       string
	ClientID     string
	ClientSecret string // empty for a public (PKCE-only) client
	RedirectURL  string // …/admin/callback
	// RolesClaim names the ID-token claim holding the admin's roles
	// (default "roles").
	RolesClaim string
	// AfterLogin is where a successful sign-in lands.
	AfterLogin string
	Signer     *Signer
	// Secure marks cookies Secure (set when the public URL is https).
	Secure bool
	// SessionTTL bounds a session (default 8 hours).
	SessionTTL time.Duration
	// PublicOrigin is the platform's own origin (scheme://host[:port]):
	// state-changing requests must come from it.
	PublicOrigin string
	// EndSession records a session ended by sign-out (the store); nil
	// only clears the cookie.
	EndSession func(ctx context.Context, id string, expires time.Time) error
	// BindTenants, when set, resolves the tenant slugs the roles name to
	// the tenants holding them at sign-in (slug → id), recorded in the
	// session so its grants follow those tenants, not their slugs.
	BindTenants func(ctx context.Context, roles []string) (map[string]string, error)
	Logger      *slog.Logger

	mu       sync.Mutex
	provider *oidc.Provider
}

type loginState struct {
	// Next is where to land after signing in: a path under /admin/.
	Next     string    `json:"x,omitempty"`
	State    string    `json:"s"`
	Verifier string    `json:"v"`
	Nonce    string    `json:"n"`
	Expires  time.Time `json:"e"`
}

func (l *AdminLogin) discover(ctx context.Context) (*oidc.Provider, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.provider != nil {
		return l.provider, nil
	}
	p, err := oidc.NewProvider(ctx, l.Issuer)
	if err != nil {
		return nil, err
	}
	l.provider = p
	return p, nil
}

func (l *AdminLogin) oauth(p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{ClientID: l.ClientID, ClientSecret: l.ClientSecret, RedirectURL: l.RedirectURL,
		Endpoint: p.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "profile"}}
}

func random() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Start redirects to the issuer with a fresh state, nonce and PKCE
// verifier, kept in a short-lived signed cookie.
func (l *AdminLogin) Start(w http.ResponseWriter, r *http.Request) {
	p, err := l.discover(r.Context())
	if err != nil {
		l.Logger.Error("admin login: issuer discovery failed", "issuer", l.Issuer, "err", err)
		http.Error(w, "the sign-in provider is unavailable; try again shortly", http.StatusBadGateway)
		return
	}
	st := loginState{State: random(), Verifier: oauth2.GenerateVerifier(), Nonce: random(), Expires: time.Now().Add(10 * time.Minute),
		Next: safeNext(r.URL.Query().Get("next"))}
	v, err := l.Signer.Sign(loginCookie, st)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: v, Path: "/admin/", HttpOnly: true, Secure: l.Secure,
		SameSite: http.SameSiteLaxMode, MaxAge: 600})
	http.Redirect(w, r, l.oauth(p).AuthCodeURL(st.State, oauth2.S256ChallengeOption(st.Verifier), oidc.Nonce(st.Nonce)), http.StatusFound)
}

// Callback completes the flow: checks state, exchanges the code with the
// PKCE verifier, verifies the ID token and its nonce, and sets the session.
func (l *AdminLogin) Callback(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, msg string, err error) {
		l.Logger.Warn("admin login refused", "reason", msg, "err", err)
		http.Error(w, "sign-in failed: "+msg, status)
	}
	c, err := r.Cookie(loginCookie)
	var st loginState
	if err != nil || l.Signer.Open(loginCookie, c.Value, &st) != nil || time.Now().After(st.Expires) {
		fail(http.StatusBadRequest, "no sign-in in progress (or it expired); start again", err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Path: "/admin/", MaxAge: -1, HttpOnly: true, Secure: l.Secure})
	if e := r.URL.Query().Get("error"); e != "" {
		fail(http.StatusForbidden, "the provider refused: "+e, nil)
		return
	}
	if r.URL.Query().Get("state") != st.State {
		fail(http.StatusBadRequest, "state mismatch", nil)
		return
	}
	p, err := l.discover(r.Context())
	if err != nil {
		fail(http.StatusBadGateway, "the sign-in provider is unavailable", err)
		return
	}
	tok, err := l.oauth(p).Exchange(r.Context(), r.URL.Query().Get("code"), oauth2.VerifierOption(st.Verifier))
	if err != nil {
		fail(http.StatusBadGateway, "the code could not be exchanged", err)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := p.Verifier(&oidc.Config{ClientID: l.ClientID}).Verify(r.Context(), raw)
	if err != nil {
		fail(http.StatusForbidden, "the ID token is not valid", err)
		return
	}
	if idt.Nonce != st.Nonce {
		fail(http.StatusForbidden, "nonce mismatch", nil)
		return
	}
	sess, err := l.session(idt)
	if err != nil {
		fail(http.StatusForbidden, err.Error(), nil)
		return
	}
	if l.BindTenants != nil {
		if sess.Tenants, err = l.BindTenants(r.Context(), sess.Roles); err != nil {
			fail(http.StatusServiceUnavailable, "the tenants of the account's roles could not be read; try again shortly", err)
			return
		}
	}
	v, err := l.Signer.Sign(SessionCookie, sess)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookieName(l.Secure), Value: v, Path: "/", HttpOnly: true, Secure: l.Secure,
		SameSite: http.SameSiteLaxMode, Expires: sess.Expires})
	l.Logger.Info("admin signed in", "subject", sess.Subject, "roles", sess.Roles)
	next := l.AfterLogin
	if st.Next != "" {
		next = st.Next
	}
	http.Redirect(w, r, next, http.StatusFound)
}

func (l *AdminLogin) session(idt *oidc.IDToken) (*Session, error) {
	claim := l.RolesClaim
	if claim == "" {
		claim = "roles"
	}
	var all map[string]any
	if err := idt.Claims(&all); err != nil {
		return nil, err
	}
	var roles []string
	switch v := all[claim].(type) {
	case []any:
		for _, r := range v {
			if s, ok := r.(string); ok {
				roles = append(roles, s)
			}
		}
	case string:
		roles = []string{v}
	}
	if len(roles) == 0 {
		return nil, fmt.Errorf("the account has no admin role (claim %q)", claim)
	}
	ttl := l.SessionTTL
	if ttl <= 0 {
		ttl = 8 * time.Hour
	}
	name, _ := all["name"].(string)
	return &Session{ID: random(), Issuer: idt.Issuer, Subject: idt.Subject, Name: name, Roles: roles, Expires: time.Now().Add(ttl)}, nil
}

// safeNext keeps a post-sign-in destination only when it is a path of
// the admin UI: never another site, a scheme-relative URL or a path that
// escapes /admin/.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/admin/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") ||
		strings.Contains(next, "/../") || len(next) > 1024 {
		return ""
	}
	return next
}

// Logout ends the session: POST only, with the session's CSRF token and
// a same-origin Origin, so no other site can sign an admin out (or in).
// The session is recorded as ended (refused on every replica until it
// would have expired) and its cookie cleared.
func (l *AdminLogin) Logout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "sign out with POST", http.StatusMethodNotAllowed)
		return
	}
	sess, err := SessionFrom(r, l.Signer, l.Secure)
	if err == nil {
		if !l.SameOrigin(r) || !l.Signer.CheckCSRF(sess, r.Header.Get("X-CSRF-Token")) {
			http.Error(w, "cross-site request refused", http.StatusForbidden)
			return
		}
		if l.EndSession != nil {
			if err := l.EndSession(r.Context(), sess.ID, sess.Expires); err != nil {
				l.Logger.Error("ending an admin session failed", "err", err)
				http.Error(w, "the session could not be ended; try again", http.StatusServiceUnavailable)
				return
			}
		}
		l.Logger.Info("admin signed out", "subject", sess.Subject)
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookieName(l.Secure), Path: "/", MaxAge: -1, HttpOnly: true, Secure: l.Secure, SameSite: http.SameSiteLaxMode})
	w.WriteHeader(http.StatusNoContent)
}

// SameOrigin reports whether a browser request came from the platform's
// own pages: its Origin (or, lacking one, its Referer) is the public
// origin.
func (l *AdminLogin) SameOrigin(r *http.Request) bool {
	return SameOrigin(r, l.PublicOrigin)
}

// SameOrigin reports whether r's Origin header (or, lacking one, its
// Referer) is origin, as scheme://host[:port].
func SameOrigin(r *http.Request, origin string) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		ref := r.Header.Get("Referer")
		u, err := url.Parse(ref)
		if ref == "" || err != nil || u.Host == "" {
			return false
		}
		o = u.Scheme + "://" + u.Host
	}
	return o != "null" && strings.EqualFold(strings.TrimSuffix(o, "/"), strings.TrimSuffix(origin, "/"))
}

// SessionCookieName is the session cookie's name: __Host- prefixed over
// HTTPS, so the browser only accepts it Secure, host-only and for the
// whole site (no subdomain or path can plant or shadow it).
func SessionCookieName(secure bool) string {
	if secure {
		return "__Host-" + SessionCookie
	}
	return SessionCookie
}

// SessionFrom reads and verifies the session cookie of a request. A
// session without an id (signed before sessions had one) is refused:
// it could not be ended.
func SessionFrom(r *http.Request, s *Signer, secure bool) (*Session, error) {
	c, err := r.Cookie(SessionCookieName(secure))
	if err != nil {
		return nil, err
	}
	var sess Session
	if err := s.Open(SessionCookie, c.Value, &sess); err != nil {
		return nil, err
	}
	if time.Now().After(sess.Expires) {
		return nil, errors.New("session expired")
	}
	if sess.ID == "" {
		return nil, errors.New("session without an id")
	}
	return &sess, nil
}
