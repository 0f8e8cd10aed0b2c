package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/egress"
	"github.com/opsmcp/platform/feed"
	"github.com/opsmcp/platform/internal/bounded"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/telemetry"
)

// Options configures every tenant's endpoint.
type Options struct {
	// Catalogues, Revocations, Sessions and Tasks are the parts of the
	// database the endpoint uses (store.Store's Tenants, Revocations,
	// Legacy and Tasks); Sessions only when legacy clients are served.
	Catalogues  CatalogueStore
	Revocations RevocationStore
	Sessions    SessionStore
	// Tasks keeps tasks (store.Store's Tasks part).
	Tasks TaskStore
	// Changes follows the flow record's changes (the record's watcher),
	// so a stream following a task hears of its changes from any
	// replica; nil leaves it to the streams' catch-up read.
	Changes FlowChanges
	Logger  *slog.Logger
	// PublicURL is the platform's external base URL; a tenant's canonical
	// resource URL is PublicURL + "/t/{slug}/mcp".
	PublicURL string
	// MaxBodyBytes caps an MCP request body.
	MaxBodyBytes int64
	// AllowPrivateTargets lets webhooks (and the default verifier's
	// discovery and key fetches) reach private addresses.
	AllowPrivateTargets bool
	// WebhookMaxResponse caps a webhook's answer.
	WebhookMaxResponse int64
	// Refresh is how often flow cancellations made by other replicas are
	// picked up, and how long a failed catalogue load is remembered.
	// Catalogue changes come from the change feed (Changed).
	Refresh time.Duration
	// FullCheck is how often every cached catalogue's version is compared
	// with the database's, the change feed's safety net. Default feed.DefaultFullCheck.
	FullCheck time.Duration
	// CatalogueBytes bounds the tenants' snapshots kept (estimated
	// bytes); past it the least recently used are evicted, never one
	// with a stream open. 0: no bound.
	CatalogueBytes int64
	// StateKeys are the shared request-state secrets, minting key first;
	// none means a random per-process key.
	StateKeys [][]byte
	// Version is reported in serverInfo.
	Version string
	// Verifier checks bearer tokens; nil means a default verifier.
	Verifier *auth.Verifier
	// Keys provides per-tenant key rings; nil means one ring from
	// StateKeys for every tenant.
	Keys KeyRings
	// AllowedHosts are extra Host header values (host or host:port) the
	// endpoints answer to, beyond the public URL's host and loopback.
	AllowedHosts []string
	// Telemetry traces and measures every request; nil records nothing.
	Telemetry *telemetry.Telemetry
	// Sinks receive every round after telemetry (the flow recorder).
	Sinks []RoundSink
	// StreamMaxLifetime ends a long-lived stream (subscriptions/listen)
	// after this long, and earlier when its caller's token expires
	// (default 1 h). StreamsPerTenant and StreamsPerPrincipal bound the
	// streams open at once on this replica (defaults 1000 and 20).
	StreamMaxLifetime                     time.Duration
	StreamsPerTenant, StreamsPerPrincipal int
	// Legacy configures serving initialization-era clients; off unless
	// Legacy.Serve.
	Legacy LegacyOptions
}

// Handler serves every tenant's MCP endpoint, POST /t/{slug}/mcp, at
// protocol 2026-07-28. It is assembled from the parts a request passes
// through: the tenants' catalogues (cached, refreshed across replicas),
// the bearer-token verifier, the flow engine (request state, declared
// inputs, the webhook), the subscription hub, and the sinks every round
// is handed to at its end.
type Handler struct {
	opts       Options
	log        *slog.Logger
	catalogues *catalogues
	hub        *hub
	flows      *flowEngine
	revoked    *revocations
	verifier   *auth.Verifier
	tel        roundTelemetry
	sinks      sinks
	legacy     *legacy // nil when legacy clients are not served
	tasks      *taskEngine

	publicHost   string
	allowedHosts map[string]bool

	stop context.CancelFunc
	// lostPending is the latest time (lostSeq's count) the change feed
	// lost changes, while no check begun since has passed (retried every
	// Refresh); 0 when none is pending.
	lostPending, lostSeq atomic.Int64

	done      chan struct{}
	tasksDone chan struct{}
	closeOne  sync.Once
}

