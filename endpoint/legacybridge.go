package endpoint

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/opsmcp/platform/internal/bounded"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/webhook"
)

// The bridge serves a legacy session's tools/call, prompts/get and
// resources/read. Each round is the stateless round (flowEngine.run),
// with the session's version and capabilities: the inbound state
// verified (tenant, principal, expiry, revocation, key ring), declared
// inputs gathered, the webhook called. When a round needs input, its
// questions go to the client as JSON-RPC requests on this request's
// event stream (the legacy way to ask), its answers come back as POSTs
// (relayed here from any replica), and they are the next round's
// inputResponses, with the state the round sealed as its requestState:
// exactly the retry a 2026-07-28 client would send. Every round is its
// own Round, handed to the sinks when it ends (its span, with
// mcp.session.id; its line in the flow record, era = the session's
// version). The call ends with the final result on the stream, or an
// error when the client does not answer in time, refuses a request,
// cancels, or the round limit is reached; a client that goes away ends
// it with nothing written.

// bridged is one bridged call in progress.
type bridged struct {
	l  *legacy
	x  *exchange
	s  *session
	bc *bridgeCall
	// level is the session's log level; progressToken the call's.
	level         string
	progressToken json.RawMessage
	// lastProgress is the last progress value relayed: values must
	// increase across the whole call, rounds included.
	lastProgress float64
	progressed   bool
	// body is the call's request as posted, kept with its stream;
	// stored is the stream's stored log once it began (nil if it could
	// not be stored), resumable says so to the goroutine watching the
	// client's connection, and asked that the call has a checkpoint
	// another replica could take it over from.
	body      []byte
	stored    *callLog
	resumable atomic.Bool
	asked     bool
	// closeStream stops counting the call's stream as open (it counts
	// until its client goes away or the call ends).
	closeStream func()
}

