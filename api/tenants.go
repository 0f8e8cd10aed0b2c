package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/tenant"
)

// tenantView is a tenant as the API shows it.
type tenantView struct {
	// ID never changes and is never reused; a slug can pass to a new
	// tenant once its tenant is deleted.
	ID          string          `json:"id"`
	Slug        string          `json:"slug"`
	DisplayName string          `json:"displayName"`
	Disabled    bool            `json:"disabled"`
	Settings    tenant.Settings `json:"settings"`
	// Access says plainly who may call the endpoint: "public" (anyone,
	// flows bound to no user), "bearer" (tokens from trusted issuers) or
	// "closed" (nobody yet: no issuer is trusted).
	Access           string    `json:"access"`
	Endpoint         string    `json:"endpoint"`
	Version          int64     `json:"version"`
	CatalogueVersion int64     `json:"catalogueVersion"`
	CreatedAt        time.Time `json:"createdAt"`
	UpdatedAt        time.Time `json:"updatedAt"`
}

func (s *Server) view(t *store.Tenant) tenantView {
	var set tenant.Settings
	_ = json.Unmarshal([]byte(t.Settings), &set)
	access := "closed"
	switch {
	case set.Auth.Public:
		access = "public"
	case len(set.Auth.Issuers) > 0:
		access = "bearer"
	}
	return tenantView{
		ID: t.ID, Slug: t.Slug, DisplayName: t.DisplayName, Disabled: t.Disabled, Settings: set, Access: access,
		Endpoint: strings.TrimSuffix(s.opts.PublicURL, "/") + "/t/" + t.Slug + "/mcp",
		Version:  t.Version, CatalogueVersion: t.CatalogueVersion,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
	}
}

type createTenantRequest struct {
	Slug             string           `json:"slug"`
	DisplayName      string           `json:"displayName"`
	Disabled         bool             `json:"disabled"`
	Settings         *tenant.Settings `json:"settings"`
	ReuseRetiredSlug bool             `json:"reuseRetiredSlug"`
}

// validateTenant checks the editable fields of a tenant.
func validateTenant(slug, displayName *string, set *tenant.Settings) []FieldError {
	var errs []FieldError
	if slug != nil && !tenant.ValidSlug(*slug) {
		errs = append(errs, FieldError{Field: "slug", Message: "must be a lowercase DNS label: 1 to 63 of a-z, 0-9 and '-', not starting or ending with '-'"})
	}
	if displayName != nil && (strings.TrimSpace(*displayName) == "" || len(*displayName) > 200) {
		errs = append(errs, FieldError{Field: "displayName", Message: "must be 1 to 200 characters, not only spaces"})
	}
	if set != nil {
		for _, e := range set.Validate() {
			errs = append(errs, FieldError{Field: e.Field, Message: e.Message})
		}
	}
	return errs
}

func (s *Server) createTenant(c *gin.Context) {
	var req createTenantRequest
	if p := decodeJSON(c, s.opts.MaxBodyBytes, &req); p != nil {
		writeProblem(c, p)
		return
	}
	if errs := validateTenant(&req.Slug, &req.DisplayName, req.Settings); len(errs) > 0 {
		writeProblem(c, probValidation.with("the tenant is not valid", errs...))
		return
	}
	settings := []byte("{}")
	if req.Settings != nil {
		settings, _ = json.Marshal(req.Settings)
	}
	t := &store.Tenant{Slug: req.Slug, DisplayName: req.DisplayName, Disabled: req.Disabled, Settings: string(settings)}
	if err := s.opts.Tenants.Create(c.Request.Context(), t, req.ReuseRetiredSlug); err != nil {
		s.storeProblem(c, err)
		return
	}
	c.Set("tenant", t) // the audit entry names the new tenant
	c.Set(auditObject, t.Slug)
	s.log.Info("tenant created", "tenant", t.Slug, "admin", adminOf(c))
	setETag(c, t.Version)
	c.Header("Location", "/api/v1/tenants/"+t.Slug)
	c.JSON(http.StatusCreated, s.view(t))
}

func (s *Server) getTenant(c *gin.Context) {
	t, err := s.opts.Tenants.Get(c.Request.Context(), c.Param("slug"))
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	setETag(c, t.Version)
	c.JSON(http.StatusOK, s.view(t))
}

