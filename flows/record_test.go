package flows

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/endpoint"
	"github.com/opsmcp/platform/internal/bounded"
	"github.com/opsmcp/platform/internal/jsontext"
	"github.com/opsmcp/platform/mrtr"
)

// webhookFacts is a round's delivery as the record keeps it (the reference encoding's shape).
type webhookFacts struct {
	Kind       string `json:"kind"`
	Outcome    string `json:"outcome"`
	Failed     bool   `json:"failed,omitempty"`
	Status     int    `json:"status,omitempty"`
	DurationMS int64  `json:"durationMs"`
	DurationUS int64  `json:"durationUs"`
	Detail     string `json:"detail,omitempty"`
}

// principalFacts is who called, as the record keeps it (the reference encoding's shape) (never a token).
type principalFacts struct {
	Issuer  string `json:"issuer,omitempty"`
	Subject string `json:"subject,omitempty"`
	Client  string `json:"client,omitempty"`
}

// referenceDocuments is what roundDocuments must produce, by
// encoding/json over the record's documented shapes (Question,
// principalFacts, endpoint.ClientInfo, webhookFacts). Strings go in as
// the record stores text (jsontext.Text: no NUL, valid UTF-8).
func referenceDocuments(t *testing.T, rd *endpoint.Round) (asked, principal, client, webhook any) {
	t.Helper()
	decode := func(v any) any {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var out any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if len(rd.Asked) > 0 {
		var qs []Question
		for _, key := range slices.Sorted(maps.Keys(rd.Asked)) {
			r := rd.Asked[key]
			q := Question{Key: jsontext.Text(key), Kind: r.Kind()}
			switch r.Kind() {
			case mrtr.KindForm:
				q.Params = r.Params
			case mrtr.KindURL:
				var p urlQuestion
				_ = json.Unmarshal(r.Params, &p)
				q.Message, q.RequestedSchema, q.URL = bounded.String(p.Message, maxQuestionText), p.RequestedSchema, bounded.URL(p.URL, bounded.Value)
			default:
				q.Message = bounded.String(mrtr.DescribeRequest(r), maxQuestionText)
			}
			qs = append(qs, q)
		}
		asked = decode(qs)
	}
	if p := rd.Principal; p != nil {
		principal = decode(principalFacts{Issuer: jsontext.Text(p.Issuer), Subject: jsontext.Text(p.Subject), Client: jsontext.Text(p.Client)})
	}
	client = decode(endpoint.ClientInfo{Name: jsontext.Text(rd.Client.Name), Version: jsontext.Text(rd.Client.Version)})
	if wh := rd.Webhook; wh != nil {
		webhook = decode(webhookFacts{Kind: jsontext.Text(wh.Kind), Outcome: jsontext.Text(wh.Outcome), Failed: wh.Failed,
			Status: wh.Status, DurationMS: wh.Duration.Milliseconds(), DurationUS: wh.Duration.Microseconds(),
			Detail: jsontext.Text(bounded.String(wh.Detail, maxCause))})
	}
	return asked, principal, client, webhook
}

func TestRoundDocumentsReadBackAsEncodingJSONWritesThem(t *testing.T) {
	awkward := "q\"uote\\ \x00nul \xffbad \u2028 <é>"
	form := json.RawMessage(`{"message":"Which environment?","requestedSchema":{"type":"object","properties":{"env":{"type":"string","enum":["staging","production"]}}}}`)
	cases := map[string]*endpoint.Round{
		"nothing but a client": {},
		"a form question, a principal, a webhook": {
			Principal: &auth.Principal{Issuer: "https://id.example.com", Subject: "user-4711", Client: "desktop"},
			Client:    endpoint.ClientInfo{Name: "claude-desktop", Version: "1.4.2"},
			Asked:     map[string]mrtr.InputRequest{"env": {Method: "elicitation/create", Params: form}},
			Webhook:   &endpoint.WebhookCall{Kind: "tool", Outcome: "input_required", Status: 200, Duration: 1830 * time.Microsecond},
		},
		"hostile strings everywhere": {
			Principal: &auth.Principal{Issuer: awkward, Subject: awkward, Client: awkward},
			Client:    endpoint.ClientInfo{Name: awkward, Version: awkward},
			Asked: map[string]mrtr.InputRequest{
				awkward: {Method: "elicitation/create", Params: json.RawMessage(`{"message":"\u0000 \"x\" \\ é","requestedSchema":{}}`)},
			},
			Webhook: &endpoint.WebhookCall{Kind: awkward, Outcome: awkward, Failed: true, Duration: 3 * time.Second},
		},
		"every kind at once, keys out of order": {
			Principal: &auth.Principal{Subject: "only-a-subject"},
			Client:    endpoint.ClientInfo{Version: "9"},
			Asked: map[string]mrtr.InputRequest{
				"z-form":     {Method: "elicitation/create", Params: json.RawMessage(` { "message" : "spaced" } `)},
				"a-url":      {Method: "elicitation/create", Params: json.RawMessage(`{"mode":"url","message":"Sign in","url":"https://user:pw@login.example.com/start?code=secret#frag","elicitationId":"e1"}`)},
				"m-sampling": {Method: "sampling/createMessage", Params: json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"Summarise"}}],"maxTokens":100}`)},
				"b-roots":    {Method: "roots/list", Params: json.RawMessage(`{}`)},
			},
			Webhook: &endpoint.WebhookCall{Kind: "prompt", Outcome: "timeout", Failed: true, Detail: "timeout after 10s \"quoted\" \x00 " + strings.Repeat("é", 400)},
		},
	}
	for name, rd := range cases {
		t.Run(name, func(t *testing.T) {
			got := [4]json.RawMessage{}
			_, got[0], got[1], got[2], got[3] = roundDocuments(nil, rd)
			wa, wp, wc, ww := referenceDocuments(t, rd)
			for i, want := range []any{wa, wp, wc, ww} {
				var back any
				if got[i] != nil {
					if err := json.Unmarshal(got[i], &back); err != nil {
						t.Fatalf("document %d is not JSON: %s", i, got[i])
					}
				}
				if !reflect.DeepEqual(back, want) {
					t.Fatalf("document %d:\ngot  %s\nwant %v", i, got[i], want)
				}
			}
		})
	}
}

func TestRoundDocumentsDoNotShareSpace(t *testing.T) {
	ask, _ := benchRounds()
	_, asked, principal, client, webhook := roundDocuments(nil, ask)
	before := string(principal)
	// Appending to one document must not write over the next.
	_ = append(asked, `,"x"`...)
	if string(principal) != before {
		t.Fatalf("appending to the questions changed the principal: %s", principal)
	}
	for _, d := range []json.RawMessage{asked, principal, client, webhook} {
		if !json.Valid(d) {
			t.Fatalf("not JSON: %s", d)
		}
	}
}

func TestAFormQuestionWithInvalidParamsIsRecordedWithoutThem(t *testing.T) {
	rd := &endpoint.Round{Asked: map[string]mrtr.InputRequest{
		"bad":  {Method: "elicitation/create", Params: json.RawMessage(`{"message": "unterminated`)},
		"good": {Method: "elicitation/create", Params: json.RawMessage(`{"message":"fine"}`)},
	}}
	_, asked, _, _, _ := roundDocuments(nil, rd)
	var qs []Question
	if err := json.Unmarshal(asked, &qs); err != nil {
		t.Fatalf("the questions are not JSON: %s", asked)
	}
	if len(qs) != 2 || qs[0].Key != "bad" || qs[0].Params != nil || string(qs[1].Params) != `{"message":"fine"}` {
		t.Fatalf("recorded %s", asked)
	}
}
