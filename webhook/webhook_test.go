package webhook_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/opsmcp/platform/webhook"
)

func TestSignedDeliveriesVerifyAndTamperedOnesDoNot(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"version":"1","kind":"tool"}`)
	h := webhook.Sign("whsec_a", now, body)
	if err := webhook.Verify("whsec_a", h, body, now, webhook.DefaultTolerance); err != nil {
		t.Fatalf("genuine delivery refused: %v", err)
	}
	cases := []struct {
		name   string
		secret string
		header string
		body   []byte
		at     time.Time
		want   error
	}{
		{"other secret", "whsec_b", h, body, now, webhook.ErrBadSignature},
		{"body changed", "whsec_a", h, []byte(`{"version":"1","kind":"tools"}`), now, webhook.ErrBadSignature},
		{"replayed later", "whsec_a", h, body, now.Add(6 * time.Minute), webhook.ErrStale},
		{"from the future", "whsec_a", h, body, now.Add(-6 * time.Minute), webhook.ErrStale},
		{"timestamp changed", "whsec_a", strings.Replace(h, "t=1800000000", "t=1800000001", 1), body, now, webhook.ErrBadSignature},
		{"no header", "whsec_a", "", body, now, webhook.ErrNoSignature},
		{"garbage", "whsec_a", "t=x,v1=zz", body, now, webhook.ErrNoSignature},
	}
	for _, tc := range cases {
		if err := webhook.Verify(tc.secret, tc.header, tc.body, tc.at, webhook.DefaultTolerance); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	// During a secret rotation a header may carry two signatures.
	both := h + ",v1=" + strings.Split(webhook.Sign("whsec_b", now, body), "v1=")[1]
	for _, s := range []string{"whsec_a", "whsec_b"} {
		if err := webhook.Verify(s, both, body, now, webhook.DefaultTolerance); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}

// TestThePublishedSchemaDescribesTheGoTypes validates real encodings of
// the contract's Go types against the JSON Schema tenants are given.
func TestThePublishedSchemaDescribesTheGoTypes(t *testing.T) {
	f, err := os.Open("schema/v1.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("urn:opsmcp:webhook:v1", doc); err != nil {
		t.Fatal(err)
	}
	validate := func(def string, v any) error {
		s, err := c.Compile("urn:opsmcp:webhook:v1#/$defs/" + def)
		if err != nil {
			t.Fatalf("compile %s: %v", def, err)
		}
		raw, _ := json.Marshal(v)
		inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
		return s.Validate(inst)
	}
	req := webhook.Request{Version: "1", Kind: "tool", Name: "book", Arguments: json.RawMessage(`{"a":1}`),
		Answers:        map[string]webhook.Answer{"who": {Action: "accept", Content: json.RawMessage(`{"name":"Ada"}`)}},
		InputResponses: map[string]json.RawMessage{"confirm": json.RawMessage(`{"action":"accept"}`)},
		State:          "s", Principal: &webhook.Principal{Issuer: "https://id.example", Subject: "u1"},
		Flow: webhook.Flow{ID: "fl_x", Round: 2}, ClientCapabilities: json.RawMessage(`{}`),
		Trace: &webhook.Trace{Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, Stream: true}
	if err := validate("Request", req); err != nil {
		t.Fatalf("a real request does not match the schema: %v", err)
	}
	good := []any{
		webhook.Response{Type: "complete", Result: json.RawMessage(`{"content":[]}`)},
		webhook.Response{Type: "input_required", State: "s"},
		webhook.Response{Type: "input_required", InputRequests: map[string]json.RawMessage{"k": json.RawMessage(`{"method":"roots/list"}`)}},
	}
	for _, r := range good {
		if err := validate("Response", r); err != nil {
			t.Errorf("%+v: %v", r, err)
		}
	}
	bad := []any{
		webhook.Response{Type: "complete"},
		webhook.Response{Type: "input_required"},
		webhook.Response{Type: "later"},
	}
	for _, r := range bad {
		if validate("Response", r) == nil {
			t.Errorf("schema accepts invalid %+v", r)
		}
	}
	total := 2.0
	ev := webhook.Event{Type: "progress", Progress: 1, Total: &total}
	if err := validate("Event", ev); err != nil {
		t.Fatal(err)
	}

	// Tasks: an offer, the deliveries about a task, an acceptance, the
	// reports and their answer.
	offer := req
	offer.Task = &webhook.Task{ID: "tk_1", ReportURL: "https://platform.example/t/acme/tasks/tk_1", Secret: "s", DeadlineMs: 60000, ExpiresAt: "2026-12-04T10:00:00Z"}
	cancel := webhook.Request{Version: "1", Kind: webhook.KindTaskCancel, Name: "book", Arguments: json.RawMessage(`{}`),
		Flow: webhook.Flow{ID: "fl_x", Round: 3}, Task: &webhook.Task{ID: "tk_1", CancelledBy: "client"}}
	for _, r := range []webhook.Request{offer, cancel} {
		if err := validate("Request", r); err != nil {
			t.Errorf("%s: %v", r.Kind, err)
		}
	}
	if err := validate("Response", webhook.Response{Type: webhook.TypeAccepted, Message: "queued"}); err != nil {
		t.Errorf("accepted: %v", err)
	}
	p := 3.0
	for _, r := range []webhook.Report{
		{Seq: 1, Type: webhook.ReportProgress, Message: "3 of 10", Progress: &p, Total: &total},
		{Seq: 2, Type: webhook.ReportInputRequired, InputRequests: map[string]json.RawMessage{"k": json.RawMessage(`{"method":"roots/list"}`)}},
		{Seq: 3, Type: webhook.ReportComplete, Result: json.RawMessage(`{"content":[]}`)},
		{Seq: 3, Type: webhook.ReportError, Error: &webhook.ReportedError{Code: -32603, Message: "broke"}},
	} {
		if err := validate("Report", r); err != nil {
			t.Errorf("%s: %v", r.Type, err)
		}
	}
	for _, r := range []webhook.Report{{Seq: 0, Type: "progress"}, {Seq: 1, Type: "complete"}, {Seq: 1, Type: "error"}, {Seq: 1, Type: "later"}} {
		if validate("Report", r) == nil {
			t.Errorf("schema accepts invalid report %+v", r)
		}
	}
	if err := validate("ReportAnswer", webhook.ReportAnswer{Status: "working", Duplicate: true}); err != nil {
		t.Error(err)
	}
}

// SendReport signs what it sends with the task's secret, and a refusal
// comes back as a *ReportRefused that says whether to send it again: a
// finished task (409) or a report that can never be taken (4xx) is
// final, a replica or its database briefly unavailable (5xx, 429) is not.
func TestSendReportSignsAndSaysWhetherARefusalIsFinal(t *testing.T) {
	cases := []struct {
		status int
		final  bool
	}{
		{http.StatusConflict, true},
		{http.StatusBadRequest, true},
		{http.StatusUnauthorized, true},
		{http.StatusNotFound, true},
		{http.StatusRequestEntityTooLarge, true},
		{http.StatusTooManyRequests, false},
		{http.StatusInternalServerError, false},
		{http.StatusBadGateway, false},
		{http.StatusServiceUnavailable, false},
		{http.StatusGatewayTimeout, false},
	}
	for _, tc := range cases {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			var verified error
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				verified = webhook.Verify("whsec_task", r.Header.Get(webhook.SignatureHeader), body, time.Now(), webhook.DefaultTolerance)
				http.Error(w, "the reason", tc.status)
			}))
			defer srv.Close()
			task := &webhook.Task{ID: "tk_1", ReportURL: srv.URL, Secret: "whsec_task"}
			_, err := webhook.SendReport(t.Context(), srv.Client(), task, &webhook.Report{Seq: 1, Type: webhook.ReportProgress})
			if verified != nil {
				t.Fatalf("the report's signature does not verify with the task's secret: %v", verified)
			}
			refused, ok := errors.AsType[*webhook.ReportRefused](err)
			if !ok {
				t.Fatalf("HTTP %d: error %v is not a *ReportRefused", tc.status, err)
			}
			if refused.StatusCode != tc.status || refused.Reason != "the reason" || refused.Final() != tc.final {
				t.Fatalf("HTTP %d: refusal %+v final=%v, want final=%v and the platform's reason", tc.status, refused, refused.Final(), tc.final)
			}
			if strings.Contains(err.Error(), "whsec_task") {
				t.Fatalf("the refusal names the task's secret: %v", err)
			}
		})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"status":"working","duplicate":true}`)
	}))
	defer srv.Close()
	a, err := webhook.SendReport(t.Context(), srv.Client(), &webhook.Task{ID: "tk_1", ReportURL: srv.URL, Secret: "s"}, &webhook.Report{Seq: 1, Type: webhook.ReportProgress})
	if err != nil || a.Status != "working" || !a.Duplicate {
		t.Fatalf("taken report: answer %+v, %v; want working, duplicate", a, err)
	}
}
