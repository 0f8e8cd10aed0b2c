package endpoint

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzParseRequest feeds arbitrary bodies and header values through the
// JSON-RPC parser and the envelope checks: whatever arrives, the answer is
// an error value or a parsed call, never a panic.
func FuzzParseRequest(f *testing.F) {
	seeds := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","arguments":{"n":1},"requestState":"v1.AAAA","inputResponses":{"k":{"action":"accept"}},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}},"progressToken":3}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"x"}`, `[]`, `{`, `"str"`, `{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":5,"_meta":{}}}`,
		`{"jsonrpc":"2.0","id":1e400,"method":"m","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":[]}}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s), "2026-07-28", "tools/call", "x")
	}
	f.Fuzz(func(t *testing.T, body []byte, version, method, name string) {
		r := httptest.NewRequest(http.MethodPost, "/t/acme/mcp", nil)
		r.Header.Set("MCP-Protocol-Version", version)
		r.Header.Set("Mcp-Method", method)
		r.Header.Set("Mcp-Name", name)
		r.Header.Set("Mcp-Param-N", name)
		q, e := parseRequest(body)
		if q == nil {
			t.Fatalf("no request value for %q", body)
		}
		if e != nil {
			if e.Code == 0 || e.Message == "" {
				t.Fatalf("empty error for %q", body)
			}
			return
		}
		if e := q.checkEnvelope(r.Header); e != nil && (e.Code == 0 || e.Message == "") {
			t.Fatalf("empty error for %q", body)
		}
		_, _ = parseResponses(q.p.InputResponses)
		_ = checkHeaderParams(r.Header, map[string]headerParam{"n": {header: "N", property: "n", typ: "integer"}}, q.p.Arguments)
	})
}

// FuzzParseRequestOnePass checks parseRequest's one-pass decoding against
// parseSlow, the envelope then the params with _meta into a map, as the
// platform decoded requests before: for any body and headers, the same
// answer, error or request, to the byte.
func FuzzParseRequestOnePass(f *testing.F) {
	for _, s := range onePassSeeds {
		f.Add([]byte(s), "2026-07-28", "tools/call", "x")
	}
	f.Fuzz(func(t *testing.T, body []byte, version, method, name string) {
		checkOnePass(t, body, version, method, name)
	})
}

