package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/store/record"
)

// FlowActions cancels flows and follows their changes (package flows);
// reading the record goes straight to the store.
type FlowActions interface {
	// Cancel revokes flows and marks them cancelled, reporting how many.
	Cancel(ctx context.Context, flows []record.Flow, reason, by string) (int, error)
	// Watch follows the changes of the flows visible selects, after
	// change after.
	Watch(ctx context.Context, after int64, visible func(tenantID string) bool) (<-chan record.Change, error)
}

func (s *Server) registerFlows(v1 gin.IRouter) {
	v1.GET("/flows", s.listFlows)
	v1.GET("/flows/stream", s.streamFlows)
	v1.GET("/overview", s.overview)
	v1.GET("/tenants/:slug/activity", s.targetActivity)
	v1.POST("/flows/cancel", s.cancelFlows)
	v1.GET("/flows/:flow", s.getFlow)
	v1.POST("/flows/:flow/cancel", s.cancelFlow)
	v1.GET("/tenants/:slug/flows", s.listFlows)
	v1.GET("/tenants/:slug/flows/:flow", s.getFlow)
	v1.POST("/tenants/:slug/flows/:flow/cancel", s.cancelFlow)
}

// flowView is a flow as the API shows it.
type flowView struct {
	ID        string         `json:"id"`
	Tenant    string         `json:"tenant"`
	Method    string         `json:"method"`
	Target    string         `json:"target"`
	State     string         `json:"state"`
	Rounds    int            `json:"rounds"`
	Principal *principalView `json:"principal,omitempty"`
	Client    *clientView    `json:"client,omitempty"`
	Era       string         `json:"era"`
	// SessionID is the legacy session a bridged flow ran in.
	SessionID      string     `json:"sessionId,omitempty"`
	PendingKinds   []string   `json:"pendingKinds"`
	KeyID          string     `json:"keyId,omitempty"`
	Replica        string     `json:"replica,omitempty"`
	TraceID        string     `json:"traceId,omitempty"`
	TraceURL       string     `json:"traceUrl,omitempty"`
	Detail         string     `json:"detail,omitempty"`
	StartedAt      time.Time  `json:"startedAt"`
	UpdatedAt      time.Time  `json:"updatedAt"`
	WaitingSince   *time.Time `json:"waitingSince,omitempty"`
	StateExpiresAt *time.Time `json:"stateExpiresAt,omitempty"`
	ServerMS       float64    `json:"serverMs"`
	ClientWaitMS   float64    `json:"clientWaitMs"`
	CancelReason   string     `json:"cancelReason,omitempty"`
	CancelledBy    string     `json:"cancelledBy,omitempty"`
	CancelledAt    *time.Time `json:"cancelledAt,omitempty"`
	// Kind is call, flow, legacy or task; Message says in words what its
	// latest change did (why it failed or was refused, a task's status).
	Kind    string `json:"kind"`
	Message string `json:"message,omitempty"`
}

type principalView struct {
	Issuer  string `json:"issuer,omitempty"`
	Subject string `json:"subject,omitempty"`
	Client  string `json:"client,omitempty"`
}

type clientView struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
}

// roundView is a recorded round as the API shows it: the record's round
// (durations in µs too), with its durations in milliseconds and a link to
// its trace.
type roundView struct {
	*record.Round
	ServerMS     float64 `json:"serverMs"`
	ClientWaitMS float64 `json:"clientWaitMs"`
	TraceURL     string  `json:"traceUrl,omitempty"`
}

