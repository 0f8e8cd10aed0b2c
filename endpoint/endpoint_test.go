package endpoint_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/endpoint"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
	"github.com/opsmcp/platform/webhook"
)

type obj = map[string]any

// hook is a tenant webhook for tests: it verifies signatures and answers
// with whatever the test sets.
type hook struct {
	*platformtest.Backend
	mu       sync.Mutex
	answer   func(w http.ResponseWriter, req *webhook.Request)
	requests []*webhook.Request
	header   http.Header // of the last delivery
}

func newHook(t *testing.T, answer func(w http.ResponseWriter, req *webhook.Request)) *hook {
	h := &hook{answer: answer}
	h.Backend = platformtest.NewBackend(t, func(w http.ResponseWriter, r *http.Request, req *webhook.Request) {
		h.mu.Lock()
		h.requests = append(h.requests, req)
		h.header = r.Header.Clone()
		h.mu.Unlock()
		h.answer(w, req)
	})
	return h
}

// roundSink tells of every round it is handed. Sinks are handed a round
// after telemetry, so a round seen here has its spans and metrics
// recorded.
type roundSink chan *endpoint.Round

func (s roundSink) Round(_ context.Context, r *endpoint.Round) {
	select {
	case s <- r:
	default: // a sink must not block; no test makes this many rounds
	}
}

// countRounds returns a channel receiving every round a platform started
// with opt has finished, once it is recorded.
func countRounds() (<-chan *endpoint.Round, platformtest.Option) {
	s := make(roundSink, 1024)
	return s, platformtest.WithServer(func(o *endpoint.Options) { o.Sinks = append(o.Sinks, s) })
}

func (h *hook) setSecret(s string) { h.SetSecrets(s) }

func (h *hook) lastHeader() http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.header
}

// count is how many deliveries the hook received.
func (h *hook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.requests)
}

func (h *hook) last() *webhook.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.requests) == 0 {
		return nil
	}
	return h.requests[len(h.requests)-1]
}