// onePassSeeds are hostile bodies: duplicate and case-folded keys,
// escaped keys, params replaced by null, deep nesting, invalid UTF-8,
// huge numbers.
var onePassSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"n":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p","io.modelcontextprotocol/logLevel":"info","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","NAME":"y","Name":"z"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"a":1}},"params":{"name":"y"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"params":null}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"params":null,"PARAMS":{"uri":"u"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"a"},"_meta":{"progressToken":1},"_META":null,"_Meta":{"baggage":"b"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"IO.MODELCONTEXTPROTOCOL/PROTOCOLVERSION":"2026-07-28"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\u0061me":"x","_meta":{"io.modelcontextprotocol\/protocolVersion":"2026-07-28"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\u0078\n","inputRespon\u017fes":{},"inputResponſes":{}}}`,
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"\xff\xfe\",\"_meta\":{\"\xff\":1,\"io.modelcontextprotocol/logLevel\":\"\xffinfo\"}}}",
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[{"}":"]"}]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],"name":"x"}}`,
	`{"jsonrpc":"2.0","id":1e999999,"method":"tools/call","params":{"cursor":-1e999999,"name":123456789012345678901234567890}}`,
	`{"jsonrpc":"2.0","id":1,"method":5,"params":{"_meta":[]}}`,
	`{"params":{"_meta":5},"jsonrpc":"2.0","id":1,"method":"m"}`,
	`{"jsonrpc":"2.0","id":null,"method":"m","params":{"_meta":5}}`,
	`{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}`,
	`{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}`,
	`{"jsonrpc":"2.0","id":1,"result":{},"params":{}}`,
	` {"jsonrpc" : "2.0" , "id" : "a" , "method" : "m" , "params" : { "name" : "x" , "_meta" : { "progressToken" : -1 } } } `,
	// The envelope's own members, each spelling the walk must read as
	// encoding/json does or leave to it.
	`{"JSONRPC":"2.0","ID":7,"METHOD":"tools/call","PARAMS":{"name":"x"}}`,
	`{"jsonrpc":"2.0","jsonrpc":null,"id":1,"method":"m"}`,
	`{"jsonrpc":"2.0","id":1,"method":"m","method":null}`,
	`{"jsonrpc":"2\u002e0","id":1,"method":"tools\/call"}`,
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\xff\"}",
	`{"jsonrpc":"2.0","id":1,"method":"m","result":null}`,
	`{"jsonrpc":"2.0","id":1,"method":"m","ERROR":false}`,
	`{"jsonrpc":"2.0","id":1,"id":"b","id":{"x":1},"method":"m"}`,
	`{"jsonrpc":"2.0","id":[1],"method":"m"}`,
	`{"jsonrpc":"2.0","i\u0064":1,"method":"m"}`,
	`{"jsonrpc":"2.0","id":1,"method":"m","params":{}}x`,
	`{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"x",}}`,
	`{"jsonrpc":2.0,"id":1,"method":"m"}`,
	`{"jsonrpc":"2.0","id":1,"method":"m","params":true}`,
	`"tools/call"`, `5`, `null`, `{}`,
}

func checkOnePass(t *testing.T, body []byte, version, method, name string) {
	t.Helper()
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] == '[' {
		return
	}
	h := http.Header{}
	h.Set("MCP-Protocol-Version", version)
	h.Set("Mcp-Method", method)
	h.Set("Mcp-Name", name)
	q, e := parseRequest(body)
	want, we := parseSlow(trimmed)
	if (e == nil) != (we == nil) || e != nil && (e.Code != we.Code || e.Message != we.Message || e.status != we.status) {
		t.Fatalf("%q: one pass %+v, general %+v", body, e, we)
	}
	same := func(what string, a, b json.RawMessage) {
		if (a == nil) != (b == nil) || !bytes.Equal(a, b) {
			t.Fatalf("%q: %s %q, general %q", body, what, a, b)
		}
	}
	same("id", q.id, want.id)
	if q.method != want.method {
		t.Fatalf("%q: method %q, general %q", body, q.method, want.method)
	}
	p, w := q.p, want.p
	for _, f := range []struct {
		what string
		a, b json.RawMessage
	}{{"name", p.Name, w.Name}, {"uri", p.URI, w.URI}, {"arguments", p.Arguments, w.Arguments}, {"cursor", p.Cursor, w.Cursor},
		{"inputResponses", p.InputResponses, w.InputResponses}, {"requestState", p.RequestState, w.RequestState}, {"ref", p.Ref, w.Ref},
		{"argument", p.Argument, w.Argument}, {"context", p.Context, w.Context}, {"notifications", p.Notifications, w.Notifications},
		{"_meta version", p.Meta.protocolVersion, w.Meta.protocolVersion}, {"_meta caps", p.Meta.clientCapabilities, w.Meta.clientCapabilities},
		{"_meta info", p.Meta.clientInfo, w.Meta.clientInfo}, {"_meta token", p.Meta.progressToken, w.Meta.progressToken},
		{"_meta level", p.Meta.logLevel, w.Meta.logLevel}, {"traceparent", p.Meta.traceparent, w.Meta.traceparent},
		{"tracestate", p.Meta.tracestate, w.Meta.tracestate}, {"baggage", p.Meta.baggage, w.Meta.baggage},
		{"taskId", p.TaskID, w.TaskID}, {"task", p.Task, w.Task}} {
		same(f.what, f.a, f.b)
	}
	if p.Meta.present != w.Meta.present {
		t.Fatalf("%q: _meta present %v, general %v", body, p.Meta.present, w.Meta.present)
	}
	if e != nil {
		return
	}
	e, we = q.checkEnvelope(h), want.checkEnvelope(h)
	if (e == nil) != (we == nil) || e != nil && (e.Code != we.Code || e.Message != we.Message) {
		t.Fatalf("%q: envelope check %+v, general %+v", body, e, we)
	}
	if q.version != want.version || q.name != want.name || q.uri != want.uri || q.logLevel != want.logLevel || q.client != want.client ||
		q.taskID != want.taskID || q.v1Task != want.v1Task || q.v1TTL != want.v1TTL {
		t.Fatalf("%q: checked %+v, general %+v", body, q, want)
	}
	same("progressToken", q.progressToken, want.progressToken)
}

// TestParseRequestOnePassMatchesGeneral runs the fuzz target's seeds, and
// pins what the hostile ones decode to.
func TestParseRequestOnePassMatchesGeneral(t *testing.T) {
	for _, s := range onePassSeeds {
		checkOnePass(t, []byte(s), "2026-07-28", "tools/call", "x")
	}
	for body, want := range map[string]string{
		// The last params wins whole; the last name of any case wins.
		onePassSeeds[2]: `"z"`, onePassSeeds[3]: `"y"`,
	} {
		if q, e := parseRequest([]byte(body)); e != nil || string(q.p.Name) != want {
			t.Errorf("%s: name %s (%v), want %s", body, q.p.Name, e, want)
		}
	}
	q, _ := parseRequest([]byte(onePassSeeds[5]))
	if q.p.Name != nil || string(q.p.URI) != `"u"` {
		t.Errorf("params after a null params: name %s uri %s", q.p.Name, q.p.URI)
	}
	q, _ = parseRequest([]byte(onePassSeeds[6]))
	if !q.p.Meta.present || q.p.Meta.protocolVersion != nil || string(q.p.Meta.baggage) != `"b"` {
		t.Errorf("_meta after a null _meta: %+v", q.p.Meta)
	}
	q, _ = parseRequest([]byte(onePassSeeds[7]))
	if q.p.Meta.protocolVersion != nil {
		t.Error("a _meta key matched case-insensitively")
	}
}