func (s *Server) viewFlow(f *record.Flow) flowView {
	v := flowView{
		ID: f.ID, Tenant: f.TenantSlug, Method: f.Method, Target: f.Target, State: f.State, Rounds: f.Rounds,
		Era: f.Era, SessionID: f.SessionID, PendingKinds: []string{}, KeyID: f.KeyID, Replica: f.Replica, TraceID: f.TraceID,
		TraceURL: s.traceURL(f.TraceID, ""), Detail: f.Detail, StartedAt: f.StartedAt.UTC(), UpdatedAt: f.UpdatedAt.UTC(),
		WaitingSince: f.WaitingSince, StateExpiresAt: f.StateExpiresAt, ServerMS: float64(f.ServerUS) / 1000, ClientWaitMS: float64(f.ClientWaitUS) / 1000,
		CancelReason: f.CancelReason, CancelledBy: f.CancelledBy, CancelledAt: f.CancelledAt, Kind: f.Kind, Message: f.Message,
	}
	if v.Kind == "" {
		v.Kind = record.KindFlow // recorded before kinds were
	}
	if f.PendingKinds != "" {
		v.PendingKinds = strings.Split(f.PendingKinds, ",")
	}
	if f.PrincipalIssuer != "" || f.PrincipalSubject != "" || f.PrincipalClient != "" {
		v.Principal = &principalView{f.PrincipalIssuer, f.PrincipalSubject, f.PrincipalClient}
	}
	if f.ClientName != "" || f.ClientVersion != "" {
		v.Client = &clientView{f.ClientName, f.ClientVersion}
	}
	return v
}

func (s *Server) viewRound(r *record.Round) roundView {
	return roundView{Round: r, ServerMS: float64(r.ServerUS) / 1000, ClientWaitMS: float64(r.ClientWaitUS) / 1000,
		TraceURL: s.traceURL(r.TraceID, r.SpanID)}
}

// traceURL fills the configured trace link template.
func (s *Server) traceURL(traceID, spanID string) string {
	if s.opts.TraceURL == "" || traceID == "" {
		return ""
	}
	return strings.NewReplacer("{traceId}", traceID, "{spanId}", spanID).Replace(s.opts.TraceURL)
}

// visibleTenants resolves the tenants the caller may see to their ids:
// nil for every tenant (platform admins and viewers).
func (s *Server) visibleTenants(c *gin.Context) ([]string, error) {
	a := c.MustGet("admin").(*Admin)
	if a.Role != RoleTenantAdmin {
		return nil, nil
	}
	return append([]string{}, a.TenantIDs...), nil
}

// flowFilter reads a flow selection from query parameters (or, for a
// bulk cancel, the same names in a JSON object), limited to the tenants
// the caller may see.
func (s *Server) flowFilter(c *gin.Context, get func(string) string) (record.Filter, *Problem) {
	var f record.Filter
	var errs []FieldError
	visible, err := s.visibleTenants(c)
	if err != nil {
		return f, probInternal.with("the request could not be completed")
	}
	f.TenantIDs = visible
	slug := c.Param("slug")
	if slug == "" {
		slug = get("tenant")
	}
	if slug != "" {
		t, err := s.opts.Tenants.Get(c.Request.Context(), slug)
		switch {
		case errors.Is(err, store.ErrNotFound):
			f.TenantIDs = []string{}
		case err != nil:
			return f, probInternal.with("the request could not be completed")
		case visible == nil || slices.Contains(visible, t.ID):
			f.TenantIDs = []string{t.ID}
		default:
			f.TenantIDs = []string{}
		}
	}
	f.States = oneOf(get("state"), "state", "a flow state", record.States, &errs)
	f.Kinds = oneOf(get("kind"), "kind", "a kind", record.Kinds, &errs)
	if v := get("q"); v != "" {
		if len(v) > 200 || !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
			errs = append(errs, FieldError{"q", "must be text of at most 200 bytes"})
		}
		f.Prefix = v
	}
	f.Target, f.Method = get("target"), get("method")
	f.Subject, f.Issuer, f.Client, f.Session, f.KeyID = get("subject"), get("issuer"), get("client"), get("session"), get("key")
	if v := get("waitingLongerThan"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, FieldError{"waitingLongerThan", "must be a positive duration like 30s or 5m"})
		}
		f.WaitingLonger = d
	}
	if v := get("minRounds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1_000_000 {
			errs = append(errs, FieldError{"minRounds", "must be a positive integer"})
		}
		f.MinRounds = n
	}
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := get(p.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				errs = append(errs, FieldError{p.name, "must be an RFC 3339 time like 2026-12-03T12:00:00Z"})
			}
			*p.to = t
		}
	}
	for _, p := range []struct{ name, v string }{{"target", f.Target}, {"subject", f.Subject}, {"issuer", f.Issuer}, {"client", f.Client}, {"session", f.Session}, {"key", f.KeyID}} {
		if len(p.v) > 1024 {
			errs = append(errs, FieldError{p.name, "must be at most 1024 characters"})
		}
	}
	if len(errs) > 0 {
		return f, probValidation.with("bad flow filter", errs...)
	}
	return f, nil
}

