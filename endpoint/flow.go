package endpoint

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/opsmcp/platform/internal/bounded"

	"go.opentelemetry.io/otel/trace"

	"github.com/opsmcp/platform/catalogue"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/telemetry"
	"github.com/opsmcp/platform/webhook"
)

// webhookKeyPrefix marks the wire keys of input requests a webhook asked
// for. Declared input names never contain '.', so the two namespaces
// cannot collide.
const webhookKeyPrefix = "wh."

// flowEngine runs the rounds of tools/call, prompts/get and
// resources/read: request state, declared inputs, the webhook.
type flowEngine struct {
	sealing  *sealing
	webhooks *webhookClient
	tasks    *taskEngine
	log      *slog.Logger
	// running is told when a round of a flow calls the webhook.
	running func(ctx context.Context, rd *Round)
	// consume records, fleet-wide, that a round used its request state
	// (store.ConsumeState): a second use is store.ErrConsumed.
	consume func(ctx context.Context, tenantID, flowID string, round int, expires time.Time) error
	// ledger, when the record is on, consumes and settles instead, so the
	// record knows of the round before the tool runs and of its outcome
	// before the client does.
	ledger Ledger
}

// events receives what happens while a round calls the webhook; the
// exchange streams it to the client.
type events interface {
	// delivering is told the webhook is about to be called, and says
	// whether its answer may stream (the client asked for events).
	delivering() bool
	progress(ev *webhook.Event)
	log(ev *webhook.Event)
}

// flow is the state of one flow as a round continues it.
type flow struct {
	id     string
	number int // this round, 1 for a fresh call
	start  time.Time
	record mrtr.Record
	state  platformState
	// served is the server time of the flow's earlier rounds.
	served time.Duration
	// stateExpires is when the inbound state stops verifying (zero for a
	// fresh flow).
	stateExpires time.Time
}

// platformState is the platform's own part of a sealed state, besides
// the declared-inputs record: the webhook's own state and the keys it
// asked for, so only answers to those reach it.
type platformState struct {
	Webhook string   `json:"s,omitempty"`
	Asked   []string `json:"k,omitempty"`
	// Served is the milliseconds the platform spent on the flow's rounds
	// so far, so the flow span can tell server time from client wait.
	Served int64 `json:"t,omitempty"`
	// Ended is when the round that sealed this state answered (Unix
	// milliseconds), so the next round knows how long the client took.
	Ended int64 `json:"e,omitempty"`
}

