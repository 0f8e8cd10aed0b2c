package endpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/internal/bounded"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/store"
)

// The endpoints are dual-era: beside 2026-07-28 (stateless, per-request
// _meta), they serve initialization-era clients (2025-11-25, 2025-06-18,
// 2025-03-26) on the same URL. Such a client opens with initialize and
// gets a session (legacysession.go); its requests are then served like
// the stateless ones, with what the stateless revision carries in each
// request (version, capabilities) taken from the session. A tools/call,
// prompts/get or resources/read that needs input is bridged
// (legacybridge.go): the questions go to the client as requests on the
// call's own event stream, and its answers, which may reach any replica
// (legacyrelay.go), become the next round's inputResponses, round after
// round, each round verified and recorded as a stateless retry would be.
//
// Which era a request belongs to is decided from the request alone, so
// any replica decides alike: a POST whose params._meta claims a protocol
// version, or whose MCP-Protocol-Version header names 2026-07-28, is
// stateless; every other POST, and a GET or DELETE naming a session, is
// legacy.

// LegacyOptions configures serving initialization-era clients.
type LegacyOptions struct {
	// Serve turns it on.
	Serve bool
	// RoundTimeout bounds how long a bridged round waits for the
	// client's answers; the tenant's state TTL bounds it too.
	RoundTimeout time.Duration
	// MaxRounds caps a bridged flow's rounds; 0 (or more than the
	// tenant's maxRounds) means the tenant's maxRounds.
	MaxRounds int
	// SessionTTL is a session's fixed lifetime.
	SessionTTL time.Duration
	// InitializePerCaller and InitializePerTenant are the sessions a
	// caller, and all of a tenant's callers, may start a minute on this
	// replica (0: 30 and 600).
	InitializePerCaller, InitializePerTenant int
	// SessionsPerCaller and SessionsPerTenant cap the live sessions a
	// caller, and a tenant, may hold, fleet-wide (0: 100 and 10,000).
	SessionsPerCaller, SessionsPerTenant int
	// SessionIdle ends a session unused for that long (0: never).
	SessionIdle time.Duration
	// CallsPerSession caps a session's bridged calls in flight on this
	// replica (0: 32).
	CallsPerSession int
	// TouchEvery is how often a replica writes which sessions it saw
	// used (0: 30 s); Sweep how often it ends idle sessions and prunes
	// expired ones (0: a minute).
	TouchEvery, Sweep time.Duration
}

// legacy serves the initialization era for a Handler.
type legacy struct {
	e *Handler
	// ctx is the handler's: the work of a call that outlives its
	// client's connection (its stored events) is done in it.
	ctx  context.Context
	opts LegacyOptions
	// holder names this process as the holder of the calls it serves;
	// calls are those whose streams are stored.
	holder string
	calls  *heldCalls
	// seen are the sessions used since the last touchEvery; streams
	// counts the streams open here per session.
	seen    *seenSessions
	streams *openStreams
	// bridging counts each session's bridged calls in flight here.
	bridging *perSession
	ended    *endedSessions
	relay    *relay
	levels   *levels
	starts   *startLimits
	done     chan struct{}
}

func newLegacy(ctx context.Context, e *Handler, opts LegacyOptions) *legacy {
	if opts.RoundTimeout <= 0 {
		opts.RoundTimeout = 10 * time.Minute
	}
	if opts.SessionTTL <= 0 || opts.SessionTTL > mrtr.MaxTTL {
		opts.SessionTTL = mrtr.MaxTTL
	}
	if opts.TouchEvery <= 0 {
		opts.TouchEvery = 30 * time.Second
	}
	if opts.Sweep <= 0 {
		opts.Sweep = time.Minute
	}
	if opts.SessionsPerCaller <= 0 {
		opts.SessionsPerCaller = 100
	}
	if opts.SessionsPerTenant <= 0 {
		opts.SessionsPerTenant = 10_000
	}
	if opts.CallsPerSession <= 0 {
		opts.CallsPerSession = 32
	}
	l := &legacy{e: e, ctx: ctx, opts: opts, holder: newStreamID(), calls: &heldCalls{m: map[string]*callLog{}}, seen: &seenSessions{ids: map[string]struct{}{}}, streams: &openStreams{perSession: perSession{n: map[string]int{}}}, bridging: &perSession{n: map[string]int{}}, ended: newEndedSessions(), relay: newRelay(e.opts.Sessions, e.log),
		levels: newLevels(e.opts.Refresh), starts: newStartLimits(opts.InitializePerCaller, opts.InitializePerTenant), done: make(chan struct{})}
	go l.run(ctx)
	return l
}

