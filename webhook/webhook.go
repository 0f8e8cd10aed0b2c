// Package webhook is the contract between the platform and a tenant's
// backend: the JSON a delivery carries, the JSON the backend answers with,
// and the signature that proves a delivery came from the platform.
// Tenants import it to verify deliveries; the schema in schema/ describes
// the same contract for other languages.
//
// A delivery is an HTTP POST with Content-Type application/json and the
// header Opsmcp-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 over
// "<t>.<body>" keyed with the webhook secret>. The backend answers 200
// with a Response as application/json, or streams progress and log
// events as application/x-ndjson (one Event per line, the last carrying
// the Response).
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Version is the contract version every delivery names.
const Version = "1"

// Header names.
const (
	SignatureHeader = "Opsmcp-Signature"
	DeliveryHeader  = "Opsmcp-Delivery"
)

// Kinds of delivery.
const (
	KindTool     = "tool"
	KindPrompt   = "prompt"
	KindResource = "resource"
)

// Request is what the platform POSTs to a tenant's webhook.
type Request struct {
	Version string `json:"version"`
	Kind    string `json:"kind"`
	// Name is the tool, prompt or resource template name.
	Name string `json:"name"`
	// URI is the resource URI being read (resource deliveries only).
	URI string `json:"uri,omitempty"`
	// Arguments are the tool's arguments (an object), the prompt's
	// arguments (strings by name) or the template's variables.
	Arguments json.RawMessage `json:"arguments"`
	// Answers are the declared inputs the platform gathered, by input name.
	Answers map[string]Answer `json:"answers,omitempty"`
	// InputResponses are the client's answers to the input requests this
	// backend asked for in its previous round, keyed by its own names.
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
	// State is this backend's own state from its previous round, as it
	// returned it. The platform seals it between rounds; it is plaintext
	// here.
	State string `json:"state,omitempty"`
	// Principal is who is calling, as verified by the platform; absent on
	// public tenants.
	Principal *Principal `json:"principal,omitempty"`
	// Flow identifies the multi-round call this delivery belongs to.
	Flow Flow `json:"flow"`
	// ClientCapabilities are the calling client's declared capabilities,
	// which bound what this backend may ask for.
	ClientCapabilities json.RawMessage `json:"clientCapabilities,omitempty"`
	// Trace carries the W3C trace context of the platform's span.
	Trace *Trace `json:"trace,omitempty"`
	// Stream says the platform accepts an application/x-ndjson answer with
	// progress and log events.
	Stream bool `json:"stream,omitempty"`
	// Task offers the call as a task (see TypeAccepted), or says which
	// task a KindTaskInput or KindTaskCancel delivery is about.
	Task *Task `json:"task,omitempty"`
}

// Answer is one declared input's outcome.
type Answer struct {
	// Action is accept, decline or cancel.
	Action string `json:"action"`
	// Content is the accepted form content, sampling result or roots list.
	Content json.RawMessage `json:"content,omitempty"`
}

// Principal identifies the verified caller.
type Principal struct {
	Issuer  string `json:"issuer,omitempty"`
	Subject string `json:"subject,omitempty"`
	Client  string `json:"client,omitempty"`
}

// Flow identifies a flow and the round being delivered (1 for the first).
type Flow struct {
	ID    string `json:"id"`
	Round int    `json:"round"`
}

// Trace is W3C trace context.
type Trace struct {
	Traceparent string `json:"traceparent,omitempty"`
	Tracestate  string `json:"tracestate,omitempty"`
}

// Response types (and TypeAccepted, for a call offered as a task).
const (
	TypeComplete      = "complete"
	TypeInputRequired = "input_required"
)

// Response is a backend's answer.
type Response struct {
	// Type is "complete" or "input_required", or "accepted" for a call
	// offered as a task.
	Type string `json:"type"`
	// Result is the MCP result for a complete answer: a CallToolResult
	// (content, structuredContent, isError), a GetPromptResult
	// (description, messages) or a ReadResourceResult (contents).
	Result json.RawMessage `json:"result,omitempty"`
	// InputRequests are, for input_required, what to ask the client,
	// keyed by names of this backend's choosing; each is
	// {"method": "elicitation/create"|"sampling/createMessage"|"roots/list", "params": {...}}.
	InputRequests map[string]json.RawMessage `json:"inputRequests,omitempty"`
	// State is carried, sealed, to this backend's next round.
	State string `json:"state,omitempty"`
	// Message is an accepted task's first status message.
	Message string `json:"message,omitempty"`
}

// Event is one line of a streamed (application/x-ndjson) answer.
type Event struct {
	// Type is "progress", "log" or "response".
	Type string `json:"type"`
	// Progress fields.
	Progress float64  `json:"progress,omitempty"`
	Total    *float64 `json:"total,omitempty"`
	Message  string   `json:"message,omitempty"`
	// Log fields.
	Level  string          `json:"level,omitempty"`
	Logger string          `json:"logger,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
	// Response ends the stream.
	Response *Response `json:"response,omitempty"`
}

// Sign returns the signature header value for body at time t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Errors from Verify.
var (
	ErrNoSignature  = errors.New("webhook: missing or malformed signature header")
	ErrBadSignature = errors.New("webhook: signature does not match")
	ErrStale        = errors.New("webhook: signature timestamp outside the tolerance")
)

// DefaultTolerance is how far a delivery's timestamp may be from now.
const DefaultTolerance = 5 * time.Minute

// Verify checks header against body with secret, and that its timestamp
// is within tolerance of now, so a captured delivery cannot be replayed
// later. Several v1 values (during secret rotation) are accepted.
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrNoSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w (%s)", ErrStale, d.Round(time.Second))
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return ErrBadSignature
}
