// Package api is the platform's admin REST API under /api/v1: tenants and
// their catalogues, JSON in and out, RFC 9457 problems, cursor pagination
// and optimistic concurrency by version (ETag / If-Match).
package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/store"
)

// Admin is an authenticated caller of the admin API.
type Admin struct {
	// Subject identifies the caller in logs and audit records.
	Subject string
	// Role is RolePlatformAdmin, RoleTenantAdmin or RoleViewer.
	Role string
	// TenantIDs are the tenants a tenant admin may touch, by id: a grant
	// follows its tenant, never a slug that may pass to a new tenant.
	TenantIDs []string
	// Name is the admin's display name, when the sign-in gave one.
	Name string
	// CSRFToken is set for a browser session: its state-changing
	// requests must carry it (X-CSRF-Token) from the platform's own
	// origin. Bearer credentials are not sent by browsers on their own,
	// so need neither.
	CSRFToken string
	// crossSite marks a session request that lacked a matching token or
	// came from another origin.
	crossSite bool
}

// Authenticator decides who is calling. It returns ErrUnauthenticated
// (possibly wrapped) when the request carries no acceptable credential.
type Authenticator interface {
	Authenticate(r *http.Request) (*Admin, error)
}

// ErrUnauthenticated means no acceptable credential was presented.
var ErrUnauthenticated = errors.New("unauthenticated")

// BootstrapToken authenticates a single bearer token configured at start.
// Only its SHA-256 hash is kept in memory.
type BootstrapToken struct {
	hash [sha256.Size]byte
	set  bool
}

// NewBootstrapToken returns an authenticator for token; an empty token
// authenticates nobody.
func NewBootstrapToken(token string) *BootstrapToken {
	if token == "" {
		return &BootstrapToken{}
	}
	return &BootstrapToken{hash: sha256.Sum256([]byte(token)), set: true}
}

// Authenticate implements Authenticator.
func (b *BootstrapToken) Authenticate(r *http.Request) (*Admin, error) {
	tok, ok := auth.BearerToken(r.Header)
	if !ok || !b.set {
		return nil, ErrUnauthenticated
	}
	h := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(h[:], b.hash[:]) != 1 {
		return nil, ErrUnauthenticated
	}
	return &Admin{Subject: "bootstrap", Role: RolePlatformAdmin}, nil
}

// Options configures the admin API.
type Options struct {
	// Tenants, Record, Tokens, Audit and LegacySessions are the parts
	// of the database the API uses (store.Store's Tenants, Record,
	// Credentials, Audit and Legacy).
	Tenants        TenantStore
	Record         FlowRecord
	Tokens         TokenStore
	Audit          AuditLog
	LegacySessions SessionLister
	Auth           Authenticator
	// MaxBodyBytes caps request bodies; 0 means 1 MiB.
	MaxBodyBytes int64
	// CatalogueItems bounds a tenant's catalogue items; 0 means no limit.
	CatalogueItems int
	// PublicURL is the platform's external base URL, used to show each
	// tenant's endpoint.
	PublicURL string
	Logger    *slog.Logger
	// Changed, when set, is told about every successful change to a
	// tenant or its catalogue, so this replica serves its own writes at
	// once (other replicas notice on their next refresh).
	Changed func(ctx context.Context, slug string)
	// Flows cancels flows and follows their changes; nil disables
	// cancelling and the live stream (the record is still readable).
	Flows FlowActions
	// TraceURL links trace ids to a tracing backend ({traceId}, {spanId}).
	TraceURL string
	// Keys manages per-tenant key rings; nil disables the keys routes.
	Keys KeyAdmin
	// Sessions ends legacy client sessions; nil: they cannot be ended
	// here (they can still be listed).
	Sessions SessionAdmin
}

// Server is the admin API.
type Server struct {
	opts Options
	log  *slog.Logger
}

// Register mounts the admin API on r under /api/v1.
func Register(r gin.IRouter, opts Options) *Server {
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{opts: opts, log: opts.Logger}
	v1 := r.Group("/api/v1", s.authenticate, s.audit, s.authorize)
	v1.GET("/me", s.me)
	v1.GET("/audit", s.auditLog)
	v1.POST("/tokens", s.createToken)
	v1.GET("/tokens", s.listTokens)
	v1.DELETE("/tokens/:id", s.revokeToken)
	v1.POST("/tenants", s.createTenant)
	v1.GET("/tenants", s.listTenants)
	v1.GET("/tenants/:slug", s.getTenant)
	v1.PATCH("/tenants/:slug", s.patchTenant)
	v1.DELETE("/tenants/:slug", s.deleteTenant)
	s.registerFlows(v1)
	s.registerKeys(v1)
	s.registerSessions(v1)
	for _, k := range kinds {
		k.register(s, v1.Group("/tenants/:slug/"+k.path()))
	}
	return s
}