// run relays messages across replicas and prunes expired records until
// ctx ends (ended sessions are followed by the endpoint's refresh).
func (l *legacy) run(ctx context.Context) {
	defer close(l.done)
	relayDone, renewDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(relayDone); l.relay.run(ctx) }()
	go func() { defer close(renewDone); l.renew(ctx) }()
	defer func() { <-relayDone; <-renewDone }()
	prune := time.NewTicker(l.opts.Sweep)
	defer prune.Stop()
	touch := time.NewTicker(l.opts.TouchEvery)
	defer touch.Stop()
	l.refreshEnded(ctx)
	for {
		select {
		case <-ctx.Done():
			l.relay.stopAll()
			l.touch(context.WithoutCancel(ctx))
			l.reportStreams(context.WithoutCancel(ctx), true)
			return
		case <-touch.C:
			l.touch(ctx)
			l.reportStreams(ctx, false)
		case <-prune.C:
			if l.opts.SessionIdle > 0 {
				if n, err := l.e.opts.Sessions.EndIdle(ctx, time.Now().Add(-l.opts.SessionIdle)); err != nil && ctx.Err() == nil {
					l.e.log.Warn("ending idle legacy sessions failed", "err", err)
				} else if n > 0 {
					l.e.log.Info("ended idle legacy sessions", "sessions", n, "idle", l.opts.SessionIdle)
					l.refreshEnded(ctx)
				}
			}
			if _, err := l.e.opts.Sessions.PruneCalls(ctx); err != nil && ctx.Err() == nil {
				l.e.log.Warn("pruning legacy calls failed", "err", err)
			}
			sessions, relay, err := l.e.opts.Sessions.Prune(ctx, relayMaxAge)
			if err != nil && ctx.Err() == nil {
				l.e.log.Warn("pruning legacy sessions failed", "err", err)
			}
			if sessions+relay > 0 {
				l.e.log.Debug("pruned legacy sessions", "sessions", sessions, "relay", relay)
			}
		}
	}
}

// seenSessions are the sessions a replica saw used, to be written.
type seenSessions struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

// add notes that session id was used.
func (s *seenSessions) add(id string) {
	s.mu.Lock()
	s.ids[id] = struct{}{}
	s.mu.Unlock()
}

// take returns the sessions seen since the last take.
func (s *seenSessions) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) == 0 {
		return nil
	}
	out := slices.Collect(maps.Keys(s.ids))
	clear(s.ids)
	return out
}

// openStreams counts a replica's open streams per session: the
// standalone GET stream, call streams, resumed streams and tasks/result
// waits. The admin API reads them fleet-wide from the reports each
// replica writes with its sessions' use.
type openStreams struct {
	perSession
	// reported says the last report held any stream.
	reported bool
}

// open counts a stream of session id until its request ends (its client
// went away, or its handler returned) or release is called, whichever
// comes first.
func (o *openStreams) open(ctx context.Context, id string) (release func()) {
	o.enter(id, 0)
	var once sync.Once
	closed := func() { once.Do(func() { o.leave(id) }) }
	stop := context.AfterFunc(ctx, closed)
	return func() { stop(); closed() }
}

// perSession counts something of each session, within a cap.
type perSession struct {
	mu sync.Mutex
	n  map[string]int
}

// enter counts one more for session id unless it has max already (max
// 0: whatever it has); leave undoes an enter that returned true.
func (p *perSession) enter(id string, max int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if max > 0 && p.n[id] >= max {
		return false
	}
	p.n[id]++
	return true
}

func (p *perSession) leave(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[id]--; p.n[id] <= 0 {
		delete(p.n, id)
	}
}

// counts copies the counts.
func (p *perSession) counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.n)
}

// streamReportLife is how long a replica's report of its open streams
// stands, in TouchEvery periods: a report is rewritten each period, so
// one missed write (a database blip) drops nothing, and a killed
// replica's streams stop counting within it.
const streamReportLife = 3

// reportStreams writes this replica's open streams per session, or,
// leaving, withdraws them; a replica with none and none reported writes
// nothing.
func (l *legacy) reportStreams(ctx context.Context, leaving bool) {
	counts := l.streams.counts()
	if leaving {
		counts = nil
	}
	if len(counts) == 0 && !l.streams.reported {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, storeWrite)
	defer cancel()
	expires := time.Now().Add(streamReportLife * l.opts.TouchEvery)
	if err := l.e.opts.Sessions.ReportStreams(ctx, l.holder, counts, expires); err != nil {
		l.e.log.Warn("reporting open legacy streams failed; the admin API may miss some", "sessions", len(counts), "err", err)
		return
	}
	l.streams.reported = len(counts) > 0
}

