package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/tenant"
)

// Roles of admin callers.
const (
	// RolePlatformAdmin may do everything.
	RolePlatformAdmin = "platform-admin"
	// RoleTenantAdmin may read and change only the tenants it names.
	RoleTenantAdmin = "tenant-admin"
	// RoleViewer may read everything and change nothing.
	RoleViewer = "viewer"
)

// ParseRoles turns role claim values into a role: "platform-admin",
// "viewer" or "tenant-admin:<slug>" (one value per tenant). The most
// powerful role wins; unknown values are ignored.
func ParseRoles(values []string) (role string, slugs []string) {
	for _, v := range values {
		switch {
		case v == RolePlatformAdmin:
			return RolePlatformAdmin, nil
		case strings.HasPrefix(v, RoleTenantAdmin+":"):
			if s := strings.TrimPrefix(v, RoleTenantAdmin+":"); tenant.ValidSlug(s) {
				slugs = append(slugs, s)
			}
		case v == RoleViewer && role == "":
			role = RoleViewer
		}
	}
	if len(slugs) > 0 {
		return RoleTenantAdmin, slugs
	}
	return role, nil
}

// Chain tries authenticators in order; the first that recognises the
// request decides.
type Chain []Authenticator

// Authenticate implements Authenticator.
func (c Chain) Authenticate(r *http.Request) (*Admin, error) {
	for _, a := range c {
		if a == nil {
			continue
		}
		admin, err := a.Authenticate(r)
		if errors.Is(err, ErrUnauthenticated) {
			continue
		}
		return admin, err
	}
	return nil, ErrUnauthenticated
}

// SessionAuth authenticates the admin UI's signed session cookie.
type SessionAuth struct {
	Signer *auth.Signer
	// Secure names the cookie for HTTPS (the __Host- prefix).
	Secure bool
	// Origin is the platform's public origin, which a session's
	// state-changing requests must come from.
	Origin string
	// Ended reports whether a session was ended by sign-out.
	Ended func(ctx context.Context, id string) (bool, error)
}

// Authenticate implements Authenticator. A tenant admin's grants are the
// tenants its claimed slugs named at sign-in (the session's record), so
// a slug given to a new tenant since does not carry them over.
func (s SessionAuth) Authenticate(r *http.Request) (*Admin, error) {
	sess, err := auth.SessionFrom(r, s.Signer, s.Secure)
	if err != nil {
		return nil, ErrUnauthenticated
	}
	if s.Ended != nil {
		ended, err := s.Ended(r.Context(), sess.ID)
		if err != nil {
			return nil, err
		}
		if ended {
			return nil, ErrUnauthenticated
		}
	}
	role, slugs := ParseRoles(sess.Roles)
	if role == "" {
		return nil, ErrUnauthenticated
	}
	a := &Admin{Subject: sess.Issuer + "#" + sess.Subject, Role: role, Name: sess.Name, CSRFToken: s.Signer.CSRFToken(sess)}
	a.crossSite = !auth.SameOrigin(r, s.Origin) || !s.Signer.CheckCSRF(sess, r.Header.Get("X-CSRF-Token"))
	for _, slug := range slugs {
		if id := sess.Tenants[slug]; id != "" {
			a.TenantIDs = append(a.TenantIDs, id)
		}
	}
	return a, nil
}

// BindTenants returns the sign-in's tenant binding (auth.AdminLogin's
// BindTenants): the tenant-admin slugs among roles, mapped to the
// tenants holding them now. Slugs no tenant holds are left out, so they
// grant nothing even if a tenant takes the slug later.
func BindTenants(st interface {
	IDsBySlug(ctx context.Context, slugs []string) (map[string]string, error)
}) func(ctx context.Context, roles []string) (map[string]string, error) {
	return func(ctx context.Context, roles []string) (map[string]string, error) {
		role, slugs := ParseRoles(roles)
		if role != RoleTenantAdmin {
			return nil, nil
		}
		return st.IDsBySlug(ctx, slugs)
	}
}

// TokenAuth authenticates API tokens (bearer "pat_…"), kept hashed.
type TokenAuth struct{ Tokens TokenStore }

const tokenPrefix = "pat_"

func hashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// Authenticate implements Authenticator.
func (a TokenAuth) Authenticate(r *http.Request) (*Admin, error) {
	tok, ok := auth.BearerToken(r.Header)
	if !ok || !strings.HasPrefix(tok, tokenPrefix) {
		return nil, ErrUnauthenticated
	}
	t, err := a.Tokens.APITokenByHash(r.Context(), hashToken(tok))
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, err
	}
	return &Admin{Subject: "token:" + t.ID, Role: t.Role, TenantIDs: t.TenantIDs}, nil
}

// may reports whether a may touch the tenant with id tenantID with
// method.
func (a *Admin) may(method, tenantID string) (allowed, visible bool) {
	read := method == http.MethodGet || method == http.MethodHead
	switch a.Role {
	case RolePlatformAdmin:
		return true, true
	case RoleViewer:
		return read, true
	case RoleTenantAdmin:
		mine := tenantID != "" && slices.Contains(a.TenantIDs, tenantID)
		return mine, mine
	}
	return false, false
}

// tenantOf is the tenant a request's route names, as authorize resolved
// it before the handler ran (nil when it names none, or none exists).
func tenantOf(c *gin.Context) *store.Tenant {
	t, _ := c.Get("tenant")
	tn, _ := t.(*store.Tenant)
	return tn
}

// authorize applies the caller's role to every route: platform admins may
// do anything; viewers only read; tenant admins only touch their tenants
// (by id), and get 404 (not 403) for any other tenant so names do not
// leak. It resolves the route's tenant once, for the grant check and the
// audit entry.
func (s *Server) authorize(c *gin.Context) {
	a := c.MustGet("admin").(*Admin)
	path := c.FullPath()
	slug := c.Param("slug")
	switch {
	case slug != "":
		t, err := s.opts.Tenants.Get(c.Request.Context(), slug)
		switch {
		case err == nil:
			c.Set("tenant", t)
		case errors.Is(err, store.ErrNotFound) && a.Role != RoleTenantAdmin:
			// The handler answers, as for any missing object.
		case errors.Is(err, store.ErrNotFound):
			s.refuse(c, "out_of_scope", probNotFound.with("tenant \""+slug+"\": not found"))
			return
		default:
			s.storeProblem(c, err)
			return
		}
		var id string
		if t != nil {
			id = t.ID
		}
		allowed, visible := a.may(c.Request.Method, id)
		if !visible {
			s.refuse(c, "out_of_scope", probNotFound.with("tenant \""+slug+"\": not found"))
			return
		}
		if !allowed {
			s.refuse(c, "role", probForbidden.with("your role ("+a.Role+") may not change this"))
			return
		}
	case path == "/api/v1/tenants" && c.Request.Method == http.MethodPost,
		strings.HasPrefix(path, "/api/v1/tokens"):
		if a.Role != RolePlatformAdmin {
			s.refuse(c, "role", probForbidden.with("only platform admins may do this"))
			return
		}
	}
	c.Next()
}

// auditObject is a context key a handler sets to name what it changed
// when its path does not (a creation names the new object).
const auditObject = "auditObject"

// audit records every successful change, after it is made, against the
// tenant's id (and its slug, for display) and the client's address as
// the trusted proxies report it.
func (s *Server) audit(c *gin.Context) {
	c.Next()
	if c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead || c.Writer.Status() >= 400 {
		return
	}
	if c.GetBool("audited") { // the handler wrote its own, detailed entry (api/keys.go)
		return
	}
	a, _ := c.Get("admin")
	admin, _ := a.(*Admin)
	if admin == nil {
		return
	}
	object := c.Param("name")
	if f := c.Param("flow"); f != "" {
		object = f
	}
	if id := c.Param("id"); id != "" {
		object = id
	}
	if o := c.GetString(auditObject); o != "" {
		object = o
	}
	entry := store.AuditEntry{Actor: admin.Subject, Action: c.Request.Method + " " + c.FullPath(),
		TenantSlug: c.Param("slug"), Object: object, RemoteAddr: c.ClientIP()}
	if t := tenantOf(c); t != nil {
		entry.TenantID, entry.TenantSlug = t.ID, t.Slug
	}
	ctx := context.WithoutCancel(c.Request.Context())
	if err := s.opts.Audit.Write(ctx, entry, map[string]any{"status": c.Writer.Status()}); err != nil {
		s.log.Error("audit write failed", "action", entry.Action, "err", err)
	}
}