// authenticate refuses every request without an admin credential.
func (s *Server) authenticate(c *gin.Context) {
	if s.opts.Auth == nil {
		c.Header("WWW-Authenticate", `Bearer realm="platform-admin"`)
		s.refuse(c, "not_configured", probUnauthorized.with("admin authentication is not configured on this server"))
		return
	}
	admin, err := s.opts.Auth.Authenticate(c.Request)
	if err != nil {
		reason := "no_credential"
		if !errors.Is(err, ErrUnauthenticated) {
			reason = "authentication_error"
			s.log.Warn("admin authentication failed", "err", err)
		} else if presentsCredential(c.Request) {
			reason = "bad_credential"
		}
		c.Header("WWW-Authenticate", `Bearer realm="platform-admin"`)
		s.refuse(c, reason, probUnauthorized.with("a valid admin bearer token is required"))
		return
	}
	if admin.CSRFToken != "" && admin.crossSite && !safeMethod(c.Request.Method) {
		c.Set("admin", admin)
		s.refuse(c, "csrf", probForbidden.with("cross-site request refused: a browser session's changes need its CSRF token (X-CSRF-Token, from GET /api/v1/me) and must come from the platform's own pages"))
		return
	}
	c.Set("admin", admin)
	c.Next()
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// presentsCredential reports whether a request carries something meant
// as an admin credential (a bearer token or a session cookie).
func presentsCredential(r *http.Request) bool {
	if _, ok := auth.BearerToken(r.Header); ok || r.Header.Get("Authorization") != "" {
		return true
	}
	for _, c := range r.Cookies() {
		if c.Name == auth.SessionCookieName(false) || c.Name == auth.SessionCookieName(true) {
			return true
		}
	}
	return false
}

// refuse answers a refused admin request with p and logs the refusal:
// why, who when known, and from where (the client address as the
// trusted proxies report it, and the connecting peer). Never the
// credential.
func (s *Server) refuse(c *gin.Context, reason string, p *Problem) {
	attrs := []any{"status", p.Status, "reason", reason, "method", c.Request.Method, "path", c.Request.URL.Path,
		"client", c.ClientIP(), "peer", c.RemoteIP()}
	if a := adminOf(c); a != "" {
		attrs = append(attrs, "admin", a)
	}
	s.log.WarnContext(c.Request.Context(), "admin request refused", attrs...)
	writeProblem(c, p)
}

// changed reports a successful write.
func (s *Server) changed(c *gin.Context) {
	if s.opts.Changed != nil {
		s.opts.Changed(context.WithoutCancel(c.Request.Context()), c.Param("slug"))
	}
}

// storeProblem maps a store error to a problem. Unknown errors are logged
// and answered generically, so nothing internal leaks.
func (s *Server) storeProblem(c *gin.Context, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(c, probNotFound.with(err.Error()))
	case errors.Is(err, store.ErrSlugRetired):
		writeProblem(c, probSlugRetired.with(err.Error()+`; to give it to a new tenant anyway, set "reuseRetiredSlug": true`))
	case errors.Is(err, store.ErrConflict):
		writeProblem(c, probConflict.with(err.Error()))
	case errors.Is(err, store.ErrQuota):
		writeProblem(c, probQuota.with(err.Error()+"; delete items first, or ask the operator to raise the limit"))
	case errors.Is(err, store.ErrVersionMismatch):
		writeProblem(c, probPrecondition.with(err.Error()+"; fetch it again and retry with the current version"))
	case errors.Is(err, context.Canceled):
		c.Abort()
	default:
		s.log.Error("admin api store error", "path", c.Request.URL.Path, "err", err)
		writeProblem(c, probInternal.with("the request could not be completed; nothing was changed"))
	}
}

// ifMatch reads the expected version from If-Match ("3" or W/"3") or from
// a version in the body; 0 means unconditional.
func ifMatch(c *gin.Context, bodyVersion *int64) (int64, *Problem) {
	h := c.GetHeader("If-Match")
	if h == "" || h == "*" {
		if bodyVersion != nil {
			return *bodyVersion, nil
		}
		return 0, nil
	}
	h = strings.TrimPrefix(h, "W/")
	v, err := strconv.ParseInt(strings.Trim(h, `"`), 10, 64)
	if err != nil || v <= 0 {
		return 0, probMalformed.with(fmt.Sprintf("If-Match must be an ETag this API returned, like \"3\"; got %q", c.GetHeader("If-Match")))
	}
	return v, nil
}

func setETag(c *gin.Context, version int64) {
	c.Header("ETag", `"`+strconv.FormatInt(version, 10)+`"`)
}

// page reads limit and cursor query parameters.
func page(c *gin.Context) (after string, limit int, p *Problem) {
	limit = 50
	if l := c.Query("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 200 {
			return "", 0, probValidation.with("bad pagination", FieldError{Field: "limit", Message: "must be an integer from 1 to 200"})
		}
		limit = n
	}
	if cur := c.Query("cursor"); cur != "" {
		a, err := decodeCursor(cur)
		if err != nil {
			return "", 0, probValidation.with("bad pagination", FieldError{Field: "cursor", Message: "is not a cursor this API returned"})
		}
		after = a
	}
	return after, limit, nil
}

// listResponse is the shape of every list: items and, when more remain,
// the cursor for the next page.
type listResponse[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"nextCursor,omitempty"`
}
