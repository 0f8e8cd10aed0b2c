package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opsmcp/platform/keys"
	"github.com/opsmcp/platform/store"
)

// KeyAdmin manages tenants' request-state key rings (a *keys.Manager).
type KeyAdmin interface {
	Show(ctx context.Context, tenantID string) (*keys.View, error)
	Create(ctx context.Context, tenantID, custody string) (*keys.View, error)
	RotateNow(ctx context.Context, tenantID string) (*keys.View, error)
	Update(ctx context.Context, tenantID string, period *time.Duration, custody *string) (*keys.View, error)
	Revoke(ctx context.Context, tenantID, keyID, confirm string) (*keys.View, error)
}

var probKeyStore = problemKind{"key-store-unavailable", "Key store unavailable", http.StatusServiceUnavailable}

// registerKeys mounts the key routes:
//
//	GET   /tenants/{slug}/keys                 the ring: ids, ages, phase, next transition (never material)
//	POST  /tenants/{slug}/keys                 create a ring {custody}
//	PATCH /tenants/{slug}/keys                 {rotationPeriodSeconds, custody}
//	POST  /tenants/{slug}/keys/rotate          rotate now (stage a new key at once)
//	POST  /tenants/{slug}/keys/{key}/revoke    emergency revocation {confirm: key id}
//
// Every change is audit-logged. A read writes nothing, neither a ring
// nor an audit entry: viewers may read, and a viewer causes no writes.
func (s *Server) registerKeys(v1 gin.IRouter) {
	v1.GET("/keys", s.fleetKeys)
	g := v1.Group("/tenants/:slug/keys")
	g.GET("", s.showKeys)
	g.POST("", s.createKeys)
	g.PATCH("", s.updateKeys)
	g.POST("/rotate", s.rotateKeys)
	g.POST("/:key/revoke", s.revokeKey)
}

// maxFleetRings bounds the rings one fleet view reads.
const maxFleetRings = 500

// fleetKeys answers GET /keys: every ring of the tenants the caller may
// see, its phase and next transition, and the flows in flight under
// each of its keys (what retiring or revoking the key would touch). A
// tenant without a ring is listed with none; one whose ring cannot be
// read now, with the reason.
func (s *Server) fleetKeys(c *gin.Context) {
	if s.opts.Keys == nil {
		writeProblem(c, probNotFound.with("per-tenant key rings are not enabled on this server (keys-provider is static)"))
		return
	}
	ctx := c.Request.Context()
	visible, err := s.visibleTenants(c)
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	// A tenant admin's rings are those of its grant, read by id (a list
	// of the first tenants could leave them out); the others see the
	// fleet's first maxFleetRings.
	var tenants []store.Tenant
	if visible != nil {
		slugs, err := s.opts.Tenants.SlugsByID(ctx, visible)
		if err != nil {
			s.storeProblem(c, err)
			return
		}
		for _, id := range visible {
			if slug, ok := slugs[id]; ok {
				tenants = append(tenants, store.Tenant{ID: id, Slug: slug})
			}
		}
		slices.SortFunc(tenants, func(a, b store.Tenant) int { return strings.Compare(a.Slug, b.Slug) })
	} else if tenants, err = s.opts.Tenants.List(ctx, "", maxFleetRings); err != nil {
		s.storeProblem(c, err)
		return
	}
	inFlight, err := s.opts.Record.InFlightByKey(ctx)
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	type ringView struct {
		Tenant   string           `json:"tenant"`
		Ring     *keys.View       `json:"ring,omitempty"`
		Problem  string           `json:"problem,omitempty"`
		InFlight map[string]int64 `json:"inFlight"`
	}
	items := []ringView{}
	for _, t := range tenants {
		if visible != nil && !slices.Contains(visible, t.ID) {
			continue
		}
		rv := ringView{Tenant: t.Slug, InFlight: inFlight[t.ID]}
		if rv.InFlight == nil {
			rv.InFlight = map[string]int64{}
		}
		v, err := s.opts.Keys.Show(ctx, t.ID)
		switch {
		case err == nil:
			rv.Ring = v
		case errors.Is(err, keys.ErrNoRing):
			rv.Problem = "no ring yet"
		default:
			s.log.Warn("key ring unreadable for the fleet view", "tenant", t.Slug, "err", err)
			rv.Problem = "the ring could not be read now"
		}
		items = append(items, rv)
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"items": items, "truncated": visible == nil && len(tenants) == maxFleetRings})
}

