package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opsmcp/platform/store"
)

// SessionAdmin ends legacy (initialization-era) client sessions on every
// replica (a *endpoint.Handler).
type SessionAdmin interface {
	// EndSession ends one session by its id, by whom; store.ErrNotFound
	// when the tenant has no such live session.
	EndSession(ctx context.Context, slug, id, by string) error
	// EndSessions ends every live session of a tenant, by whom.
	EndSessions(ctx context.Context, slug, by string) (int64, error)
}

// registerSessions mounts the legacy session routes:
//
//	GET    /tenants/{slug}/sessions        live sessions (not ended, not expired)
//	DELETE /tenants/{slug}/sessions/{id}   end one: its calls stop, its id gets 404 on every replica
//	DELETE /tenants/{slug}/sessions        end every live session of the tenant
//
// A session's id here is its nonce (ls_…), which traces carry as
// mcp.session.id; the sealed id the client holds is never shown.
func (s *Server) registerSessions(v1 gin.IRouter) {
	v1.GET("/tenants/:slug/sessions", s.listSessions)
	v1.DELETE("/tenants/:slug/sessions/:id", s.endSession)
	v1.DELETE("/tenants/:slug/sessions", s.endSessions)
}

// sessionView is a legacy session as the API shows it.
type sessionView struct {
	ID              string         `json:"id"`
	ProtocolVersion string         `json:"protocolVersion"`
	Client          *clientView    `json:"client,omitempty"`
	Principal       *principalView `json:"principal,omitempty"`
	LogLevel        string         `json:"logLevel,omitempty"`
	CreatedAt       time.Time      `json:"createdAt"`
	ExpiresAt       time.Time      `json:"expiresAt"`
	// LastSeenAt is when it was last used, to within 30 s.
	LastSeenAt *time.Time `json:"lastSeenAt,omitempty"`
	// CallsInFlight counts its bridged calls whose stream began and that
	// have not ended (waiting on the client, or running).
	CallsInFlight int `json:"callsInFlight"`
	// OpenStreams counts its open streams on every replica (the GET
	// stream, call streams, tasks/result waits), as each replica last
	// reported them: within 30 s.
	OpenStreams int `json:"openStreams"`
}

func viewSession(ls *store.LegacySession) sessionView {
	v := sessionView{ID: ls.ID, ProtocolVersion: ls.ProtocolVersion, LogLevel: ls.LogLevel,
		CreatedAt: ls.CreatedAt.UTC(), ExpiresAt: ls.ExpiresAt.UTC()}
	if ls.LastSeenAt != nil {
		t := ls.LastSeenAt.UTC()
		v.LastSeenAt = &t
	}
	if ls.ClientName != "" || ls.ClientVersion != "" {
		v.Client = &clientView{ls.ClientName, ls.ClientVersion}
	}
	if ls.PrincipalIssuer != "" || ls.PrincipalSubject != "" || ls.PrincipalClient != "" {
		v.Principal = &principalView{ls.PrincipalIssuer, ls.PrincipalSubject, ls.PrincipalClient}
	}
	return v
}

// sessionsTenant is the route's tenant, or answers 404.
func (s *Server) sessionsTenant(c *gin.Context) (*store.Tenant, bool) {
	t := tenantOf(c)
	if t == nil {
		writeProblem(c, probNotFound.with("tenant \""+c.Param("slug")+"\": not found"))
		return nil, false
	}
	return t, true
}

// listSessions answers GET /tenants/{slug}/sessions: one page of the
// tenant's live sessions, by id.
func (s *Server) listSessions(c *gin.Context) {
	t, ok := s.sessionsTenant(c)
	if !ok {
		return
	}
	after, limit, p := page(c)
	if p != nil {
		writeProblem(c, p)
		return
	}
	rows, err := s.opts.LegacySessions.List(c.Request.Context(), t.ID, after, limit+1)
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	out := listResponse[sessionView]{Items: []sessionView{}}
	ids := make([]string, 0, len(rows))
	for i := range rows {
		if i == limit {
			out.NextCursor = encodeCursor(rows[i-1].ID)
			break
		}
		out.Items = append(out.Items, viewSession(&rows[i]))
		ids = append(ids, rows[i].ID)
	}
	calls, err := s.opts.LegacySessions.CallsInFlight(c.Request.Context(), t.ID, ids)
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	streams, err := s.opts.LegacySessions.OpenStreams(c.Request.Context(), ids)
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	for i := range out.Items {
		out.Items[i].CallsInFlight, out.Items[i].OpenStreams = calls[out.Items[i].ID], streams[out.Items[i].ID]
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, out)
}

// endRequest is the optional body of a DELETE of sessions: why, for
// the audit log.
type endRequest struct {
	Reason string `json:"reason"`
}

// endReason reads the request's reason, or answers 400.
func endReason(c *gin.Context) (string, bool) {
	var req endRequest
	if c.Request.ContentLength != 0 {
		if err := c.ShouldBindJSON(&req); err != nil {
			writeProblem(c, probValidation.with("the body must be JSON: {\"reason\": \"…\"}"))
			return "", false
		}
	}
	if len(req.Reason) > maxReason {
		writeProblem(c, probValidation.with("bad reason", FieldError{"reason", fmt.Sprintf("must be at most %d characters", maxReason)}))
		return "", false
	}
	return req.Reason, true
}

// endSession answers DELETE /tenants/{slug}/sessions/{id}, with an
// optional reason: audited with it, the session's end names the admin.
func (s *Server) endSession(c *gin.Context) {
	if _, ok := s.sessionsTenant(c); !ok {
		return
	}
	if s.opts.Sessions == nil {
		writeProblem(c, probNotFound.with("legacy sessions are not served by this server"))
		return
	}
	reason, ok := endReason(c)
	if !ok {
		return
	}
	err := s.opts.Sessions.EndSession(c.Request.Context(), c.Param("slug"), c.Param("id"), "admin: "+canceller(c))
	if errors.Is(err, store.ErrNotFound) {
		writeProblem(c, probNotFound.with("session \""+c.Param("id")+"\": no live session of tenant \""+c.Param("slug")+"\""))
		return
	}
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	s.log.Info("legacy session ended", "tenant", c.Param("slug"), "session", c.Param("id"), "admin", adminOf(c))
	s.keysAudit(c, "DELETE "+c.FullPath(), c.Param("id"), map[string]any{"status": http.StatusNoContent, "reason": reason})
	c.Status(http.StatusNoContent)
}

// endSessions answers DELETE /tenants/{slug}/sessions: every live
// session of the tenant ends; audited with the reason and the count.
func (s *Server) endSessions(c *gin.Context) {
	if _, ok := s.sessionsTenant(c); !ok {
		return
	}
	if s.opts.Sessions == nil {
		writeProblem(c, probNotFound.with("legacy sessions are not served by this server"))
		return
	}
	reason, ok := endReason(c)
	if !ok {
		return
	}
	n, err := s.opts.Sessions.EndSessions(c.Request.Context(), c.Param("slug"), "admin: "+canceller(c))
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	s.log.Info("legacy sessions ended", "tenant", c.Param("slug"), "count", n, "admin", adminOf(c))
	s.keysAudit(c, "DELETE "+c.FullPath(), "sessions", map[string]any{"status": http.StatusOK, "ended": n, "reason": reason})
	c.JSON(http.StatusOK, gin.H{"ended": n})
}