// run serves one round of a carrier request:
//
//  1. the inbound requestState, if any, is verified: it says which flow
//     and round this continues (none: a fresh flow, round 1);
//  2. the target is found: the tool, prompt or resource template (or the
//     request is answered at once: invalid tool arguments, a template
//     prompt, a static resource);
//  3. declared inputs are gathered: answers recorded in the state, fresh
//     answers to the questions actually asked, questions still open;
//  4. open questions are asked, with the next round's state sealed;
//  5. otherwise the webhook is called with the arguments and answers: it
//     completes, or asks for more (asked as in 4).
//
// Every fact of the round goes on rd.
func (f *flowEngine) run(ctx context.Context, c *call, rd *Round, ev events) (res answer) {
	sealer := f.sealing.forRound(c.snap)
	b := f.binding(c)
	fl, a := f.open(ctx, &sealer, c, b, rd)
	if fl == nil {
		return a
	}
	responses, e := parseResponses(c.p.InputResponses)
	if e != nil {
		return failed(e)
	}
	rd.Actions = answerActions(responses)
	t, a := findTarget(c)
	if t == nil {
		return a
	}
	if t.onceOnly {
		// Every round of a destructive or single-use tool is in the record
		// before its answer leaves: the confirmed one consumed (useOnce)
		// and settled, the ones that ask settled too.
		defer func() { f.settle(ctx, c, rd, res) }()
	}
	declared, hookResponses := splitResponses(responses, fl.state.Asked)
	var answers map[string]webhook.Answer
	if t.inputs.Len() > 0 {
		res, err := t.inputs.Resolve(t.args, fl.record, declared, c.caps)
		if err != nil {
			var mc *mrtr.MissingCapabilityError
			if errors.As(err, &mc) {
				return failed(errMissingCapability(mc.Required))
			}
			f.log.ErrorContext(ctx, "declared inputs failed", "tenant", c.snap.slug, "target", t.name, "err", err)
			return failed(errInternal())
		}
		fl.record = res.Record
		if !res.Done {
			return f.ask(ctx, &sealer, c, b, rd, fl, res.Open)
		}
		answers = make(map[string]webhook.Answer, len(res.Answers))
		for k, a := range res.Answers {
			answers[k] = webhook.Answer{Action: a.Action, Content: a.Content}
		}
	}
	if t.onceOnly && fl.number > 1 {
		if a, ok := f.useOnce(ctx, c, fl, rd); !ok {
			return a
		}
	}
	if !offersTask(c, t) {
		resp, we := f.deliver(ctx, c, t, fl, answers, hookResponses, rd, ev, nil)
		return f.delivered(ctx, &sealer, c, b, t, fl, rd, resp, we, nil)
	}
	tk, e := f.tasks.create(ctx, c, t, fl, rd)
	if e != nil {
		return failed(e)
	}
	resp, we := f.deliver(ctx, c, t, fl, answers, hookResponses, rd, ev, tk)
	a = f.delivered(ctx, &sealer, c, b, t, fl, rd, resp, we, tk)
	switch {
	case a.task:
	case c.v1Task && a.inputRequired == nil && (a.complete != nil || a.err != nil):
		// A legacy client asked for a task, which it gets, finished.
		return f.tasks.finishedAtOnce(ctx, c, tk, a, rd)
	default:
		f.tasks.dropped(ctx, tk) // answered at once: the client never hears of the task
	}
	return a
}

// delivered is the answer of a round whose webhook answered resp (or
// failed with we): the task it accepted, its questions (with the next
// round's state sealed), or its result.
func (f *flowEngine) delivered(ctx context.Context, sealer *roundSealer, c *call, b mrtr.Binding, t *target, fl *flow, rd *Round,
	resp *webhook.Response, we *WebhookError, tk *store.Task) answer {
	if we != nil {
		if we.Class == "canceled" {
			return answer{} // the client went away: nothing to answer
		}
		return webhookFailed(c, t, rd, we)
	}
	if resp.Type == webhook.TypeAccepted {
		return f.tasks.accepted(ctx, c, tk, resp.Message, rd)
	}
	if resp.Type == webhook.TypeInputRequired {
		if t.view {
			return webhookFailed(c, t, rd, &WebhookError{Class: "contract", Detail: "a view's call or read cannot ask for input: hosts have no way to ask it"})
		}
		open, keys, e, err := webhookInputs(resp.InputRequests, c.caps, webhookKeyPrefix)
		if err != nil {
			return webhookFailed(c, t, rd, &WebhookError{Class: "contract", Detail: err.Error()})
		}
		if e != nil {
			return failed(e)
		}
		fl.state = platformState{Webhook: resp.State, Asked: keys}
		return f.ask(ctx, sealer, c, b, rd, fl, open)
	}
	result, isError, err := completeResult(t.kind, resp.Result, c.snap.resultMeta)
	if err == nil && t.view && t.kind == webhook.KindResource {
		err = viewContents(c.uri, result["contents"])
	}
	if err != nil {
		return webhookFailed(c, t, rd, &WebhookError{Class: "contract", Detail: err.Error()})
	}
	if isError {
		return toolFailed(result)
	}
	return completed(result)
}