// touch writes which sessions were used since it last did, in one
// statement (per 500), off every request's path.
func (l *legacy) touch(ctx context.Context) {
	ids := l.seen.take()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, storeWrite)
	defer cancel()
	if err := l.e.opts.Sessions.Touch(ctx, ids, time.Now()); err != nil {
		l.e.log.Warn("recording legacy sessions' use failed; an idle one may end early", "sessions", len(ids), "err", err)
	}
}

// refreshEnded learns of the sessions ended since the last refresh, on
// any replica, and stops their calls and streams held here.
func (l *legacy) refreshEnded(ctx context.Context) {
	fresh, err := l.ended.refresh(ctx, l.e.opts.Sessions)
	if err != nil {
		if ctx.Err() == nil {
			l.e.log.Warn("ended-session refresh failed; keeping the last known set", "err", err)
		}
		return
	}
	for _, s := range fresh {
		l.relay.endSession(s.ID)
	}
}

func (l *legacy) close() { <-l.done }

// serveLegacy serves one request of the initialization era: the tenant,
// its Host and Origin, and the bearer token are checked already.
func (e *Handler) serveLegacy(x *exchange, snap *snapshot, p *auth.Principal, body []byte) {
	l := e.legacy
	switch x.req.Method {
	case http.MethodGet:
		l.stream(x, snap, p)
		return
	case http.MethodDelete:
		l.end(x, snap, p)
		return
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		x.fail(newError(http.StatusBadRequest, mcp.CodeInvalidRequest, "Empty request body", nil))
		return
	}
	if trimmed[0] == '[' {
		x.fail(newError(http.StatusBadRequest, mcp.CodeInvalidRequest, "Batches are not supported: send one JSON-RPC message per POST", nil))
		return
	}
	var m wrapped
	if err := json.Unmarshal(trimmed, &m); err != nil {
		x.fail(newError(http.StatusBadRequest, mcp.CodeParseError, "Parse error: the body is not valid JSON", nil))
		return
	}
	if m.Method == "" && (m.Result != nil || m.Error != nil) {
		l.answered(x, snap, p, &m, trimmed)
		return
	}
	q, rerr := parseRequest(trimmed)
	x.id, x.round.Method, x.round.RequestID = q.id, q.method, boundedID(q.id)
	if rerr != nil {
		x.fail(rerr)
		return
	}
	if q.id != nil && q.method == mcp.MethodInitialize {
		l.initialize(x, snap, p, m.Params)
		return
	}
	if q.id == nil && x.req.Header.Get(mcp.HeaderSessionID) == "" {
		// A notification outside any session has nothing to act on.
		x.w.WriteHeader(http.StatusAccepted)
		return
	}
	s, ok := l.session(x, snap, p)
	if !ok {
		return
	}
	if q.id == nil {
		l.notified(x, snap, s, q.method, m.Params)
		return
	}
	if v := x.req.Header.Get(mcp.HeaderProtocolVersion); v != "" && !mcp.IsLegacyVersion(v) {
		x.fail(newError(http.StatusBadRequest, mcp.CodeInvalidRequest, "Bad Request: unsupported MCP-Protocol-Version "+bounded.String(v, 40)+" on a session", nil))
		return
	}
	if _, rerr := q.readTarget(true); rerr != nil {
		x.round.SessionID, x.round.Era = s.id, s.version
		legacyFail(x, rerr)
		return
	}
	q.version, q.caps, q.rawCaps, q.client = s.version, s.caps, s.rawCaps, s.client
	q.progressToken = q.p.Meta.token()
	c := &call{request: q, snap: snap, principal: p}
	x.round.SessionID, x.round.Era = s.id, s.version
	e.begin(x, c)
	l.dispatch(x, c, s, m.Params, trimmed)
}

