package endpoint

import (
	"net/http"
	"testing"
)

// BenchmarkParseRequest decodes and checks a typical tools/call request:
// the one-pass decoding, and the general one it falls back to.
func BenchmarkParseRequest(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tool0007","arguments":{"msg":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p1","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}`)
	h := http.Header{}
	h.Set("MCP-Protocol-Version", "2026-07-28")
	h.Set("Mcp-Method", "tools/call")
	h.Set("Mcp-Name", "tool0007")
	for _, c := range []struct {
		name  string
		parse func([]byte) (*request, *rpcError)
	}{{"onepass", parseRequest}, {"general", parseSlow}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				q, e := c.parse(body)
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