// binding is what the request's state is bound to.
func (f *flowEngine) binding(c *call) mrtr.Binding {
	b := mrtr.Binding{
		Tenant:    c.snap.tenantID,
		Audience:  c.snap.audience,
		Method:    c.method,
		Target:    c.name,
		Principal: c.principal.Binding(),
	}
	if c.method == mcp.MethodResourcesRead {
		b.Target = c.uri
	} else {
		b.Args = c.p.Arguments
	}
	return b
}

// open verifies an inbound requestState and returns the flow it
// continues, or a fresh flow when there is none. Any failure is the one
// frozen rejection (returned as the answer, with a nil flow); the reason
// is logged and recorded, never sent.
func (f *flowEngine) open(ctx context.Context, sealer *roundSealer, c *call, b mrtr.Binding, rd *Round) (*flow, answer) {
	tok, present, err := mrtr.TokenFromJSON(c.p.RequestState)
	if err == nil && !present {
		fl := &flow{id: mrtr.NewFlowID(), number: 1, start: rd.Arrived}
		rd.FlowID, rd.Number, rd.FlowStart = fl.id, fl.number, fl.start
		return fl, answer{}
	}
	reject := func(reason string) (*flow, answer) {
		f.log.WarnContext(ctx, "requestState rejected", "tenant", c.snap.slug, "method", c.method, "reason", reason)
		rd.StateIn = StateCheck{Outcome: StateRejected, Reason: reason}
		return nil, failed(errInvalidState())
	}
	if err != nil {
		return reject(rejectionReason(err))
	}
	if c.snap.settings.RecordAnswers {
		rd.Answers, _ = parseResponses(c.p.InputResponses)
	}
	s, err := sealer.get(ctx)
	if err != nil {
		// No usable key ring: fail closed, with the one frozen answer.
		f.log.ErrorContext(ctx, "no key ring for tenant", "tenant", c.snap.slug, "err", err)
		return reject("no_key_ring")
	}
	opened := time.Now()
	claims, err := s.Open(ctx, tok, b)
	rd.OpenTime = time.Since(opened)
	if err != nil {
		// A state that opened but failed a check names its flow: the
		// record shows the refused round on it.
		if rej, ok := errors.AsType[*mrtr.Rejection](err); ok && rej.FlowID != "" {
			rd.FlowID, rd.Number = rej.FlowID, rej.Round+1
		}
		return reject(rejectionReason(err))
	}
	fl := &flow{
		id:     claims.FlowID,
		number: claims.Round + 1,
		start:  claims.FlowStart,
		record: mrtr.DecodeRecord(claims.Resolver),

		stateExpires: claims.Expiry,
	}
	if len(claims.State) > 0 && json.Unmarshal(claims.State, &fl.state) != nil {
		// The platform sealed this itself, so this cannot happen short of
		// a format change; treat it like any other bad state.
		return reject("flow_state")
	}
	fl.served = time.Duration(fl.state.Served) * time.Millisecond
	rd.FlowID, rd.Number, rd.FlowStart, rd.Served = fl.id, fl.number, fl.start, fl.served
	if fl.state.Ended > 0 {
		rd.PreviousEnded = time.UnixMilli(fl.state.Ended)
	}
	rd.StateIn = StateCheck{Outcome: StateVerified, KeyID: claims.KeyID, Parent: claims.Parent}
	return fl, answer{}
}

// useOnce consumes the round's request state before a single-use tool's
// webhook runs: a replay of the round, on any replica, then gets the
// frozen rejection instead of running the tool again. When the record of
// uses cannot be written the tool does not run either.
func (f *flowEngine) useOnce(ctx context.Context, c *call, fl *flow, rd *Round) (answer, bool) {
	var err error
	if f.ledger != nil {
		start := time.Now()
		err = f.ledger.Consume(ctx, rd, fl.stateExpires)
		rd.RecordTime = time.Since(start)
		rd.consumed = err == nil
	} else {
		err = f.consume(ctx, c.snap.tenantID, fl.id, fl.number, fl.stateExpires)
	}
	switch {
	case err == nil:
		return answer{}, true
	case errors.Is(err, store.ErrConsumed):
		f.log.WarnContext(ctx, "requestState rejected", "tenant", c.snap.slug, "method", c.method, "reason", "replayed")
		rd.StateIn = StateCheck{Outcome: StateRejected, Reason: "replayed", KeyID: rd.StateIn.KeyID}
		return failed(errInvalidState()), false
	}
	f.log.ErrorContext(ctx, "a single-use round could not be recorded; the tool did not run", "tenant", c.snap.slug, "err", err)
	rd.NotRun = true
	return failed(newError(http.StatusServiceUnavailable, mcp.CodeInternalError, "The call could not be recorded as used once; try again shortly", nil)), false
}