// New starts the endpoint and its refresh loop; Close stops it.
func New(ctx context.Context, opts Options) (*Handler, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Refresh <= 0 {
		opts.Refresh = time.Second
	}
	if opts.FullCheck <= 0 {
		opts.FullCheck = feed.DefaultFullCheck
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 4 << 20
	}
	if opts.WebhookMaxResponse <= 0 {
		opts.WebhookMaxResponse = 4 << 20
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.StreamMaxLifetime <= 0 {
		opts.StreamMaxLifetime = time.Hour
	}
	if opts.StreamsPerTenant <= 0 {
		opts.StreamsPerTenant = 1000
	}
	if opts.StreamsPerPrincipal <= 0 {
		opts.StreamsPerPrincipal = 20
	}
	if opts.Verifier == nil {
		opts.Verifier = auth.NewVerifier(auth.VerifierOptions{Egress: egress.Policy{AllowPrivate: opts.AllowPrivateTargets}})
	}
	rings := opts.Keys
	if rings == nil {
		ring, err := ringFromConfig(opts.StateKeys)
		if err != nil {
			return nil, err
		}
		rings = staticRings{ring}
	}
	log := telemetry.Logger(opts.Logger) // lines logged with a request's context carry its trace
	e := &Handler{
		opts:     opts,
		log:      log,
		hub:      newHub(opts.StreamsPerTenant, opts.StreamsPerPrincipal),
		revoked:  &revocations{},
		verifier: opts.Verifier,
		tel:      roundTelemetry{tel: opts.Telemetry},
		done:     make(chan struct{}),

		tasksDone: make(chan struct{}),
	}
	e.catalogues = newCatalogues(opts.Catalogues, log, opts.Refresh, opts.Version, opts.PublicURL, e.hub.publish)
	e.catalogues.budget, e.catalogues.pinned = opts.CatalogueBytes, e.hub.streaming
	if f, ok := opts.Keys.(interface{ Forget(tenantID string) }); ok {
		e.catalogues.forget = f.Forget
	}
	e.flows = &flowEngine{
		sealing:  &sealing{rings: rings, revoked: e.revoked, now: time.Now},
		webhooks: newWebhookClient(opts.AllowPrivateTargets, opts.WebhookMaxResponse, opts.Telemetry),
		log:      log,
	}
	e.sinks = append(sinks{e.tel}, opts.Sinks...)
	e.flows.running = e.sinks.running
	e.tasks = &taskEngine{store: opts.Tasks, webhooks: e.flows.webhooks, log: log, publicURL: opts.PublicURL,
		emit: e.sinks.taskEvent, now: time.Now, catalogue: e.catalogues.lookup, tel: opts.Telemetry, changes: opts.Changes}
	e.flows.tasks = e.tasks
	e.flows.consume = opts.Revocations.ConsumeState
	for _, k := range opts.Sinks {
		if l, ok := k.(Ledger); ok {
			e.flows.ledger = l
		}
	}
	if u, err := url.Parse(opts.PublicURL); err == nil {
		e.publicHost = u.Host
	}
	e.allowedHosts = map[string]bool{}
	for _, h := range opts.AllowedHosts {
		e.allowedHosts[strings.ToLower(strings.TrimSpace(h))] = true
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.stop = cancel
	if opts.Legacy.Serve {
		e.legacy = newLegacy(rctx, e, opts.Legacy)
	}
	go e.refresh(rctx)
	go func() {
		defer close(e.tasksDone)
		e.tasks.run(rctx)
	}()
	return e, nil
}

// Close stops the refresh loop and ends open subscription streams.
func (e *Handler) Close() {
	e.closeOne.Do(func() {
		e.stop()
		<-e.done
		<-e.tasksDone
		if e.legacy != nil {
			e.legacy.close()
		}
		e.hub.close()
	})
}

// refresh picks up, every Refresh, flow cancellations made on other
// replicas and sessions ended, and runs the catalogues' full check every
// FullCheck.
func (e *Handler) refresh(ctx context.Context) {
	defer close(e.done)
	t := time.NewTicker(e.opts.Refresh)
	defer t.Stop()
	prune := time.NewTicker(time.Minute)
	defer prune.Stop()
	full := time.NewTicker(e.opts.FullCheck)
	defer full.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-prune.C:
			if err := e.opts.Revocations.PruneConsumedStates(ctx, time.Now()); err != nil && ctx.Err() == nil {
				e.log.Warn("pruning consumed request states failed", "err", err)
			}
			continue
		case <-full.C:
			e.checkCatalogues(ctx, true)
			continue
		case <-t.C:
		}
		e.catalogues.sweep()
		if e.lostPending.Load() != 0 {
			e.checkCatalogues(ctx, false)
		}
		if e.legacy != nil {
			e.legacy.refreshEnded(ctx)
		}
		if rv, err := e.opts.Revocations.RevokedFlows(ctx); err == nil {
			set := map[string]map[string]bool{}
			for _, f := range rv {
				if set[f.TenantID] == nil {
					set[f.TenantID] = map[string]bool{}
				}
				set[f.TenantID][f.FlowID] = true
			}
			e.revoked.replace(set)
		} else if ctx.Err() == nil {
			e.log.Warn("revoked-flow refresh failed; keeping the last known set", "err", err)
		}
	}
}