// session verifies the request's Mcp-Session-Id: missing is 400; unknown,
// forged, expired, ended or another caller's is 404, after which the
// client starts a new session. A session that can be verified only
// against its record (its key retired) while the record cannot be read
// is 503: the session may well be alive, and a 404 would make the client
// drop it and every call it has in flight.
func (l *legacy) session(x *exchange, snap *snapshot, p *auth.Principal) (*session, bool) {
	id := x.req.Header.Get(mcp.HeaderSessionID)
	if id == "" {
		x.fail(newError(http.StatusBadRequest, mcp.CodeInvalidRequest, "Bad Request: the Mcp-Session-Id header is required (initialize first)", nil))
		return nil, false
	}
	s, reason := l.open(x.ctx, snap, p, id)
	if s == nil {
		if reason == reasonSessionStore {
			l.e.log.WarnContext(x.ctx, "legacy session record unavailable", "tenant", snap.slug)
			x.fail(errSessionsUnavailable())
			return nil, false
		}
		l.e.log.InfoContext(x.ctx, "legacy session refused", "tenant", snap.slug, "reason", reason)
		x.fail(errSessionNotFound())
		return nil, false
	}
	l.seen.add(s.id)
	return s, true
}

// reasonSessionStore is why a session could not be verified when its
// record could not be read.
const reasonSessionStore = "session_record"

func errSessionNotFound() *rpcError {
	return newError(http.StatusNotFound, mcp.CodeSessionNotFound, "Session not found", nil)
}

// errSessionsUnavailable answers a request that needs a session's record
// (or the relay) while the database does not answer: 503, so the client
// sends it again rather than give the session up.
func errSessionsUnavailable() *rpcError {
	return newError(http.StatusServiceUnavailable, mcp.CodeInternalError, "Sessions are unavailable right now; try again", nil)
}

// legacyFail answers a method's error as legacy clients expect it: in
// the JSON-RPC body of a 200 (an HTTP error status tells them nothing
// of the code), except an authorization challenge, which keeps its
// status.
func legacyFail(x *exchange, e *rpcError) {
	if e.challenge == "" {
		cp := *e
		cp.status = http.StatusOK
		e = &cp
	}
	x.fail(e)
}

// legacyAnswer writes a method's answer in the legacy shape.
func legacyAnswer(x *exchange, a answer) {
	switch {
	case a.err != nil:
		legacyFail(x, a.err)
	case a.complete != nil:
		a.complete = legacyResult(a.complete)
		x.answer(a)
	default:
		x.answer(a)
	}
}

// legacyResult drops what only the stateless revision's results carry:
// resultType and the caching hints.
func legacyResult(v any) any {
	switch m := v.(type) {
	case map[string]any:
		delete(m, "resultType")
		delete(m, "ttlMs")
		delete(m, "cacheScope")
	case map[string]json.RawMessage:
		delete(m, "resultType")
		delete(m, "ttlMs")
		delete(m, "cacheScope")
	}
	return v
}

// serverCapabilities are what initialize declares; serverCapabilitiesTasks
// add tasks, for a tenant with a tool that may run as one.
var (
	serverCapabilities = map[string]any{
		"logging":     map[string]any{},
		"completions": map[string]any{},
		"prompts":     map[string]any{"listChanged": true},
		"resources":   map[string]any{"subscribe": true, "listChanged": true},
		"tools":       map[string]any{"listChanged": true},
	}
	serverCapabilitiesTasks = func() map[string]any {
		m := maps.Clone(serverCapabilities)
		m["tasks"] = v1Capabilities
		return m
	}()
)

