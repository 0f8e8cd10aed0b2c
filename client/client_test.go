package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsmcp/platform/client"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
)

type obj = map[string]any

// recorded is one request the fake server received.
type recorded struct {
	Method string
	ID     json.RawMessage
	Params map[string]json.RawMessage
	Header http.Header
	Body   []byte
}

func (r *recorded) meta(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.Params["_meta"], &m); err != nil {
		t.Fatalf("%s: _meta %s: %v", r.Method, r.Params["_meta"], err)
	}
	return m
}

// answer is what the fake server sends back.
type answer struct {
	status int
	ctype  string
	body   string
}

// fake is a scripted MCP server: handle decides each answer.
type fake struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []*recorded
	handle func(r *recorded) answer
}

func newFake(t *testing.T, handle func(r *recorded) answer) *fake {
	f := &fake{handle: handle}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var env struct {
			ID     json.RawMessage            `json:"id"`
			Method string                     `json:"method"`
			Params map[string]json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			http.Error(w, "bad json", 400)
			return
		}
		r := &recorded{Method: env.Method, ID: env.ID, Params: env.Params, Header: req.Header.Clone(), Body: body}
		f.mu.Lock()
		f.reqs = append(f.reqs, r)
		f.mu.Unlock()
		a := f.handle(r)
		if a.status == 0 {
			a.status = 200
		}
		if a.ctype == "" {
			a.ctype = "application/json"
		}
		w.Header().Set("Content-Type", a.ctype)
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) requests(method string) []*recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*recorded
	for _, r := range f.reqs {
		if method == "" || r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

func result(r *recorded, v any) answer {
	b, _ := json.Marshal(v)
	return answer{body: fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, r.ID, b)}
}

func rawResult(r *recorded, raw string) answer {
	return answer{body: fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, r.ID, raw)}
}