// keysTenant is the tenant authorize resolved (so the ring acted on is
// the one of the tenant whose grant was checked), or answers the problem.
func (s *Server) keysTenant(c *gin.Context) (*store.Tenant, bool) {
	if s.opts.Keys == nil {
		writeProblem(c, probNotFound.with("per-tenant key rings are not enabled on this server (keys-provider is static)"))
		return nil, false
	}
	t := tenantOf(c)
	if t == nil {
		writeProblem(c, probNotFound.with("tenant \""+c.Param("slug")+"\": not found"))
		return nil, false
	}
	return t, true
}

// keysAudit records a key action with its non-secret facts.
func (s *Server) keysAudit(c *gin.Context, action, object string, detail map[string]any) {
	c.Set("audited", true) // this handler wrote its own, detailed entry
	e := store.AuditEntry{Actor: adminOf(c), Action: action, TenantSlug: c.Param("slug"), Object: object, RemoteAddr: c.ClientIP()}
	if t := tenantOf(c); t != nil {
		e.TenantID, e.TenantSlug = t.ID, t.Slug
	}
	if err := s.opts.Audit.Write(context.WithoutCancel(c.Request.Context()), e, detail); err != nil {
		s.log.Error("audit write failed", "action", action, "err", err)
	}
}

func viewFacts(v *keys.View) map[string]any {
	if v == nil {
		return map[string]any{}
	}
	ids := make([]string, len(v.Keys))
	for i, k := range v.Keys {
		ids[i] = k.ID + ":" + string(k.State)
	}
	return map[string]any{"phase": v.Phase, "keys": ids, "next": v.Next.Transition, "nextAt": v.Next.At,
		"rotationPeriodSeconds": v.RotationPeriodSeconds, "custody": v.Custody, "generation": v.Generation}
}

// keysProblem maps a keys error to a problem.
func (s *Server) keysProblem(c *gin.Context, err error, v *keys.View) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.storeProblem(c, err)
	case errors.Is(err, keys.ErrNoRing):
		writeProblem(c, probNotFound.with("the tenant has no key ring yet: it gets one at its first request-state round (keys-auto-create), or create one with POST …/keys"))
	case errors.Is(err, keys.ErrRingExists):
		writeProblem(c, probConflict.with("the tenant already has a key ring"))
	case errors.Is(err, keys.ErrRotationInProgress):
		detail := "a rotation is already in progress"
		if v != nil {
			detail += ": phase " + string(v.Phase) + ", next " + string(v.Next.Transition) + " at " + v.Next.At.UTC().Format(time.RFC3339)
		}
		writeProblem(c, probConflict.with(detail))
	case errors.Is(err, keys.ErrUnknownKey):
		writeProblem(c, probNotFound.with("key \""+c.Param("key")+"\" is not in the tenant's ring"))
	case errors.Is(err, keys.ErrNotConfirmed):
		writeProblem(c, probValidation.with("revocation is immediate: in-flight flows sealed under the key are refused",
			FieldError{Field: "confirm", Message: "must repeat the key id \"" + c.Param("key") + "\""}))
	case errors.Is(err, keys.ErrBadPeriod):
		writeProblem(c, probValidation.with("bad rotation period",
			FieldError{Field: "rotationPeriodSeconds", Message: "must be from 1 to 315360000"}))
	case errors.Is(err, keys.ErrBadCustody):
		writeProblem(c, probValidation.with("bad custody", FieldError{Field: "custody", Message: err.Error()}))
	case errors.Is(err, keys.ErrMalformed):
		s.log.Error("tenant key ring refused", "tenant", c.Param("slug"), "err", err)
		writeProblem(c, probInternal.with("the tenant's key ring record is malformed or foreign; the tenant fails closed until it is repaired"))
	case errors.Is(err, context.Canceled):
		c.Abort()
	default:
		s.log.Error("key store error", "tenant", c.Param("slug"), "path", c.FullPath(), "err", err)
		writeProblem(c, probKeyStore.with("the key store did not complete the request; nothing was changed, or the change will show on the next read"))
	}
}

func (s *Server) showKeys(c *gin.Context) {
	t, ok := s.keysTenant(c)
	if !ok {
		return
	}
	v, err := s.opts.Keys.Show(c.Request.Context(), t.ID)
	if err != nil {
		s.keysProblem(c, err, nil)
		return
	}
	c.JSON(http.StatusOK, v)
}

type createKeysRequest struct {
	Custody string `json:"custody"`
}

