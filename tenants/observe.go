package tenants

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/telemetry"
)

// observation is the telemetry of one MCP request: its SERVER span named
// and attributed by the MCP semantic conventions, the MRTR attributes of
// its round (opsmcp.*), the flow span when it completes a flow, and its
// metrics. Every method is safe on a nil *observation, and nothing here
// blocks: spans end into a batch processor, metrics into the SDK.
type observation struct {
	w       obsWriter // the request's writer, reporting to this
	reg     *Registry
	tel     *telemetry.Telemetry
	start   time.Time
	base    context.Context // the request's own context
	header  context.Context // base with the HTTP headers' trace context; nil without one
	ctx     context.Context // the context work is done in: with the Pending, then the span
	r       *http.Request
	pending *telemetry.Pending // &pend while tracing
	pend    telemetry.Pending
	span    trace.Span // nil until begin
	// startOpts holds the span's start options, so they need no
	// allocation of their own.
	startOpts [3]trace.SpanStartOption
	status    int // HTTP status written

	snap *snapshot
	c    *call

	// outcome, from the JSON-RPC message written
	code      int
	errMsg    string
	result    any
	inputReq  bool
	toolError bool

	// MRTR round
	rd         *round
	verify     string // verified, rejected or ""
	verifyKey  string
	sealed     string // minted, failed or ""
	sealKey    string
	asked      map[string]mrtr.InputRequest
	parentLink trace.SpanContext // the round that minted the inbound state
}

// observe starts observing a request. The returned writer records the
// JSON-RPC message written; the returned context, for the work before
// the span can start (tenant lookup, bearer check), carries a Pending so
// that work is replayed under the span.
func (reg *Registry) observe(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, context.Context, *observation) {
	o := &observation{reg: reg, tel: reg.tel, start: time.Now(), base: r.Context()}
	o.w = obsWriter{ResponseWriter: w, ob: o}
	ctx := o.base
	// Until the span starts, log lines carry the caller's trace context
	// from the HTTP headers, if any.
	if _, ok := r.Header["Traceparent"]; ok {
		if hctx := o.tel.Propagator().Extract(ctx, propagation.HeaderCarrier(r.Header)); trace.SpanContextFromContext(hctx).IsValid() {
			ctx, o.header = hctx, hctx
		}
	}
	if reg.tel.Tracing() {
		o.pending = &o.pend
		ctx = o.pend.Into(ctx)
	}
	o.r, o.ctx = r, ctx
	return &o.w, ctx, o
}

// obsWriter lets writeJSON and the SSE writer report the message they
// send to the request's observation.
type obsWriter struct {
	http.ResponseWriter
	ob *observation
}

