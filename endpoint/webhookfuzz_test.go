package endpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/webhook"
)

// fuzzSink counts the events a stream hands on.
type fuzzSink struct{ progressed, logged int }

func (s *fuzzSink) progress(*webhook.Event) { s.progressed++ }
func (s *fuzzSink) log(*webhook.Event)      { s.logged++ }

// webhookErrorClasses are the classes a backend's answer can be refused
// with; dashboards and alerts group by them.
var webhookErrorClasses = map[string]bool{"invalid_json": true, "contract": true, "oversize": true}

// FuzzWebhookResponse feeds arbitrary bytes, read as a JSON answer and
// as an NDJSON stream, through everything the platform does with a
// backend's answer before a client sees it: the reader, the contract
// check, the backend's own input requests and the complete result. A
// hostile backend gets a refusal of a known class with a short detail,
// never a panic, and what it gets through reaches the client as valid
// JSON.
func FuzzWebhookResponse(f *testing.F) {
	for _, s := range []string{
		`{"type":"complete","result":{"content":[{"type":"text","text":"ok"}]}}`,
		`{"type":"complete","result":{"content":[],"isError":true,"_meta":{"x":1}}}`,
		`{"type":"input_required","inputRequests":{"confirm":{"method":"elicitation/create","params":{"mode":"form","message":"Sure?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}},"state":"s1"}`,
		`{"type":"input_required","inputRequests":{"u":{"method":"elicitation/create","params":{"mode":"url","url":"https://example.com/x","message":"m","elicitationId":"e1"}}}}`,
		`{"type":"input_required","inputRequests":{"m":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":10}}}}`,
		`{"type":"input_required","inputRequests":{"r":{"method":"roots/list"}}}`,
		`{"type":"input_required","state":"only state"}`,
		"{\"type\":\"progress\",\"progress\":1,\"total\":2}\n{\"type\":\"log\",\"level\":\"info\",\"data\":\"x\"}\n{\"type\":\"response\",\"response\":{\"type\":\"complete\",\"result\":{\"content\":[]}}}\n",
		"{\"type\":\"response\"}\n", "\n\n", `{"type":"nope"}`, `[]`, `{"type":"complete","result":[]}`,
		`{"type":"complete","result":{"content":[1e999]}}`, "{\"type\":\"complete\",\"result\":{\"content\":[\"\xff\"]}}",
		`{"type":"complete","type":"input_required","result":{"content":[]}}`,
		`{"type":"complete","result":{"content":[],"_meta":null}}`, `{"type":"complete","result":{"content":[],"_meta":[1]}}`,
	} {
		f.Add([]byte(s), false, "tool")
		f.Add([]byte(s), true, "prompt")
	}
	const max = 64 << 10
	c := &webhookClient{maxResponse: max}
	info := map[string]any{"io.modelcontextprotocol/serverInfo": map[string]string{"name": "opsmcp", "version": "fuzz"}}
	meta := newResultMeta(info)
	everyCap := mrtr.ClientCapabilities{Elicitation: &mrtr.ElicitationCapability{Form: &struct{}{}, URL: &struct{}{}}, Sampling: &mrtr.SamplingCapability{}, Roots: &mrtr.RootsCapability{}}
	f.Fuzz(func(t *testing.T, body []byte, stream bool, kind string) {
		var resp *webhook.Response
		var err error
		sink := &fuzzSink{}
		if stream {
			resp, err = c.readStream(context.Background(), bytes.NewReader(body), sink, time.Second)
		} else {
			resp, err = c.readOne(context.Background(), bytes.NewReader(body), time.Second)
		}
		if err == nil {
			err = checkResponse(resp, false)
		}
		if err != nil {
			var we *WebhookError
			if !errors.As(err, &we) || !webhookErrorClasses[we.Class] {
				t.Fatalf("refused with %T %v, not a WebhookError of a known class", err, err)
			}
			if len(we.Detail) > 200 {
				t.Fatalf("a refusal's detail carries %d bytes of the answer: %q", len(we.Detail), we.Detail)
			}
			return
		}
		switch resp.Type {
		case webhook.TypeInputRequired:
			for _, caps := range []mrtr.ClientCapabilities{{}, everyCap} {
				open, keys, e, err := webhookInputs(resp.InputRequests, caps, webhookKeyPrefix)
				if err != nil || e != nil {
					if e != nil && (e.Code == 0 || e.Message == "") {
						t.Fatalf("empty protocol error for %q", body)
					}
					continue
				}
				if len(open) != len(keys) {
					t.Fatalf("%d requests under %d keys", len(open), len(keys))
				}
				for k, r := range open {
					wire, err := json.Marshal(r)
					if err != nil || !json.Valid(wire) {
						t.Fatalf("input request %q does not encode: %v", k, err)
					}
				}
			}
		case webhook.TypeComplete:
			for _, k := range []string{webhook.KindTool, webhook.KindPrompt, webhook.KindResource, kind} {
				result, _, err := completeResult(k, resp.Result, meta)
				if err != nil {
					continue
				}
				wire, err := json.Marshal(result)
				if err != nil || !json.Valid(wire) {
					t.Fatalf("a %s result the client would get does not encode: %v", k, err)
				}
			}
		default:
			t.Fatalf("accepted an answer of type %q", resp.Type)
		}
	})
}

// TestCompleteResultMeta: a result's _meta is ours over the backend's
// own; one that is not an object (null too, which used to panic) is
// replaced by ours.
func TestCompleteResultMeta(t *testing.T) {
	meta := newResultMeta(map[string]any{"io.modelcontextprotocol/serverInfo": map[string]string{"name": "opsmcp/<x>", "version": "1"}})
	ours := `{"io.modelcontextprotocol/serverInfo":{"name":"opsmcp/\u003cx\u003e","version":"1"}}`
	for raw, want := range map[string]string{
		`{"content":[]}`:              ours,
		`{"content":[],"_meta":null}`: ours,
		`{"content":[],"_meta":"x"}`:  ours,
		`{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":1,"b":[ 1 ]}}`: `{"b":[1],"io.modelcontextprotocol/serverInfo":{"name":"opsmcp/\u003cx\u003e","version":"1"}}`,
	} {
		result, _, err := completeResult(webhook.KindTool, json.RawMessage(raw), meta)
		if err != nil || string(result["_meta"]) != want || string(result["resultType"]) != `"complete"` {
			t.Errorf("%s: _meta %s (%v), want %s", raw, result["_meta"], err, want)
		}
	}
}