// settle writes a round of a destructive or single-use tool to the
// record before its answer a is written (the ledger's Settle). A write
// that fails is logged and left to the recorder's queue: the client is
// told all the same, since the tool may have run. A round refused before
// it ran (its state consumed already) needs no settling.
func (f *flowEngine) settle(ctx context.Context, c *call, rd *Round, a answer) {
	if f.ledger == nil || rd.StateIn.Outcome == StateRejected || rd.NotRun {
		return
	}
	rd.expect(a)
	rd.Ended = time.Now()
	if err := f.ledger.Settle(ctx, rd); err != nil {
		f.log.WarnContext(ctx, "a single-use round's outcome could not be recorded before its answer; it is queued", "tenant", c.snap.slug, "err", err)
		return
	}
	rd.Settled = true
}

// rejectionReason is the reason a state was refused, for logs and spans.
func rejectionReason(err error) string {
	var rej *mrtr.Rejection
	if errors.As(err, &rej) {
		return rej.Reason
	}
	return "codec_error"
}

// ask seals the next round's state and answers with an
// InputRequiredResult asking open.
func (f *flowEngine) ask(ctx context.Context, sealer *roundSealer, c *call, b mrtr.Binding, rd *Round, fl *flow, open map[string]mrtr.InputRequest) answer {
	tok, claims, err := f.seal(ctx, sealer, b, rd, fl)
	if err != nil {
		rd.StateOut.Outcome = StateSealFailed
		if errors.Is(err, mrtr.ErrTooManyRounds) {
			msg := fmt.Sprintf("This call needed more than %d rounds of input and was stopped.", c.snap.settings.Rounds())
			if c.method == mcp.MethodToolsCall {
				return toolFailed(toolError(c.snap, msg))
			}
			return failed(errInvalidParams(msg))
		}
		f.log.ErrorContext(ctx, "refusing to seal requestState", "tenant", c.snap.slug, "method", c.method, "err", err)
		return failed(errInternal())
	}
	rd.StateOut = StateSeal{Outcome: StateMinted, KeyID: claims.KeyID, Expires: claims.Expiry}
	rd.Asked = open
	return asked(&mrtr.InputRequiredResult{
		ResultType:    mcp.ResultTypeInputRequired,
		InputRequests: open,
		RequestState:  tok,
		Meta:          c.snap.info,
	})
}

// seal mints the requestState of the round after this one.
func (f *flowEngine) seal(ctx context.Context, sealer *roundSealer, b mrtr.Binding, rd *Round, fl *flow) (string, *mrtr.Claims, error) {
	now := time.Now()
	fl.state.Served = (fl.served + now.Sub(rd.Arrived)).Milliseconds()
	fl.state.Ended = now.UnixMilli()
	state, err := json.Marshal(fl.state)
	if err != nil {
		return "", nil, err
	}
	rec, err := mrtr.EncodeRecord(fl.record)
	if err != nil {
		return "", nil, err
	}
	claims := &mrtr.Claims{
		FlowID:    fl.id,
		Round:     fl.number,
		FlowStart: fl.start,
		Resolver:  rec,
		State:     state,
	}
	// The next round links to this one, whichever replica serves it.
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		claims.Parent = telemetry.Traceparent(span.SpanContext())
	}
	s, err := sealer.get(ctx)
	if err != nil {
		return "", nil, err
	}
	tok, keyID, err := s.Seal(ctx, b, claims)
	claims.KeyID = keyID
	rd.SealTime = time.Since(now)
	return tok, claims, err
}