// Changed applies a batch of the change feed: cached tenants it names
// are reloaded (a feed.Consumer).
func (e *Handler) Changed(ctx context.Context, cs []store.Change) {
	e.catalogues.apply(ctx, cs)
	if e.legacy != nil && slices.ContainsFunc(cs, func(c store.Change) bool { return c.Kind == store.ChangeCatalogue }) {
		// A tenant disabled ends its sessions: serve none of them from
		// now on, on this replica as on the one that wrote.
		e.legacy.refreshEnded(ctx)
	}
}

// Lost checks every cached catalogue: the change feed may have lost
// changes (a feed.Consumer). A check that fails is tried again every
// refresh interval until one passes.
func (e *Handler) Lost(ctx context.Context) {
	e.lostPending.Store(e.lostSeq.Add(1))
	e.checkCatalogues(ctx, false)
}

// checkCatalogues runs the catalogues' full check. A scheduled one
// counts what it finds that the feed had not delivered (it should find
// nothing); one after the feed lost changes expects to find them.
func (e *Handler) checkCatalogues(ctx context.Context, scheduled bool) {
	pending := e.lostPending.Load()
	found, err := e.catalogues.checkAll(ctx)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("catalogue check failed; serving cached catalogues", "scheduled", scheduled, "err", err)
		}
		return
	}
	// A check that began before the latest loss does not cover it.
	e.lostPending.CompareAndSwap(pending, 0)
	if !scheduled {
		return
	}
	if found > 0 {
		e.catalogues.missed.Add(int64(found))
		e.log.Warn("catalogue check found changes the feed had not delivered", "tenants", found)
	}
}

// CatalogueMissed counts the cached catalogues full checks found changed
// though the feed had not said so: zero while the feed works.
func (e *Handler) CatalogueMissed() int64 { return e.catalogues.missed.Load() }

// Invalidate reloads a tenant's catalogue now; the admin API calls it
// after a change so this replica serves its own writes at once.
func (e *Handler) Invalidate(ctx context.Context, slug string) {
	e.catalogues.invalidate(ctx, slug)
	if e.legacy != nil {
		e.legacy.refreshEnded(ctx) // disabling a tenant ends its sessions
	}
}

// Slug returns the slug of the cached tenant with id tenantID (no
// database read): metric collection maps the key rings' tenant ids
// through it (a ring is held only for a cached tenant).
func (e *Handler) Slug(tenantID string) (string, bool) { return e.catalogues.slug(tenantID) }

// maxStateLife is the longest any tenant's flow can live: the longest
// state lifetime a round, for the most rounds settings allow.
const maxStateLife = 86400 * time.Second * 1000

// ErrBadFlowID is returned for a flow id this platform cannot have minted.
var ErrBadFlowID = errors.New("not a flow id")

// CancelFlow revokes a tenant's flow: its next round, on any replica, gets
// the frozen requestState rejection. The revocation lasts as long as any
// state of the flow could still be valid. A flow that became a task has
// its task cancelled too, and the task's backend told (by, an admin's
// name, is who cancelled).
//
// The flow is the tenant's with id tenantID, and is revoked by that id;
// slug is how the record last named it, used only to find how long the
// tenant's states live. When this replica's snapshot of the slug is of
// another tenant, or of none (a cache a refresh behind, a slug taken by
// a new tenant), the revocation lasts as long as any tenant's state
// could: it is never skipped.
func (e *Handler) CancelFlow(ctx context.Context, tenantID, slug, flowID, by string) error {
	if !mrtr.ValidFlowID(flowID) {
		return ErrBadFlowID
	}
	s, err := e.catalogues.lookup(ctx, slug)
	if err != nil {
		return err
	}
	lives := maxStateLife
	if s != nil && s.tenantID == tenantID {
		lives = s.settings.StateTTL() * time.Duration(s.settings.Rounds())
	}
	if err := e.opts.Revocations.RevokeFlow(ctx, tenantID, flowID, time.Now().Add(lives+time.Minute)); err != nil {
		return err
	}
	e.revoked.add(tenantID, flowID)
	tk, err := e.tasks.store.ByFlow(ctx, flowID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return err
	case tk.TenantID != tenantID:
		return nil
	}
	_, _, err = e.tasks.cancelTask(ctx, tk.ID, "admin:"+by)
	return err
}

