package endpoint

import (
	"context"
	"encoding/json"
	"time"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/tenant"
	"go.opentelemetry.io/otel/trace"
)

// Round is the facts of one MCP request as an endpoint served it: filled
// in along the request's path and handed, once, after the answer is
// written, to every RoundSink. A request that continued or started a
// multi-round flow carries the flow's facts too.
//
// The value is the sinks' to read; none may change it. It holds no
// secret: no token, no requestState, no answer content (only the
// questions asked), and Arguments and Result only for consumers the
// tenant allowed to see content (see Content).
type Round struct {
	// Arrived is when the request arrived; Ended when its answer was
	// written.
	Arrived, Ended time.Time

	// ClientAddr and ClientPort are the caller's address as the
	// connection shows it; HTTPVersion is "1.1", "2" or "3".
	ClientAddr  string
	ClientPort  int
	HTTPVersion string

	// TenantID and Tenant (the slug) are set once the tenant is known to
	// exist, so a sink may use them as labels.
	TenantID, Tenant string

	// Method is the JSON-RPC method as sent (anything a client wrote;
	// sinks bound it before using it as a label); RequestID the request's
	// id as sent, nil for none (an id longer than bounded.Value bytes is
	// recorded as a string of its first bytes).
	Method    string
	RequestID json.RawMessage
	// Target is the tool or prompt name, or the resource URI (without its
	// user information, query and fragment), of a method that names one,
	// cut to bounded.Value bytes like Client's fields; Registered says the
	// tenant registered it.
	Target     string
	Registered bool
	// ProtocolVersion is the revision the request declared; Era is the
	// protocol era the endpoint served it in: EraStateless, or the
	// revision a legacy session negotiated (2025-11-25, …).
	ProtocolVersion string
	Era             string
	// SessionID is the legacy session's id as traces and admins know it
	// (its nonce, never the sealed token); "" for stateless requests.
	SessionID string
	// Client is the client's clientInfo, as it declared it.
	Client ClientInfo
	// Principal is the verified caller; nil on a public tenant and for
	// requests refused before the token was checked.
	Principal *auth.Principal
	// TokenRefused is why the bearer token was refused ("expired",
	// "audience", …, as auth.TokenError says); "" when it was not.
	TokenRefused string
	// Settings are the tenant's, as the snapshot that served the round
	// had them (the record's sampling and content choices read them);
	// nil before the tenant is known.
	Settings *tenant.Settings

	// Flow facts: set on every carrier request (tools/call, prompts/get,
	// resources/read) that got as far as its state. A fresh call is round
	// 1 of a new flow id; it is a flow only if it asked for input.
	FlowID string
	// Number is this request's round of the flow: 1 for a fresh call,
	// n+1 for the retry of round n.
	Number int
	// FlowStart is when the flow's first round arrived; Served the server
	// time of the flow's earlier rounds; PreviousEnded when the round
	// before this one answered (zero for round 1).
	FlowStart     time.Time
	Served        time.Duration
	PreviousEnded time.Time

	// StateIn is what became of the inbound requestState.
	StateIn StateCheck
	// StateOut is the requestState this round sealed, if any.
	StateOut StateSeal
	// Asked are the input requests of an input_required answer, by wire
	// key (declared names, and webhook keys under "wh.").
	Asked map[string]mrtr.InputRequest

	// Webhook is the delivery this round made; nil when it made none.
	Webhook *WebhookCall

	// Where the round's server time went, beside the webhook's: verifying
	// the bearer token, opening the inbound state (the key ring's
	// decryption included), the record's writes the round waited on
	// before its webhook (a destructive or single-use tool's state
	// consumed with its running mark; every other round's record is
	// written after its answer, and never waited on), and sealing the
	// outbound state. Zero for a step the round did not take.
	AuthTime, OpenTime, RecordTime, SealTime time.Duration

	// ResultType is the answer's resultType ("complete" or
	// "input_required"); empty when the answer was an error or none was
	// written (the client went away).
	ResultType string
	// ToolError marks a complete tools/call result with isError set.
	ToolError bool
	// ErrorCode and ErrorMessage are the JSON-RPC error answered, if any.
	ErrorCode    int
	ErrorMessage string
	// Answered says an answer was written at all.
	Answered bool
	// Stopped says why a bridged call was stopped before its backend
	// answered, when its client is to blame: client_timeout (it did not
	// answer the server's requests in time, perhaps having gone away for
	// good) or client_refused (it answered one with an error); StopCause
	// says so in words.
	Stopped, StopCause string
	// NotRun says the round failed before it could run, for want of its
	// own record: a destructive or single-use round whose state could not
	// be consumed (the database unreachable), answered 503. The client
	// sends it again; recorded, this attempt could land after its retry's
	// outcome and overwrite it, so recorders leave it out, and it ends no
	// flow.
	NotRun bool
	// Settled says the record holds the round already: its outcome was
	// written before its answer (a Ledger's Settle), so a recorder adds
	// it no second time.
	Settled bool
	// TaskID is the task the request created or changed: a tools/call
	// answered with a task, a tasks/update that took answers, a
	// tasks/cancel that cancelled.
	TaskID string

	// Content is set only for tenants that opted into content recording
	// (settings.traceContent): the tool arguments and the complete result.
	Content *RoundContent
	// Answers are the client's inputResponses as sent, set only for
	// tenants that opted into recording them (settings.recordAnswers).
	Answers map[string]json.RawMessage
	// Actions are how the client answered each question it answered, by
	// key: accept, decline or cancel for an elicitation, "answered" for
	// the rest. Set on every round that carried answers; never content.
	Actions map[string]string

	// consumed says a Ledger consumed the round's state and marked its
	// flow running already: no running mark is queued behind it, where
	// it could land after the settled outcome.
	consumed bool

	// names of the request and flow spans, from the catalogue snapshot
	// (only registered targets name spans).
	spanName, flowSpanName string
	// trace is the request's tracing state (see roundTelemetry); nil
	// outside a request.
	trace *spanState
}