// deliver calls the target's webhook with everything the round gathered.
func (f *flowEngine) deliver(ctx context.Context, c *call, t *target, fl *flow, answers map[string]webhook.Answer,
	hookResponses map[string]json.RawMessage, rd *Round, ev events, tk *store.Task) (*webhook.Response, *WebhookError) {
	req := &webhook.Request{
		Version:            webhook.Version,
		Kind:               t.kind,
		Name:               t.name,
		Arguments:          t.args,
		Answers:            answers,
		InputResponses:     hookResponses,
		State:              fl.state.Webhook,
		Flow:               webhook.Flow{ID: fl.id, Round: fl.number},
		ClientCapabilities: c.rawCaps,
		Stream:             ev.delivering(),
	}
	if tk != nil {
		req.Task = f.tasks.offer(tk)
	}
	if p := c.principal; p != nil {
		req.Principal = &webhook.Principal{Issuer: p.Issuer, Subject: p.Subject, Client: p.Client}
		if p.Machine() {
			req.Principal.Subject = ""
		}
	}
	if t.kind == webhook.KindResource {
		req.URI = c.uri
	}
	if f.running != nil && !rd.consumed {
		f.running(ctx, rd)
	}
	start := time.Now()
	resp, status, err := f.webhooks.deliver(ctx, t.handler.URL, t.secret,
		time.Duration(t.handler.Timeout())*time.Millisecond, req, ev)
	call := &WebhookCall{Kind: t.kind, Status: status, Duration: time.Since(start)}
	rd.Webhook = call
	if err != nil {
		var we *WebhookError
		errors.As(err, &we)
		call.Outcome, call.Failed, call.Detail = we.Class, true, we.Why(c.snap.settings.RecordAnswers || c.snap.settings.TraceContent)
		f.log.WarnContext(ctx, "webhook failed", "tenant", c.snap.slug, "target", t.name, "class", we.Class,
			"detail", we.Detail, "duration", call.Duration)
		return nil, we
	}
	call.Outcome = resp.Type
	return resp, nil
}

// webhookFailed answers a failed delivery: a tool error result the model
// can read for tools, an internal error naming the failure otherwise.
func webhookFailed(c *call, t *target, rd *Round, we *WebhookError) answer {
	if w := rd.Webhook; w != nil && !w.Failed {
		// The backend answered, outside the contract.
		w.Outcome, w.Failed, w.Detail = we.Class, true, we.Why(false)
	}
	msg := fmt.Sprintf("The %s's backend failed (%s): %s", t.kind, we.Class, we.Detail)
	if t.kind == webhook.KindTool {
		return toolFailed(toolError(c.snap, msg))
	}
	return failed(newError(http.StatusBadGateway, mcp.CodeInternalError, msg, map[string]string{"webhook": we.Class}))
}