func replyText(text string) func(http.ResponseWriter, *webhook.Request) {
	return func(w http.ResponseWriter, _ *webhook.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"type":"complete","result":{"content":[{"type":"text","text":%q}]}}`, text)
	}
}

func echoTool(name, url string) obj {
	return obj{"name": name, "description": "echo",
		"inputSchema": obj{"type": "object", "properties": obj{"msg": obj{"type": "string"}, "n": obj{"type": "integer", "x-mcp-header": "N"}}},
		"handler":     obj{"url": url, "timeoutMs": 2000}}
}

// setup starts a platform with one tenant "acme" whose tool "echo" is
// answered by h.
func setup(t *testing.T, h *hook, opts ...platformtest.Option) *platformtest.Platform {
	p := platformtest.Start(t, platformtest.SQLiteURL(t), opts...)
	p.Tenant(t, "acme")
	h.setSecret(p.Tool(t, "acme", echoTool("echo", h.URL)))
	return p
}

func toolText(t *testing.T, res map[string]any) string {
	t.Helper()
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		t.Fatalf("no content in %v", res)
	}
	return content[0].(map[string]any)["text"].(string)
}

func TestToolCallReachesTheSignedWebhookAndReturnsItsResult(t *testing.T) {
	h := newHook(t, replyText("pong"))
	p := setup(t, h)
	res := platformtest.Result(t, p.MCP(t, "acme", "tools/call", obj{"name": "echo", "arguments": obj{"msg": "ping"}}))
	if res["resultType"] != "complete" || toolText(t, res) != "pong" {
		t.Fatalf("result %v", res)
	}
	meta := res["_meta"].(map[string]any)["io.modelcontextprotocol/serverInfo"].(map[string]any)
	// The platform is started as version "test"; the name is the tenant's.
	if name, ok := meta["name"].(string); !ok || name != "opsmcp/acme" {
		t.Fatalf("serverInfo name %#v in %v", meta["name"], meta)
	}
	if version, ok := meta["version"].(string); !ok || version != "test" {
		t.Fatalf("serverInfo version %#v in %v", meta["version"], meta)
	}
	req := h.last()
	if req.Version != "1" || req.Kind != "tool" || req.Name != "echo" || string(req.Arguments) != `{"msg":"ping"}` || req.Flow.Round != 1 || req.Flow.ID == "" {
		t.Fatalf("delivery %+v", req)
	}
}

func TestEveryResultCarriesResultTypeAndListsCarryCacheHints(t *testing.T) {
	h := newHook(t, replyText("x"))
	p := setup(t, h)
	for _, m := range []string{"server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list"} {
		res := platformtest.Result(t, p.MCP(t, "acme", m, nil))
		if res["resultType"] != "complete" || res["cacheScope"] != "private" {
			t.Errorf("%s: %v", m, res)
		}
		if _, ok := res["ttlMs"].(float64); !ok {
			t.Errorf("%s: no ttlMs", m)
		}
	}
}

// raw sends a hand-built request to the acme endpoint.
func raw(t *testing.T, p *platformtest.Platform, method, body string, header ...string) *platformtest.Response {
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			continue
		}
		h.Set(header[i], header[i+1])
	}
	return platformtest.Do(t, method, p.URL+"/t/acme/mcp", h, []byte(body))
}

const validMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func TestProtocolErrorsAreAnsweredExactlyAsTheSpecGivesThem(t *testing.T) {
	h := newHook(t, replyText("x"))
	p := setup(t, h)
	std := []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list"}
	call := func(name string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + name + `","arguments":{"n":5},` + validMeta + `}}`
	}
	callHeaders := func(extra ...string) []string {
		return append([]string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "echo", "Mcp-Param-N", "5"}, extra...)
	}
	cases := []struct {
		name   string
		body   string
		header []string
		status int
		code   int
	}{
		{"no version header", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + validMeta + `}}`, []string{"Mcp-Method", "tools/list"}, 400, -32020},
		{"no _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, std, 400, -32602},
		{"no capabilities", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, std, 400, -32602},
		{"header differs from _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}}`, std, 400, -32020},
		{"unsupported version", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`, []string{"MCP-Protocol-Version", "1900-01-01", "Mcp-Method", "tools/list"}, 400, -32022},
		{"Mcp-Method differs", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + validMeta + `}}`, []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "prompts/list"}, 400, -32020},
		{"Mcp-Method case", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + validMeta + `}}`, []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "TOOLS/LIST"}, 400, -32020},
		{"Mcp-Name missing", call("echo"), []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call"}, 400, -32020},
		{"Mcp-Name differs", call("echo"), []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "other"}, 400, -32020},
		{"Mcp-Param missing", call("echo"), []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "echo"}, 400, -32020},
		{"Mcp-Param differs", call("echo"), callHeaders("Mcp-Param-N", "6"), 400, -32020},
		{"Mcp-Param bad base64", call("echo"), callHeaders("Mcp-Param-N", "=?base64?NQ?="), 400, -32020},
		{"unknown tool", call("nope"), []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "nope"}, 400, -32602},
		{"name of wrong type", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5,` + validMeta + `}}`, []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "5"}, 400, -32602},
		{"arguments not an object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":[1],` + validMeta + `}}`, callHeaders(), 400, -32602},
		{"initialize removed", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{` + validMeta + `}}`, []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "initialize"}, 404, -32601},
		{"ping removed", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{` + validMeta + `}}`, []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "ping"}, 404, -32601},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"x/y","params":{` + validMeta + `}}`, []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "x/y"}, 404, -32601},
		{"parse error", `{"jsonrpc":`, std, 400, -32700},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, std, 400, -32600},
		{"response posted", `{"jsonrpc":"2.0","id":1,"result":{}}`, std, 400, -32600},
		{"bad jsonrpc", `{"jsonrpc":"1.0","id":1,"method":"tools/list"}`, std, 400, -32600},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"tools/list"}`, std, 400, -32600},
		{"params not object", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[1]}`, std, 400, -32602},
	}
	for _, tc := range cases {
		r := raw(t, p, "POST", tc.body, tc.header...)
		if r.Status != tc.status {
			t.Errorf("%s: HTTP %d, want %d: %s", tc.name, r.Status, tc.status, r.Body)
			continue
		}
		code, msg, data := platformtest.RPCError(t, r)
		if code != tc.code || msg == "" {
			t.Errorf("%s: code %d (%q), want %d", tc.name, code, msg, tc.code)
		}
		if tc.code == -32022 && (data["requested"] != "1900-01-01" || data["supported"] == nil) {
			t.Errorf("%s: data %v", tc.name, data)
		}
		if id, ok := r.JSON(t)["id"]; ok && id == nil {
			t.Errorf("%s: id is null; it must be the request's or absent", tc.name)
		}
	}
	if len(h.requests) != 0 {
		t.Fatalf("a rejected request reached the webhook")
	}
}

