package endpoint

import (
	"net/http"
	"strings"
	"testing"
)

// BenchmarkParseRequest decodes and checks a typical tools/call request:
// the one-pass decoding, and the general one it falls back to.
func BenchmarkParseRequest(b *testing.B) {
	call := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tool0007","arguments":{"msg":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p1","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}`)
	// An answered retry: a sealed state of a typical size, the answer.
	retry := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"tool0007","arguments":{},"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":"v1.` +
		strings.Repeat("AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_", 20) + `","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1.0.0"}}}}`)
	h := http.Header{}
	h.Set("MCP-Protocol-Version", "2026-07-28")
	h.Set("Mcp-Method", "tools/call")
	h.Set("Mcp-Name", "tool0007")
	for _, c := range []struct {
		name  string
		parse func([]byte) (*request, *rpcError)
	}{{"onepass", parseRequest}, {"general", parseSlow}} {
		for _, body := range []struct {
			name string
			b    []byte
		}{{"call", call}, {"retry", retry}} {
			b.Run(c.name+"/"+body.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					q, e := c.parse(body.b)
					if e != nil {
						b.Fatal(e.Message)
					}
					if e := q.checkEnvelope(h); e != nil {
						b.Fatal(e.Message)
					}
				}
			})
		}
	}
}