// ServeHTTP serves POST /t/{slug}/mcp: one JSON-RPC request, answered as
// JSON or, when it streams, as server-sent events. Each step below either
// passes the request on or answers it; the round's facts are gathered on
// the way and handed to the sinks when the answer is written. The slug is
// the router's: the request's path value "slug" (a net/http pattern
// /t/{slug}/mcp, or the server's gin route, which sets it).
func (e *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := e.arrive(w, r)
	defer e.finish(x)
	slug := r.PathValue("slug")
	if slug == "" {
		x.fail(newError(http.StatusNotFound, mcp.CodeInvalidRequest, "Not an MCP endpoint", nil))
		return
	}
	if r.Method != http.MethodPost && !e.legacyStream(r) {
		// The stateless revision has no GET stream and no session to
		// DELETE (a legacy session's GET and DELETE are served below).
		w.Header().Set("Allow", "POST")
		x.fail(newError(http.StatusMethodNotAllowed, mcp.CodeInvalidRequest, "Method not allowed: this endpoint accepts POST only", nil))
		return
	}
	snap, ok := e.tenant(x, slug)
	if !ok {
		return
	}
	if !e.originAllowed(r, snap) {
		x.fail(newError(http.StatusForbidden, mcp.CodeInvalidRequest, "Origin not allowed", nil))
		return
	}
	principal, ok := e.authenticate(x, snap)
	if !ok {
		return
	}
	body, ok := e.readBody(x)
	if !ok {
		return
	}
	if e.legacyRequest(r, body) {
		// An initialization-era client (legacy.go): its session, its
		// stream, and flows bridged onto it.
		e.serveLegacy(x, snap, principal, body)
		return
	}
	q, rerr := parseRequest(body)
	x.id, x.round.Method, x.round.RequestID = q.id, q.method, boundedID(q.id)
	if rerr != nil {
		x.fail(rerr)
		return
	}
	if q.id == nil {
		// A notification: nothing in this revision needs an answer.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if rerr := q.checkEnvelope(r.Header); rerr != nil {
		x.fail(rerr)
		return
	}
	c := &call{request: q, snap: snap, principal: principal, header: r.Header}
	e.begin(x, c)
	e.dispatch(x, c)
}

// call is a checked request of a tenant's endpoint, as the method that
// answers it sees it.
type call struct {
	*request
	snap      *snapshot
	principal *auth.Principal // nil on a public tenant
	header    http.Header
}

// arrive starts the exchange of one HTTP request and its round.
func (e *Handler) arrive(w http.ResponseWriter, r *http.Request) *exchange {
	x := &exchange{w: w, req: r}
	x.round = &x.rd
	x.rd = Round{Arrived: time.Now(), Era: EraStateless, HTTPVersion: httpVersion(r), trace: &x.st}
	if host, port, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		x.rd.ClientAddr = host
		x.rd.ClientPort, _ = strconv.Atoi(port)
	}
	if ip, _ := r.Context().Value(clientIPKey{}).(string); ip != "" && ip != x.rd.ClientAddr {
		// Behind a proxy the server trusts: the client's address, and
		// no port of its (the peer's is the proxy's).
		x.rd.ClientAddr, x.rd.ClientPort = ip, 0
	}
	x.ctx = e.tel.arrive(r, &x.st)
	return x
}