// oneOf reads a comma-separated list of values from allowed (nil for
// ""), naming each other value in errs as not being what.
func oneOf(v, field, what string, allowed []string, errs *[]FieldError) []string {
	if v == "" {
		return nil
	}
	var out []string
	for _, x := range strings.Split(v, ",") {
		if !slices.Contains(allowed, x) {
			*errs = append(*errs, FieldError{field, fmt.Sprintf("%q is not %s (%s)", x, what, strings.Join(allowed, ", "))})
			continue
		}
		out = append(out, x)
	}
	return out
}

// flowQuery are the query parameters of a flow listing: its filters
// (flowFilter reads them) and its page. Any other is a 400, so a
// misspelt filter is not read as no filter.
var flowQuery = []string{"tenant", "state", "kind", "q", "target", "method", "subject", "issuer", "client", "session", "key",
	"waitingLongerThan", "minRounds", "since", "until", "sort", "limit", "cursor"}

// unknownParams are the query parameters of c not in known.
func unknownParams(c *gin.Context, known []string) []FieldError {
	var errs []FieldError
	for k := range c.Request.URL.Query() {
		if !slices.Contains(known, k) {
			errs = append(errs, FieldError{k, "is not a parameter of this route (" + strings.Join(known, ", ") + ")"})
		}
	}
	slices.SortFunc(errs, func(a, b FieldError) int { return strings.Compare(a.Field, b.Field) })
	return errs
}

// flowCursor encodes a listing position with its sort, so a cursor is
// never read against another order.
func encodeFlowCursor(sort record.Sort, c *record.Cursor) string {
	b, _ := json.Marshal(struct {
		S string    `json:"s"`
		T time.Time `json:"t"`
		R int       `json:"r"`
		I string    `json:"i"`
		W bool      `json:"w,omitempty"`
	}{string(sort), c.Time.UTC(), c.Rounds, c.ID, c.Rest})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeFlowCursor(sort record.Sort, raw string) (*record.Cursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		return nil, false
	}
	var v struct {
		S string    `json:"s"`
		T time.Time `json:"t"`
		R int       `json:"r"`
		I string    `json:"i"`
		W bool      `json:"w"`
	}
	if json.Unmarshal(b, &v) != nil || v.S != string(sort) || v.I == "" {
		return nil, false
	}
	return &record.Cursor{Time: v.T, Rounds: v.R, ID: v.I, Rest: v.W}, true
}

// listFlows answers GET /flows and GET /tenants/{slug}/flows: one page,
// and the counts per state of the whole selection.
func (s *Server) listFlows(c *gin.Context) {
	if errs := unknownParams(c, flowQuery); len(errs) > 0 {
		writeProblem(c, probMalformed.with("unknown query parameters", errs...))
		return
	}
	f, p := s.flowFilter(c, c.Query)
	if p != nil {
		writeProblem(c, p)
		return
	}
	sort := record.Sort(c.DefaultQuery("sort", string(record.SortUpdated)))
	switch sort {
	case record.SortUpdated, record.SortStarted, record.SortWaiting, record.SortRounds:
	default:
		writeProblem(c, probValidation.with("bad sort", FieldError{"sort", "must be updated, started, waiting or rounds"}))
		return
	}
	limit := 50
	if l := c.Query("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 500 {
			writeProblem(c, probValidation.with("bad pagination", FieldError{"limit", "must be an integer from 1 to 500"}))
			return
		}
		limit = n
	}
	var after *record.Cursor
	if cur := c.Query("cursor"); cur != "" {
		var ok bool
		if after, ok = decodeFlowCursor(sort, cur); !ok {
			writeProblem(c, probValidation.with("bad pagination", FieldError{"cursor", "is not a cursor this API returned for this sort"}))
			return
		}
	}
	ctx := c.Request.Context()
	pg, err := s.opts.Record.List(ctx, f, sort, after, limit)
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	counts, err := s.opts.Record.Count(ctx, f)
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	out := struct {
		Items      []flowView       `json:"items"`
		NextCursor string           `json:"nextCursor,omitempty"`
		Counts     map[string]int64 `json:"counts"`
	}{Items: make([]flowView, len(pg.Flows)), Counts: counts}
	for i := range pg.Flows {
		out.Items[i] = s.viewFlow(&pg.Flows[i])
	}
	if pg.Next != nil {
		out.NextCursor = encodeFlowCursor(sort, pg.Next)
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, out)
}