// viewContents checks what a template handler answered a ui:// read
// with: one content item, of the request's URI, exactly the app type,
// exactly one of text and blob (at most MaxViewBytes), and a _meta.ui
// the extension defines, if any. A host would render anything else
// wrongly, or not at all.
func viewContents(uri string, raw json.RawMessage) error {
	var items []struct {
		URI      string          `json:"uri"`
		MimeType string          `json:"mimeType"`
		Text     *string         `json:"text"`
		Blob     *string         `json:"blob"`
		Meta     json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return fmt.Errorf("a view's contents must be an array of resource contents: %v", err)
	}
	if len(items) != 1 {
		return fmt.Errorf("a view's read returns one content item, not %d", len(items))
	}
	v := items[0]
	switch {
	case v.URI != uri:
		return fmt.Errorf("a view's content must have the URI read (%q), not %q", uri, v.URI)
	case v.MimeType != catalogue.AppMimeType:
		return fmt.Errorf("a view's mimeType must be exactly %q, not %q", catalogue.AppMimeType, v.MimeType)
	case (v.Text == nil) == (v.Blob == nil):
		return errors.New("a view's content has exactly one of text and blob")
	}
	size := 0
	if v.Text != nil {
		size = len(*v.Text)
	} else {
		b, err := base64.StdEncoding.DecodeString(*v.Blob)
		if err != nil {
			return errors.New("a view's blob must be standard base64")
		}
		size = len(b)
	}
	if size > catalogue.MaxViewBytes {
		return fmt.Errorf("a view's HTML must be at most %d bytes, not %d", catalogue.MaxViewBytes, size)
	}
	if len(v.Meta) > 0 {
		if err := catalogue.ValidateViewMeta(v.Meta); err != nil {
			return fmt.Errorf("a view's %v", strings.TrimPrefix(err.Error(), "invalid definition: "))
		}
	}
	return nil
}

// completeResult checks a webhook's complete result against the contract
// for its kind and adds resultType and serverInfo; isError reports a
// tool's own error result.
func completeResult(kind string, raw json.RawMessage, meta resultMeta) (result map[string]json.RawMessage, isError bool, err error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, false, errors.New("result must be a JSON object")
	}
	var need string
	switch kind {
	case webhook.KindTool:
		need = "content"
	case webhook.KindPrompt:
		need = "messages"
	case webhook.KindResource:
		need = "contents"
	}
	if v, ok := m[need]; !ok || len(v) == 0 || v[0] != '[' {
		return nil, false, fmt.Errorf("a %s result needs a %q array", kind, need)
	}
	m["resultType"] = json.RawMessage(`"complete"`)
	if own := m["_meta"]; len(own) > 0 && own[0] == '{' {
		// The backend's _meta, with ours over it.
		var metaObj map[string]json.RawMessage
		_ = json.Unmarshal(own, &metaObj)
		maps.Copy(metaObj, meta.members)
		m["_meta"], _ = json.Marshal(metaObj)
	} else {
		// None, or one that is not an object (dropped, as before; a null
		// one used to panic, decoded into a nil map and written to).
		m["_meta"] = meta.object
	}
	if kind == webhook.KindResource {
		if _, ok := m["ttlMs"]; !ok {
			m["ttlMs"] = json.RawMessage("0")
		}
		if _, ok := m["cacheScope"]; !ok {
			m["cacheScope"] = json.RawMessage(`"private"`)
		}
	}
	return m, kind == webhook.KindTool && string(m["isError"]) == "true", nil
}

// resultMeta is the _meta every complete result carries, encoded once
// per snapshot: the object, and each member for merging into a backend's
// own _meta.
type resultMeta struct {
	object  json.RawMessage
	members map[string]json.RawMessage
}

func newResultMeta(info map[string]any) resultMeta {
	rm := resultMeta{members: make(map[string]json.RawMessage, len(info))}
	for k, v := range info {
		rm.members[k], _ = json.Marshal(v)
	}
	obj, _ := json.Marshal(rm.members)
	// Capped: a result that appended to it could not write into the
	// snapshot's copy.
	rm.object = obj[:len(obj):len(obj)]
	return rm
}

// splitResponses separates answers to declared inputs from answers to a
// webhook's own input requests (returned with the prefix removed, and
// only for the keys it asked).
func splitResponses(all map[string]json.RawMessage, asked []string) (declared, hook map[string]json.RawMessage) {
	for k, v := range all {
		if name, ok := strings.CutPrefix(k, webhookKeyPrefix); ok {
			if slices.Contains(asked, name) {
				if hook == nil {
					hook = map[string]json.RawMessage{}
				}
				hook[name] = v
			}
			continue
		}
		if declared == nil {
			declared = map[string]json.RawMessage{}
		}
		declared[k] = v
	}
	return declared, hook
}