// begin records what the checked request is, and starts its span: the
// work from here on is traced under it.
func (e *Handler) begin(x *exchange, c *call) {
	rd := x.round
	rd.ProtocolVersion = c.version
	rd.Client = ClientInfo{Name: bounded.String(c.client.Name, bounded.Value), Version: bounded.String(c.client.Version, bounded.Value)}
	if c.uri != "" {
		rd.Target = bounded.URL(c.uri, bounded.Value)
	} else {
		rd.Target = bounded.String(c.name, bounded.Value)
	}
	switch c.method {
	case mcp.MethodToolsCall:
		if t := c.snap.tools[c.name]; t != nil {
			rd.Registered, rd.spanName, rd.flowSpanName = true, t.spanName, t.flowName
		}
	case mcp.MethodPromptsGet:
		if p := c.snap.prompts[c.name]; p != nil {
			rd.Registered, rd.spanName, rd.flowSpanName = true, p.spanName, p.flowName
		}
	}
	if c.method == mcp.MethodToolsCall && c.snap.settings.TraceContent {
		rd.Content = &RoundContent{Arguments: c.p.Arguments}
	}
	x.ctx = e.tel.begin(rd, &c.p.Meta)
	x.want = c.wantsEvents()
	x.progressToken, x.logLevel = c.progressToken, c.logLevel
}

// finish hands the round to the sinks, once the answer is written.
func (e *Handler) finish(x *exchange) {
	x.round.Ended = time.Now()
	e.sinks.Round(x.ctx, x.round)
}

// dispatch answers a checked request by its method.
func (e *Handler) dispatch(x *exchange, c *call) {
	switch c.method {
	case mcp.MethodDiscover:
		x.answer(e.discover(c))
	case mcp.MethodToolsList:
		x.answer(e.list(c, c.snap.toolList, "tools"))
	case mcp.MethodPromptsList:
		x.answer(e.list(c, c.snap.promptLst, "prompts"))
	case mcp.MethodResourcesList:
		x.answer(e.list(c, c.snap.resList, "resources"))
	case mcp.MethodResourcesTemplatesList:
		x.answer(e.list(c, c.snap.tmplList, "resourceTemplates"))
	case mcp.MethodComplete:
		x.answer(e.complete(c))
	case mcp.MethodToolsCall, mcp.MethodPromptsGet, mcp.MethodResourcesRead:
		x.answer(e.flows.run(x.ctx, c, x.round, x))
	case mcp.MethodSubscriptionsListen:
		e.listen(x, c)
	case mcp.MethodTasksGet:
		x.answer(e.tasks.get(x.ctx, c))
	case mcp.MethodTasksUpdate:
		x.answer(e.tasks.update(x.ctx, c, x.round))
	case mcp.MethodTasksCancel:
		x.answer(e.tasks.cancel(x.ctx, c, x.round))
	default:
		msg := "Method not found: " + c.method
		if removed[c.method] {
			msg = "Method not found: " + c.method + " was removed in protocol " + mcp.Version
		}
		x.fail(newError(http.StatusNotFound, mcp.CodeMethodNotFound, msg, nil))
	}
}

// removed are methods of earlier revisions that 2026-07-28 dropped; they
// get the same 404 as unknown methods, so clients probing for a legacy
// server get an unambiguous modern answer.
var removed = map[string]bool{
	mcp.MethodInitialize: true, mcp.NotificationInitialized: true, mcp.MethodPing: true, mcp.MethodSetLevel: true,
	mcp.MethodSubscribe: true, mcp.MethodUnsubscribe: true,
}

// tenant finds the tenant a request is for. A tenant that cannot be
// loaded answers 503; one that does not exist, or is disabled, 404.
func (e *Handler) tenant(x *exchange, slug string) (*snapshot, bool) {
	snap, err := e.catalogues.lookup(x.ctx, slug)
	if err != nil {
		level := slog.LevelError
		if errors.As(err, new(errStillFailing)) {
			level = slog.LevelDebug // logged when the load failed
		}
		e.log.Log(x.ctx, level, "tenant lookup failed", "tenant", slug, "err", err)
		x.fail(newError(http.StatusServiceUnavailable, mcp.CodeInternalError, "Tenant catalogue unavailable", nil))
		return nil, false
	}
	if snap == nil || snap.disabled {
		x.fail(newError(http.StatusNotFound, mcp.CodeInvalidRequest, "Unknown MCP endpoint", nil))
		return nil, false
	}
	x.round.TenantID, x.round.Tenant, x.round.Settings = snap.tenantID, snap.slug, &snap.settings
	return snap, true
}