func TestBase64HeaderValuesAreDecodedBeforeComparing(t *testing.T) {
	h := newHook(t, replyText("ok"))
	p := setup(t, h)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"n":5},` + validMeta + `}}`
	r := raw(t, p, "POST", body, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "=?base64?ZWNobw==?=", "Mcp-Param-N", "=?base64?NQ==?=")
	if res := platformtest.Result(t, r); toolText(t, res) != "ok" {
		t.Fatalf("got %v", res)
	}
}

func TestTransportRulesForMethodsNotificationsOriginsAndSize(t *testing.T) {
	h := newHook(t, replyText("x"))
	p := setup(t, h, platformtest.WithConfig(func(c *config.Config) { c.MaxMCPBodyBytes = 4096 }))
	for _, m := range []string{"GET", "DELETE", "PUT"} {
		if r := raw(t, p, m, ""); r.Status != 405 || r.Header.Get("Allow") != "POST" {
			t.Errorf("%s: %d allow %q", m, r.Status, r.Header.Get("Allow"))
		}
	}
	if r := raw(t, p, "POST", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`); r.Status != 202 || len(r.Body) != 0 {
		t.Errorf("notification: %d %q", r.Status, r.Body)
	}
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + validMeta + `}}`
	std := []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list"}
	if r := raw(t, p, "POST", list, append(std, "Origin", "http://evil.example")...); r.Status != 403 {
		t.Errorf("foreign origin: %d", r.Status)
	}
	if r := raw(t, p, "POST", list, append(std, "Origin", p.URL)...); r.Status != 200 {
		t.Errorf("own origin: %d %s", r.Status, r.Body)
	}
	req, _ := http.NewRequest("POST", p.URL+"/t/acme/mcp", strings.NewReader(list))
	req.Host = "evil.example.com"
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/list")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Errorf("foreign Host: %v %v", err, resp)
	}
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", 5000) + `",` + validMeta + `}}`
	if r := raw(t, p, "POST", big, std...); r.Status != 413 {
		t.Errorf("oversize: %d", r.Status)
	}
	for _, path := range []string{"/t/ghost/mcp", "/t/ACME/mcp"} {
		r := platformtest.Do(t, "POST", p.URL+path, http.Header{"Content-Type": {"application/json"}}, []byte(list))
		if r.Status != 404 {
			t.Errorf("%s: %d", path, r.Status)
		}
		platformtest.RPCError(t, r)
	}
	p.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", obj{"disabled": true})
	if r := raw(t, p, "POST", list, std...); r.Status != 404 {
		t.Errorf("disabled tenant: %d", r.Status)
	}
}

func TestInvalidArgumentsAreAToolErrorTheModelCanRead(t *testing.T) {
	h := newHook(t, replyText("x"))
	p := setup(t, h)
	res := platformtest.Result(t, p.MCP(t, "acme", "tools/call", obj{"name": "echo", "arguments": obj{"msg": 42}}))
	if res["isError"] != true || !strings.Contains(toolText(t, res), "/msg") {
		t.Fatalf("got %v", res)
	}
	if h.last() != nil {
		t.Fatal("invalid arguments reached the webhook")
	}
}

func TestWebhookFailuresBecomeToolErrorsNamingTheFailure(t *testing.T) {
	// The timeout case's webhook never answers on its own: it is held
	// until the test has the platform's answer, so that answer can only
	// have come from the platform giving up at the handler's deadline.
	release := make(chan struct{})
	var released sync.Once
	cases := []struct {
		name, class string
		detail      string // a part of the message, when it matters
		answer      func(w http.ResponseWriter, r *webhook.Request)
	}{
		// The tool's own deadline (timeoutMs 2000), not the default.
		{"no answer before the deadline", "timeout", "within 2s", func(w http.ResponseWriter, _ *webhook.Request) { <-release }},
		{"server error status", "status", "", func(w http.ResponseWriter, _ *webhook.Request) { http.Error(w, "boom", 500) }},
		{"HTML body", "invalid_json", "", func(w http.ResponseWriter, _ *webhook.Request) { io.WriteString(w, "<html>") }},
		{"unknown answer type", "contract", "", func(w http.ResponseWriter, _ *webhook.Request) { io.WriteString(w, `{"type":"maybe"}`) }},
		{"content not an array", "contract", "", func(w http.ResponseWriter, _ *webhook.Request) {
			io.WriteString(w, `{"type":"complete","result":{"content":"not an array"}}`)
		}},
		{"input request with a non-input method", "contract", "", func(w http.ResponseWriter, _ *webhook.Request) {
			io.WriteString(w, `{"type":"input_required","inputRequests":{"x":{"method":"tools/call"}}}`)
		}},
		{"oversize JSON answer", "oversize", "", func(w http.ResponseWriter, _ *webhook.Request) {
			fmt.Fprintf(w, `{"type":"complete","result":{"content":[{"type":"text","text":%q}]}}`, strings.Repeat("x", 5000))
		}},
		{"oversize event stream", "oversize", "", func(w http.ResponseWriter, _ *webhook.Request) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			for i := 0; i < 200; i++ {
				io.WriteString(w, `{"type":"log","level":"info","data":"`+strings.Repeat("y", 50)+`"}`+"\n")
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHook(t, tc.answer)
			// Registered after the hook's Close, so it runs first: Close
			// waits for the held handler.
			t.Cleanup(func() { released.Do(func() { close(release) }) })
			p := setup(t, h, platformtest.WithConfig(func(c *config.Config) { c.WebhookMaxResponse = 4096 }))
			r := p.MCP(t, "acme", "tools/call", obj{"name": "echo", "arguments": obj{}})
			res := platformtest.Result(t, r)
			if res["isError"] != true || !strings.Contains(toolText(t, res), "("+tc.class+")") || !strings.Contains(toolText(t, res), tc.detail) {
				t.Fatalf("got %v", res)
			}
		})
	}
	t.Run("connect", func(t *testing.T) {
		h := newHook(t, replyText("x"))
		p := setup(t, h)
		h.Close()
		res := platformtest.Result(t, p.MCP(t, "acme", "tools/call", obj{"name": "echo", "arguments": obj{}}))
		if res["isError"] != true || !strings.Contains(toolText(t, res), "(connect)") {
			t.Fatalf("got %v", res)
		}
	})
}

func TestPrivateWebhookAddressesAreRefusedByDefault(t *testing.T) {
	h := newHook(t, replyText("x"))
	p := setup(t, h, platformtest.WithConfig(func(c *config.Config) { c.AllowPrivateTargets = false }))
	// A hostname that resolves to loopback is refused too: the check is on
	// the address dialled.
	p.Tool(t, "acme", echoTool("byname", strings.Replace(h.URL, "127.0.0.1", "localhost", 1)))
	for _, tool := range []string{"echo", "byname"} {
		res := platformtest.Result(t, p.MCP(t, "acme", "tools/call", obj{"name": tool, "arguments": obj{}}))
		if res["isError"] != true || !strings.Contains(toolText(t, res), "(refused_address)") {
			t.Fatalf("%s: got %v", tool, res)
		}
	}
	if h.last() != nil {
		t.Fatal("the webhook was reached")
	}
}

func TestClientDisconnectCancelsTheWebhookCall(t *testing.T) {
	canceled := make(chan struct{})
	var once sync.Once
	reached := make(chan struct{})
	h := newHook(t, func(w http.ResponseWriter, _ *webhook.Request) {})
	h.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body to its end lets net/http notice the platform
		// closing the connection, which cancels r.Context().
		_, _ = io.ReadAll(r.Body)
		close(reached)
		<-r.Context().Done()
		once.Do(func() { close(canceled) })
	})
	rounds, counted := countRounds()
	p := setup(t, h, counted)
	ctx, cancel := context.WithCancel(context.Background())
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},` + validMeta + `}}`
	req, _ := http.NewRequestWithContext(ctx, "POST", p.URL+"/t/acme/mcp", strings.NewReader(body))
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "echo")
	// The client leaves once the delivery is in the webhook's hands; the
	// webhook never answers, so only the platform passing the client's
	// departure on can end its request.
	go func() { <-reached; cancel() }()
	_, _ = http.DefaultClient.Do(req)
	testwait.Recv(t, canceled, "the webhook call to be cancelled after the client left")
	// Cancelled for the client's leaving, not ended by the tool's deadline.
	rd := testwait.Recv(t, rounds, "the round to be recorded")
	if rd.Webhook == nil || rd.Webhook.Outcome != "canceled" || rd.ResultType != "" {
		t.Fatalf("round %+v, webhook %+v: want the delivery canceled and no answer", rd, rd.Webhook)
	}
}