func rpcError(r *recorded, status, code int, msg string, data any) answer {
	b, _ := json.Marshal(obj{"code": code, "message": msg, "data": data})
	return answer{status: status, body: fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":%s}`, r.ID, b)}
}

var discover = obj{"resultType": "complete", "supportedVersions": []string{"2026-07-28"}, "capabilities": obj{"tools": obj{}},
	"ttlMs": 0, "cacheScope": "private", "_meta": obj{"io.modelcontextprotocol/serverInfo": obj{"name": "fake", "version": "1"}}}

func toolsList(tools ...obj) obj {
	return obj{"resultType": "complete", "tools": tools, "ttlMs": 0, "cacheScope": "private"}
}

func textResult(s string) obj {
	return obj{"resultType": "complete", "content": []obj{{"type": "text", "text": s}}}
}

// basic answers discover, an empty tools/list, and text for anything else.
func basic(r *recorded) answer {
	switch r.Method {
	case "server/discover":
		return result(r, discover)
	case "tools/list":
		return result(r, toolsList(obj{"name": "echo", "inputSchema": obj{"type": "object"}}))
	}
	return result(r, textResult("ok"))
}

func newClient(t *testing.T, url string, opts client.Options) *client.Client {
	t.Helper()
	c, err := client.New(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func acceptAll(_ context.Context, req *client.ElicitRequest) (*client.ElicitResult, error) {
	return &client.ElicitResult{Action: "accept", Content: obj{"ok": true}}, nil
}

func TestEveryRequestCarriesMetaAndTheStandardHeaders(t *testing.T) {
	f := newFake(t, basic)
	var tokens atomic.Int32
	c := newClient(t, f.URL+"/t/acme/mcp", client.Options{
		ClientInfo:  client.Implementation{Name: "tester", Version: "9"},
		TokenSource: client.TokenFunc(func(context.Context) (string, error) { return fmt.Sprintf("tok-%d", tokens.Add(1)), nil }),
		ElicitForm:  acceptAll,
	})
	ctx := context.Background()
	if _, err := c.CallTool(ctx, "echo", obj{"x": 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetPrompt(ctx, "brief", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadResource(ctx, "file:///path/to/file%20name.txt"); err != nil {
		t.Fatal(err)
	}
	got := f.requests("")
	var methods []string
	for _, r := range got {
		methods = append(methods, r.Method)
	}
	// The client discovers first, and lists the tools before calling one
	// it has not seen, to learn its x-mcp-header arguments.
	if want := "server/discover tools/list tools/call prompts/get resources/read"; strings.Join(methods, " ") != want {
		t.Fatalf("methods %v, want %s", methods, want)
	}
	names := map[string]string{"tools/call": "echo", "prompts/get": "brief", "resources/read": "file:///path/to/file%20name.txt"}
	seen := map[string]bool{}
	for i, r := range got {
		if seen[string(r.ID)] {
			t.Errorf("id %s reused", r.ID)
		}
		seen[string(r.ID)] = true
		h := r.Header
		if h.Get("Content-Type") != "application/json" || h.Get("Accept") != "application/json, text/event-stream" ||
			h.Get("MCP-Protocol-Version") != "2026-07-28" || h.Get("Mcp-Method") != r.Method || h.Get("Mcp-Name") != names[r.Method] {
			t.Errorf("%s: headers %v", r.Method, h)
		}
		if want := fmt.Sprintf("Bearer tok-%d", i+1); h.Get("Authorization") != want {
			t.Errorf("%s: Authorization %q, want %q (the token source is asked every request)", r.Method, h.Get("Authorization"), want)
		}
		m := r.meta(t)
		if string(m["io.modelcontextprotocol/protocolVersion"]) != `"2026-07-28"` ||
			string(m["io.modelcontextprotocol/clientCapabilities"]) != `{"elicitation":{"form":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}` ||
			string(m["io.modelcontextprotocol/clientInfo"]) != `{"name":"tester","version":"9"}` {
			t.Errorf("%s: _meta %v", r.Method, m)
		}
	}
}

func TestCapabilitiesAreDeclaredFromTheHandlersRegistered(t *testing.T) {
	sample := func(context.Context, *client.SamplingRequest) (*client.SamplingResult, error) { return nil, nil }
	cases := []struct {
		opts client.Options
		want string
	}{
		{client.Options{NoTasks: true}, `{}`},
		{client.Options{ElicitForm: acceptAll, NoTasks: true}, `{"elicitation":{"form":{}}}`},
		{client.Options{ElicitURL: acceptAll, NoTasks: true}, `{"elicitation":{"url":{}}}`},
		{client.Options{ElicitForm: acceptAll, ElicitURL: acceptAll, Sample: sample, Roots: client.StaticRoots(), NoTasks: true},
			`{"elicitation":{"form":{},"url":{}},"sampling":{},"roots":{}}`},
		// The Tasks extension is declared unless NoTasks.
		{client.Options{}, `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`},
		{client.Options{ElicitForm: acceptAll}, `{"elicitation":{"form":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}`},
	}
	for _, tc := range cases {
		f := newFake(t, basic)
		c := newClient(t, f.URL, tc.opts)
		if _, err := c.Discover(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := string(f.requests("server/discover")[0].meta(t)["io.modelcontextprotocol/clientCapabilities"]); got != tc.want {
			t.Errorf("capabilities %s, want %s", got, tc.want)
		}
	}
}

func TestDiscoverReprobesOnceWhenTheServerNamesASharedVersion(t *testing.T) {
	var first atomic.Bool
	f := newFake(t, func(r *recorded) answer {
		if !first.Swap(true) {
			// Like the request-metadata mock: the first request is refused
			// whatever it carries.
			return rpcError(r, 400, -32022, "Unsupported protocol version", obj{"supported": []string{"2026-07-28"}, "requested": "2026-07-28"})
		}
		return basic(r)
	})
	c := newClient(t, f.URL, client.Options{})
	d, err := c.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d.ServerInfo.Name != "fake" || c.ProtocolVersion() != "2026-07-28" {
		t.Fatalf("discover %+v", d)
	}
	if _, err := c.ListTools(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if n := len(f.requests("server/discover")); n != 2 {
		t.Fatalf("%d discover requests, want 2", n)
	}
	for _, r := range f.requests("") {
		if r.Header.Get("MCP-Protocol-Version") != "2026-07-28" {
			t.Fatalf("version header %q", r.Header.Get("MCP-Protocol-Version"))
		}
	}
}

func TestNoSharedVersionIsAClearErrorAndTheReprobeHappensOnlyOnce(t *testing.T) {
	f := newFake(t, func(r *recorded) answer {
		return rpcError(r, 400, -32022, "Unsupported protocol version", obj{"supported": []string{"2025-11-25", "2025-06-18"}, "requested": "2026-07-28"})
	})
	_, err := newClient(t, f.URL, client.Options{}).ListTools(context.Background(), "")
	var uv *client.UnsupportedVersionError
	if !errors.As(err, &uv) || !strings.Contains(err.Error(), "2025-11-25, 2025-06-18") || !strings.Contains(err.Error(), "2026-07-28") {
		t.Fatalf("err %v", err)
	}
	if n := len(f.requests("")); n != 1 {
		t.Fatalf("%d requests; no shared version means no re-probe", n)
	}

	// A server that keeps refusing a version it claims to support is
	// re-probed once, not forever.
	g := newFake(t, func(r *recorded) answer {
		return rpcError(r, 400, -32022, "Unsupported protocol version", obj{"supported": []string{"2026-07-28"}, "requested": "2026-07-28"})
	})
	_, err = newClient(t, g.URL, client.Options{}).Discover(context.Background())
	if !errors.As(err, &uv) || len(g.requests("")) != 2 {
		t.Fatalf("err %v after %d requests", err, len(g.requests("")))
	}

	// A discover result that lists no version in common fails too.
	h := newFake(t, func(r *recorded) answer {
		d := obj{"resultType": "complete", "supportedVersions": []string{"2099-01-01"}, "capabilities": obj{}}
		return result(r, d)
	})
	if _, err := newClient(t, h.URL, client.Options{}).Discover(context.Background()); !errors.As(err, &uv) {
		t.Fatalf("err %v", err)
	}
}

func TestAServerWithoutDiscoverIsUsedAsIsButALegacyServerIsAnError(t *testing.T) {
	f := newFake(t, func(r *recorded) answer {
		if r.Method == "server/discover" {
			return rpcError(r, 404, -32601, "Method not found", nil)
		}
		return basic(r)
	})
	if _, err := newClient(t, f.URL, client.Options{}).ListTools(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	g := newFake(t, func(r *recorded) answer {
		return answer{status: 400, ctype: "text/plain", body: "Bad Request: no session"}
	})
	_, err := newClient(t, g.URL, client.Options{}).ListTools(context.Background(), "")
	var he *client.HTTPError
	if !errors.As(err, &he) || he.StatusCode != 400 || !strings.Contains(err.Error(), "no session") {
		t.Fatalf("err %v", err)
	}
}

// customHeadersTool is the http-custom-headers scenario's tool.
func customHeadersTool() obj {
	p := func(typ, header string) obj {
		m := obj{"type": typ}
		if header != "" {
			m["x-mcp-header"] = header
		}
		return m
	}
	return obj{"name": "test_custom_headers", "inputSchema": obj{"type": "object", "properties": obj{
		"region": p("string", "Region"), "priority": p("integer", "Priority"), "verbose": p("boolean", "Verbose"),
		"debug": p("boolean", "Debug"), "empty_val": p("string", "EmptyVal"), "method_val": p("string", "Method"),
		"float_val": p("number", ""), "non_ascii_val": p("string", "NonAscii"), "whitespace_val": p("string", "Whitespace"),
		"leading_space_val": p("string", "LeadingSpace"), "trailing_space_val": p("string", "TrailingSpace"),
		"internal_space_val": p("string", "InternalSpace"), "control_char_val": p("string", "ControlChar"),
		"crlf_val": p("string", "CrLf"), "tab_val": p("string", "Tab"), "query": p("string", ""),
	}}}
}

func TestHeaderParamsAreMirroredAndEncodedAsTheSpecSays(t *testing.T) {
	f := newFake(t, func(r *recorded) answer {
		if r.Method == "tools/list" {
			return result(r, toolsList(customHeadersTool()))
		}
		return basic(r)
	})
	c := newClient(t, f.URL, client.Options{})
	args := json.RawMessage(`{"region":"us-west1","priority":42,"verbose":false,"debug":true,"empty_val":"","method_val":"test-method","float_val":3.14159,"non_ascii_val":"Hello, 世界","whitespace_val":" padded ","leading_space_val":" us-west1","trailing_space_val":"us-west1 ","internal_space_val":"us west 1","control_char_val":"line1\nline2","crlf_val":"line1\r\nline2","tab_val":"\tindented","query":"SELECT * FROM users"}`)
	if _, err := c.CallTool(context.Background(), "test_custom_headers", args); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallTool(context.Background(), "test_custom_headers", obj{"region": "us-east1", "priority": 1.0, "verbose": nil}); err != nil {
		t.Fatal(err)
	}
	calls := f.requests("tools/call")
	want := map[string]string{
		"Region": "us-west1", "Priority": "42", "Verbose": "false", "Debug": "true", "Emptyval": "",
		"Method": "test-method", "Nonascii": "=?base64?SGVsbG8sIOS4lueVjA==?=", "Whitespace": "=?base64?IHBhZGRlZCA=?=",
		"Leadingspace": "=?base64?IHVzLXdlc3Qx?=", "Trailingspace": "=?base64?dXMtd2VzdDEg?=", "Internalspace": "us west 1",
		"Controlchar": "=?base64?bGluZTEKbGluZTI=?=", "Crlf": "=?base64?bGluZTENCmxpbmUy?=", "Tab": "=?base64?CWluZGVudGVk?=",
	}
	got := map[string]string{}
	for k, vs := range calls[0].Header {
		if name, ok := strings.CutPrefix(k, "Mcp-Param-"); ok {
			got[name] = vs[0]
			if len(vs) != 1 {
				t.Errorf("%s sent %d times", k, len(vs))
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Mcp-Param headers\n got %v\nwant %v", got, want)
	}
	h := calls[1].Header
	if h.Get("Mcp-Param-Region") != "us-east1" || h.Get("Mcp-Param-Priority") != "1" || h.Values("Mcp-Param-Verbose") != nil {
		t.Fatalf("null call headers %v", h)
	}
}

func TestEncodeHeaderValue(t *testing.T) {
	for in, want := range map[string]string{
		"plain": "plain", "": "", "a b": "a b", " a": "=?base64?IGE=?=", "é": "=?base64?w6k=?=",
		"=?base64?abc?=": "=?base64?PT9iYXNlNjQ/YWJjPz0=?=", "x\x7f": "=?base64?eH8=?=",
	} {
		if got := mcp.EncodeHeaderValue(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func TestToolsWithInvalidHeaderAnnotationsAreDroppedAndNeverCalled(t *testing.T) {
	prop := func(typ string, header any) obj { return obj{"type": typ, "x-mcp-header": header} }
	schema := func(props obj) obj { return obj{"type": "object", "properties": props} }
	tools := []obj{
		{"name": "valid_tool", "inputSchema": obj{"type": "object", "properties": obj{"region": prop("string", "Region")}, "required": []string{"region"}}},
		{"name": "invalid_empty_header", "inputSchema": schema(obj{"a": prop("string", "")})},
		{"name": "invalid_object_header", "inputSchema": schema(obj{"a": prop("object", "A")})},
		{"name": "invalid_array_header", "inputSchema": schema(obj{"a": prop("array", "A")})},
		{"name": "invalid_null_header", "inputSchema": schema(obj{"a": prop("null", "A")})},
		{"name": "invalid_number_header", "inputSchema": schema(obj{"a": prop("number", "A")})},
		{"name": "invalid_duplicate_same_case", "inputSchema": schema(obj{"a": prop("string", "Region"), "b": prop("string", "Region")})},
		{"name": "invalid_duplicate_diff_case", "inputSchema": schema(obj{"a": prop("string", "MyField"), "b": prop("string", "myfield")})},
		{"name": "invalid_space_in_name", "inputSchema": schema(obj{"a": prop("string", "My Region")})},
		{"name": "invalid_colon_in_name", "inputSchema": schema(obj{"a": prop("string", "Region:Primary")})},
		{"name": "invalid_non_ascii_name", "inputSchema": schema(obj{"a": prop("string", "Région")})},
		{"name": "invalid_control_char_name", "inputSchema": schema(obj{"a": prop("string", "Region\t1")})},
		{"name": "invalid_not_a_string", "inputSchema": schema(obj{"a": prop("string", 7)})},
		{"name": "invalid_under_items", "inputSchema": schema(obj{"a": obj{"type": "array", "items": prop("string", "Item")}})},
		{"name": "valid_nested", "inputSchema": schema(obj{"outer": obj{"type": "object", "properties": obj{"inner": prop("integer", "Inner")}}})},
	}
	f := newFake(t, func(r *recorded) answer {
		if r.Method == "tools/list" {
			return result(r, toolsList(tools...))
		}
		return basic(r)
	})
	c := newClient(t, f.URL, client.Options{})
	res, err := c.ListTools(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, tl := range res.Tools {
		kept = append(kept, tl.Name)
	}
	if strings.Join(kept, ",") != "valid_tool,valid_nested" || len(res.Dropped) != 13 {
		t.Fatalf("kept %v, dropped %v", kept, res.Dropped)
	}
	for _, d := range res.Dropped {
		if !strings.HasPrefix(d.Name, "invalid_") || d.Reason == "" {
			t.Errorf("dropped %+v", d)
		}
	}
	if got := c.DroppedTools(); len(got) != 13 || got[0].Name != "invalid_array_header" {
		t.Fatalf("DroppedTools %v", got)
	}
	_, err = c.CallTool(context.Background(), "invalid_space_in_name", obj{"a": "x"})
	var ite *client.InvalidToolError
	if !errors.As(err, &ite) || ite.Name != "invalid_space_in_name" || !strings.Contains(err.Error(), "My Region") {
		t.Fatalf("err %v", err)
	}
	if _, err := c.CallTool(context.Background(), "valid_nested", obj{"outer": obj{"inner": 5}}); err != nil {
		t.Fatal(err)
	}
	calls := f.requests("tools/call")
	if len(calls) != 1 || calls[0].Header.Get("Mcp-Param-Inner") != "5" {
		t.Fatalf("calls %d, headers %v", len(calls), calls[0].Header)
	}
}

func TestSchemaRefsAreNeverDereferencedOverTheNetwork(t *testing.T) {
	var canary atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/canary/", func(w http.ResponseWriter, _ *http.Request) { canary.Add(1); io.WriteString(w, `{"type":"object"}`) })
	var srv *httptest.Server
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, req *http.Request) {
		var env struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(req.Body).Decode(&env)
		var res any = textResult("ok")
		switch env.Method {
		case "server/discover":
			res = discover
		case "tools/list":
			res = obj{"tools": []obj{{"name": "lookup_user", "inputSchema": obj{
				"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
				"$defs":      obj{"userId": obj{"type": "string", "pattern": "^[a-z0-9-]+$"}},
				"properties": obj{"id": obj{"$ref": "#/$defs/userId"}, "profile": obj{"$ref": srv.URL + "/canary/profile-schema.json"}},
				"required":   []string{"id"}}}}}
		}
		b, _ := json.Marshal(res)
		// Answered as an event stream, as the SDK-based mock does.
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n\n", env.ID, b)
	})
	srv = httptest.NewServer(mux)
	defer srv.Close()
	c := newClient(t, srv.URL+"/mcp", client.Options{})
	tools, err := c.AllTools(context.Background())
	if err != nil || len(tools) != 1 {
		t.Fatalf("tools %v, %v", tools, err)
	}
	if _, err := c.CallTool(context.Background(), "lookup_user", obj{"id": "ada"}); err != nil {
		t.Fatal(err)
	}
	if canary.Load() != 0 {
		t.Fatal("the client fetched a $ref")
	}
}

func TestEventStreamsYieldTheResponseWithTheRequestsIDAndDeliverNotifications(t *testing.T) {
	f := newFake(t, func(r *recorded) answer {
		if r.Method != "tools/call" {
			return basic(r)
		}
		var meta map[string]json.RawMessage
		_ = json.Unmarshal(r.Params["_meta"], &meta)
		tok := string(meta["progressToken"])
		var b strings.Builder
		b.WriteString(": keep-alive\n\n")
		fmt.Fprintf(&b, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":%s,\"progress\":1,\"total\":2}}\n\n", tok)
		b.WriteString("event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\r\ndata: \"params\":{\"level\":\"warning\",\"data\":\"careful\"}}\r\n\r\n")
		b.WriteString("data: {\"jsonrpc\":\"2.0\",\"id\":999999,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"not mine\"}]}}\n\n")
		fmt.Fprintf(&b, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":%s,\"progress\":2,\"total\":2}}\n\n", tok)
		fmt.Fprintf(&b, "id: 7\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"resultType\":\"complete\",\"content\":[{\"type\":\"text\",\"text\":\"mine\"}]}}\n\n", r.ID)
		b.WriteString("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"late\",\"progress\":3}}\n\n")
		return answer{ctype: "text/event-stream", body: b.String()}
	})
	var progress []float64
	var logs []string
	c := newClient(t, f.URL, client.Options{
		OnProgress: func(p client.Progress) { progress = append(progress, p.Progress) },
		LogLevel:   "info",
		OnLog:      func(l client.LogMessage) { logs = append(logs, l.Level+":"+string(l.Data)) },
	})
	res, err := c.CallTool(context.Background(), "echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Content[0].Text != "mine" {
		t.Fatalf("result %s", res.Raw)
	}
	if !reflect.DeepEqual(progress, []float64{1, 2}) || !reflect.DeepEqual(logs, []string{`warning:"careful"`}) {
		t.Fatalf("progress %v, logs %v", progress, logs)
	}
	m := f.requests("tools/call")[0].meta(t)
	if string(m["io.modelcontextprotocol/logLevel"]) != `"info"` || len(m["progressToken"]) == 0 {
		t.Fatalf("_meta %v", m)
	}

	// A stream that ends without the response is an error.
	g := newFake(t, func(r *recorded) answer {
		if r.Method == "server/discover" {
			return basic(r)
		}
		return answer{ctype: "text/event-stream", body: "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n"}
	})
	_, err = newClient(t, g.URL, client.Options{}).ListTools(context.Background(), "")
	var pe *client.ProtocolError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "ended before the response") {
		t.Fatalf("err %v", err)
	}
}

func TestJSONRPCAndHTTPErrorsAreTyped(t *testing.T) {
	f := newFake(t, func(r *recorded) answer {
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(r.Body, &struct {
			Params any `json:"params"`
		}{&p})
		switch {
		case r.Method == "server/discover" || r.Method == "tools/list":
			return basic(r)
		case p.Name == "cap":
			return rpcError(r, 400, -32021, "Missing required client capability", obj{"requiredCapabilities": obj{"sampling": obj{}, "roots": obj{}}})
		case p.Name == "auth":
			return answer{status: 401, ctype: "text/plain", body: "no"}
		}
		return rpcError(r, 400, -32602, "Unknown tool: nope", obj{"name": "nope"})
	})
	c := newClient(t, f.URL, client.Options{})
	_, err := c.GetPrompt(context.Background(), "nope", nil)
	var re *client.RPCError
	if !errors.As(err, &re) || re.Code != -32602 || re.Message != "Unknown tool: nope" || string(re.Data) != `{"name":"nope"}` || re.HTTPStatus != 400 {
		t.Fatalf("err %#v", err)
	}
	if !client.IsCode(err, mcp.CodeInvalidParams) {
		t.Fatal("IsCode")
	}
	_, err = c.GetPrompt(context.Background(), "cap", nil)
	if !errors.As(err, &re) || !reflect.DeepEqual(re.RequiredCapabilities(), []string{"roots", "sampling"}) || !strings.Contains(err.Error(), "roots, sampling") {
		t.Fatalf("err %v", err)
	}
	_, err = c.GetPrompt(context.Background(), "auth", nil)
	var he *client.HTTPError
	if !errors.As(err, &he) || he.StatusCode != 401 {
		t.Fatalf("err %v", err)
	}
}

// mrtrServer answers tools/call named "flow" with rounds of input from
// rounds, in order (counted per method), then a complete result.
func mrtrServer(t *testing.T, rounds ...string) *fake {
	var mu sync.Mutex
	n := map[string]int{}
	return newFake(t, func(r *recorded) answer {
		switch r.Method {
		case "tools/call", "prompts/get", "resources/read":
			mu.Lock()
			i := n[r.Method]
			n[r.Method]++
			mu.Unlock()
			if i < len(rounds) {
				return rawResult(r, rounds[i])
			}
			switch r.Method {
			case "prompts/get":
				return result(r, obj{"resultType": "complete", "messages": []obj{{"role": "user", "content": obj{"type": "text", "text": "p"}}}})
			case "resources/read":
				return result(r, obj{"resultType": "complete", "contents": []obj{{"uri": "x://1", "text": "r"}}, "ttlMs": 0, "cacheScope": "private"})
			}
			return result(r, textResult("done"))
		case "tools/list":
			return result(r, toolsList(obj{"name": "flow", "inputSchema": obj{"type": "object",
				"properties": obj{"region": obj{"type": "string", "x-mcp-header": "Region"}}}}))
		}
		return basic(r)
	})
}

func TestRetriesHaveNewIDsTheSameParamsAndEchoTheStateByteForByte(t *testing.T) {
	const state = `"{\"nonce\":\"a\u00e9<b>&\"}\/x"`
	f := mrtrServer(t,
		`{"resultType":"input_required","inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"Sure?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}},"requestState":`+state+`}`,
		`{"resultType":"input_required","inputRequests":{"again":{"method":"elicitation/create","params":{"message":"Really?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}},"requestState":"s2"}`,
	)
	c := newClient(t, f.URL, client.Options{ElicitForm: acceptAll})
	res, err := c.CallTool(context.Background(), "flow", obj{"region": "eu <1>"}, client.WithMeta("trace", "t-1"))
	if err != nil || res.Content[0].Text != "done" {
		t.Fatalf("res %v, %v", res, err)
	}
	calls := f.requests("tools/call")
	if len(calls) != 3 {
		t.Fatalf("%d legs", len(calls))
	}
	ids := map[string]bool{}
	for i, r := range calls {
		ids[string(r.ID)] = true
		if string(r.Params["name"]) != `"flow"` || string(r.Params["arguments"]) != `{"region":"eu <1>"}` ||
			string(r.Params["_meta"]) != string(calls[0].Params["_meta"]) || r.Header.Get("Mcp-Param-Region") != "eu <1>" ||
			r.Header.Get("Mcp-Name") != "flow" {
			t.Fatalf("leg %d differs from the first: %s %v", i, r.Body, r.Header)
		}
	}
	if len(ids) != 3 {
		t.Fatalf("ids reused: %v", ids)
	}
	if _, ok := calls[0].Params["requestState"]; ok {
		t.Fatal("the first leg carries requestState")
	}
	if got := string(calls[1].Params["requestState"]); got != state {
		t.Fatalf("state went back as %s, want %s", got, state)
	}
	if !bytes.Contains(calls[1].Body, []byte(`"requestState":`+state)) {
		t.Fatalf("the wire bytes of the state changed: %s", calls[1].Body)
	}
	if string(calls[1].Params["inputResponses"]) != `{"confirm":{"action":"accept","content":{"ok":true}}}` {
		t.Fatalf("answers %s", calls[1].Params["inputResponses"])
	}
	if string(calls[2].Params["requestState"]) != `"s2"` {
		t.Fatalf("round 2 state %s", calls[2].Params["requestState"])
	}
}

func TestARetryOmitsRequestStateWhenTheServerSentNone(t *testing.T) {
	f := mrtrServer(t, `{"resultType":"input_required","inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"Sure?","requestedSchema":{"type":"object","properties":{}}}}}}`)
	c := newClient(t, f.URL, client.Options{ElicitForm: acceptAll})
	if _, err := c.CallTool(context.Background(), "flow", obj{}); err != nil {
		t.Fatal(err)
	}
	retry := f.requests("tools/call")[1]
	if _, ok := retry.Params["requestState"]; ok {
		t.Fatalf("retry carries a requestState key: %s", retry.Body)
	}
	if retry.Params["inputResponses"] == nil {
		t.Fatal("retry carries no answers")
	}
}

func TestAStateOnlyRoundRetriesWithoutAnswersAfterTheBackoff(t *testing.T) {
	f := mrtrServer(t, `{"resultType":"input_required","requestState":"busy"}`, `{"resultType":"input_required","requestState":"busy"}`)
	var waits []time.Duration
	c := newClient(t, f.URL, client.Options{Observer: func(r mrtr.Round) {
		if r.Phase == mrtr.PhaseAnswered {
			waits = append(waits, r.Wait)
		}
	}})
	if _, err := c.CallTool(context.Background(), "flow", obj{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.requests("tools/call")[1:] {
		if _, ok := r.Params["inputResponses"]; ok || string(r.Params["requestState"]) != `"busy"` {
			t.Fatalf("state-only retry %s", r.Body)
		}
	}
	if !reflect.DeepEqual(waits, []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}) {
		t.Fatalf("waits %v", waits)
	}
}

func TestEveryKindOfInputIsAnsweredThroughItsHandler(t *testing.T) {
	f := mrtrServer(t, `{"resultType":"input_required","requestState":"s","inputRequests":{
		"form":{"method":"elicitation/create","params":{"message":"Name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}},
		"login":{"method":"elicitation/create","params":{"mode":"url","message":"Log in","url":"https://idp.example/login"}},
		"model":{"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"Capital of France?"}}],"maxTokens":10}},
		"roots":{"method":"roots/list"},
		"nope":{"method":"elicitation/create","params":{"message":"Skip?","requestedSchema":{"type":"object","properties":{}}}}}}`)
	var keys sync.Map
	c := newClient(t, f.URL, client.Options{
		ElicitForm: func(_ context.Context, req *client.ElicitRequest) (*client.ElicitResult, error) {
			keys.Store(req.Key, req.Mode)
			if req.Key == "nope" {
				return &client.ElicitResult{Action: "decline", Content: obj{"ignored": true}}, nil
			}
			return &client.ElicitResult{Action: "accept", Content: obj{"name": "Ada"}}, nil
		},
		ElicitURL: func(_ context.Context, req *client.ElicitRequest) (*client.ElicitResult, error) {
			keys.Store(req.Key, req.Mode+" "+req.URL)
			return &client.ElicitResult{Action: "accept", Content: obj{"not": "sent"}}, nil
		},
		Sample: func(_ context.Context, req *client.SamplingRequest) (*client.SamplingResult, error) {
			keys.Store(req.Key, req.Messages[0].Content[0].Text)
			return &client.SamplingResult{Content: client.TextContent("Paris"), Model: "human"}, nil
		},
		Roots: client.StaticRoots(client.Root{URI: "file:///home/u/proj", Name: "proj"}),
	})
	if _, err := c.CallTool(context.Background(), "flow", obj{}); err != nil {
		t.Fatal(err)
	}
	var answers map[string]json.RawMessage
	_ = json.Unmarshal(f.requests("tools/call")[1].Params["inputResponses"], &answers)
	want := map[string]string{
		"form":  `{"action":"accept","content":{"name":"Ada"}}`,
		"login": `{"action":"accept"}`,
		"model": `{"role":"assistant","content":{"type":"text","text":"Paris"},"model":"human"}`,
		"roots": `{"roots":[{"uri":"file:///home/u/proj","name":"proj"}]}`,
		"nope":  `{"action":"decline"}`,
	}
	for k, w := range want {
		if string(answers[k]) != w {
			t.Errorf("%s: %s, want %s", k, answers[k], w)
		}
	}
	if v, _ := keys.Load("login"); v != "url https://idp.example/login" {
		t.Errorf("url handler saw %v", v)
	}
	if v, _ := keys.Load("model"); v != "Capital of France?" {
		t.Errorf("sampling handler saw %v", v)
	}
}

func TestAQuestionWithoutAHandlerFailsTheCallAndIsNeverAnswered(t *testing.T) {
	f := mrtrServer(t, `{"resultType":"input_required","requestState":"s","inputRequests":{"model":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}},"form":{"method":"elicitation/create","params":{"message":"x","requestedSchema":{"type":"object","properties":{}}}}}}`)
	c := newClient(t, f.URL, client.Options{ElicitForm: acceptAll})
	_, err := c.CallTool(context.Background(), "flow", obj{})
	var ue *client.UnsupportedInputError
	var de *mrtr.DispatchError
	if !errors.As(err, &ue) || ue.Method != "sampling/createMessage" || !errors.As(err, &de) || de.Key != "model" {
		t.Fatalf("err %v", err)
	}
	if n := len(f.requests("tools/call")); n != 1 {
		t.Fatalf("%d legs: a failed round must not be sent", n)
	}
}

func TestManualModeHandsBackTheQuestionsAndASeedResumesTheFlowElsewhere(t *testing.T) {
	f := mrtrServer(t, `{"resultType":"input_required","requestState":"tok-1","inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"Sure?","requestedSchema":{"type":"object","properties":{}}}}}}`)
	c := newClient(t, f.URL, client.Options{})
	res, err := c.CallTool(context.Background(), "flow", obj{"region": "x"}, client.Manual())
	if err != nil {
		t.Fatal(err)
	}
	p := res.InputRequired
	if p == nil || string(p.RequestState) != `"tok-1"` || p.InputRequests["confirm"].Method != "elicitation/create" {
		t.Fatalf("manual result %+v", res)
	}
	// Save the flow as JSON, as a process would before exiting…
	saved, _ := json.Marshal(p.Seed(map[string]json.RawMessage{"confirm": json.RawMessage(`{"action":"accept","content":{}}`)}))
	// …and resume it from another client.
	var seed mrtr.Seed
	if err := json.Unmarshal(saved, &seed); err != nil {
		t.Fatal(err)
	}
	other := newClient(t, f.URL, client.Options{})
	res, err = other.CallTool(context.Background(), "flow", obj{"region": "x"}, client.WithSeed(seed))
	if err != nil || res.Content[0].Text != "done" || res.InputRequired != nil {
		t.Fatalf("resumed %v, %v", res, err)
	}
	legs := f.requests("tools/call")
	if string(legs[1].Params["requestState"]) != `"tok-1"` || string(legs[1].Params["inputResponses"]) != `{"confirm":{"action":"accept","content":{}}}` {
		t.Fatalf("seeded leg %s", legs[1].Body)
	}
}

func TestPromptsAndResourcesRunRoundsToo(t *testing.T) {
	ask := `{"resultType":"input_required","requestState":"s","inputRequests":{"c":{"method":"elicitation/create","params":{"message":"x","requestedSchema":{"type":"object","properties":{}}}}}}`
	f := mrtrServer(t, ask)
	c := newClient(t, f.URL, client.Options{ElicitForm: acceptAll})
	pr, err := c.GetPrompt(context.Background(), "brief", map[string]string{"a": "1"})
	if err != nil || pr.Messages[0].Content.Text != "p" {
		t.Fatalf("prompt %v %v", pr, err)
	}
	rr, err := c.ReadResource(context.Background(), "x://1")
	if err != nil || rr.Contents[0].Text != "r" || rr.TTLMs == nil {
		t.Fatalf("resource %v %v", rr, err)
	}
	for _, m := range []string{"prompts/get", "resources/read"} {
		legs := f.requests(m)
		if len(legs) != 2 || string(legs[1].Params["requestState"]) != `"s"` || string(legs[1].Params["uri"]) != string(legs[0].Params["uri"]) ||
			string(legs[1].Params["arguments"]) != string(legs[0].Params["arguments"]) {
			t.Fatalf("%s legs %d", m, len(legs))
		}
	}
}

func TestTheClientsRoundBoundAppliesToEveryCall(t *testing.T) {
	var rounds []string
	for range 5 {
		rounds = append(rounds, `{"resultType":"input_required","requestState":"s","inputRequests":{"c":{"method":"elicitation/create","params":{"message":"x","requestedSchema":{"type":"object","properties":{}}}}}}`)
	}
	f := mrtrServer(t, rounds...)
	c := newClient(t, f.URL, client.Options{ElicitForm: acceptAll, MaxRounds: 2})
	_, err := c.CallTool(context.Background(), "flow", obj{})
	var rex *mrtr.RoundsExceededError
	if !errors.As(err, &rex) || rex.MaxRounds != 2 || len(f.requests("tools/call")) != 3 {
		t.Fatalf("err %v after %d legs", err, len(f.requests("tools/call")))
	}
}

func TestListsFollowCursorsAndRefuseALoop(t *testing.T) {
	f := newFake(t, func(r *recorded) answer {
		var cursor string
		_ = json.Unmarshal(r.Params["cursor"], &cursor)
		switch r.Method {
		case "prompts/list":
			next := map[string]string{"": "p2", "p2": "p3", "p3": ""}[cursor]
			return result(r, obj{"resultType": "complete", "prompts": []obj{{"name": "p-" + cursor}}, "nextCursor": next, "ttlMs": 0, "cacheScope": "private"})
		case "resources/list":
			return result(r, obj{"resultType": "complete", "resources": []obj{}, "nextCursor": "same"})
		}
		return basic(r)
	})
	c := newClient(t, f.URL, client.Options{})
	ps, err := c.AllPrompts(context.Background())
	if err != nil || len(ps) != 3 {
		t.Fatalf("prompts %v %v", ps, err)
	}
	if _, err := c.AllResources(context.Background()); err == nil || !strings.Contains(err.Error(), "repeats the cursor") {
		t.Fatalf("err %v", err)
	}
}

func TestAToolTheClientHasNotSeenIsListedFirstAndAServerThatWillNotListIsStillCalled(t *testing.T) {
	var listed atomic.Bool
	f := newFake(t, func(r *recorded) answer {
		if r.Method == "tools/list" {
			if !listed.Swap(true) {
				return result(r, toolsList())
			}
			return result(r, toolsList(obj{"name": "late", "inputSchema": obj{"type": "object", "properties": obj{"r": obj{"type": "string", "x-mcp-header": "R"}}}}))
		}
		return basic(r)
	})
	c := newClient(t, f.URL, client.Options{})
	// The first listing does not name "late": it is called without headers.
	if _, err := c.CallTool(context.Background(), "late", obj{"r": "x"}); err != nil {
		t.Fatal(err)
	}
	// Once the server lists it, the client learns its header.
	if _, err := c.CallTool(context.Background(), "late", obj{"r": "x"}); err != nil {
		t.Fatal(err)
	}
	calls := f.requests("tools/call")
	if calls[0].Header.Get("Mcp-Param-R") != "" || calls[1].Header.Get("Mcp-Param-R") != "x" {
		t.Fatalf("headers %v / %v", calls[0].Header, calls[1].Header)
	}

	g := newFake(t, func(r *recorded) answer {
		if r.Method == "tools/list" {
			return rpcError(r, 403, -32600, "listing is not allowed", nil)
		}
		return basic(r)
	})
	if _, err := newClient(t, g.URL, client.Options{}).CallTool(context.Background(), "echo", nil); err != nil {
		t.Fatalf("a server that refuses to list must still be callable: %v", err)
	}
}
