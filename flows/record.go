package flows

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/opsmcp/platform/endpoint"
	"github.com/opsmcp/platform/internal/bounded"
	"github.com/opsmcp/platform/internal/jsontext"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/store/record"
	"github.com/opsmcp/platform/telemetry"
)

// maxQuestionText caps a question's text as recorded.
const maxQuestionText = 2 << 10

// Question is one input request as the record keeps it: what was asked,
// never what was answered.
type Question struct {
	Key  string `json:"key"`
	Kind string `json:"kind"`
	// Message is the question's text (form and URL elicitation), or a
	// description of a sampling request.
	Message string `json:"message,omitempty"`
	// RequestedSchema is a form's schema.
	RequestedSchema json.RawMessage `json:"requestedSchema,omitempty"`
	// URL is a URL elicitation's address, without its query or fragment
	// (which may carry one-time codes).
	URL string `json:"url,omitempty"`
	// Params are a form elicitation's params (message, requestedSchema)
	// as sent.
	Params json.RawMessage `json:"params,omitempty"`
}

// urlQuestion is what the record reads of a URL elicitation's params.
type urlQuestion struct {
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requestedSchema"`
	URL             string          `json:"url"`
}

// recordKind is the kind of call rd is as the record keeps it, or ""
// when the record does not keep it: every tools/call, prompts/get and
// resources/read of a known tenant that got as far as its flow (and
// every refused token, whatever it was sent for); not lists, pings or
// tasks/get polls, which metrics count.
func recordKind(rd *endpoint.Round, running bool) string {
	switch {
	case rd.Tenant == "", rd.NotRun:
		return ""
	case rd.TokenRefused != "":
		return record.KindCall
	case rd.FlowID == "" && rd.StateIn.Outcome != endpoint.StateRejected:
		return ""
	case rd.ResultType == mcp.ResultTypeTask:
		return record.KindTask
	case !running && !carrier(rd.Method):
		return ""
	case running || rd.InFlow() || rd.StateIn.Outcome != "":
		if rd.Era != endpoint.EraStateless {
			return record.KindLegacy
		}
		return record.KindFlow
	}
	return record.KindCall
}

// carrier reports whether method is one the record keeps each call of.
func carrier(method string) bool {
	return method == mcp.MethodToolsCall || method == mcp.MethodPromptsGet || method == mcp.MethodResourcesRead
}

// refused reports whether rd was refused before it ran: its token or
// its state. The record keeps a tenant's refusals within a budget.
func refused(rd *endpoint.Round) bool {
	return rd.TokenRefused != "" || rd.StateIn.Outcome == endpoint.StateRejected
}

// failed reports whether rd did not succeed: an error, a tool error, a
// failed delivery, no answer. Failures are never sampled out.
func failed(rd *endpoint.Round) bool {
	return rd.ErrorCode != 0 || rd.ToolError || !rd.Answered || (rd.Webhook != nil && rd.Webhook.Failed)
}