// sse reads the JSON messages of an event-stream body.
func sse(t *testing.T, body []byte) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(string(body), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("bad event %q", data)
			}
			out = append(out, m)
		}
	}
	return out
}

func TestWebhookProgressAndLogsAreRelayedOnlyWhenAskedFor(t *testing.T) {
	h := newHook(t, func(w http.ResponseWriter, req *webhook.Request) {
		if !req.Stream {
			replyText("plain")(w, req)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		io.WriteString(w, `{"type":"progress","progress":1,"total":2}`+"\n")
		io.WriteString(w, `{"type":"log","level":"warning","data":"careful"}`+"\n")
		io.WriteString(w, `{"type":"log","level":"debug","data":"noise"}`+"\n")
		io.WriteString(w, `{"type":"progress","progress":2,"total":2}`+"\n")
		io.WriteString(w, `{"type":"response","response":{"type":"complete","result":{"content":[{"type":"text","text":"done"}]}}}`+"\n")
	})
	p := setup(t, h)
	meta := platformtest.Meta(nil)
	meta["progressToken"] = "tok-1"
	meta["io.modelcontextprotocol/logLevel"] = "info"
	r := p.MCP(t, "acme", "tools/call", obj{"name": "echo", "arguments": obj{}, "_meta": meta})
	if ct := r.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	msgs := sse(t, r.Body)
	var kinds []string
	for _, m := range msgs {
		if method, ok := m["method"].(string); ok {
			kinds = append(kinds, method)
		} else {
			kinds = append(kinds, "result")
		}
	}
	want := "notifications/progress,notifications/message,notifications/progress,result"
	if strings.Join(kinds, ",") != want {
		t.Fatalf("stream %v, want %s", kinds, want)
	}
	if msgs[0]["params"].(map[string]any)["progressToken"] != "tok-1" {
		t.Fatalf("progress %v", msgs[0])
	}
	// Without a log level, no notifications/message; without a token, no progress.
	meta = platformtest.Meta(nil)
	meta["progressToken"] = 7
	r = p.MCP(t, "acme", "tools/call", obj{"name": "echo", "arguments": obj{}, "_meta": meta})
	for _, m := range sse(t, r.Body) {
		if m["method"] == "notifications/message" {
			t.Fatal("a log message was sent without a requested log level")
		}
	}
	r = p.MCP(t, "acme", "tools/call", obj{"name": "echo", "arguments": obj{}})
	if r.Header.Get("Content-Type") != "application/json" || toolText(t, platformtest.Result(t, r)) != "plain" {
		t.Fatalf("plain call: %s", r.Body)
	}
}

func TestListsPaginateWithOpaqueCursors(t *testing.T) {
	h := newHook(t, replyText("x"))
	p := setup(t, h)
	for i := 0; i < 120; i++ {
		p.Tool(t, "acme", echoTool(fmt.Sprintf("t%03d", i), h.URL))
	}
	var names []string
	params := obj{}
	for pages := 0; pages < 5; pages++ {
		res := platformtest.Result(t, p.MCP(t, "acme", "tools/list", params))
		for _, tl := range res["tools"].([]any) {
			names = append(names, tl.(map[string]any)["name"].(string))
		}
		next, _ := res["nextCursor"].(string)
		if next == "" {
			break
		}
		params = obj{"cursor": next}
	}
	if len(names) != 121 {
		t.Fatalf("listed %d tools across pages, want 121", len(names))
	}
	code, _, _ := platformtest.RPCError(t, p.MCP(t, "acme", "tools/list", obj{"cursor": "bogus"}))
	if code != -32602 {
		t.Fatalf("bad cursor: %d", code)
	}
}

func TestCatalogueChangesReachListenersOnAnotherReplica(t *testing.T) {
	db := platformtest.PostgresSchemaURL(t)
	a := platformtest.Start(t, db)
	b := platformtest.Start(t, db)
	h := newHook(t, replyText("x"))
	a.Tenant(t, "acme")
	a.Tool(t, "acme", echoTool("first", h.URL))

	body, _ := json.Marshal(obj{"jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen",
		"params": obj{"notifications": obj{"toolsListChanged": true}, "_meta": platformtest.Meta(nil)}})
	req, _ := http.NewRequest("POST", b.URL+"/t/acme/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan map[string]any, 8)
	go func() {
		buf := make([]byte, 4096)
		var acc string
		for {
			n, err := resp.Body.Read(buf)
			acc += string(buf[:n])
			for {
				i := strings.Index(acc, "\n\n")
				if i < 0 {
					break
				}
				for _, m := range sse(t, []byte(acc[:i+1])) {
					events <- m
				}
				acc = acc[i+2:]
			}
			if err != nil {
				close(events)
				return
			}
		}
	}()
	next := func() map[string]any {
		return testwait.Recv(t, events, "the next event")
	}
	ack := next()
	if ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first event %v", ack)
	}
	a.Tool(t, "acme", echoTool("second", h.URL)) // written through replica A
	ev := next()
	meta := ev["params"].(map[string]any)["_meta"].(map[string]any)
	if ev["method"] != "notifications/tools/list_changed" || meta["io.modelcontextprotocol/subscriptionId"] != "sub-1" {
		t.Fatalf("change event %v", ev)
	}
	res := platformtest.Result(t, b.MCP(t, "acme", "tools/list", nil))
	if n := len(res["tools"].([]any)); n != 2 {
		t.Fatalf("replica B lists %d tools after the change", n)
	}
}

// TestToolArgumentsAreValidatedUnlessTheSchemaAcceptsAnyObject: a
// tool's arguments that its input schema refuses never reach its
// webhook, and the answer names where they fail; a tool without
// arguments ({"type":"object"}, or with no properties) takes any object,
// as the validator would, without it.
func TestToolArgumentsAreValidatedUnlessTheSchemaAcceptsAnyObject(t *testing.T) {
	h := newHook(t, replyText("pong"))
	p := setup(t, h)
	for i, schema := range []obj{{"type": "object"}, {"type": "object", "properties": obj{}, "required": []string{}}} {
		name := fmt.Sprintf("noargs%d", i)
		h.setSecret(p.Tool(t, "acme", obj{"name": name, "description": "d", "inputSchema": schema,
			"handler": obj{"url": h.URL, "timeoutMs": 2000}}))
		for _, args := range []obj{{}, {"anything": []any{1, "two", nil}}, {"n": "not a number"}} {
			res := platformtest.Result(t, p.MCP(t, "acme", "tools/call", obj{"name": name, "arguments": args}))
			if res["isError"] == true || toolText(t, res) != "pong" {
				t.Fatalf("schema %v, arguments %v: %v", schema, args, res)
			}
		}
	}
	h.setSecret(p.Tool(t, "acme", obj{"name": "typed", "description": "d", "handler": obj{"url": h.URL, "timeoutMs": 2000},
		"inputSchema": obj{"type": "object", "properties": obj{"msg": obj{"type": "string"}, "n": obj{"type": "integer"}}}}))
	before := h.count()
	for args, where := range map[string]string{`{"n":"3"}`: "/n", `{"msg":7}`: "/msg", `{"n":1.5}`: "/n"} {
		var a obj
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			t.Fatal(err)
		}
		res := platformtest.Result(t, p.MCP(t, "acme", "tools/call", obj{"name": "typed", "arguments": a}))
		if text := toolText(t, res); res["isError"] != true || !strings.Contains(text, "Invalid arguments: "+where) {
			t.Errorf("arguments %s: %v, want an error naming %s", args, res, where)
		}
	}
	if n := h.count(); n != before {
		t.Fatalf("refused arguments reached the webhook: %d deliveries, want %d", n, before)
	}
}
