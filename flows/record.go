package flows

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/opsmcp/platform/internal/bounded"
	"github.com/opsmcp/platform/internal/jsontext"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/tenants"
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

// recorded reports whether the record keeps rd: a round of a
// multi-round flow, or a refused state that names its flow.
func recorded(rd *tenants.Round, running bool) bool {
	if rd.FlowID == "" || rd.Tenant == "" {
		return false
	}
	return running || rd.StateIn.Outcome == tenants.StateRejected || rd.InFlow()
}

// write turns a round into what the record stores; ok is false for a
// round that belongs to no flow. The round's documents are written into
// *docs, space the caller reuses; the result points into it and into rd,
// so it is encoded before either changes (and allocates nothing).
func write(rd *tenants.Round, replica string, running bool, docs *[]byte) (store.RoundWrite, bool) {
	if !recorded(rd, running) {
		return store.RoundWrite{}, false
	}
	sc := rd.SpanContext()
	f := store.Flow{
		ID:            rd.FlowID,
		TenantID:      rd.TenantID,
		TenantSlug:    rd.Tenant,
		Method:        rd.Method,
		Target:        rd.Target,
		ClientName:    rd.Client.Name,
		ClientVersion: rd.Client.Version,
		Era:           rd.Era,
		Replica:       replica,
		StartedAt:     rd.FlowStart,
		UpdatedAt:     rd.Ended,
	}
	if f.StartedAt.IsZero() {
		f.StartedAt = rd.Arrived
	}
	if sc.IsValid() {
		f.TraceID = sc.TraceID().String()
	}
	if p := rd.Principal; p != nil {
		f.PrincipalIssuer, f.PrincipalSubject, f.PrincipalClient = p.Issuer, p.Subject, p.Client
	}
	f.KeyID = rd.StateIn.KeyID
	if rd.StateOut.KeyID != "" {
		f.KeyID = rd.StateOut.KeyID
	}
	f.State, f.Detail = flowState(rd, running)
	if f.State == store.FlowAwaitingInput {
		f.WaitingSince = &rd.Ended
		if !rd.StateOut.Expires.IsZero() {
			f.StateExpiresAt = &rd.StateOut.Expires
		}
		f.PendingKinds = pendingKinds(rd.Asked)
	}
	w := store.RoundWrite{Flow: f, Running: running, Round: store.FlowRound{N: rd.Number}}
	if running {
		return w, true
	}
	r := store.FlowRound{
		N:          rd.Number,
		ArrivedAt:  rd.Arrived,
		EndedAt:    rd.Ended,
		ServerUS:   rd.Ended.Sub(rd.Arrived).Microseconds(),
		ResultType: rd.ResultType,
		ErrorClass: f.Detail,
		StateIn:    rd.StateIn.Outcome,
		KeyIn:      rd.StateIn.KeyID,
		KeyOut:     rd.StateOut.KeyID,
		Replica:    replica,
	}
	if !rd.PreviousEnded.IsZero() {
		r.ClientWaitUS = max(rd.Arrived.Sub(rd.PreviousEnded), 0).Microseconds()
	}
	if sc.IsValid() {
		r.TraceID, r.SpanID = sc.TraceID().String(), sc.SpanID().String()
	}
	if !rd.StateOut.Expires.IsZero() {
		r.StateExpiresAt = &rd.StateOut.Expires
	}
	*docs, r.Asked, r.Principal, r.Client, r.Webhook = roundDocuments((*docs)[:0], rd)
	if len(rd.Answers) > 0 {
		r.Answers = jsonRaw(rd.Answers)
	}
	w.Round = r
	return w, true
}

// flowState is the state a round leaves its flow in, and the error or
// rejection class that explains it.
func flowState(rd *tenants.Round, running bool) (state, detail string) {
	switch {
	case running:
		return store.FlowRunning, ""
	case rd.StateIn.Outcome == tenants.StateRejected:
		return store.FlowRejected, rd.StateIn.Reason
	case rd.ErrorCode != 0:
		return store.FlowFailed, strconv.Itoa(rd.ErrorCode)
	case rd.ResultType == mcp.ResultTypeInputRequired:
		return store.FlowAwaitingInput, ""
	case rd.ToolError:
		return store.FlowFailed, "tool_error"
	case rd.ResultType == mcp.ResultTypeComplete:
		return store.FlowCompleted, ""
	}
	return store.FlowFailed, "no_answer" // the client went away before the answer
}

// pendingKinds are the kinds of the open input requests, sorted and
// comma-separated.
func pendingKinds(asked map[string]mrtr.InputRequest) string {
	var kinds []string
	for _, r := range asked {
		if k := r.Kind(); !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	return strings.Join(kinds, ",")
}

// roundDocuments appends to b what a round asked (an array of Question),
// who called ({issuer, subject, client}, never a token), with which
// client (tenants.ClientInfo) and how its webhook went ({kind, outcome,
// failed, status, durationMs}), and returns b and each document, in it.
// It is written by hand because it runs for every round: encoding/json's
// reflection, and its re-validation of each question's params, cost the
// serving process more than the rest of recording.
func roundDocuments(b []byte, rd *tenants.Round) (_ []byte, asked, principal, client, webhook json.RawMessage) {
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