func (s *Server) createKeys(c *gin.Context) {
	t, ok := s.keysTenant(c)
	if !ok {
		return
	}
	var req createKeysRequest
	if c.Request.ContentLength != 0 {
		if p := decodeJSON(c, s.opts.MaxBodyBytes, &req); p != nil {
			writeProblem(c, p)
			return
		}
	}
	if req.Custody != "" && req.Custody != keys.KindAES && req.Custody != keys.KindTransit {
		writeProblem(c, probValidation.with("bad custody", FieldError{Field: "custody", Message: "must be aes or transit"}))
		return
	}
	v, err := s.opts.Keys.Create(c.Request.Context(), t.ID, req.Custody)
	if err != nil {
		s.keysProblem(c, err, nil)
		return
	}
	s.keysAudit(c, "keys.create", v.Keys[0].ID, viewFacts(v))
	s.log.Info("key ring created", "tenant", t.Slug, "admin", adminOf(c))
	c.JSON(http.StatusCreated, v)
}

type updateKeysRequest struct {
	RotationPeriodSeconds *int64  `json:"rotationPeriodSeconds"`
	Custody               *string `json:"custody"`
}

func (s *Server) updateKeys(c *gin.Context) {
	t, ok := s.keysTenant(c)
	if !ok {
		return
	}
	var req updateKeysRequest
	if p := decodeJSON(c, s.opts.MaxBodyBytes, &req); p != nil {
		writeProblem(c, p)
		return
	}
	var fields []FieldError
	var period *time.Duration
	if req.RotationPeriodSeconds != nil {
		n := *req.RotationPeriodSeconds
		if n < 1 || n > int64(keys.MaxPeriod/time.Second) {
			fields = append(fields, FieldError{Field: "rotationPeriodSeconds", Message: "must be from 1 to 315360000"})
		}
		d := time.Duration(n) * time.Second
		period = &d
	}
	if req.Custody != nil && *req.Custody != keys.KindAES && *req.Custody != keys.KindTransit {
		fields = append(fields, FieldError{Field: "custody", Message: "must be aes or transit"})
	}
	if req.RotationPeriodSeconds == nil && req.Custody == nil {
		fields = append(fields, FieldError{Field: "rotationPeriodSeconds", Message: "give rotationPeriodSeconds and/or custody"})
	}
	if len(fields) > 0 {
		writeProblem(c, probValidation.with("bad key ring settings", fields...))
		return
	}
	v, err := s.opts.Keys.Update(c.Request.Context(), t.ID, period, req.Custody)
	if err != nil {
		s.keysProblem(c, err, nil)
		return
	}
	facts := viewFacts(v)
	if req.Custody != nil {
		facts["setCustody"] = *req.Custody
	}
	if req.RotationPeriodSeconds != nil {
		facts["setRotationPeriodSeconds"] = *req.RotationPeriodSeconds
	}
	s.keysAudit(c, "keys.update", "", facts)
	s.log.Info("key ring settings changed", "tenant", t.Slug, "admin", adminOf(c))
	c.JSON(http.StatusOK, v)
}

func (s *Server) rotateKeys(c *gin.Context) {
	t, ok := s.keysTenant(c)
	if !ok {
		return
	}
	v, err := s.opts.Keys.RotateNow(c.Request.Context(), t.ID)
	if err != nil {
		s.keysProblem(c, err, v)
		return
	}
	s.keysAudit(c, "keys.rotate", v.Keys[len(v.Keys)-1].ID, viewFacts(v))
	s.log.Info("key rotation started", "tenant", t.Slug, "admin", adminOf(c))
	c.JSON(http.StatusOK, v)
}

type revokeKeyRequest struct {
	Confirm string `json:"confirm"`
}

func (s *Server) revokeKey(c *gin.Context) {
	t, ok := s.keysTenant(c)
	if !ok {
		return
	}
	var req revokeKeyRequest
	if p := decodeJSON(c, s.opts.MaxBodyBytes, &req); p != nil {
		writeProblem(c, p)
		return
	}
	v, err := s.opts.Keys.Revoke(c.Request.Context(), t.ID, c.Param("key"), req.Confirm)
	if err != nil {
		// A refused revocation is worth a record too.
		s.keysAudit(c, "keys.revoke.refused", c.Param("key"), map[string]any{"reason": err.Error()})
		s.keysProblem(c, err, nil)
		return
	}
	s.keysAudit(c, "keys.revoke", c.Param("key"), viewFacts(v))
	s.log.Warn("key revoked", "tenant", t.Slug, "key", c.Param("key"), "admin", adminOf(c))
	c.JSON(http.StatusOK, v)
}