func (s *Server) listTenants(c *gin.Context) {
	after, limit, p := page(c)
	if p != nil {
		writeProblem(c, p)
		return
	}
	ts, err := s.opts.Tenants.List(c.Request.Context(), after, limit+1)
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	resp := listResponse[tenantView]{Items: []tenantView{}}
	admin := c.MustGet("admin").(*Admin)
	for i := range ts {
		if i == limit {
			resp.NextCursor = encodeCursor(ts[i-1].Slug)
			break
		}
		// A tenant admin sees only its tenants (pages may come out short).
		if _, visible := admin.may(http.MethodGet, ts[i].ID); visible {
			resp.Items = append(resp.Items, s.view(&ts[i]))
		}
	}
	c.JSON(http.StatusOK, resp)
}

type patchTenantRequest struct {
	DisplayName *string         `json:"displayName"`
	Disabled    *bool           `json:"disabled"`
	Settings    json.RawMessage `json:"settings"`
	Version     *int64          `json:"version"`
}

// settingsProblem carries validation failures out of an update.
type settingsProblem struct{ p *Problem }

func (e *settingsProblem) Error() string { return e.p.Detail }

// patchTenant changes the fields present in the body. settings is a JSON
// merge patch (RFC 7396) of the current settings: keys present replace,
// null removes, absent keys are kept.
func (s *Server) patchTenant(c *gin.Context) {
	var req patchTenantRequest
	if p := decodeJSON(c, s.opts.MaxBodyBytes, &req); p != nil {
		writeProblem(c, p)
		return
	}
	if errs := validateTenant(nil, req.DisplayName, nil); len(errs) > 0 {
		writeProblem(c, probValidation.with("the change is not valid", errs...))
		return
	}
	if len(req.Settings) > 0 && req.Settings[0] != '{' {
		writeProblem(c, probValidation.with("the change is not valid", FieldError{Field: "settings", Message: "must be an object (a merge patch of the settings)"}))
		return
	}
	want, p := ifMatch(c, req.Version)
	if p != nil {
		writeProblem(c, p)
		return
	}
	t, err := s.opts.Tenants.Update(c.Request.Context(), c.Param("slug"), want, func(t *store.Tenant) error {
		if req.DisplayName != nil {
			t.DisplayName = *req.DisplayName
		}
		if req.Disabled != nil {
			t.Disabled = *req.Disabled
		}
		if len(req.Settings) > 0 {
			merged, p := mergeSettings([]byte(t.Settings), req.Settings)
			if p != nil {
				return &settingsProblem{p}
			}
			t.Settings = string(merged)
		}
		return nil
	})
	var sp *settingsProblem
	if errors.As(err, &sp) {
		writeProblem(c, sp.p)
		return
	}
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	s.changed(c)
	s.log.Info("tenant updated", "tenant", t.Slug, "admin", adminOf(c))
	setETag(c, t.Version)
	c.JSON(http.StatusOK, s.view(t))
}

func (s *Server) deleteTenant(c *gin.Context) {
	want, p := ifMatch(c, nil)
	if p != nil {
		writeProblem(c, p)
		return
	}
	if err := s.opts.Tenants.Delete(c.Request.Context(), c.Param("slug"), want); err != nil {
		s.storeProblem(c, err)
		return
	}
	s.changed(c)
	s.log.Info("tenant deleted", "tenant", c.Param("slug"), "admin", adminOf(c))
	c.Status(http.StatusNoContent)
}

// mergeSettings applies an RFC 7396 merge patch to stored settings and
// validates the result strictly.
func mergeSettings(current, patch []byte) ([]byte, *Problem) {
	var cur, pat map[string]any
	_ = json.Unmarshal(current, &cur)
	if err := json.Unmarshal(patch, &pat); err != nil {
		return nil, probValidation.with("the change is not valid", FieldError{Field: "settings", Message: "must be an object"})
	}
	merged, _ := json.Marshal(mergePatch(cur, pat))
	var set tenant.Settings
	dec := json.NewDecoder(bytes.NewReader(merged))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&set); err != nil {
		p := jsonProblem(err, 0)
		for i := range p.Errors {
			p.Errors[i].Field = "settings." + p.Errors[i].Field
		}
		return nil, p
	}
	if errs := validateTenant(nil, nil, &set); len(errs) > 0 {
		return nil, probValidation.with("the change is not valid", errs...)
	}
	out, _ := json.Marshal(set)
	return out, nil
}

// mergePatch applies patch to target per RFC 7396.
func mergePatch(target, patch map[string]any) map[string]any {
	if target == nil {
		target = map[string]any{}
	}
	for k, v := range patch {
		if v == nil {
			delete(target, k)
			continue
		}
		if pv, ok := v.(map[string]any); ok {
			tv, _ := target[k].(map[string]any)
			target[k] = mergePatch(tv, pv)
			continue
		}
		target[k] = v
	}
	return target
}

func adminOf(c *gin.Context) string {
	if a, ok := c.Get("admin"); ok {
		return a.(*Admin).Subject
	}
	return ""
}