// authenticate verifies the bearer token against the issuers the tenant
// trusts. A missing or refused token gets 401 with a challenge naming the
// tenant's protected-resource metadata; the reason is logged, the token
// never is.
func (e *Handler) authenticate(x *exchange, s *snapshot) (*auth.Principal, bool) {
	cfg := s.settings.Auth
	if cfg.Public {
		return nil, true
	}
	var p *auth.Principal
	var err error
	if tok, ok := auth.BearerToken(x.req.Header); ok || x.req.Header.Get("Authorization") == "" {
		start := time.Now()
		p, err = e.verifier.Verify(x.ctx, tok, cfg, s.audience)
		x.round.AuthTime = time.Since(start)
	} else {
		err = &auth.TokenError{Reason: "malformed"}
	}
	if err != nil {
		reason := "error"
		var te *auth.TokenError
		if errors.As(err, &te) {
			reason = te.Reason
		}
		if reason != "missing" {
			// A request without a token is how a client learns where to
			// get one (the challenge below): not a refusal worth a record.
			e.log.WarnContext(x.ctx, "bearer token refused", "tenant", s.slug, "reason", reason)
			x.round.TokenRefused = reason
			x.round.Method, x.round.Target = claimed(x.req.Header)
		}
		x.w.Header().Set("WWW-Authenticate", auth.Challenge(s.metadataURL, s.scopes))
		x.fail(newError(http.StatusUnauthorized, mcp.CodeInvalidRequest, "Unauthorized: a valid bearer token for this endpoint is required", nil))
		return nil, false
	}
	x.round.Principal = p
	return p, true
}

// readBody reads the request body, up to the size cap.
func (e *Handler) readBody(x *exchange) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(x.w, x.req.Body, e.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			x.fail(newError(http.StatusRequestEntityTooLarge, mcp.CodeInvalidRequest,
				fmt.Sprintf("Request body exceeds %d bytes", e.opts.MaxBodyBytes), nil))
		}
		return nil, false // or the client went away
	}
	return body, true
}

// ServeMetadata answers GET /.well-known/oauth-protected-resource/t/{slug}/mcp
// (RFC 9728) for tenants that take tokens.
func (e *Handler) ServeMetadata(w http.ResponseWriter, r *http.Request, slug string) {
	s, err := e.catalogues.lookup(r.Context(), slug)
	if err != nil {
		http.Error(w, "tenant catalogue unavailable", http.StatusServiceUnavailable)
		return
	}
	if s == nil || s.disabled || s.settings.Auth.Public {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeJSON(w, http.StatusOK, auth.Metadata(s.audience, s.settings.Auth, s.scopes))
}

// originAllowed guards against DNS rebinding. The Host must be the
// platform's public host, a loopback name, or one the operator allows; a
// browser request (one with an Origin header) must come from the same
// host, the platform's public origin, or an origin the tenant allows.
func (e *Handler) originAllowed(r *http.Request, s *snapshot) bool {
	if !e.hostAllowed(r.Host) {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if s.origins[strings.TrimSuffix(origin, "/")] {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, r.Host) || strings.EqualFold(u.Host, e.publicHost)
}

// hostAllowed reports whether a request's Host names this platform.
func (e *Handler) hostAllowed(host string) bool {
	if host == "" {
		return false
	}
	if strings.EqualFold(host, e.publicHost) || e.allowedHosts[strings.ToLower(host)] {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.Trim(strings.ToLower(name), "[]")
	if e.allowedHosts[name] {
		return true
	}
	switch name {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}

func httpVersion(r *http.Request) string {
	switch r.ProtoMajor {
	case 2:
		return "2"
	case 3:
		return "3"
	}
	return "1." + strconv.Itoa(r.ProtoMinor)
}

// claimed is what a request refused before its body is read says it
// calls, by its headers (a 2026-07-28 client names the method and its
// target there): a call, a prompt or a resource read, and its target,
// bounded as a read body's would be. Nothing checked it against a body,
// so the record holds it as the caller's claim; any other method is
// left unnamed.
func claimed(h http.Header) (method, target string) {
	m, _ := headerValue(h, mcp.HeaderMethod)
	switch m {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet:
		t, _ := headerValue(h, mcp.HeaderName)
		return m, bounded.String(t, bounded.Value)
	case mcp.MethodResourcesRead:
		t, _ := headerValue(h, mcp.HeaderName)
		return m, bounded.URL(t, bounded.Value)
	}
	return "", ""
}

// boundedID is a request id fit to record: as sent when short, else a
// string of the first bytes of its value.
func boundedID(id json.RawMessage) json.RawMessage {
	if len(id) <= bounded.Value {
		return id
	}
	s := string(id)
	if id[0] == '"' {
		_ = json.Unmarshal(id, &s)
	}
	b, _ := json.Marshal(bounded.String(s, bounded.Value))
	return b
}