// EraStateless is the era of 2026-07-28 requests: per-request metadata,
// no session.
const EraStateless = "2026-07-28"

// ClientInfo is a client's name and version as it declared them.
type ClientInfo struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
}

// StateCheck is the verification of an inbound requestState.
type StateCheck struct {
	// Outcome is StateVerified, StateRejected or "" (no state came in).
	Outcome string
	// KeyID is the key that verified it.
	KeyID string
	// Reason says why it was rejected (never sent to the client).
	Reason string
	// Parent is the traceparent of the round that sealed it.
	Parent string
}

// StateSeal is the sealing of the next round's requestState.
type StateSeal struct {
	// Outcome is StateMinted, StateSealFailed or "" (nothing sealed).
	Outcome string
	// KeyID is the key that sealed it; Expires when it stops verifying.
	KeyID   string
	Expires time.Time
}

// State outcomes.
const (
	StateVerified   = "verified"
	StateRejected   = "rejected"
	StateMinted     = "minted"
	StateSealFailed = "failed"
)

// WebhookCall is one delivery to a tenant's backend.
type WebhookCall struct {
	// Kind is tool, prompt or resource.
	Kind string
	// Outcome is the answer's type (complete or input_required) or, for a
	// failed delivery, its class (timeout, connect, status, …).
	Outcome string
	Failed  bool
	// Status is the backend's HTTP status, 0 when none came.
	Status   int
	Duration time.Duration
	// Detail says why a failed delivery failed, for operators
	// (WebhookError.Why): bounded, and free of the call's content.
	Detail string
}

// RoundContent is what a round carried, recorded only for tenants that
// opted in.
type RoundContent struct {
	Arguments json.RawMessage
	Result    any
}

// SpanContext is the span of the request's round (invalid when it was
// not traced).
func (r *Round) SpanContext() trace.SpanContext {
	if r.trace == nil || r.trace.span == nil {
		return trace.SpanContext{}
	}
	return r.trace.span.SpanContext()
}

// InFlow reports whether r is a round of a multi-round flow: it
// continued a verified state or asked for input. A call answered in one
// round with no state in or out is in no flow.
func (r *Round) InFlow() bool {
	return r.FlowID != "" && (r.Number > 1 || r.ResultType == mcp.ResultTypeInputRequired || r.StateOut.Outcome != "")
}

// EndsFlow reports whether r ended a multi-round flow: it continued a
// verified state and answered with a complete result or an error.
func (r *Round) EndsFlow() bool {
	return r.Number > 1 && r.StateIn.Outcome == StateVerified && r.ResultType != mcp.ResultTypeInputRequired && r.Answered && !r.NotRun
}

// A RoundSink consumes rounds: telemetry, the flow recorder. Round is
// called once per request, after its answer is written, on the request's
// goroutine with the request's context (carrying its span); it must not
// block, and must copy what it keeps beyond the call's data it was handed
// (the Round itself may be kept: nothing writes to it afterwards).
type RoundSink interface {
	Round(ctx context.Context, r *Round)
}

// A Ledger is a sink that also records, synchronously, the rounds whose
// outcome must never be lost: the confirmed round of a destructive or
// single-use tool. Consume consumes the round's request state fleet-wide
// (store.ErrConsumed when it was consumed before) and, in the same
// write, marks its flow running, before the webhook is called; Settle
// writes the round's outcome before its answer is written. A replica
// lost in between leaves the flow running in the record: whether the
// tool ran always has an answer. These are the one exception to
// recording never holding up serving.
type Ledger interface {
	Consume(ctx context.Context, r *Round, expires time.Time) error
	Settle(ctx context.Context, r *Round) error
}

// expect fills r with what the answer a is about to say (the result
// type, the error), before it is written: what a Ledger settles.
func (r *Round) expect(a answer) {
	switch {
	case a.err != nil:
		r.ErrorCode, r.ErrorMessage = a.err.Code, a.err.Message
	case a.inputRequired != nil:
		r.ResultType = mcp.ResultTypeInputRequired
	case a.task:
		r.ResultType = mcp.ResultTypeTask
	case a.complete != nil:
		r.ResultType, r.ToolError = mcp.ResultTypeComplete, a.toolError
	default:
		return // no answer: the client went away
	}
	r.Answered = true
}

// A RunningSink is also told when a round of a multi-round flow (round
// 2 or later) is about to call the webhook, so a live view can show the
// flow running. It must not block.
type RunningSink interface {
	Running(ctx context.Context, r *Round)
}

// sinks fans a round out to several sinks.
type sinks []RoundSink

func (s sinks) Round(ctx context.Context, r *Round) {
	for _, k := range s {
		k.Round(ctx, r)
	}
}

// running tells the sinks that care that r is calling the webhook.
func (s sinks) running(ctx context.Context, r *Round) {
	if r.Number < 2 {
		return
	}
	for _, k := range s {
		if rs, ok := k.(RunningSink); ok {
			rs.Running(ctx, r)
		}
	}
}

// taskEvent hands a task event to the sinks that take them.
func (s sinks) taskEvent(ctx context.Context, ev *TaskEvent) {
	for _, k := range s {
		if ts, ok := k.(TaskSink); ok {
			ts.TaskEvent(ctx, ev)
		}
	}
}