// routeFlow reads the flow the route names, authorized by its tenant's
// id, never a slug (a deleted tenant's slug may be another tenant's
// now): under /tenants/{slug}, the flow must be of the tenant the slug
// names now, which authorize resolved and checked; by id alone, the
// caller must be allowed its tenant. Another tenant's flow, or one the
// record does not know, is 404, alike.
func (s *Server) routeFlow(c *gin.Context) (*record.Flow, []record.Round, bool) {
	id := c.Param("flow")
	notFound := func() (*record.Flow, []record.Round, bool) {
		where := "the flow record"
		if slug := c.Param("slug"); slug != "" {
			where = "the flow record of tenant \"" + slug + "\""
		}
		writeProblem(c, probNotFound.with("flow \""+id+"\": not found in "+where))
		return nil, nil, false
	}
	f, rounds, err := s.opts.Record.Get(c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound()
	}
	if err != nil {
		s.storeProblem(c, err)
		return nil, nil, false
	}
	if c.Param("slug") != "" {
		if t := tenantOf(c); t == nil || t.ID != f.TenantID {
			return notFound()
		}
		return f, rounds, true
	}
	a := c.MustGet("admin").(*Admin)
	allowed, visible := a.may(c.Request.Method, f.TenantID)
	if !visible {
		return notFound()
	}
	if a.Role == RoleTenantAdmin {
		// A grant names tenants by id; one deleted since grants nothing,
		// its flows included.
		live, err := s.opts.Tenants.SlugsByID(c.Request.Context(), []string{f.TenantID})
		if err != nil {
			s.storeProblem(c, err)
			return nil, nil, false
		}
		if _, ok := live[f.TenantID]; !ok {
			return notFound()
		}
	}
	if !allowed {
		writeProblem(c, probForbidden.with("your role ("+a.Role+") may not change this"))
		return nil, nil, false
	}
	// The audit entry names the flow's tenant by its id.
	c.Set("tenant", &store.Tenant{ID: f.TenantID, Slug: f.TenantSlug})
	return f, rounds, true
}

// getFlow answers GET /tenants/{slug}/flows/{flow}: the flow and its
// rounds.
func (s *Server) getFlow(c *gin.Context) {
	f, rounds, ok := s.routeFlow(c)
	if !ok {
		return
	}
	out := struct {
		Flow   flowView    `json:"flow"`
		Rounds []roundView `json:"rounds"`
	}{Flow: s.viewFlow(f), Rounds: make([]roundView, len(rounds))}
	for i := range rounds {
		out.Rounds[i] = s.viewRound(&rounds[i])
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, out)
}

type cancelRequest struct {
	Reason string `json:"reason"`
}

const maxReason = 500

// cancelFlow answers POST /tenants/{slug}/flows/{flow}/cancel: the flow's
// next round, on any replica, is refused. A flow the record does not
// know is 404; one already finished is 409.
func (s *Server) cancelFlow(c *gin.Context) {
	if s.opts.Flows == nil {
		writeProblem(c, probNotFound.with("flow cancellation is not available on this server"))
		return
	}
	var req cancelRequest
	if c.Request.ContentLength != 0 {
		if p := decodeJSON(c, s.opts.MaxBodyBytes, &req); p != nil {
			writeProblem(c, p)
			return
		}
	}
	if len(req.Reason) > maxReason {
		writeProblem(c, probValidation.with("bad reason", FieldError{"reason", fmt.Sprintf("must be at most %d characters", maxReason)}))
		return
	}
	f, _, ok := s.routeFlow(c)
	if !ok {
		return
	}
	if f.State != record.AwaitingInput && f.State != record.Running {
		writeProblem(c, probConflict.with("flow \""+f.ID+"\" is "+f.State+": only a flow awaiting input or running can be cancelled"))
		return
	}
	if _, err := s.opts.Flows.Cancel(c.Request.Context(), []record.Flow{*f}, req.Reason, canceller(c)); err != nil {
		s.storeProblem(c, err)
		return
	}
	s.log.Info("flow cancelled", "tenant", f.TenantSlug, "flow", f.ID, "admin", adminOf(c))
	f, _, ok = s.routeFlow(c)
	if !ok {
		return
	}
	c.JSON(http.StatusOK, s.viewFlow(f))
}