// initialize starts a session: the version negotiated, the client's
// capabilities and name sealed into the id, the session recorded.
func (l *legacy) initialize(x *exchange, snap *snapshot, p *auth.Principal, raw json.RawMessage) {
	var params struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ClientInfo      ClientInfo      `json:"clientInfo"`
	}
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &params) != nil {
		legacyFail(x, errInvalidParams("Invalid params: initialize needs protocolVersion, capabilities and clientInfo"))
		return
	}
	caller := callerKey(p, x.round.ClientAddr)
	if wait, ok := l.starts.allow(snap.tenantID, caller, time.Now()); !ok {
		secs := int((wait + time.Second - 1) / time.Second)
		x.w.Header().Set("Retry-After", strconv.Itoa(secs))
		x.fail(newError(http.StatusTooManyRequests, mcp.CodeInvalidRequest,
			fmt.Sprintf("Too many sessions started: try again in %d s", secs), nil))
		return
	}
	callerHash := hashHex(caller)
	tenantLive, callerLive, err := l.e.opts.Sessions.CountLive(x.ctx, snap.tenantID, callerHash)
	if err != nil {
		l.e.log.ErrorContext(x.ctx, "cannot count legacy sessions", "tenant", snap.slug, "err", err)
		x.fail(errSessionsUnavailable())
		return
	}
	if callerLive >= int64(l.opts.SessionsPerCaller) || tenantLive >= int64(l.opts.SessionsPerTenant) {
		whose := fmt.Sprintf("this caller has %d live sessions, the most it may", callerLive)
		if tenantLive >= int64(l.opts.SessionsPerTenant) {
			whose = fmt.Sprintf("this tenant has %d live sessions, the most it may", tenantLive)
		}
		x.w.Header().Set("Retry-After", "60")
		x.fail(newError(http.StatusTooManyRequests, mcp.CodeInvalidRequest,
			"Too many live sessions: "+whose+"; end one (DELETE) or try again later", nil))
		return
	}
	s := &session{id: newSessionID(), version: negotiate(params.ProtocolVersion),
		client: ClientInfo{Name: bounded.String(params.ClientInfo.Name, 200), Version: bounded.String(params.ClientInfo.Version, 100)}}
	if len(params.Capabilities) > 0 && params.Capabilities[0] == '{' {
		_ = json.Unmarshal(params.Capabilities, &s.caps)
	}
	s.rawCaps, _ = json.Marshal(s.caps)
	x.round.SessionID, x.round.Era, x.round.ProtocolVersion, x.round.Client = s.id, s.version, s.version, s.client
	tok, err := l.mint(x.ctx, snap, p, s)
	if err != nil {
		l.e.log.ErrorContext(x.ctx, "cannot seal a legacy session id", "tenant", snap.slug, "err", err)
		x.fail(errInternal())
		return
	}
	row := &store.LegacySession{ID: s.id, TenantID: snap.tenantID, ProtocolVersion: s.version,
		ClientName: s.client.Name, ClientVersion: s.client.Version, CreatedAt: time.Now(), ExpiresAt: s.expires,
		TokenHash: hashHex(tok), PrincipalHash: hashHex(p.Binding()), Capabilities: string(s.rawCaps), Caller: callerHash}
	if p != nil {
		row.PrincipalIssuer, row.PrincipalSubject, row.PrincipalClient = p.Issuer, p.Subject, p.Client
	}
	if err := l.e.opts.Sessions.Create(x.ctx, row); err != nil {
		// Without its record a session could not be ended: refuse it.
		l.e.log.ErrorContext(x.ctx, "cannot record a legacy session", "tenant", snap.slug, "err", err)
		x.fail(errSessionsUnavailable())
		return
	}
	caps := serverCapabilities
	if v1Tasks(s.version, snap) {
		caps = serverCapabilitiesTasks
	}
	result := map[string]any{
		"protocolVersion": s.version,
		"capabilities":    caps,
		"serverInfo":      snap.info[mcp.MetaServerInfo],
	}
	if snap.settings.Instructions != "" {
		result["instructions"] = snap.settings.Instructions
	}
	x.w.Header().Set(mcp.HeaderSessionID, tok)
	x.answer(completed(result))
}

// notified handles a client's notification: cancellation of one of its
// bridged calls is relayed to the replica serving it; the rest need
// nothing.
func (l *legacy) notified(x *exchange, snap *snapshot, s *session, method string, raw json.RawMessage) {
	if method == mcp.NotificationCancelled {
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(raw, &p) == nil && len(p.RequestID) > 0 && len(p.RequestID) <= 200 {
			// A cancellation that cannot be passed on is not retried: the
			// call then ends by itself (its round times out).
			_ = l.relay.post(x.ctx, snap.tenantID, s.id, callTarget(s.id, p.RequestID), nil)
		}
	}
	x.w.WriteHeader(http.StatusAccepted)
}

// answered takes a client's response to a request the platform sent on a
// bridged call's stream, and relays it to that call. An answer that can
// be neither handed over here nor passed on (the database down) is 503,
// so the client sends it again instead of waiting for a call that will
// never see it.
func (l *legacy) answered(x *exchange, snap *snapshot, p *auth.Principal, m *wrapped, body []byte) {
	s, ok := l.session(x, snap, p)
	if !ok {
		return
	}
	var id string
	if json.Unmarshal(m.ID, &id) == nil {
		if taskID, key, ok := parseTaskQuestionID(id); ok {
			l.taskAnswered(x, snap, p, s, taskID, key, m)
			return
		}
	}
	if validLegID(id) {
		if err := l.relay.post(x.ctx, snap.tenantID, s.id, "r:"+id, body); err != nil {
			x.fail(errSessionsUnavailable())
			return
		}
	}
	x.w.WriteHeader(http.StatusAccepted)
}

