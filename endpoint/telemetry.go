package endpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/telemetry"
)

// roundTelemetry traces and measures every request: one SERVER span
// named and attributed by the MCP semantic conventions, the MRTR
// attributes of its round (opsmcp.*), the flow span when it ends a flow,
// and the metrics. The span starts once the request is checked (begin)
// so the work under it is traced; everything else comes from the Round,
// handed to Round once at the end. Nothing here blocks: spans end into a
// batch processor, metrics into the SDK.
type roundTelemetry struct {
	tel *telemetry.Telemetry
}

// spanState is a request's tracing state, carried on its Round.
type spanState struct {
	// pending holds the work done before the span could start (the
	// tenant's catalogue load, the bearer check), replayed under it.
	pend    telemetry.Pending
	pending *telemetry.Pending // &pend while tracing
	// header is the request's context with the HTTP headers' trace
	// context; nil without one.
	header context.Context
	base   context.Context // the request's own context
	span   trace.Span      // nil until begin
	// startOpts holds the span's start options, so they need no
	// allocation of their own.
	startOpts [3]trace.SpanStartOption
}

// arrive prepares a request's tracing and returns the context for the
// work before its span: log lines carry the caller's trace context from
// the headers, if any, and traced work is recorded for the span.
func (t roundTelemetry) arrive(r *http.Request, st *spanState) context.Context {
	ctx := r.Context()
	st.base = ctx
	if _, ok := r.Header["Traceparent"]; ok {
		if hctx := t.tel.Propagator().Extract(ctx, propagation.HeaderCarrier(r.Header)); trace.SpanContextFromContext(hctx).IsValid() {
			ctx, st.header = hctx, hctx
		}
	}
	if t.tel.Tracing() {
		st.pending = &st.pend
		ctx = st.pend.Into(ctx)
	}
	return ctx
}

// begin starts the request's SERVER span and returns the context work is
// done in. Its parent is the trace context in params._meta when there is
// one (with a link to the HTTP headers' context when that differs), else
// the HTTP headers'. Metrics recorded in the returned context carry the
// span, so exemplars (when enabled) point at it.
func (t roundTelemetry) begin(rd *Round, md *meta) context.Context {
	st := rd.trace
	parent := st.base
	if st.header != nil {
		parent = st.header
	}
	var links []trace.Link
	if md != nil && md.traceparent != nil { // nil: the request failed before it was read
		metaCtx := t.tel.Propagator().Extract(st.base, metaCarrier{md})
		if sc := trace.SpanContextFromContext(metaCtx); sc.IsValid() {
			parent = metaCtx
			if hsc := trace.SpanContextFromContext(st.header); hsc.IsValid() && !hsc.Equal(sc) {
				links = append(links, trace.Link{SpanContext: hsc})
			}
		}
	}
	if !t.tel.Tracing() || rd.Method == mcp.MethodTasksGet {
		// No spans, but the caller's context still reaches the webhook.
		// A task's polls are counted, not traced: an hour-long task polled
		// every 2 s would be 1,800 spans.
		st.span = trace.SpanFromContext(parent)
		return parent
	}
	// The attributes are all set once, at the end: the span then sizes
	// its attribute storage once instead of copying and growing it.
	opts := append(st.startOpts[:0], serverKind, trace.WithTimestamp(rd.Arrived))
	if len(links) > 0 {
		opts = append(opts, trace.WithLinks(links...))
	}
	ctx, span := t.tel.Tracer().Start(parent, spanName(rd), opts...)
	st.span = span
	st.pending.Replay(ctx)
	return ctx
}

// metaCarrier reads trace context from params._meta. The propagator is
// W3C trace context and baggage, whose keys are all _meta keeps of it
// (meta.field): Keys lists those present, not every key _meta had.
type metaCarrier struct{ m *meta }

func (c metaCarrier) Get(key string) string {
	f := c.m.field([]byte(key))
	if f == nil || len(*f) == 0 || (*f)[0] != '"' {
		return ""
	}
	s, _ := jsonString(*f)
	return s
}
func (c metaCarrier) Set(string, string) {}
func (c metaCarrier) Keys() []string {
	var out []string
	for _, k := range [...]string{"traceparent", "tracestate", "baggage"} {
		if *c.m.field([]byte(k)) != nil {
			out = append(out, k)
		}
	}
	return out
}

// spanName is {mcp.method.name} {target}, the target only when it is a
// registered tool or prompt (a client cannot mint span names).
func spanName(rd *Round) string {
	if rd.spanName != "" {
		return rd.spanName
	}
	return boundedMethod(rd.Method)
}