// canceller is who cancels, as the record keeps it: the admin's name and
// subject ("Ada Lovelace (https://id.example#ada)"), or the subject
// alone for a token (which has no name).
func canceller(c *gin.Context) string {
	a := c.MustGet("admin").(*Admin)
	if a.Name != "" {
		return a.Name + " (" + a.Subject + ")"
	}
	return a.Subject
}

// bulkCancelRequest selects flows to cancel: the filter of GET /flows,
// as strings. Preview reports what matches without changing anything;
// otherwise Expect must equal the count the preview reported, so what is
// cancelled is what was looked at.
type bulkCancelRequest struct {
	Filter  map[string]string `json:"filter"`
	Reason  string            `json:"reason"`
	Preview bool              `json:"preview"`
	Expect  *int              `json:"expect"`
}

// maxBulkCancel bounds one bulk cancellation.
const maxBulkCancel = 10_000

// cancelFlows answers POST /flows/cancel: cancel every in-flight flow a
// filter selects (all of one principal's, all sealed under one key, …),
// after a preview of how many.
func (s *Server) cancelFlows(c *gin.Context) {
	if s.opts.Flows == nil {
		writeProblem(c, probNotFound.with("flow cancellation is not available on this server"))
		return
	}
	if a := c.MustGet("admin").(*Admin); a.Role == RoleViewer {
		writeProblem(c, probForbidden.with("your role ("+a.Role+") may not change this"))
		return
	}
	var req bulkCancelRequest
	if p := decodeJSON(c, s.opts.MaxBodyBytes, &req); p != nil {
		writeProblem(c, p)
		return
	}
	for k := range req.Filter {
		switch k {
		case "tenant", "target", "method", "subject", "issuer", "client", "session", "key", "waitingLongerThan", "minRounds", "since", "until", "kind", "q":
		default:
			writeProblem(c, probValidation.with("bad filter", FieldError{"filter." + k, "is not a filter (state is implied: flows awaiting input or running)"}))
			return
		}
	}
	if len(req.Filter) == 0 {
		writeProblem(c, probValidation.with("bad filter", FieldError{"filter", "must select something: cancelling every flow needs at least a tenant"}))
		return
	}
	if len(req.Reason) > maxReason {
		writeProblem(c, probValidation.with("bad reason", FieldError{"reason", fmt.Sprintf("must be at most %d characters", maxReason)}))
		return
	}
	f, p := s.flowFilter(c, func(k string) string { return req.Filter[k] })
	if p != nil {
		writeProblem(c, p)
		return
	}
	f.States = []string{record.AwaitingInput, record.Running}
	ctx := c.Request.Context()
	matched, err := s.opts.Record.IDs(ctx, f, maxBulkCancel+1)
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	if len(matched) > maxBulkCancel {
		writeProblem(c, probValidation.with(fmt.Sprintf("the filter selects more than %d flows; narrow it", maxBulkCancel)))
		return
	}
	sample := make([]string, 0, min(len(matched), 20))
	for _, m := range matched[:min(len(matched), 20)] {
		sample = append(sample, m.ID)
	}
	if req.Preview {
		c.Set("audited", true) // a preview changes nothing
		c.JSON(http.StatusOK, gin.H{"matched": len(matched), "sample": sample})
		return
	}
	if req.Expect == nil || *req.Expect != len(matched) {
		writeProblem(c, probConflict.with(fmt.Sprintf("the filter now selects %d flows; preview again and send that count as expect", len(matched))))
		return
	}
	n, err := s.opts.Flows.Cancel(ctx, matched, req.Reason, canceller(c))
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	s.auditBulkCancel(c, matched, n, req)
	c.Set("audited", true)
	s.log.Info("flows cancelled", "matched", len(matched), "cancelled", n, "admin", adminOf(c))
	c.JSON(http.StatusOK, gin.H{"matched": len(matched), "cancelled": n})
}

