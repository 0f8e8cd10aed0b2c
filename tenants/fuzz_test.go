package tenants

import (
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