// boundedMethod is the request's method if it is one a span or metric may
// carry as is; anything else is _OTHER, so a client cannot mint label
// values.
func boundedMethod(m string) string {
	switch m {
	case mcp.MethodDiscover, mcp.MethodToolsList, mcp.MethodToolsCall, mcp.MethodPromptsList, mcp.MethodPromptsGet,
		mcp.MethodResourcesList, mcp.MethodResourcesTemplatesList, mcp.MethodResourcesRead, mcp.MethodComplete,
		mcp.MethodSubscriptionsListen, mcp.MethodInitialize, mcp.NotificationInitialized, mcp.MethodPing,
		mcp.MethodSetLevel, mcp.MethodSubscribe, mcp.MethodUnsubscribe,
		mcp.NotificationCancelled, mcp.NotificationProgress,
		mcp.MethodTasksGet, mcp.MethodTasksUpdate, mcp.MethodTasksCancel, mcp.MethodTasksResult, mcp.MethodTasksList:
		return m
	}
	return "_OTHER"
}

// TaskEvent traces a task's lifecycle event, an INTERNAL span "task
// {kind}" in the task's trace (a child of the round that created it,
// whichever replica records it), and counts it.
func (t roundTelemetry) TaskEvent(ctx context.Context, ev *TaskEvent) {
	if m := t.tel.Metrics(); m != nil && ev.Tenant != "" {
		m.TaskEvent(ctx, ev.Tenant, ev.Kind)
	}
	if !t.tel.Tracing() {
		return
	}
	parent := context.WithoutCancel(ctx)
	if sc, ok := telemetry.ParseTraceparent(ev.Traceparent, ""); ok {
		parent = trace.ContextWithRemoteSpanContext(parent, sc)
	}
	_, span := t.tel.Tracer().Start(parent, "task "+ev.Kind, internalKind, trace.WithTimestamp(ev.At))
	if span.IsRecording() {
		by := ev.By
		if strings.HasPrefix(by, "admin:") {
			by = "admin" // an admin's name is not a span attribute
		}
		attrs := []attribute.KeyValue{telemetry.AttrTenant.String(ev.Tenant), telemetry.AttrGenAIToolName.String(ev.Tool),
			telemetry.AttrTaskID.String(ev.TaskID), telemetry.AttrFlowID.String(ev.FlowID), telemetry.AttrTaskEvent.String(ev.Kind),
			telemetry.AttrTaskStatus.String(ev.Status), telemetry.AttrTaskBy.String(by)}
		if ev.Cause != "" {
			attrs = append(attrs, telemetry.AttrTaskCause.String(ev.Cause))
		}
		if len(ev.Asked) > 0 {
			keys := slices.Sorted(maps.Keys(ev.Asked))
			kinds := make([]string, len(keys))
			for i, k := range keys {
				kinds[i] = ev.Asked[k].Kind()
			}
			attrs = append(attrs, telemetry.AttrInputKeys.StringSlice(keys), telemetry.AttrInputKinds.StringSlice(kinds))
		}
		switch {
		case ev.ErrorCode != 0:
			attrs = append(attrs, telemetry.AttrErrorType.String(codeString(ev.ErrorCode)))
			span.SetStatus(codes.Error, ev.Message)
		case ev.ToolError:
			attrs = append(attrs, telemetry.AttrErrorType.String(telemetry.ErrorToolError))
		}
		if d := ev.Delivery; d != nil && d.Failed {
			attrs = append(attrs, telemetry.AttrWebhookOutcome.String(d.Outcome))
		}
		span.SetAttributes(attrs...)
	}
	span.End(trace.WithTimestamp(ev.At))
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

// codeString is a JSON-RPC code as error.type and rpc.response.status_code
// spell it.
func codeString(code int) string {
	switch code {
	case mcp.CodeParseError:
		return "-32700"
	case mcp.CodeInvalidRequest:
		return "-32600"
	case mcp.CodeMethodNotFound:
		return "-32601"
	case mcp.CodeInvalidParams:
		return "-32602"
	case mcp.CodeInternalError:
		return "-32603"
	}
	return strconv.Itoa(code)
}

// clientError reports whether code is one the MCP conventions do not count
// as a server error on a server span.
func clientError(code int) bool {
	switch code {
	case mcp.CodeParseError, mcp.CodeInvalidRequest, mcp.CodeMethodNotFound, mcp.CodeInvalidParams, mcp.CodeResourceNotFound:
		return true
	}
	return false
}

// maxContentAttr caps opt-in content attributes.
const maxContentAttr = 8 << 10

// Round records the finished round: span attributes and status (the span
// starts now if the request failed before it could), metrics, and the
// flow span when this round ended a multi-round flow.
func (t roundTelemetry) Round(ctx context.Context, rd *Round) {
	span := rd.trace.span
	if span == nil {
		ctx = t.begin(rd, nil)
		span = rd.trace.span
	}
	method := boundedMethod(rd.Method)
	var errType, statusCode string
	if rd.ErrorCode != 0 {
		statusCode = codeString(rd.ErrorCode)
		errType = statusCode
	} else if rd.ToolError && method == mcp.MethodToolsCall {
		errType = telemetry.ErrorToolError
	}

	// Metrics: only bounded labels (known methods, our own error codes,
	// existing tenants).
	if m := t.tel.Metrics(); m != nil {
		m.Operation(ctx, rd.Ended.Sub(rd.Arrived), rd.Tenant, method, errType, statusCode)
		if rd.Tenant != "" {
			if rd.FlowID != "" || rd.StateIn.Outcome == StateRejected {
				rt := rd.ResultType
				if rt == "" {
					rt = "error"
				}
				m.Round(ctx, rd.Tenant, method, rt)
			}
			if rd.StateIn.Outcome == StateRejected {
				m.StateRejected(ctx, rd.Tenant, rd.StateIn.Reason)
			}
			if w := rd.Webhook; w != nil {
				m.Webhook(ctx, rd.Tenant, w.Kind, w.Outcome, w.Failed, w.Duration)
			}
		}
	}
	t.flowDone(ctx, rd, method, errType)
	if !span.IsRecording() {
		return
	}
	buf := attrPool.Get().(*[]attribute.KeyValue)
	attrs := requestAttrs(rd, method, (*buf)[:0])
	// The MRTR attributes go on rounds of multi-round flows; every
	// attribute costs on every span's export.
	if rd.InFlow() {
		attrs = append(attrs, telemetry.AttrFlowID.String(rd.FlowID), telemetry.AttrFlowRound.Int(rd.Number))
		if rd.ResultType != "" {
			attrs = append(attrs, telemetry.AttrResultType.String(rd.ResultType))
		}
	}
	if in := rd.StateIn; in.Outcome != "" {
		attrs = append(attrs, telemetry.AttrStateVerify.String(in.Outcome))
		if in.KeyID != "" {
			attrs = append(attrs, telemetry.AttrStateVerifyKey.String(in.KeyID))
		}
		if in.Outcome == StateRejected {
			span.AddEvent(telemetry.EventStateRejected, trace.WithAttributes(telemetry.AttrRejectReason.String(in.Reason)))
		}
	}
	if sc, ok := telemetry.ParseTraceparent(rd.StateIn.Parent, ""); ok {
		span.AddLink(trace.Link{SpanContext: sc})
	}
	if out := rd.StateOut; out.Outcome != "" {
		attrs = append(attrs, telemetry.AttrStateSeal.String(out.Outcome))
		if out.KeyID != "" {
			attrs = append(attrs, telemetry.AttrStateSealKey.String(out.KeyID))
		}
	}
	if len(rd.Asked) > 0 && rd.ResultType == mcp.ResultTypeInputRequired {
		keys := slices.Sorted(maps.Keys(rd.Asked))
		kinds := make([]string, len(keys))
		for i, k := range keys {
			kinds[i] = rd.Asked[k].Kind()
		}
		attrs = append(attrs, telemetry.AttrInputKeys.StringSlice(keys), telemetry.AttrInputKinds.StringSlice(kinds))
	}
	if c := rd.Content; c != nil {
		if len(c.Arguments) > 0 {
			attrs = append(attrs, telemetry.AttrToolCallArguments.String(capString(string(c.Arguments))))
		}
		if c.Result != nil {
			if b, err := json.Marshal(c.Result); err == nil {
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
		case rd.ErrorCode != 0 && !clientError(rd.ErrorCode):
			span.SetStatus(codes.Error, rd.ErrorMessage)
		case rd.ErrorCode == 0:
			span.SetStatus(codes.Error, telemetry.ErrorToolError)
		}
	}
	span.SetAttributes(attrs...)
	putAttrs(buf, attrs)
	span.End(trace.WithTimestamp(rd.Ended))
}

// requestAttrs appends the MCP conventions' request attributes, the
// network and client ones, and the tenant.
func requestAttrs(rd *Round, method string, attrs []attribute.KeyValue) []attribute.KeyValue {
	// network.transport (tcp) and network.protocol.name (http) are left
	// out, as the HTTP conventions allow for their default values.
	attrs = append(attrs, telemetry.AttrMCPMethod.String(method),
		telemetry.AttrNetworkProtoVer.String(rd.HTTPVersion))
	if rd.ClientAddr != "" {
		attrs = append(attrs, telemetry.AttrClientAddress.String(rd.ClientAddr))
		if rd.ClientPort != 0 {
			attrs = append(attrs, telemetry.AttrClientPort.Int(rd.ClientPort))
		}
	}
	if rd.Tenant != "" {
		attrs = append(attrs, telemetry.AttrTenant.String(rd.Tenant))
	}
	if id := rd.RequestID; id != nil {
		s := string(id)
		if id[0] == '"' {
			if bytes.IndexByte(id, '\\') < 0 {
				s = s[1 : len(s)-1]
			} else {
				_ = json.Unmarshal(id, &s)
			}
		}
		attrs = append(attrs, telemetry.AttrJSONRPCRequestID.String(s))
	}
	if v := rd.ProtocolVersion; v != "" && len(v) <= 32 {
		attrs = append(attrs, telemetry.AttrMCPProtocolVersion.String(v))
	}
	if rd.SessionID != "" {
		attrs = append(attrs, telemetry.AttrMCPSessionID.String(rd.SessionID))
	}
	switch rd.Method {
	case mcp.MethodToolsCall:
		attrs = append(attrs, telemetry.AttrGenAIOperation.String(telemetry.OperationExecuteTool))
		if rd.Target != "" {
			attrs = append(attrs, telemetry.AttrGenAIToolName.String(rd.Target))
		}
	case mcp.MethodPromptsGet:
		if rd.Target != "" {
			attrs = append(attrs, telemetry.AttrGenAIPromptName.String(rd.Target))
		}
	case mcp.MethodResourcesRead:
		if rd.Target != "" {
			attrs = append(attrs, telemetry.AttrMCPResourceURI.String(rd.Target))
		}
	}
	return attrs
}

func capString(s string) string {
	if len(s) <= maxContentAttr {
		return s
	}
	return s[:maxContentAttr] + "…"
}

// flowDone emits the flow span and the flow metrics when rd ended a
// multi-round flow: one that began with an InputRequiredResult and now
// completed (or failed) on a verified retry.
func (t roundTelemetry) flowDone(ctx context.Context, rd *Round, method, errType string) {
	if !rd.EndsFlow() || rd.Tenant == "" {
		return
	}
	outcome := "complete"
	switch {
	case rd.ErrorCode != 0:
		outcome = "error"
	case errType == telemetry.ErrorToolError:
		outcome = telemetry.ErrorToolError
	case rd.ResultType == "":
		return // the client went away before an answer
	}
	total := rd.Ended.Sub(rd.FlowStart)
	served := rd.Served + rd.Ended.Sub(rd.Arrived)
	wait := max(total-served, 0)
	t.tel.Metrics().FlowDone(ctx, rd.Tenant, method, outcome, total, rd.Number)
	span := rd.trace.span
	if !span.IsRecording() {
		return
	}
	name := rd.flowSpanName
	if name == "" {
		name = "flow " + method
		if rd.Target != "" && method != mcp.MethodResourcesRead {
			name += " " + rd.Target
		}
	}
	buf := attrPool.Get().(*[]attribute.KeyValue)
	attrs := append((*buf)[:0],
		telemetry.AttrMCPMethod.String(method),
		telemetry.AttrTenant.String(rd.Tenant),
		telemetry.AttrFlowID.String(rd.FlowID),
		telemetry.AttrFlowRounds.Int(rd.Number),
		telemetry.AttrFlowClientWait.Float64(wait.Seconds()),
		telemetry.AttrFlowServerTime.Float64(served.Seconds()),
		telemetry.AttrFlowOutcome.String(outcome),
	)
	if rd.Target != "" {
		switch method {
		case mcp.MethodToolsCall:
			attrs = append(attrs, telemetry.AttrGenAIToolName.String(rd.Target))
		case mcp.MethodPromptsGet:
			attrs = append(attrs, telemetry.AttrGenAIPromptName.String(rd.Target))
		}
	}
	// A root of its own, so it is not cut to the final round's trace,
	// linked to the final round (which links back round by round). The
	// attributes are set after the start, from the pool: a start option
	// would hold its own copy.
	_, fs := t.tel.Tracer().Start(ctx, name, trace.WithNewRoot(), internalKind,
		trace.WithTimestamp(rd.FlowStart), trace.WithLinks(trace.Link{SpanContext: span.SpanContext()}))
	fs.SetAttributes(attrs...)
	putAttrs(buf, attrs)
	if outcome != "complete" {
		fs.SetStatus(codes.Error, outcome)
	}
	fs.End(trace.WithTimestamp(rd.Ended))
}