// dispatch answers a session's request by its method (raw its params,
// body the request as posted).
func (l *legacy) dispatch(x *exchange, c *call, s *session, raw json.RawMessage, body []byte) {
	e := l.e
	switch c.method {
	case mcp.MethodPing:
		x.answer(completed(map[string]any{}))
	case mcp.MethodSetLevel:
		l.setLevel(x, c, s, raw)
	case mcp.MethodSubscribe, mcp.MethodUnsubscribe:
		l.subscribe(x, c, s)
	case mcp.MethodToolsList:
		list := c.snap.toolList
		if v1Tasks(s.version, c.snap) {
			list = c.snap.legacyToolList
		}
		legacyAnswer(x, e.list(c, list, "tools"))
	case mcp.MethodPromptsList:
		legacyAnswer(x, e.list(c, c.snap.promptLst, "prompts"))
	case mcp.MethodResourcesList:
		legacyAnswer(x, e.list(c, c.snap.resList, "resources"))
	case mcp.MethodResourcesTemplatesList:
		legacyAnswer(x, e.list(c, c.snap.tmplList, "resourceTemplates"))
	case mcp.MethodComplete:
		legacyAnswer(x, e.complete(c))
	case mcp.MethodToolsCall:
		if e := v1TaskParams(c); e != nil {
			legacyFail(x, e)
			return
		}
		l.bridge(x, c, s, body)
	case mcp.MethodPromptsGet, mcp.MethodResourcesRead:
		l.bridge(x, c, s, body)
	case mcp.MethodTasksGet, mcp.MethodTasksCancel, mcp.MethodTasksList, mcp.MethodTasksResult:
		l.taskMethod(x, c, s)
	default:
		legacyFail(x, newError(http.StatusNotFound, mcp.CodeMethodNotFound, "Method not found: "+bounded.String(c.method, 100), nil))
	}
}

// setLevel records the session's log level, which every replica then
// uses for the session's calls.
func (l *legacy) setLevel(x *exchange, c *call, s *session, raw json.RawMessage) {
	var p struct {
		Level string `json:"level"`
	}
	if json.Unmarshal(raw, &p) != nil {
		legacyFail(x, errInvalidParams("Invalid params: level is required"))
		return
	}
	if _, ok := logLevels[p.Level]; !ok {
		legacyFail(x, errInvalidParams("Invalid params: level must be one of debug, info, notice, warning, error, critical, alert, emergency"))
		return
	}
	if err := l.e.opts.Sessions.SetLogLevel(x.ctx, c.snap.tenantID, s.id, p.Level); err != nil {
		l.storeFailed(x, c, err)
		return
	}
	l.levels.put(s.id, p.Level)
	x.answer(completed(map[string]any{}))
}

// maxSubscriptions bounds a session's resource subscriptions.
const maxSubscriptions = 100

// subscribe records a resource (un)subscription; updates go on the
// session's GET stream, from whichever replica holds it.
func (l *legacy) subscribe(x *exchange, c *call, s *session) {
	if len(c.uri) > 2048 {
		legacyFail(x, errInvalidParams("Invalid params: uri is longer than 2048 bytes"))
		return
	}
	errTooMany := errInvalidParams("Invalid params: a session may subscribe to at most 100 resources")
	err := l.e.opts.Sessions.UpdateSubscriptions(x.ctx, c.snap.tenantID, s.id, func(uris []string) ([]string, error) {
		i := slices.Index(uris, c.uri)
		switch {
		case c.method == mcp.MethodSubscribe && i < 0:
			if len(uris) >= maxSubscriptions {
				return nil, errTooMany
			}
			return append(uris, c.uri), nil
		case c.method == mcp.MethodUnsubscribe && i >= 0:
			return slices.Delete(uris, i, i+1), nil
		}
		return uris, nil
	})
	switch {
	case errors.Is(err, errTooMany):
		legacyFail(x, errTooMany)
	case err != nil:
		l.storeFailed(x, c, err)
	default:
		x.answer(completed(map[string]any{}))
	}
}

// storeFailed answers a failed read or write of the session's record: an
// ended session is 404; anything else (the database down) is 503, which
// the client may send again.
func (l *legacy) storeFailed(x *exchange, c *call, err error) {
	if errors.Is(err, errSessionGone) || errors.Is(err, store.ErrNotFound) {
		x.fail(errSessionNotFound())
		return
	}
	if x.ctx.Err() == nil {
		l.e.log.ErrorContext(x.ctx, "legacy session record unavailable", "tenant", c.snap.slug, "err", err)
	}
	x.fail(errSessionsUnavailable())
}

