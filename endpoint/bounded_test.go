package endpoint_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/opsmcp/platform/endpoint"
	"github.com/opsmcp/platform/internal/bounded"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
)

// TestClientValuesAreRecordedBoundedAndURIsWithoutWhatMayHoldSecrets:
// whatever a client puts in a resource URI, a tool name, a request id or
// its clientInfo, the round handed to every sink (the flow record among
// them), the spans and the log carry at most bounded.Value bytes of it,
// and never a URI's user information, query or fragment.
func TestClientValuesAreRecordedBoundedAndURIsWithoutWhatMayHoldSecrets(t *testing.T) {
	const secret = "s3cret"
	spans, traceOpt := traced(t)
	rounds, roundOpt := countRounds()
	h := newHook(t, replyText("x"))
	p := setup(t, h, traceOpt, roundOpt)
	long := strings.Repeat("n", 10_000)

	type call struct {
		name   string
		id     any
		method string
		params obj
	}
	var calls []call
	for _, uri := range []string{
		"docs://readme?token=" + secret,
		"docs://readme#" + secret,
		"docs://readme?",
		"https://user:" + secret + "@example.com/x",
		"https://" + secret + "@example.com/x",
		"urn:isbn:1?" + secret,
		"docs://" + long + "?" + secret,
		"docs://r?a=1&token=" + secret + "#f",
		"%zz?" + secret,
	} {
		calls = append(calls, call{"uri " + uri[:min(len(uri), 30)], 1, "resources/read", obj{"uri": uri}})
	}
	calls = append(calls,
		call{"long tool name", 1, "tools/call", obj{"name": long, "arguments": obj{}}},
		call{"long string id", long, "tools/call", obj{"name": "echo", "arguments": obj{}}},
		call{"long number id", json.Number("1" + strings.Repeat("0", 5000)), "tools/call", obj{"name": "echo", "arguments": obj{}}},
		call{"long clientInfo", 1, "tools/call", obj{"name": "echo", "arguments": obj{}, "_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": obj{},
			"io.modelcontextprotocol/clientInfo":         obj{"name": long, "version": long}}}},
	)
	for _, c := range calls {
		if _, ok := c.params["_meta"]; !ok {
			c.params["_meta"] = platformtest.Meta(nil)
		}
		body, _ := json.Marshal(obj{"jsonrpc": "2.0", "id": c.id, "method": c.method, "params": c.params})
		hdr := http.Header{"Content-Type": {"application/json"}, "Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {c.method}}
		if n, ok := c.params["name"].(string); ok {
			hdr.Set("Mcp-Name", n)
		} else {
			hdr.Set("Mcp-Name", c.params["uri"].(string))
		}
		r := platformtest.Do(t, "POST", p.URL+"/t/acme/mcp", hdr, body)
		var answer struct{ ID json.RawMessage }
		if r.Status >= 500 || json.Unmarshal(r.Body, &answer) != nil {
			t.Fatalf("%s: HTTP %d %s", c.name, r.Status, r.Body)
		}
		// The client gets its id back whole.
		if sent, _ := json.Marshal(c.id); string(answer.ID) != string(sent) {
			t.Fatalf("%s: answered with id %.60s…, not the id sent", c.name, answer.ID)
		}
		rd := testwait.Recv(t, rounds, "the round of "+c.name)
		checkRound(t, c.name, rd, secret)
	}

	ended := spans.Ended()
	if len(ended) < len(calls) {
		t.Fatalf("%d spans for %d calls", len(ended), len(calls))
	}
	for _, s := range ended {
		if len(s.Name()) > 2*bounded.Value || strings.Contains(s.Name(), secret) {
			t.Errorf("span name %.80q… (%d bytes)", s.Name(), len(s.Name()))
		}
		for _, kv := range s.Attributes() {
			v := kv.Value.String()
			if len(v) > bounded.Value || strings.Contains(v, secret) {
				t.Errorf("span %s: %s = %.80q… (%d bytes)", s.Name(), kv.Key, v, len(v))
			}
		}
		for _, ev := range s.Events() {
			for _, kv := range ev.Attributes {
				if v := kv.Value.String(); len(v) > 4*bounded.Value || strings.Contains(v, secret) {
					t.Errorf("span %s event %s: %s = %.80q…", s.Name(), ev.Name, kv.Key, v)
				}
			}
		}
	}
	logs := p.Logs.String()
	if strings.Contains(logs, secret) || strings.Contains(logs, long[:2*bounded.Value]) {
		t.Error("the log holds a URI's secret or an unbounded client value")
	}
}

func checkRound(t *testing.T, name string, rd *endpoint.Round, secret string) {
	t.Helper()
	for field, v := range map[string]string{"Target": rd.Target, "RequestID": string(rd.RequestID),
		"Client.Name": rd.Client.Name, "Client.Version": rd.Client.Version} {
		if len(v) > bounded.Value+2 || strings.Contains(v, secret) {
			t.Errorf("%s: round %s = %.80q… (%d bytes)", name, field, v, len(v))
		}
	}
	if rd.RequestID != nil && !json.Valid(rd.RequestID) {
		t.Errorf("%s: round RequestID %.80q is not JSON", name, rd.RequestID)
	}
}
