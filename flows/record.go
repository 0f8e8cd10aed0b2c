package flows

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/opsmcp/platform/internal/bounded"
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

// webhookFacts is a round's delivery as the record keeps it.
type webhookFacts struct {
	Kind       string `json:"kind"`
	Outcome    string `json:"outcome"`
	Failed     bool   `json:"failed,omitempty"`
	Status     int    `json:"status,omitempty"`
	DurationMS int64  `json:"durationMs"`
}

// principalFacts is who called, as the record keeps it (never a token).
type principalFacts struct {
	Issuer  string `json:"issuer,omitempty"`
	Subject string `json:"subject,omitempty"`
	Client  string `json:"client,omitempty"`
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
// round that belongs to no flow.
func write(rd *tenants.Round, replica string, running bool) (store.RoundWrite, bool) {
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
		ended := rd.Ended
		f.WaitingSince = &ended
		if !rd.StateOut.Expires.IsZero() {
			exp := rd.StateOut.Expires
			f.StateExpiresAt = &exp
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
		Asked:      questionsJSON(rd.Asked),
		Client:     jsonRaw(rd.Client),
	}
	if !rd.PreviousEnded.IsZero() {
		r.ClientWaitUS = max(rd.Arrived.Sub(rd.PreviousEnded), 0).Microseconds()
	}
	if sc.IsValid() {
		r.TraceID, r.SpanID = sc.TraceID().String(), sc.SpanID().String()
	}
	if !rd.StateOut.Expires.IsZero() {
		exp := rd.StateOut.Expires
		r.StateExpiresAt = &exp
	}
	if p := rd.Principal; p != nil {
		r.Principal = jsonRaw(principalFacts{Issuer: p.Issuer, Subject: p.Subject, Client: p.Client})
	}
	if wh := rd.Webhook; wh != nil {
		r.Webhook = jsonRaw(webhookFacts{Kind: wh.Kind, Outcome: wh.Outcome, Failed: wh.Failed, Status: wh.Status,
			DurationMS: wh.Duration.Milliseconds()})
	}
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

// questionsJSON records what each input request asked, in key order.
func questionsJSON(asked map[string]mrtr.InputRequest) json.RawMessage {
	if len(asked) == 0 {
		return nil
	}
	qs := make([]Question, 0, len(asked))
	for _, key := range slices.Sorted(maps.Keys(asked)) {
		r := asked[key]
		q := Question{Key: key, Kind: r.Kind()}
		switch r.Kind() {
		case mrtr.KindForm:
			// A form's params are the question as the client sees it:
			// recorded as they are, unparsed.
			q.Params = r.Params
		case mrtr.KindURL:
			var p struct {
				Message         string          `json:"message"`
				RequestedSchema json.RawMessage `json:"requestedSchema"`
				URL             string          `json:"url"`
			}
			_ = json.Unmarshal(r.Params, &p)
			q.Message, q.RequestedSchema, q.URL = bounded.String(p.Message, maxQuestionText), p.RequestedSchema, bounded.URL(p.URL, bounded.Value)
		default:
			q.Message = bounded.String(mrtr.DescribeRequest(r), maxQuestionText)
		}
		qs = append(qs, q)
	}
	return jsonRaw(qs)
}

func jsonRaw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