// write fills w, a zero RoundWrite, with what the record stores of rd,
// a round the record keeps (see recordKind; the caller sets the kind). The round's documents are
// written into *docs, space the caller reuses; w points into it and into
// rd, so it is encoded before either changes. w is filled in place: a
// RoundWrite is most of a kilobyte, copied twice over when built and
// returned by value.
func write(w *record.RoundWrite, rd *endpoint.Round, replica string, running bool, docs *[]byte) {
	w.Running = running
	f, r := &w.Flow, &w.Round
	f.ID, f.TenantID, f.TenantSlug = rd.FlowID, rd.TenantID, rd.Tenant
	f.Method, f.Target, f.Era, f.Replica = rd.Method, rd.Target, rd.Era, replica
	f.ClientName, f.ClientVersion, f.SessionID = rd.Client.Name, rd.Client.Version, rd.SessionID
	f.StartedAt, f.UpdatedAt = rd.FlowStart, rd.Ended
	if f.StartedAt.IsZero() {
		f.StartedAt = rd.Arrived
	}
	var spanID string
	if sc := rd.SpanContext(); sc.IsValid() {
		f.TraceID, spanID = sc.TraceID().String(), sc.SpanID().String()
	}
	if p := rd.Principal; p != nil {
		f.PrincipalIssuer, f.PrincipalSubject, f.PrincipalClient = p.Issuer, p.Subject, p.Client
	}
	f.KeyID = rd.StateIn.KeyID
	if rd.StateOut.KeyID != "" {
		f.KeyID = rd.StateOut.KeyID
	}
	f.State, f.Detail = flowState(rd, running)
	if rd.Number > 1 && (f.State == record.Rejected || (rd.ErrorCode != 0 && rd.Webhook == nil)) {
		// A round refused, or answered an error before it ran (bad
		// answers, an unknown target), did not advance its flow: it moves
		// the flow's state only if the flow had not gone past the round
		// it continued. A replay of a consumed round, or a bad attempt
		// written late, leaves the flow as the round that ran left it.
		f.Rounds = rd.Number - 1
	}
	if f.State == record.AwaitingInput {
		f.WaitingSince = &rd.Ended
		if !rd.StateOut.Expires.IsZero() {
			f.StateExpiresAt = &rd.StateOut.Expires
		}
		f.PendingKinds = pendingKinds(rd.Asked)
	}
	r.N = max(rd.Number, 1)
	if running {
		return
	}
	f.Message = cause(rd, f.State, f.Detail)
	r.ArrivedAt, r.EndedAt = rd.Arrived, rd.Ended
	r.ServerUS = rd.Ended.Sub(rd.Arrived).Microseconds()
	r.AuthUS, r.OpenUS, r.RecordUS, r.SealUS = rd.AuthTime.Microseconds(), rd.OpenTime.Microseconds(), rd.RecordTime.Microseconds(), rd.SealTime.Microseconds()
	r.ResultType, r.ErrorClass, r.Cause = rd.ResultType, f.Detail, f.Message
	r.StateIn, r.KeyIn, r.KeyOut = rd.StateIn.Outcome, rd.StateIn.KeyID, rd.StateOut.KeyID
	r.Replica, r.TraceID, r.SpanID = replica, f.TraceID, spanID
	if !rd.PreviousEnded.IsZero() {
		r.ClientWaitUS = max(rd.Arrived.Sub(rd.PreviousEnded), 0).Microseconds()
	}
	if !rd.StateOut.Expires.IsZero() {
		r.StateExpiresAt = &rd.StateOut.Expires
	}
	*docs, r.Asked, r.Principal, r.Client, r.Webhook = roundDocuments((*docs)[:0], rd)
	switch {
	case len(rd.Answers) > 0:
		r.Answers = jsonRaw(rd.Answers)
	case len(rd.Actions) > 0:
		r.Answers = appendActions(nil, rd.Actions)
	}
}

// appendActions appends how each question was answered, never with what,
// as the answers document of a tenant that does not record content:
// {"key": {"action": "decline"}, …}, in key order.
func appendActions(b []byte, actions map[string]string) []byte {
	keys := make([]string, 0, len(actions))
	for k := range actions {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsontext.AppendString(b, k)
		b = jsontext.AppendString(append(b, `:{"action":`...), actions[k])
		b = append(b, '}')
	}
	return append(b, '}')
}

// flowState is the state a round leaves its flow in, and the error or
// rejection class that explains it.
func flowState(rd *endpoint.Round, running bool) (state, detail string) {
	switch {
	case running:
		return record.Running, ""
	case rd.TokenRefused != "":
		return record.Rejected, "token_" + rd.TokenRefused
	case rd.StateIn.Outcome == endpoint.StateRejected:
		return record.Rejected, rd.StateIn.Reason
	case rd.Webhook != nil && rd.Webhook.Failed && rd.Answered:
		return record.Failed, "webhook_" + rd.Webhook.Outcome
	case rd.ErrorCode != 0:
		return record.Failed, strconv.Itoa(rd.ErrorCode)
	case rd.ResultType == mcp.ResultTypeInputRequired:
		return record.AwaitingInput, ""
	case rd.ResultType == mcp.ResultTypeTask:
		return record.Running, "" // working, as the task's events will say
	case rd.Stopped != "":
		return record.Failed, rd.Stopped
	case rd.ToolError:
		return record.Failed, "tool_error"
	case rd.ResultType == mcp.ResultTypeComplete:
		return record.Completed, ""
	}
	return record.Failed, "no_answer" // the client went away before the answer
}