// maxInputResponses bounds the answers one request may carry: no round
// asks more than mrtr.MaxInputs declared questions plus as many of a
// webhook's own.
const maxInputResponses = 2 * mrtr.MaxInputs

// parseResponses reads params.inputResponses: absent is none; anything
// but an object (null included), or more answers than any round asks, is
// invalid params.
func parseResponses(raw json.RawMessage) (map[string]json.RawMessage, *rpcError) {
	if len(raw) == 0 {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, errInvalidParams("Invalid params: inputResponses must be an object")
	}
	if len(m) > maxInputResponses {
		return nil, errInvalidParams(fmt.Sprintf("Invalid params: inputResponses holds %d answers; a request carries at most %d", len(m), maxInputResponses))
	}
	return m, nil
}

// maxAnswerKey bounds an answer's key as recorded (the platform's own
// keys are at most 64 bytes, a webhook's under "wh." too).
const maxAnswerKey = 80

// answerActions is how each answer answered: an elicitation's action
// (accept, decline, cancel), or "answered" for a sampling or roots
// result. Only the action is read; the content is not kept.
func answerActions(responses map[string]json.RawMessage) map[string]string {
	if len(responses) == 0 {
		return nil
	}
	out := make(map[string]string, len(responses))
	for k, raw := range responses {
		k = bounded.String(k, maxAnswerKey) // a key is the client's to choose
		var a struct {
			Action string `json:"action"`
		}
		_ = json.Unmarshal(raw, &a)
		switch a.Action {
		case "accept", "decline", "cancel":
			out[k] = a.Action
		default:
			out[k] = "answered"
		}
	}
	return out
}

// webhookInputs checks the input requests a webhook asked for and turns
// them into wire input requests, their keys under prefix (the webhook's
// key namespace in a flow; none in a task). A request the client's
// capabilities do not allow is -32021.
func webhookInputs(reqs map[string]json.RawMessage, caps mrtr.ClientCapabilities, prefix string) (map[string]mrtr.InputRequest, []string, *rpcError, error) {
	if len(reqs) > mrtr.MaxInputs {
		return nil, nil, nil, fmt.Errorf("%d input requests in one answer; at most %d", len(reqs), mrtr.MaxInputs)
	}
	out := make(map[string]mrtr.InputRequest, len(reqs))
	keys := make([]string, 0, len(reqs))
	for k, raw := range reqs {
		if k == "" || len(k) > 64 {
			return nil, nil, nil, fmt.Errorf("input request key %q must be 1 to 64 characters", k)
		}
		var ir mrtr.InputRequest
		if err := json.Unmarshal(raw, &ir); err != nil {
			return nil, nil, nil, fmt.Errorf("input request %q is not {method, params}", k)
		}
		if len(ir.Params) > 0 && ir.Params[0] != '{' {
			return nil, nil, nil, fmt.Errorf("input request %q: params must be an object", k)
		}
		switch ir.Method {
		case mcp.MethodElicit, mcp.MethodCreateMessage:
		case mcp.MethodListRoots:
			if len(ir.Params) == 0 {
				ir.Params = json.RawMessage(`{}`)
			}
		default:
			return nil, nil, nil, fmt.Errorf("input request %q: method %q is not elicitation/create, sampling/createMessage or roots/list", k, ir.Method)
		}
		out[prefix+k] = ir
		keys = append(keys, k)
	}
	if missing, lacking := mrtr.MissingCapabilities(out, caps); lacking {
		return nil, nil, errMissingCapability(missing), nil
	}
	slices.Sort(keys)
	return out, keys, nil, nil
}

func errMissingCapability(required mrtr.ClientCapabilities) *rpcError {
	return newError(http.StatusBadRequest, mcp.CodeMissingRequiredCapability, "Missing required client capability",
		map[string]any{"requiredCapabilities": required})
}