// end answers DELETE: the session ends on every replica (its calls held
// anywhere stop, its id gets 404 from now on).
func (l *legacy) end(x *exchange, snap *snapshot, p *auth.Principal) {
	s, ok := l.session(x, snap, p)
	if !ok {
		return
	}
	x.round.SessionID, x.round.Era = s.id, s.version
	if err := l.endSession(x.ctx, snap.tenantID, s.id, s.expires, "client"); err != nil && !errors.Is(err, store.ErrNotFound) {
		l.e.log.ErrorContext(x.ctx, "ending a legacy session failed", "tenant", snap.slug, "err", err)
		x.fail(errInternal())
		return
	}
	x.round.Answered = true
	x.w.WriteHeader(http.StatusNoContent)
}

// endSession records a session's end and applies it here at once.
func (l *legacy) endSession(ctx context.Context, tenantID, id string, expires time.Time, by string) error {
	err := l.e.opts.Sessions.End(ctx, tenantID, id, by)
	if err == nil || errors.Is(err, store.ErrNotFound) {
		l.ended.add(id, expires)
		l.relay.endSession(id)
	}
	return err
}

// EndSession ends a tenant's legacy session by its id (the nonce admins
// see): on every replica, its calls stop and its id gets 404.
// store.ErrNotFound means no such live session.
func (e *Handler) EndSession(ctx context.Context, slug, id, by string) error {
	if !validSessionID(id) {
		return store.ErrNotFound
	}
	tenantID, err := e.tenantID(ctx, slug)
	if err != nil {
		return err
	}
	if e.legacy == nil {
		return e.opts.Sessions.End(ctx, tenantID, id, by)
	}
	err = e.opts.Sessions.End(ctx, tenantID, id, by)
	if err == nil {
		e.legacy.ended.add(id, time.Now().Add(e.legacy.opts.SessionTTL))
		e.legacy.relay.endSession(id)
	}
	return err
}

// EndSessions ends every live legacy session of a tenant and says how
// many.
func (e *Handler) EndSessions(ctx context.Context, slug, by string) (int64, error) {
	tenantID, err := e.tenantID(ctx, slug)
	if err != nil {
		return 0, err
	}
	n, err := e.opts.Sessions.EndAll(ctx, tenantID, by)
	if err == nil && e.legacy != nil {
		e.legacy.refreshEnded(ctx)
	}
	return n, err
}

func (e *Handler) tenantID(ctx context.Context, slug string) (string, error) {
	t, err := e.opts.Catalogues.Get(ctx, slug)
	if err != nil {
		return "", err
	}
	return t.ID, nil
}

// streamKeepAlive is how often an idle stream gets a comment, so
// proxies do not take it for dead.
const streamKeepAlive = 15 * time.Second

// stream answers a session's GET: the session's standalone stream, or
// with Last-Event-ID, the stream that id names, resumed
// (legacyresume.go).
func (l *legacy) stream(x *exchange, snap *snapshot, p *auth.Principal) {
	s, ok := l.session(x, snap, p)
	if !ok {
		return
	}
	x.round.SessionID, x.round.Era = s.id, s.version
	if last := x.req.Header.Get(mcp.HeaderLastEventID); last != "" {
		l.resume(x, snap, p, s, last)
		return
	}
	l.standalone(x, snap, p, s, "")
}