// me says who the caller is; a tenant admin's tenants are listed by
// their slugs now (a deleted tenant is not listed) and by id.
func (s *Server) me(c *gin.Context) {
	a := c.MustGet("admin").(*Admin)
	slugs, err := s.opts.Tenants.SlugsByID(c.Request.Context(), a.TenantIDs)
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	tenants := []string{}
	for _, id := range a.TenantIDs {
		if slug, ok := slugs[id]; ok {
			tenants = append(tenants, slug)
		}
	}
	slices.Sort(tenants)
	out := gin.H{"subject": a.Subject, "role": a.Role, "tenants": tenants, "tenantIds": nonNil(a.TenantIDs), "session": a.CSRFToken != ""}
	if a.Name != "" {
		out["name"] = a.Name
	}
	if a.CSRFToken != "" {
		// The admin UI reads it here; the cookie itself is HTTP-only.
		out["csrfToken"] = a.CSRFToken
		c.Header("Cache-Control", "no-store")
	}
	c.JSON(http.StatusOK, out)
}

type createTokenRequest struct {
	Name             string   `json:"name"`
	Role             string   `json:"role"`
	Tenants          []string `json:"tenants"`
	ExpiresInSeconds int64    `json:"expiresInSeconds"`
}

// createToken mints an API token, shown once.
func (s *Server) createToken(c *gin.Context) {
	var req createTokenRequest
	if p := decodeJSON(c, s.opts.MaxBodyBytes, &req); p != nil {
		writeProblem(c, p)
		return
	}
	var errs []FieldError
	if strings.TrimSpace(req.Name) == "" || len(req.Name) > 200 {
		errs = append(errs, FieldError{"name", "must be 1 to 200 characters"})
	}
	switch req.Role {
	case RolePlatformAdmin, RoleViewer:
		if len(req.Tenants) > 0 {
			errs = append(errs, FieldError{"tenants", "only tenant-admin tokens name tenants"})
		}
	case RoleTenantAdmin:
		if len(req.Tenants) == 0 {
			errs = append(errs, FieldError{"tenants", "a tenant-admin token must name at least one tenant"})
		}
		for i, t := range req.Tenants {
			if !tenant.ValidSlug(t) {
				errs = append(errs, FieldError{"tenants[" + strconv.Itoa(i) + "]", "is not a tenant slug"})
			}
		}
	default:
		errs = append(errs, FieldError{"role", "must be platform-admin, tenant-admin or viewer"})
	}
	const maxTTL = 366 * 24 * 3600
	if req.ExpiresInSeconds == 0 {
		req.ExpiresInSeconds = 90 * 24 * 3600
	}
	if req.ExpiresInSeconds < 60 || req.ExpiresInSeconds > maxTTL {
		errs = append(errs, FieldError{"expiresInSeconds", "must be between 60 and 31622400 (one year)"})
	}
	if len(errs) > 0 {
		writeProblem(c, probValidation.with("the token request is not valid", errs...))
		return
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	tok := tokenPrefix + base64.RawURLEncoding.EncodeToString(secret)
	slugs, _ := json.Marshal(req.Tenants)
	if req.Tenants == nil {
		slugs = []byte("[]")
	}
	t := &store.APIToken{Name: req.Name, Hash: hashToken(tok), Role: req.Role, Tenants: string(slugs),
		CreatedBy: adminOf(c), ExpiresAt: time.Now().UTC().Add(time.Duration(req.ExpiresInSeconds) * time.Second)}
	err := s.opts.Tokens.CreateAPIToken(c.Request.Context(), t, req.Tenants)
	var unknown *store.UnknownSlugError
	if errors.As(err, &unknown) {
		writeProblem(c, probValidation.with("the token request is not valid",
			FieldError{"tenants[" + strconv.Itoa(unknown.Index) + "]", "no tenant has this slug"}))
		return
	}
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	c.Set(auditObject, "token "+t.ID+" ("+t.Name+")")
	c.JSON(http.StatusCreated, gin.H{"id": t.ID, "name": t.Name, "role": t.Role, "tenants": req.Tenants,
		"tenantIds": nonNil(t.TenantIDs), "expiresAt": t.ExpiresAt, "token": tok})
}

func nonNil(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

func (s *Server) listTokens(c *gin.Context) {
	ts, err := s.opts.Tokens.ListAPITokens(c.Request.Context())
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	out := make([]gin.H, len(ts))
	for i, t := range ts {
		var slugs []string
		_ = json.Unmarshal([]byte(t.Tenants), &slugs)
		// tenants are the slugs named at creation; tenantIds the grants
		// left (a deleted tenant's is gone).
		out[i] = gin.H{"id": t.ID, "name": t.Name, "role": t.Role, "tenants": slugs, "tenantIds": nonNil(t.TenantIDs),
			"createdBy": t.CreatedBy, "createdAt": t.CreatedAt, "expiresAt": t.ExpiresAt, "revokedAt": t.RevokedAt}
	}
	c.JSON(http.StatusOK, listResponse[gin.H]{Items: out})
}

func (s *Server) revokeToken(c *gin.Context) {
	if err := s.opts.Tokens.RevokeAPIToken(c.Request.Context(), c.Param("id")); err != nil {
		s.storeProblem(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// auditLog lists admin actions, newest first. ?tenant=SLUG reads the
// entries of the tenant holding the slug now (never those of an earlier
// tenant that held it); ?tenantId=ID reads a tenant's by id, deleted
// tenants' included. Tenant admins read one of their tenants at a time.
func (s *Server) auditLog(c *gin.Context) {
	a := c.MustGet("admin").(*Admin)
	slug, tenantID := c.Query("tenant"), c.Query("tenantId")
	switch {
	case slug != "" && tenantID != "":
		writeProblem(c, probValidation.with("name the tenant once",
			FieldError{"tenantId", "give tenant (a slug) or tenantId, not both"}))
		return
	case slug != "":
		t, err := s.opts.Tenants.Get(c.Request.Context(), slug)
		if errors.Is(err, store.ErrNotFound) {
			p := probNotFound.with("tenant \"" + slug + "\": not found")
			if a.Role == RoleTenantAdmin {
				s.refuse(c, "out_of_scope", p)
				return
			}
			p.Detail += "; a deleted tenant's entries are read with ?tenantId="
			writeProblem(c, p)
			return
		}
		if err != nil {
			s.storeProblem(c, err)
			return
		}
		tenantID = t.ID
	}
	if a.Role == RoleTenantAdmin && tenantID != "" && slices.Contains(a.TenantIDs, tenantID) {
		// A session names the tenants of its sign-in; one deleted since
		// grants nothing, its history included.
		live, err := s.opts.Tenants.SlugsByID(c.Request.Context(), []string{tenantID})
		if err != nil {
			s.storeProblem(c, err)
			return
		}
		if _, ok := live[tenantID]; !ok {
			s.refuse(c, "out_of_scope", probNotFound.with("tenant \""+tenantID+"\": not found"))
			return
		}
	}
	if a.Role == RoleTenantAdmin && !slices.Contains(a.TenantIDs, tenantID) {
		if tenantID != "" {
			name := slug
			if name == "" {
				name = tenantID
			}
			s.refuse(c, "out_of_scope", probNotFound.with("tenant \""+name+"\": not found"))
			return
		}
		writeProblem(c, probValidation.with("tenant admins read the audit log one tenant at a time",
			FieldError{"tenant", "must name one of your tenants"}))
		return
	}
	limit := 100
	if l, err := strconv.Atoi(c.Query("limit")); err == nil && l > 0 && l <= 500 {
		limit = l
	}
	var before time.Time
	if b := c.Query("before"); b != "" {
		t, err := time.Parse(time.RFC3339Nano, b)
		if err != nil {
			writeProblem(c, probValidation.with("bad pagination", FieldError{"before", "must be an RFC 3339 time"}))
			return
		}
		before = t
	}
	entries, err := s.opts.Audit.List(c.Request.Context(), tenantID, before, limit)
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	// An entry's detail is non-secret facts about the action (the store
	// holds writers to that): what a bulk action matched, which keys a
	// rotation touched.
	type entryView struct {
		store.AuditEntry
		Detail json.RawMessage `json:"detail,omitempty"`
	}
	items := make([]entryView, len(entries))
	for i, e := range entries {
		items[i] = entryView{AuditEntry: e}
		if e.Detail != "" && e.Detail != "{}" && json.Valid([]byte(e.Detail)) {
			items[i].Detail = json.RawMessage(e.Detail)
		}
	}
	c.JSON(http.StatusOK, gin.H{"items": items})
}