func (w *obsWriter) WriteHeader(status int) {
	if w.ob.status == 0 {
		w.ob.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *obsWriter) Write(b []byte) (int, error) {
	if w.ob.status == 0 {
		w.ob.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *obsWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *obsWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// obs returns the observation of c's request (nil outside ServeHTTP).
func (c *call) obs() *observation {
	if ow, ok := c.w.(*obsWriter); ok {
		return ow.ob
	}
	return nil
}

// arrived is when c's request arrived.
func (c *call) arrived() time.Time {
	if o := c.obs(); o != nil {
		return o.start
	}
	return time.Now()
}

// watch ties the observation behind c's writer to c, so the span can
// name the method and id even when the request fails to parse.
func (c *call) watch() {
	if ow, ok := c.w.(*obsWriter); ok {
		ow.ob.c = c
	}
}

// observed reports a JSON-RPC message to the observation behind w, if any.
func observed(w http.ResponseWriter, msg any) {
	if ow, ok := w.(*obsWriter); ok {
		ow.ob.message(msg)
	}
}

func (o *observation) message(msg any) {
	resp, ok := msg.(response)
	if !ok {
		return
	}
	if resp.Error != nil {
		o.code, o.errMsg = resp.Error.Code, resp.Error.Message
		return
	}
	o.result = resp.Result
	switch v := resp.Result.(type) {
	case *mrtr.InputRequiredResult:
		o.inputReq = true
	case map[string]any:
		o.toolError = v["isError"] == true
	case map[string]json.RawMessage:
		o.toolError = string(v["isError"]) == "true"
	}
}

// tenant records the tenant the request is for, once it is known to
// exist: only then does its slug become a metric label.
func (o *observation) tenant(s *snapshot) {
	if o != nil {
		o.snap = s
	}
}

// metaCarrier reads trace context from params._meta.
type metaCarrier map[string]json.RawMessage

func (m metaCarrier) Get(key string) string {
	raw, ok := m[key]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}
func (m metaCarrier) Set(string, string) {}
func (m metaCarrier) Keys() []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// begin starts the request's SERVER span. Its parent is the trace
// context in params._meta when there is one (with a link to the HTTP
// headers' context when that differs), else the HTTP headers'. It makes
// the span's context the call's (c.ctx()) and the observation's, and
// replays the work recorded before it. Metrics recorded afterwards carry
// that context too, so exemplars (when enabled) point at this span.
func (o *observation) begin(c *call) {
	if o == nil || o.span != nil {
		return
	}
	o.c = c
	parent := o.base
	if o.header != nil {
		parent = o.header
	}
	var links []trace.Link
	if c != nil && c.p.Meta != nil {
		if _, ok := c.p.Meta["traceparent"]; ok {
			metaCtx := o.tel.Propagator().Extract(o.base, metaCarrier(c.p.Meta))
			if sc := trace.SpanContextFromContext(metaCtx); sc.IsValid() {
				parent = metaCtx
				if hsc := trace.SpanContextFromContext(o.header); hsc.IsValid() && !hsc.Equal(sc) {
					links = append(links, trace.Link{SpanContext: hsc})
				}
			}
		}
	}
	if !o.tel.Tracing() {
		// No spans, but the caller's context still reaches the webhook.
		o.span = trace.SpanFromContext(parent)
		if c != nil && o.span.SpanContext().IsValid() {
			c.reqCtx = parent
		}
		return
	}
	// The attributes are all set once, at the end: the span then sizes
	// its attribute storage once instead of copying and growing it.
	opts := append(o.startOpts[:0], serverKind, trace.WithTimestamp(o.start))
	if len(links) > 0 {
		opts = append(opts, trace.WithLinks(links...))
	}
	ctx, span := o.tel.Tracer().Start(parent, o.spanName(), opts...)
	o.span, o.ctx = span, ctx
	if c != nil {
		c.reqCtx = ctx
	}
	o.pending.Replay(ctx)
}

// spanName is {mcp.method.name} {target}, the target only when it is a
// registered tool or prompt (a client cannot mint span names).
func (o *observation) spanName() string {
	if span, _, ok := o.targetNames(); ok {
		return span
	}
	return o.method()
}

// flowSpanName is "flow {method} {target}".
func (o *observation) flowSpanName(method string) string {
	if _, flow, ok := o.targetNames(); ok {
		return flow
	}
	if o.c == nil || o.c.name == "" {
		return "flow " + method
	}
	return "flow " + method + " " + o.c.name
}

// targetNames are the span names the catalogue snapshot built for the
// request's target, when it is a registered tool or prompt.
func (o *observation) targetNames() (span, flow string, ok bool) {
	c := o.c
	if c == nil || c.name == "" || o.snap == nil {
		return "", "", false
	}
	switch c.method {
	case mcp.MethodToolsCall:
		if e := o.snap.tools[c.name]; e != nil {
			return e.spanName, e.flowName, true
		}
	case mcp.MethodPromptsGet:
		if e := o.snap.prompts[c.name]; e != nil {
			return e.spanName, e.flowName, true
		}
	}
	return "", "", false
}

// Span kinds as start options, made once.
var (
	serverKind   = trace.WithSpanKind(trace.SpanKindServer)
	clientKind   = trace.WithSpanKind(trace.SpanKindClient)
	internalKind = trace.WithSpanKind(trace.SpanKindInternal)
)

// attrPool recycles the attribute slices handed to spans, which copy
// them.
var attrPool = sync.Pool{New: func() any { s := make([]attribute.KeyValue, 0, 24); return &s }}

// putAttrs returns buf to the pool, holding attrs (grown from it) and
// none of their values.
func putAttrs(buf *[]attribute.KeyValue, attrs []attribute.KeyValue) {
	clear(attrs)
	*buf = attrs[:0]
	attrPool.Put(buf)
}

// requestAttrs appends the attributes known once the request is parsed
// and checked: the MCP conventions' request attributes, the network and
// client ones, and the tenant.
func (o *observation) requestAttrs(attrs []attribute.KeyValue) []attribute.KeyValue {
	method := o.method()
	// network.transport (tcp) and network.protocol.name (http) are left
	// out, as the HTTP conventions allow for their default values: every
	// attribute costs on every span's export.
	attrs = append(attrs, telemetry.AttrMCPMethod.String(method),
		telemetry.AttrNetworkProtoVer.String(protoVersion(o.r)))
	if host, port, err := net.SplitHostPort(o.r.RemoteAddr); err == nil {
		attrs = append(attrs, telemetry.AttrClientAddress.String(host))
		if n, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, telemetry.AttrClientPort.Int(n))
		}
	}
	if o.snap != nil {
		attrs = append(attrs, telemetry.AttrTenant.String(o.snap.slug))
	}
	c := o.c
	if c == nil {
		return attrs
	}
	if c.id != nil {
		id := string(c.id)
		if c.id[0] == '"' {
			if bytes.IndexByte(c.id, '\\') < 0 {
				id = id[1 : len(id)-1]
			} else {
				_ = json.Unmarshal(c.id, &id)
			}
		}
		attrs = append(attrs, telemetry.AttrJSONRPCRequestID.String(id))
	}
	if raw, ok := c.p.Meta[metaProtocolVersion]; ok {
		if string(raw) == `"`+ProtocolVersion+`"` {
			attrs = append(attrs, telemetry.AttrMCPProtocolVersion.String(ProtocolVersion))
		} else if v := (metaCarrier{"v": raw}).Get("v"); v != "" && len(v) <= 32 {
			attrs = append(attrs, telemetry.AttrMCPProtocolVersion.String(v))
		}
	}
	switch c.method {
	case mcp.MethodToolsCall:
		attrs = append(attrs, telemetry.AttrGenAIOperation.String(telemetry.OperationExecuteTool))
		if c.name != "" {
			attrs = append(attrs, telemetry.AttrGenAIToolName.String(c.name))
		}
	case mcp.MethodPromptsGet:
		if c.name != "" {
			attrs = append(attrs, telemetry.AttrGenAIPromptName.String(c.name))
		}
	case mcp.MethodResourcesRead:
		if c.uri != "" {
			attrs = append(attrs, telemetry.AttrMCPResourceURI.String(c.uri))
		}
	}
	return attrs
}

// method is the request's method if it is one a span or metric may
// carry as is; anything else is _OTHER, so a client cannot mint label
// values.
func (o *observation) method() string {
	if o.c == nil {
		return "_OTHER"
	}
	switch m := o.c.method; m {
	case "server/discover", "tools/list", "tools/call", "prompts/list", "prompts/get",
		"resources/list", "resources/templates/list", "resources/read", "completion/complete",
		"subscriptions/listen", "initialize", "notifications/initialized", "ping",
		"logging/setLevel", "resources/subscribe", "resources/unsubscribe",
		"notifications/cancelled", "notifications/progress":
		return m
	}
	return "_OTHER"
}

// codeString is a JSON-RPC code as error.type and rpc.response.status_code
// spell it.
func codeString(code int) string {
	switch code {
	case codeParseError:
		return "-32700"
	case codeInvalidRequest:
		return "-32600"
	case codeMethodNotFound:
		return "-32601"
	case codeInvalidParams:
		return "-32602"
	case codeInternal:
		return "-32603"
	}
	return strconv.Itoa(code)
}

func protoVersion(r *http.Request) string {
	switch r.ProtoMajor {
	case 2:
		return "2"
	case 3:
		return "3"
	}
	return "1." + strconv.Itoa(r.ProtoMinor)
}

// fresh records a first round.
func (o *observation) fresh(rd *round) {
	if o != nil {
		o.rd = rd
	}
}

// verified records a round continued from a verified requestState.
func (o *observation) verified(rd *round, keyID, parent string) {
	if o == nil {
		return
	}
	o.rd, o.verify, o.verifyKey = rd, "verified", keyID
	if sc, ok := telemetry.ParseTraceparent(parent, ""); ok {
		o.parentLink = sc
		if o.span != nil && o.span.IsRecording() {
			o.span.AddLink(trace.Link{SpanContext: sc})
		}
	}
}

// rejected records a refused requestState: the reason becomes a span
// event and a metric, never part of the answer.
func (o *observation) rejected(reason string) {
	if o == nil {
		return
	}
	o.verify = "rejected"
	if o.span != nil && o.span.IsRecording() {
		o.span.AddEvent(telemetry.EventStateRejected, trace.WithAttributes(telemetry.AttrRejectReason.String(reason)))
	}
	if o.snap != nil {
		o.tel.Metrics().StateRejected(o.ctx, o.snap.slug, reason)
	}
}

// sealOutcome records the requestState this round minted, or that
// sealing failed.
func (o *observation) sealOutcome(keyID string, ok bool) {
	if o == nil {
		return
	}
	if ok {
		o.sealed, o.sealKey = "minted", keyID
	} else {
		o.sealed = "failed"
	}
}

// askedInputs records the input requests of an InputRequiredResult.
func (o *observation) askedInputs(open map[string]mrtr.InputRequest) {
	if o != nil {
		o.asked = open
	}
}

// inputKind is form, url, sampling or roots.
func inputKind(ir mrtr.InputRequest) string {
	switch ir.Method {
	case mcp.MethodElicit:
		if bytes.Contains(ir.Params, []byte(`"url"`)) {
			var p struct {
				Mode string `json:"mode"`
			}
			if json.Unmarshal(ir.Params, &p) == nil && p.Mode == "url" {
				return "url"
			}
		}
		return "form"
	case mcp.MethodCreateMessage:
		return "sampling"
	case mcp.MethodListRoots:
		return "roots"
	}
	return "other"
}

// clientErrors are the codes the MCP conventions do not count as server
// errors on a server span.
func clientError(code int) bool {
	switch code {
	case codeParseError, codeInvalidRequest, codeMethodNotFound, codeInvalidParams, -32002:
		return true
	}
	return false
}

// maxContentAttr caps opt-in content attributes.
const maxContentAttr = 8 << 10

// end finishes the observation: span attributes and status, metrics, and
// the flow span when this round completed a multi-round flow.
func (o *observation) end() {
	if o.span == nil {
		o.begin(o.c)
	}
	now := time.Now()
	dur := now.Sub(o.start)
	ctx := o.ctx
	method := o.method()
	c := o.c

	var errType, statusCode string
	if o.code != 0 {
		statusCode = codeString(o.code)
		errType = statusCode
	} else if o.toolError && method == mcp.MethodToolsCall {
		errType = telemetry.ErrorToolError
	}
	carrier := o.rd != nil || o.verify == "rejected"
	resultType := ""
	switch {
	case o.code != 0:
	case o.inputReq:
		resultType = mcp.ResultTypeInputRequired
	case o.result != nil:
		resultType = mcp.ResultTypeComplete
	}

	// Metrics: only bounded labels (known methods, our own error codes,
	// existing tenants).
	m := o.tel.Metrics()
	if m != nil {
		tenant := ""
		if o.snap != nil {
			tenant = o.snap.slug
		}
		m.Operation(ctx, dur, tenant, method, errType, statusCode)
		if carrier && o.snap != nil {
			rt := resultType
			if rt == "" {
				rt = "error"
			}
			m.Round(ctx, o.snap.slug, method, rt)
		}
	}

	span := o.span
	if !span.IsRecording() {
		o.flowDone(ctx, now, method, resultType, errType)
		return
	}
	buf := attrPool.Get().(*[]attribute.KeyValue)
	attrs := o.requestAttrs((*buf)[:0])
	// The MRTR attributes go on rounds of multi-round flows: those that
	// continued a state or asked for input. A call answered in one round
	// with no state in or out is in no flow, and every attribute costs on
	// every span's export.
	if o.rd != nil && (o.rd.number > 1 || o.inputReq || o.sealed != "") {
		attrs = append(attrs, telemetry.AttrFlowID.String(o.rd.flowID), telemetry.AttrFlowRound.Int(o.rd.number))
		if resultType != "" {
			attrs = append(attrs, telemetry.AttrResultType.String(resultType))
		}
	}
	if o.verify != "" {
		attrs = append(attrs, telemetry.AttrStateVerify.String(o.verify))
		if o.verifyKey != "" {
			attrs = append(attrs, telemetry.AttrStateVerifyKey.String(o.verifyKey))
		}
	}
	if o.sealed != "" {
		attrs = append(attrs, telemetry.AttrStateSeal.String(o.sealed))
		if o.sealKey != "" {
			attrs = append(attrs, telemetry.AttrStateSealKey.String(o.sealKey))
		}
	}
	if len(o.asked) > 0 && o.inputReq {
		keys := make([]string, 0, len(o.asked))
		for k := range o.asked {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		kinds := make([]string, len(keys))
		for i, k := range keys {
			kinds[i] = inputKind(o.asked[k])
		}
		attrs = append(attrs, telemetry.AttrInputKeys.StringSlice(keys), telemetry.AttrInputKinds.StringSlice(kinds))
	}
	if c != nil && c.method == mcp.MethodToolsCall && o.snap != nil && o.snap.settings.TraceContent {
		if len(c.p.Arguments) > 0 {
			attrs = append(attrs, telemetry.AttrToolCallArguments.String(capString(string(c.p.Arguments))))
		}
		if resultType == mcp.ResultTypeComplete {
			if b, err := json.Marshal(o.result); err == nil {
				attrs = append(attrs, telemetry.AttrToolCallResult.String(capString(string(b))))
			}
		}
	}
	if errType != "" {
		attrs = append(attrs, telemetry.AttrErrorType.String(errType))
		if statusCode != "" {
			attrs = append(attrs, telemetry.AttrRPCStatusCode.String(statusCode))
		}
		switch {
		case o.code != 0 && !clientError(o.code):
			span.SetStatus(codes.Error, o.errMsg)
		case o.code == 0:
			span.SetStatus(codes.Error, telemetry.ErrorToolError)
		}
	}
	span.SetAttributes(attrs...)
	putAttrs(buf, attrs)
	o.flowDone(ctx, now, method, resultType, errType)
	span.End()
}

func capString(s string) string {
	if len(s) <= maxContentAttr {
		return s
	}
	return s[:maxContentAttr] + "…"
}

// flowDone emits the flow span and the flow metrics when this round
// ended a multi-round flow: one that began with an InputRequiredResult
// and now completed (or failed) on a verified retry.
func (o *observation) flowDone(ctx context.Context, now time.Time, method, resultType, errType string) {
	rd := o.rd
	if rd == nil || rd.number < 2 || o.verify != "verified" || o.inputReq || o.snap == nil {
		return
	}
	outcome := "complete"
	switch {
	case o.code != 0:
		outcome = "error"
	case errType == telemetry.ErrorToolError:
		outcome = telemetry.ErrorToolError
	case resultType == "":
		return // the client went away before an answer
	}
	total := now.Sub(rd.start)
	served := rd.served + now.Sub(o.start)
	wait := total - served
	if wait < 0 {
		wait = 0
	}
	o.tel.Metrics().FlowDone(ctx, o.snap.slug, method, outcome, total, rd.number)
	if !o.span.IsRecording() {
		return
	}
	name := o.flowSpanName(method)
	buf := attrPool.Get().(*[]attribute.KeyValue)
	attrs := append((*buf)[:0],
		telemetry.AttrMCPMethod.String(method),
		telemetry.AttrTenant.String(o.snap.slug),
		telemetry.AttrFlowID.String(rd.flowID),
		telemetry.AttrFlowRounds.Int(rd.number),
		telemetry.AttrFlowClientWait.Float64(wait.Seconds()),
		telemetry.AttrFlowServerTime.Float64(served.Seconds()),
		telemetry.AttrFlowOutcome.String(outcome),
	)
	if o.c != nil && o.c.name != "" {
		switch method {
		case mcp.MethodToolsCall:
			attrs = append(attrs, telemetry.AttrGenAIToolName.String(o.c.name))
		case mcp.MethodPromptsGet:
			attrs = append(attrs, telemetry.AttrGenAIPromptName.String(o.c.name))
		}
	}
	// A root of its own, so it is not cut to the final round's trace,
	// linked to the final round (which links back round by round). The
	// attributes are set after the start, from the pool: a start option
	// would hold its own copy.
	_, fs := o.tel.Tracer().Start(ctx, name, trace.WithNewRoot(), internalKind,
		trace.WithTimestamp(rd.start), trace.WithLinks(trace.Link{SpanContext: o.span.SpanContext()}))
	fs.SetAttributes(attrs...)
	putAttrs(buf, attrs)
	if outcome != "complete" {
		fs.SetStatus(codes.Error, outcome)
	}
	fs.End(trace.WithTimestamp(now))
}