// pendingKinds are the kinds of the open input requests, sorted and
// comma-separated. The kinds are a handful (form, url, sampling, roots,
// other), gathered without allocating.
func pendingKinds(asked map[string]mrtr.InputRequest) string {
	var seen [8]string
	kinds := seen[:0]
	for _, r := range asked {
		if k := r.Kind(); !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	if len(kinds) == 1 {
		return kinds[0]
	}
	return strings.Join(kinds, ",")
}

// roundDocuments appends to b what a round asked (an array of Question),
// who called ({issuer, subject, client}, never a token), with which
// client (endpoint.ClientInfo) and how its webhook went ({kind, outcome,
// failed, status, durationMs, durationUs, detail}), and returns b and
// each document, in it.
// It is written by hand because it runs for every round: encoding/json's
// reflection, and its re-validation of each question's params, cost the
// serving process more than the rest of recording.
func roundDocuments(b []byte, rd *endpoint.Round) (_ []byte, asked, principal, client, webhook json.RawMessage) {
	size := 160 + len(rd.Client.Name) + len(rd.Client.Version)
	if p := rd.Principal; p != nil {
		size += len(p.Issuer) + len(p.Subject) + len(p.Client)
	}
	for k, r := range rd.Asked {
		size += 64 + len(k) + len(r.Params)
	}
	b = slices.Grow(b, size)
	// part is what was appended since start, capped so that appending to
	// it never writes over the next one.
	part := func(start int) json.RawMessage { return b[start:len(b):len(b)] }
	if len(rd.Asked) > 0 {
		start := len(b)
		b = appendQuestions(b, rd.Asked)
		asked = part(start)
	}
	if p := rd.Principal; p != nil {
		start := len(b)
		b = appendObject(b, field{"issuer", p.Issuer}, field{"subject", p.Subject}, field{"client", p.Client})
		principal = part(start)
	}
	start := len(b)
	b = appendObject(b, field{"name", rd.Client.Name}, field{"version", rd.Client.Version})
	client = part(start)
	if wh := rd.Webhook; wh != nil {
		start := len(b)
		b = jsontext.AppendString(append(b, `{"kind":`...), wh.Kind)
		b = jsontext.AppendString(append(b, `,"outcome":`...), wh.Outcome)
		if wh.Failed {
			b = append(b, `,"failed":true`...)
		}
		if wh.Status != 0 {
			b = strconv.AppendInt(append(b, `,"status":`...), int64(wh.Status), 10)
		}
		b = strconv.AppendInt(append(b, `,"durationMs":`...), wh.Duration.Milliseconds(), 10)
		b = strconv.AppendInt(append(b, `,"durationUs":`...), wh.Duration.Microseconds(), 10)
		if wh.Detail != "" {
			b = jsontext.AppendString(append(b, `,"detail":`...), bounded.String(wh.Detail, maxCause))
		}
		b = append(b, '}')
		webhook = part(start)
	}
	return b, asked, principal, client, webhook
}

// field is a string member of a JSON object, left out when empty.
type field struct{ key, val string }

// appendObject appends the fields that are set as a JSON object.
func appendObject(b []byte, fields ...field) []byte {
	b = append(b, '{')
	first := true
	for _, f := range fields {
		if f.val == "" {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = jsontext.AppendString(b, f.key)
		b = jsontext.AppendString(append(b, ':'), f.val)
	}
	return append(b, '}')
}

// appendQuestions appends what each input request asked, in key order,
// as a JSON array of Question.
func appendQuestions(b []byte, asked map[string]mrtr.InputRequest) []byte {
	b = append(b, '[')
	keys := make([]string, 0, 4)
	for k := range asked {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, key := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		r := asked[key]
		kind := r.Kind()
		b = jsontext.AppendString(append(b, `{"key":`...), key)
		b = jsontext.AppendString(append(b, `,"kind":`...), kind)
		switch kind {
		case mrtr.KindForm:
			// A form's params are the question as the client sees it,
			// recorded as they are. Every input request's params were
			// decoded from a webhook's answer by encoding/json or encoded
			// by it from a declared question; checked all the same, since
			// one invalid document would spoil the flow's whole history.
			if len(r.Params) > 0 && json.Valid(r.Params) {
				b = append(append(b, `,"params":`...), r.Params...)
			}
		case mrtr.KindURL:
			var p urlQuestion
			_ = json.Unmarshal(r.Params, &p)
			if m := bounded.String(p.Message, maxQuestionText); m != "" {
				b = jsontext.AppendString(append(b, `,"message":`...), m)
			}
			if len(p.RequestedSchema) > 0 {
				b = append(append(b, `,"requestedSchema":`...), p.RequestedSchema...)
			}
			if u := bounded.URL(p.URL, bounded.Value); u != "" {
				b = jsontext.AppendString(append(b, `,"url":`...), u)
			}
		default:
			if m := bounded.String(mrtr.DescribeRequest(r), maxQuestionText); m != "" {
				b = jsontext.AppendString(append(b, `,"message":`...), m)
			}
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

func jsonRaw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// taskStates are the flow states of task statuses.
var taskStates = map[string]string{
	store.TaskWorking: record.Running, store.TaskInputRequired: record.AwaitingInput, store.TaskCompleted: record.Completed,
	store.TaskFailed: record.Failed, store.TaskCancelled: record.Cancelled,
}

// writeEvent fills w, a zero RoundWrite, with what the record stores of a
// task's lifecycle event: a round of the task's flow, and the flow as
// the event leaves it. Like write, w points into *docs and ev.
func writeEvent(w *record.RoundWrite, ev *endpoint.TaskEvent, replica string, docs *[]byte) {
	f, r := &w.Flow, &w.Round
	f.ID, f.TenantID, f.TenantSlug, f.Kind = ev.FlowID, ev.TenantID, ev.Tenant, record.KindTask
	f.Method, f.Target, f.Era, f.Replica = mcp.MethodToolsCall, ev.Tool, ev.Era, replica
	f.ClientName, f.ClientVersion = ev.Client.Name, ev.Client.Version
	f.PrincipalIssuer, f.PrincipalSubject, f.PrincipalClient = ev.Principal.Issuer, ev.Principal.Subject, ev.Principal.Client
	f.StartedAt, f.UpdatedAt = ev.Created, ev.At
	f.State, f.Message = taskStates[ev.Status], ev.Message
	switch {
	case ev.Cause != "":
		f.Detail = ev.Cause
	case ev.ErrorCode != 0:
		f.Detail = strconv.Itoa(ev.ErrorCode)
	case ev.ToolError:
		f.Detail = "tool_error"
	}
	if f.State == record.AwaitingInput {
		f.WaitingSince = &ev.At
		f.PendingKinds = pendingKinds(ev.Asked)
	}
	if sc, ok := telemetry.ParseTraceparent(ev.Traceparent, ""); ok {
		f.TraceID = sc.TraceID().String()
	}
	r.N, r.ArrivedAt, r.EndedAt = ev.N, ev.At, ev.At
	r.Event, r.By, r.Message, r.ErrorClass = ev.Kind, ev.By, ev.Message, f.Detail
	r.Replica, r.TraceID = replica, f.TraceID
	b := (*docs)[:0]
	if len(ev.Asked) > 0 {
		start := len(b)
		b = appendQuestions(b, ev.Asked)
		r.Asked = b[start:len(b):len(b)]
	}
	if len(ev.Answers) > 0 {
		r.Answers = jsonRaw(ev.Answers)
	} else if len(ev.Answered) > 0 {
		r.Answers = jsonRaw(map[string][]string{"keys": ev.Answered})
	}
	if d := ev.Delivery; d != nil {
		r.Webhook = jsonRaw(map[string]any{"kind": d.Kind, "outcome": d.Outcome, "failed": d.Failed, "status": d.Status,
			"durationMs": d.Duration.Milliseconds()})
	}
	*docs = b
}