// standalone serves the session's standalone stream: what concerns the
// session but no call of it: the tenant's list changes, and updates of
// the resources it subscribed to. It ends with the session, the client,
// or the replica, and like every stream at its maximum lifetime, when
// the caller's token expires, or when the tenant would no longer accept
// it. Its events are not stored: one resumed (from stream, which names
// the catalogue version it followed) begins by saying that everything
// it carries may have changed, when the catalogue has since.
func (l *legacy) standalone(x *exchange, snap *snapshot, p *auth.Principal, s *session, resumed string) {
	if _, err := l.sessionRow(x.ctx, snap, s); err != nil {
		l.storeFailed(x, &call{snap: snap}, err)
		return
	}
	hold, ok := l.e.holdStream(x, snap, p)
	if !ok {
		return
	}
	defer hold.release()
	defer l.streams.open(x.req.Context(), s.id)()
	// Held by the relay, so that the session's end, here or on another
	// replica, ends the stream at once.
	ctx, cancel := context.WithCancel(x.ctx)
	defer cancel()
	held := &bridgeCall{tenantID: snap.tenantID, session: s.id, target: "s:" + newLegID(), cancel: cancel}
	l.relay.hold(held)
	defer l.relay.release(held)
	sse := newSSE(x.w)
	sse.prefix = "g." + standaloneID(snap.version) + "."
	x.sse, x.round.Answered = sse, true
	if s.version == mcp.Version20251125 {
		if sse.event(sse.prefix+"0", reconnectDelay, nil) != nil {
			return
		}
	} else if sse.comment() != nil {
		return
	}
	if v, ok := standaloneVersion(resumed); resumed != "" && (!ok || v != snap.version) && l.resignal(ctx, sse, snap, s) != nil {
		return
	}
	keepAlive := time.NewTicker(streamKeepAlive)
	defer keepAlive.Stop()
	last := snap
	// The session's tasks, when it was offered them.
	var tasks *sessionTasks
	follow := &taskFollow{stop: func() {}} // follows nothing
	if v1Tasks(s.version, snap) {
		tasks = l.e.tasks.newSessionTasks(snap.tenantID, principalHash(p), s.id)
		follow = l.e.tasks.follow(ctx, snap.tenantID)
	}
	defer follow.stop()
	notifyTasks := func(flowID string) error {
		if tasks == nil {
			return nil
		}
		for _, n := range tasks.changed(ctx, flowID) {
			if err := sse.send(n); err != nil {
				return err
			}
		}
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ch, open := <-follow.changes:
			if !open {
				follow.changes = nil
			}
			if flowID, ok := taskFlow(ch, open); ok && notifyTasks(flowID) != nil {
				return
			}
		case <-follow.tick:
			if notifyTasks("") != nil {
				return
			}
		case <-keepAlive.C:
			if l.ended.has(s.id) || sse.comment() != nil {
				return
			}
			l.seen.add(s.id) // a session with a stream open is in use
		case <-hold.ending.C:
			return // its maximum lifetime, or the caller's token expired
		case ch, ok := <-hold.changes:
			if !ok || l.ended.has(s.id) {
				return // shutting down, or the session ended
			}
			if ch.tenant && !l.e.mayStay(x, snap, p) {
				return
			}
			for _, n := range []struct {
				on     bool
				method string
			}{
				{ch.tools || ch.legacyTools, mcp.NotificationToolsListChanged},
				{ch.prompts, mcp.NotificationPromptsListChanged},
				{ch.resources, mcp.NotificationResourcesListChanged},
			} {
				if n.on && sse.send(notification{JSONRPC: "2.0", Method: n.method}) != nil {
					return
				}
			}
			if ch.resources || ch.contents {
				cur, err := l.e.catalogues.lookup(ctx, snap.slug)
				if err != nil || cur == nil || cur.tenantID != snap.tenantID {
					return
				}
				if l.updated(ctx, sse, last, cur, s) != nil {
					return
				}
				last = cur
			}
		}
	}
}

// resignal tells a client resuming its standalone stream that every
// list, and every resource it subscribed to, may have changed while it
// was away: what was sent then is not kept, and a spurious signal only
// costs a re-read.
func (l *legacy) resignal(ctx context.Context, sse *sseWriter, snap *snapshot, s *session) error {
	for _, m := range []string{mcp.NotificationToolsListChanged, mcp.NotificationPromptsListChanged, mcp.NotificationResourcesListChanged} {
		if err := sse.send(notification{JSONRPC: "2.0", Method: m}); err != nil {
			return err
		}
	}
	return l.updated(ctx, sse, &snapshot{}, snap, s)
}

// updated sends notifications/resources/updated for every resource the
// session subscribed to whose content differs between two snapshots.
func (l *legacy) updated(ctx context.Context, sse *sseWriter, old, cur *snapshot, s *session) error {
	row, err := l.sessionRow(ctx, cur, s)
	if err != nil {
		return err
	}
	var uris []string
	_ = json.Unmarshal([]byte(row.Subscriptions), &uris)
	for _, uri := range uris {
		if sameResource(old.resources[uri], cur.resources[uri]) {
			continue
		}
		if err := sse.send(notification{JSONRPC: "2.0", Method: mcp.NotificationResourceUpdated,
			Params: map[string]any{"uri": uri}}); err != nil {
			return err
		}
	}
	return nil
}