// auditBulkCancel writes a bulk cancel's audit entries: one for every
// tenant whose flows it selected, by id, so each tenant's audit log
// shows what was done to it (the count of its own flows, the reason),
// and one for the whole action.
func (s *Server) auditBulkCancel(c *gin.Context, matched []record.Flow, cancelled int, req bulkCancelRequest) {
	a := c.MustGet("admin").(*Admin)
	type touched struct {
		slug string
		n    int
	}
	tenants := map[string]*touched{}
	var ids []string
	for _, f := range matched {
		t := tenants[f.TenantID]
		if t == nil {
			t = &touched{slug: f.TenantSlug}
			tenants[f.TenantID] = t
			ids = append(ids, f.TenantID)
		}
		t.n++
	}
	slices.Sort(ids)
	ctx := context.WithoutCancel(c.Request.Context())
	write := func(entry store.AuditEntry, detail map[string]any) {
		if err := s.opts.Audit.Write(ctx, entry, detail); err != nil {
			s.log.Error("audit write failed", "action", entry.Action, "tenant_id", entry.TenantID, "err", err)
		}
	}
	// Each tenant's entry holds its own facts only (a tenant admin reads
	// it, and the filter may name another tenant's users or keys); the
	// whole action, filter and all, is one entry of no tenant, which
	// only platform admins and viewers read.
	for _, id := range ids {
		write(store.AuditEntry{Actor: a.Subject, Action: "POST /api/v1/flows/cancel", TenantID: id, TenantSlug: tenants[id].slug,
			Object: "flows", RemoteAddr: c.ClientIP()}, map[string]any{"matched": tenants[id].n, "reason": req.Reason})
	}
	write(store.AuditEntry{Actor: a.Subject, Action: "POST /api/v1/flows/cancel", Object: "flows", RemoteAddr: c.ClientIP()},
		map[string]any{"matched": len(matched), "cancelled": cancelled, "tenants": len(ids), "filter": req.Filter, "reason": req.Reason})
	c.Set("audited", true)
}

// streamRecheck is how often a live stream checks that the credential
// that opened it still stands (a signed-out session, a revoked or
// expired token, a changed grant end it).
const streamRecheck = 2 * time.Second

// stillAdmin reports whether c's credential still authenticates the admin
// that opened the stream, with the same role and tenants.
func (s *Server) stillAdmin(c *gin.Context, opened *Admin) bool {
	a, err := s.opts.Auth.Authenticate(c.Request)
	if err != nil {
		return false
	}
	return a.Subject == opened.Subject && a.Role == opened.Role && slices.Equal(a.TenantIDs, opened.TenantIDs)
}