// legRequest is a request sent to the client on the call's stream.
type legRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      string          `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// legPrefix starts the ids of requests the bridge sends.
const legPrefix = "opsmcp-"

// newLegID returns a request id unique within the session (and across
// replicas): 128 random bits.
func newLegID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return legPrefix + hex.EncodeToString(b[:])
}

func validLegID(id string) bool {
	rest, ok := strings.CutPrefix(id, legPrefix)
	if !ok || len(rest) != 32 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil
}

// newUUID returns a random (version 4) UUID, for URL elicitations'
// elicitationId.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// urlAsk is a URL elicitation the client accepted: once the flow moves
// past it, the client is told it is complete.
type urlAsk struct {
	key, elicitationID string
	params             json.RawMessage
}

// legFailure is why a round's requests got no usable answers.
type legFailure struct {
	// kind is timeout, refused, cancelled (by the client), gone (the
	// client disconnected), ended (the session), revoked (the flow, by
	// an admin), shutdown, unavailable (the tenant).
	kind   string
	method string
	detail string
}

// bridge serves a carrier request of a legacy session.
func (l *legacy) bridge(x *exchange, c *call, s *session, body []byte) {
	l.serveBridged(x, c, s, body, nil, nil)
}

// serveBridged serves a bridged call: from its start, or, taken over
// (cl and r set), from the questions it waits on. The call does not
// depend on the client's connection once its stream is resumable: the
// work goes on in contexts that keep the request's values (its trace)
// but not its cancellation, and ends with the call or when stopped
// from outside.
func (l *legacy) serveBridged(x *exchange, c *call, s *session, body []byte, cl *callLog, r *resumed) {
	// A call taken over is one the session already had: counted, never
	// refused.
	limit := l.opts.CallsPerSession
	if cl != nil {
		limit = 0
	}
	if !l.bridging.enter(s.id, limit) {
		x.w.Header().Set("Retry-After", "5")
		x.fail(newError(http.StatusTooManyRequests, mcp.CodeInvalidRequest, fmt.Sprintf(
			"Too many calls in flight: this session has %d, the most it may; wait for one to end, or cancel one (notifications/cancelled)", limit), nil))
		return
	}
	defer l.bridging.leave(s.id)
	level, err := l.sessionLevel(x.ctx, c.snap, s)
	if err != nil {
		l.storeFailed(x, c, err)
		return
	}
	x.ctx = context.WithoutCancel(x.ctx)
	if st := x.round.trace; st != nil {
		st.base = context.WithoutCancel(st.base)
		if st.header != nil {
			st.header = context.WithoutCancel(st.header)
		}
	}
	ctx, cancel := context.WithCancel(x.ctx)
	defer cancel()
	bc := &bridgeCall{tenantID: c.snap.tenantID, session: s.id, target: callTarget(s.id, c.id),
		inbox: make(chan json.RawMessage, 16), cancel: cancel}
	l.relay.hold(bc)
	defer l.relay.release(bc)
	b := &bridged{l: l, x: x, s: s, bc: bc, level: level, progressToken: c.progressToken, body: body, stored: cl}
	if cl != nil {
		b.resumable.Store(true)
		b.asked = true
	}
	// A client that goes away before its stream can be resumed ends the
	// call, as before: nobody could ever read its answer.
	stop := context.AfterFunc(x.req.Context(), func() {
		if !b.resumable.Load() {
			cancel()
		}
	})
	defer stop()
	defer func() {
		if b.stored != nil && cl == nil {
			b.stored.close()
		}
		if b.closeStream != nil {
			b.closeStream()
		}
	}()
	b.run(ctx, c, r)
}

// resumed is where a taken-over call picks up: the state its pending
// questions were asked under, the questions, and the answers given.
type resumed struct {
	state   string
	legs    []pendingLeg
	answers map[string]json.RawMessage
}

// maxRounds is the round limit of a tenant's bridged flows.
func (l *legacy) maxRounds(snap *snapshot) int {
	n := snap.settings.Rounds()
	if l.opts.MaxRounds > 0 && l.opts.MaxRounds < n {
		n = l.opts.MaxRounds
	}
	return n
}

// roundTimeout is how long a round waits for the client: the setting,
// but never past the round's state TTL, after which the answers would
// be refused anyway.
func (l *legacy) roundTimeout(snap *snapshot) time.Duration {
	return min(l.opts.RoundTimeout, snap.settings.StateTTL())
}

// stateOnlyBackoff is how long the bridge waits before continuing a
// round that sealed a state but asked nothing (a backend that wants to
// be called again).
var stateOnlyBackoff = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 250 * time.Millisecond}

// run runs the call's rounds until one completes or the call fails; a
// taken-over call (r set) starts by waiting for its pending answers.
func (b *bridged) run(ctx context.Context, c *call, r *resumed) {
	x, l := b.x, b.l
	e := l.e
	var urls []urlAsk
	stateOnly := 0
	for {
		var state string
		var responses map[string]json.RawMessage
		var fail *legFailure
		if r != nil {
			state = r.state
			if len(r.legs) > 0 {
				responses, urls, fail = b.await(ctx, r.legs, r.answers, l.roundTimeout(c.snap))
			}
			r = nil
		} else {
			rd := x.round
			rctx, rcancel := context.WithCancel(x.ctx)
			stop := context.AfterFunc(ctx, rcancel)
			a := e.flows.run(rctx, c, rd, b)
			stop()
			rcancel()
			if ctx.Err() != nil {
				b.stopped(c, b.stopFailure())
				return
			}
			if b.stored != nil && b.stored.lost {
				b.stopped(c, &legFailure{kind: "lost"})
				return
			}
			ir := a.inputRequired
			if ir == nil {
				b.completeURLs(urls, nil)
				b.finish(c, a)
				return
			}
			if limit := l.maxRounds(c.snap); rd.Number > limit {
				// The flow asks again past the limit: the state sealed for it
				// is never sent, and the call ends as a 2026-07-28 flow would.
				rd.Asked = nil
				legacyAnswer(x, roundsExceeded(c, limit))
				return
			}
			b.completeURLs(urls, ir.InputRequests)
			// This round ends here, its questions about to go out as requests.
			rd.ResultType, rd.Answered, rd.Ended = mcp.ResultTypeInputRequired, true, time.Now()
			e.sinks.Round(x.ctx, rd)

			state = ir.RequestState
			if len(ir.InputRequests) == 0 {
				b.pauseCheckpoint(state)
				fail = b.pause(ctx, stateOnlyBackoff[min(stateOnly, len(stateOnlyBackoff)-1)])
				stateOnly++
			} else {
				var legs []pendingLeg
				if legs, fail = b.post(ir.InputRequests, state); fail == nil {
					responses, urls, fail = b.await(ctx, legs, nil, l.roundTimeout(c.snap))
				}
			}
			b.next(c, rd)
		}
		if fail != nil {
			b.stopped(c, fail)
			return
		}
		// The answers are in (and recorded so): the round that takes them
		// runs here, to its end, and is not left to another replica.
		b.asked = false
		snap, err := e.catalogues.lookup(ctx, c.snap.slug)
		if err != nil || snap == nil || snap.disabled || snap.tenantID != c.snap.tenantID {
			b.stopped(c, &legFailure{kind: "unavailable"})
			return
		}
		c = c.retry(snap, responses, state)
	}
}

// retry is the call's next round: the same request with the client's
// answers and the state the last round sealed, on the tenant's current
// catalogue.
func (c *call) retry(snap *snapshot, responses map[string]json.RawMessage, state string) *call {
	q := *c.request
	q.p.InputResponses, q.p.RequestState = nil, nil
	if responses != nil {
		q.p.InputResponses, _ = json.Marshal(responses)
	}
	if state != "" {
		q.p.RequestState, _ = json.Marshal(state)
	}
	return &call{request: &q, snap: snap, principal: c.principal, header: c.header}
}

// next starts the call's next round (or its closing one, when the call
// fails between rounds) as the exchange's current round: a Round of its
// own, traced as its own span. The span's parent is the client's trace
// context when it sent one (the rounds are then siblings), else the
// previous round's span, so a bridged call is one trace.
func (b *bridged) next(c *call, prev *Round) {
	x := b.x
	rd := &Round{
		Arrived: time.Now(), ClientAddr: prev.ClientAddr, ClientPort: prev.ClientPort, HTTPVersion: prev.HTTPVersion,
		TenantID: prev.TenantID, Tenant: prev.Tenant, Settings: prev.Settings, Method: prev.Method, RequestID: prev.RequestID,
		Target: prev.Target, Registered: prev.Registered, ProtocolVersion: prev.ProtocolVersion, Era: prev.Era,
		Client: prev.Client, Principal: prev.Principal, SessionID: prev.SessionID,
		// Until the round opens the state, it continues the same flow
		// (the closing round of a failed call keeps these).
		FlowID: prev.FlowID, Number: prev.Number + 1, FlowStart: prev.FlowStart, PreviousEnded: prev.Ended,
		Served:   prev.Served + prev.Ended.Sub(prev.Arrived),
		spanName: prev.spanName, flowSpanName: prev.flowSpanName,
	}
	if prev.Content != nil {
		rd.Content = &RoundContent{Arguments: prev.Content.Arguments}
	}
	st := &spanState{base: prev.trace.base, header: prev.trace.header}
	if st.header == nil && c.p.Meta.traceparent == nil && prev.trace.span != nil {
		st.base = trace.ContextWithSpan(st.base, prev.trace.span)
	}
	rd.trace = st
	x.round = rd
	x.ctx = b.l.e.tel.begin(rd, &c.p.Meta)
}

// pause waits before a state-only round continues.
func (b *bridged) pause(ctx context.Context, d time.Duration) *legFailure {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return b.stopFailure()
	case <-t.C:
		return nil
	}
}

// stopFailure says why the call's context ended.
func (b *bridged) stopFailure() *legFailure {
	switch b.bc.stopped() {
	case stopClientCancel:
		return &legFailure{kind: "cancelled"}
	case stopSessionEnded:
		return &legFailure{kind: "ended"}
	case stopShutdown:
		return &legFailure{kind: "shutdown"}
	}
	return &legFailure{kind: "gone"}
}

// stopped ends a call that did not complete, on its current round: the
// client is told why when it still listens and did not cancel (a
// cancelled request gets no answer).
func (b *bridged) stopped(c *call, f *legFailure) {
	x := b.x
	var msg string
	if b.stored != nil && b.stored.lost {
		return // another replica serves it now, and says how it ends
	}
	if b.leaving(f) {
		// Left for another replica: the client resumes its stream there,
		// which takes the call over at once.
		b.stored.left = true
		if err := b.l.write(func(ctx context.Context) error { return b.l.e.opts.Sessions.ReleaseCall(ctx, b.stored.id, b.l.holder) }); err != nil {
			b.l.e.log.Warn("cannot release a legacy call at shutdown; another replica takes it over when its lease ends", "err", err)
		}
		return
	}
	switch f.kind {
	case "gone", "cancelled", "lost":
		return
	case "timeout":
		msg = fmt.Sprintf("The client did not answer the server's %s request within %s; the call was stopped.", f.method, b.l.roundTimeout(c.snap))
		x.round.Stopped, x.round.StopCause = "client_timeout", msg
	case "refused":
		msg = fmt.Sprintf("The client refused the server's %s request (%s); the call was stopped.", f.method, f.detail)
		x.round.Stopped, x.round.StopCause = "client_refused", msg
	case "ended":
		msg = "The session ended; the call was stopped."
	case "revoked":
		msg = "The call was cancelled by an administrator."
	case "shutdown":
		msg = "The server is shutting down; call again."
	default:
		msg = "The tenant is no longer available; the call was stopped."
	}
	if c.method == mcp.MethodToolsCall && f.kind != "shutdown" {
		legacyAnswer(x, toolFailed(toolError(c.snap, msg)))
		return
	}
	legacyAnswer(x, failed(newError(http.StatusOK, mcp.CodeInternalError, msg, nil)))
}

// leaving says the call stops because this replica shuts down, while
// another could take it over: it waits on questions whose state is
// recorded.
func (b *bridged) leaving(f *legFailure) bool {
	return f.kind == "shutdown" && b.stored != nil && b.stored.stored() && b.asked
}

// finish writes the last round's answer in the legacy shape.
func (b *bridged) finish(c *call, a answer) {
	if a.err != nil {
		switch {
		case a.err.Code == mcp.CodeMissingRequiredCapability:
			// The session's capabilities lack what the flow needs: no
			// request was sent, and the error names the capability.
			var need mrtr.ClientCapabilities
			if d, ok := a.err.Data.(map[string]any); ok {
				need, _ = d["requiredCapabilities"].(mrtr.ClientCapabilities)
			}
			msg := "This " + targetKind(c.method) + " needs the client capability " + describeCapabilities(need) +
				", which this session did not declare in initialize."
			if c.method == mcp.MethodToolsCall {
				a = toolFailed(toolError(c.snap, msg))
			} else {
				a = failed(newError(http.StatusOK, mcp.CodeInternalError, msg, map[string]any{"requiredCapabilities": need}))
			}
		case a.err.Code == mcp.CodeInvalidParams && a.err.Message == errInvalidState().Message:
			// The state of a bridged round never left the server: it was
			// refused because the flow expired or was cancelled.
			msg := "The call could not continue: it expired or was cancelled."
			if c.method == mcp.MethodToolsCall {
				a = toolFailed(toolError(c.snap, msg))
			} else {
				a = failed(newError(http.StatusOK, mcp.CodeInternalError, msg, nil))
			}
		case c.method == mcp.MethodResourcesRead && a.err.Code == mcp.CodeInvalidParams && a.err.Message == "Resource not found":
			// 2026-07-28 moved resource-not-found to -32602; before, -32002.
			cp := *a.err
			cp.Code = mcp.CodeResourceNotFound
			a.err = &cp
		}
	}
	legacyAnswer(b.x, a)
}

// roundsExceeded is the answer of a flow past the round limit.
func roundsExceeded(c *call, limit int) answer {
	msg := fmt.Sprintf("This call needed more than %d rounds of input and was stopped.", limit)
	if c.method == mcp.MethodToolsCall {
		return toolFailed(toolError(c.snap, msg))
	}
	return failed(newError(http.StatusOK, mcp.CodeInternalError, msg, nil))
}

func targetKind(method string) string {
	switch method {
	case mcp.MethodToolsCall:
		return "tool"
	case mcp.MethodPromptsGet:
		return "prompt"
	}
	return "resource"
}

// describeCapabilities names capabilities the way initialize declares
// them: elicitation.form, elicitation.url, sampling, sampling.tools,
// sampling.context, roots.
func describeCapabilities(c mrtr.ClientCapabilities) string {
	var names []string
	if e := c.Elicitation; e != nil {
		switch {
		case e.URL != nil && e.Form != nil:
			names = append(names, "elicitation.form", "elicitation.url")
		case e.URL != nil:
			names = append(names, "elicitation.url")
		default:
			names = append(names, "elicitation (form)")
		}
	}
	if s := c.Sampling; s != nil {
		switch {
		case s.Tools != nil:
			names = append(names, "sampling.tools")
		case s.Context != nil:
			names = append(names, "sampling.context")
		default:
			names = append(names, "sampling")
		}
	}
	if c.Roots != nil {
		names = append(names, "roots")
	}
	if len(names) == 0 {
		return "(unknown)"
	}
	return strings.Join(names, " and ")
}

// post sends a round's questions as requests on the call's stream,
// stored with what another replica would need to take the call over
// (the state they were asked under, the questions) in one write. Their
// ids are held by the relay before they are sent, so no answer can
// arrive first.
func (b *bridged) post(reqs map[string]mrtr.InputRequest, state string) ([]pendingLeg, *legFailure) {
	keys := slices.Sorted(maps.Keys(reqs))
	legs := make([]pendingLeg, len(keys))
	ids := make([]string, len(keys))
	msgs := make([]any, len(keys))
	for i, k := range keys {
		params, eid := legParams(reqs[k])
		legs[i] = pendingLeg{ID: newLegID(), Key: k, Method: reqs[k].Method, EID: eid, Params: params}
		ids[i] = legs[i].ID
		msgs[i] = legRequest{JSONRPC: "2.0", ID: legs[i].ID, Method: legs[i].Method, Params: params}
	}
	b.l.relay.addLegs(b.bc, ids)
	sse := b.stream()
	raw, _ := json.Marshal(legs)
	if sse.sendAll(msgs, &store.Checkpoint{State: state, Legs: string(raw)}) != nil {
		b.l.relay.dropLegs(ids)
		return nil, &legFailure{kind: "gone"}
	}
	b.asked = b.stored != nil && b.stored.stored()
	return legs, nil
}

// pauseCheckpoint records, before a state-only round is run again,
// that it is about to run: a replica taking the call over does not run
// it a second time.
func (b *bridged) pauseCheckpoint(state string) {
	if b.stored == nil || !b.stored.written.Load() {
		return
	}
	b.stored.write(nil, &store.Checkpoint{State: state, Running: true}, false)
	b.asked = false
}

// await waits for every answer to the call's pending questions (those
// in given already count), the round timeout, or the call's end. The
// first refusal stops the round: the other requests are cancelled.
func (b *bridged) await(ctx context.Context, legs []pendingLeg, given map[string]json.RawMessage, timeout time.Duration) (map[string]json.RawMessage, []urlAsk, *legFailure) {
	ids := make([]string, len(legs))
	byID := make(map[string]int, len(legs))
	for i, leg := range legs {
		ids[i] = leg.ID
		byID[leg.ID] = i
	}
	b.l.relay.addLegs(b.bc, ids)
	defer b.l.relay.dropLegs(ids)
	if given != nil {
		// Taken over: answers posted while no replica held the call wait
		// in the relay; take them now rather than at the next sweep.
		b.l.relay.takeNow(b.l.ctx, ids)
	}
	sse := b.stream()
	answers := make(map[string]json.RawMessage, len(legs))
	var urls []urlAsk
	accept := func(i int, result json.RawMessage) {
		answers[legs[i].Key] = result
		if legs[i].EID != "" && acceptedResult(result) {
			urls = append(urls, urlAsk{key: legs[i].Key, elicitationID: legs[i].EID, params: legs[i].Params})
		}
	}
	for i, leg := range legs {
		if r, ok := given[leg.Key]; ok {
			accept(i, r)
		}
	}
	cancelRest := func(reason string) {
		for _, leg := range legs {
			if _, done := answers[leg.Key]; !done {
				_ = sse.send(notification{JSONRPC: "2.0", Method: mcp.NotificationCancelled,
					Params: map[string]any{"requestId": leg.ID, "reason": reason}})
			}
		}
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	keepAlive := time.NewTicker(streamKeepAlive)
	defer keepAlive.Stop()
	// An admin's cancellation (here or on any replica) stops the wait at
	// once rather than when the client answers.
	revocation := time.NewTicker(b.l.e.opts.Refresh)
	defer revocation.Stop()
	rd := b.x.round
	for len(answers) < len(legs) {
		select {
		case <-revocation.C:
			if b.l.e.revoked.revoked(rd.TenantID, rd.FlowID) {
				cancelRest("the call was cancelled")
				return nil, nil, &legFailure{kind: "revoked"}
			}
		case <-ctx.Done():
			f := b.stopFailure()
			if f.kind != "gone" && !b.leaving(f) {
				cancelRest("the call was stopped")
			}
			return nil, nil, f
		case <-timer.C:
			cancelRest("timed out")
			first := ""
			for _, leg := range legs {
				if _, done := answers[leg.Key]; !done {
					first = leg.Method
					break
				}
			}
			return nil, nil, &legFailure{kind: "timeout", method: first}
		case <-keepAlive.C:
			if sse.comment() != nil {
				return nil, nil, &legFailure{kind: "gone"}
			}
			b.l.seen.add(b.s.id) // a call waiting on its client keeps its session in use
		case raw := <-b.bc.inbox:
			var resp struct {
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			var id string
			if json.Unmarshal(raw, &resp) != nil || json.Unmarshal(resp.ID, &id) != nil {
				continue
			}
			i, ok := byID[id]
			if !ok {
				continue
			}
			if _, done := answers[legs[i].Key]; done {
				continue
			}
			if resp.Error != nil || len(resp.Result) == 0 || string(resp.Result) == "null" {
				detail := "no result"
				if resp.Error != nil {
					detail = fmt.Sprintf("%d %s", resp.Error.Code, bounded.String(resp.Error.Message, 200))
				}
				answers[legs[i].Key] = nil // not to be cancelled
				cancelRest("another request of the call was refused")
				return nil, nil, &legFailure{kind: "refused", method: legs[i].Method, detail: detail}
			}
			accept(i, resp.Result)
			if f := b.saveAnswers(legs, answers); f != nil {
				return nil, nil, f
			}
		}
	}
	return answers, urls, nil
}

// saveAnswers records the answers given so far, for a replica that
// would take the call over; with the last one the round is marked
// running, after which a taker does not run it again. A call taken over
// already stops here, its answers passed on to the taker.
func (b *bridged) saveAnswers(legs []pendingLeg, answers map[string]json.RawMessage) *legFailure {
	cl := b.stored
	if cl == nil || !cl.stored() || !cl.written.Load() {
		return nil
	}
	raw, _ := json.Marshal(answers)
	running := len(answers) == len(legs)
	err := b.l.write(func(ctx context.Context) error {
		return b.l.e.opts.Sessions.SaveAnswers(ctx, cl.id, b.l.holder, string(raw), running)
	})
	switch {
	case errors.Is(err, store.ErrNotHeld):
		cl.lost = true
		// The answers this replica took belong to the call's new holder.
		for _, leg := range legs {
			if a, ok := answers[leg.Key]; ok && a != nil {
				msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": leg.ID, "result": a})
				_ = b.l.relay.post(b.l.ctx, b.bc.tenantID, b.bc.session, "r:"+leg.ID, msg)
			}
		}
		return &legFailure{kind: "lost"}
	case err != nil:
		b.asked = false // a taker would not know of these answers: none is to take over
		b.l.e.log.Warn("cannot record a legacy call's answers; the call cannot be taken over", "err", err)
	}
	return nil
}

func acceptedResult(raw json.RawMessage) bool {
	var r struct {
		Action string `json:"action"`
	}
	return json.Unmarshal(raw, &r) == nil && r.Action == mrtr.ActionAccept
}

// legParams are an input request's params as a legacy client reads
// them: a form elicitation without mode (absent means form in every
// legacy revision, and 2025-06-18 knows no mode), a URL elicitation with
// the elicitationId 2025-11-25 requires (returned too).
func legParams(r mrtr.InputRequest) (json.RawMessage, string) {
	if r.Method != mcp.MethodElicit || len(r.Params) == 0 {
		return r.Params, ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(r.Params, &m) != nil {
		return r.Params, ""
	}
	var mode, eid string
	_ = json.Unmarshal(m["mode"], &mode)
	switch mode {
	case "url":
		if json.Unmarshal(m["elicitationId"], &eid) != nil || eid == "" {
			eid = newUUID()
			m["elicitationId"], _ = json.Marshal(eid)
		}
	case "form":
		delete(m, "mode")
	default:
		return r.Params, ""
	}
	out, err := json.Marshal(m)
	if err != nil {
		return r.Params, ""
	}
	return out, eid
}

// completeURLs tells the client that the URL elicitations it accepted
// are complete, for those the flow no longer asks (next: the questions
// of the round that followed; nil when the call ended).
func (b *bridged) completeURLs(urls []urlAsk, next map[string]mrtr.InputRequest) {
	for _, u := range urls {
		if r, again := next[u.key]; again && string(r.Params) == string(u.params) {
			continue // asked again: not complete
		}
		_ = b.stream().send(notification{JSONRPC: "2.0", Method: mcp.NotificationElicitationComplete,
			Params: map[string]any{"elicitationId": u.elicitationID}})
	}
}

// stream returns the call's event stream, starting it if need be: a
// stored, resumable one (primed for a 2025-11-25 client), whose row is
// written with its first events.
func (b *bridged) stream() *sseWriter {
	if b.x.sse != nil {
		return b.x.sse
	}
	sse := newSSE(b.x.w)
	b.x.sse = sse
	b.closeStream = b.l.streams.open(b.x.req.Context(), b.s.id)
	b.stored = b.l.newCallLog(b.bc.tenantID, b.s, b.body)
	sse.log = b.stored
	b.resumable.Store(true)
	if b.s.version == mcp.Version20251125 {
		sse.primeID = eventID('c', b.stored.id, 0)
	}
	return sse
}

// delivering implements events: the webhook's answer streams when the
// call asked for progress or the session set a log level.
func (b *bridged) delivering() bool {
	if b.progressToken == nil && b.level == "" {
		return false
	}
	if sse := b.stream(); !b.stored.written.Load() {
		// The stream begins before any event: its row now, so that a
		// client dropped during the webhook's answer may resume.
		b.stored.write(nil, nil, false)
		if sse.primeID != "" {
			_ = sse.event("", "", nil) // the priming alone
		}
	}
	return true
}

// progress relays a webhook's progress, increasing across the call.
func (b *bridged) progress(ev *webhook.Event) {
	if b.progressToken == nil || (b.progressed && ev.Progress <= b.lastProgress) {
		return
	}
	b.progressed, b.lastProgress = true, ev.Progress
	_ = b.stream().send(progressNote(b.progressToken, ev))
}

// log relays a webhook's log event at or above the session's level.
func (b *bridged) log(ev *webhook.Event) {
	if n, ok := logNote(b.level, ev); ok {
		_ = b.stream().send(n)
	}
}