// streamFlows answers GET /flows/stream: server-sent events of flow
// changes the caller may see, across the fleet, resumable with
// Last-Event-ID (or ?after=). Each event is "flow" with the flow as GET
// shows it, or "reset" when changes were missed (reload the list).
func (s *Server) streamFlows(c *gin.Context) {
	if s.opts.Flows == nil {
		writeProblem(c, probNotFound.with("the flow stream is not available on this server"))
		return
	}
	visible, err := s.visibleTenants(c)
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	var only string
	if slug := c.Query("tenant"); slug != "" {
		t, err := s.opts.Tenants.Get(c.Request.Context(), slug)
		if err != nil || (visible != nil && !slices.Contains(visible, t.ID)) {
			writeProblem(c, probNotFound.with("tenant \""+slug+"\": not found"))
			return
		}
		only = t.ID
	}
	after := int64(-1) // from now
	for _, v := range []string{c.GetHeader("Last-Event-ID"), c.Query("after")} {
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeProblem(c, probValidation.with("bad resume position", FieldError{"Last-Event-ID", "must be an event id this stream sent"}))
			return
		}
		after = n
		break
	}
	ctx := c.Request.Context()
	changes, err := s.opts.Flows.Watch(ctx, after, func(tenantID string) bool {
		if only != "" {
			return tenantID == only
		}
		return visible == nil || slices.Contains(visible, tenantID)
	})
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	w := c.Writer
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// A first comment makes the response start at once.
	_, _ = w.Write([]byte(": flows\nretry: 2000\n\n"))
	w.Flush()
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	recheck := time.NewTicker(streamRecheck)
	defer recheck.Stop()
	opened := c.MustGet("admin").(*Admin)
	for {
		select {
		case <-ctx.Done():
			return
		case <-recheck.C:
			if !s.stillAdmin(c, opened) {
				// The client's EventSource reconnects, and is refused.
				_, _ = w.Write([]byte("event: ended\ndata: {\"reason\":\"credential\"}\n\n"))
				w.Flush()
				return
			}
		case <-keepAlive.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
			w.Flush()
		case ch, ok := <-changes:
			if !ok {
				return // the client reconnects and resumes after its last id
			}
			var body []byte
			event := "flow"
			switch {
			case ch.Reset:
				event, body = "reset", []byte("{}")
			case ch.Flow == nil:
				continue // pruned meanwhile
			default:
				body, _ = json.Marshal(s.viewFlow(ch.Flow))
			}
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ch.ID, event, body); err != nil {
				return
			}
			w.Flush()
		}
	}
}

// activityWindow is the window of the overview's rates.
const activityWindow = time.Hour

// overview answers GET /overview: for every tenant the caller may see,
// its catalogue's size by kind, its calls by state, and over the last
// hour its calls a minute, failure rate and p95 round time, with what
// waits on its people now (the UI's tenants page).
func (s *Server) overview(c *gin.Context) {
	ctx := c.Request.Context()
	visible, err := s.visibleTenants(c)
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	items, err := s.opts.Tenants.CatalogueCounts(ctx)
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	flows, err := s.opts.Record.CountsByTenant(ctx)
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	act, err := s.opts.Record.Activity(ctx, time.Now().Add(-activityWindow))
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	type activityView struct {
		Window         string     `json:"window"`
		Calls          int64      `json:"calls"`
		CallsPerMinute float64    `json:"callsPerMinute"`
		Failed         int64      `json:"failed"`
		FailureRate    float64    `json:"failureRate"`
		P95RoundMS     float64    `json:"p95RoundMs"`
		Waiting        int64      `json:"waiting"`
		OldestWaiting  *time.Time `json:"oldestWaitingSince,omitempty"`
	}
	type tenantCounts struct {
		Catalogue map[string]int64 `json:"catalogue"`
		Flows     map[string]int64 `json:"flows"`
		Activity  activityView     `json:"activity"`
	}
	out := map[string]tenantCounts{}
	ids := make([]string, 0, len(items)+len(flows))
	for id := range items {
		ids = append(ids, id)
	}
	for id := range flows {
		ids = append(ids, id)
	}
	slugs, err := s.opts.Tenants.SlugsByID(ctx, ids)
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	for id, slug := range slugs {
		if visible != nil && !slices.Contains(visible, id) {
			continue
		}
		tc := tenantCounts{Catalogue: items[id], Flows: flows[id], Activity: activityView{Window: activityWindow.String()}}
		if a := act[id]; a != nil {
			v := &tc.Activity
			v.Calls, v.Failed, v.Waiting, v.OldestWaiting = a.Calls, a.Failed, a.Waiting, a.OldestWaiting
			v.CallsPerMinute = float64(a.Calls) / activityWindow.Minutes()
			if a.Calls > 0 {
				v.FailureRate = float64(a.Failed) / float64(a.Calls)
			}
			v.P95RoundMS = float64(a.P95RoundUS) / 1000
		}
		if tc.Catalogue == nil {
			tc.Catalogue = map[string]int64{}
		}
		if tc.Flows == nil {
			tc.Flows = map[string]int64{}
		}
		out[slug] = tc
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"tenants": out})
}
