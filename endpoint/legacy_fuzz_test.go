package endpoint

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
)

// FuzzLegacyIntake feeds arbitrary bodies and header values through what
// the legacy path does to a request before any verification: the era
// decision, the target's decoding, an input request's params as a legacy
// client is sent them, and the reading of a leg's id and a session id.
// Whatever arrives, nothing panics, and a claimed 2026-07-28 header is
// never taken for the legacy era.
func FuzzLegacyIntake(f *testing.F) {
	seeds := []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"test://x","_meta":{"progressToken":"p"}}}`,
		`{"message":"m","requestedSchema":{"type":"object"},"mode":"form"}`,
		`{"mode":"url","message":"m","url":"https://x","elicitationId":7}`,
		`{"jsonrpc":"2.0","id":"opsmcp-0123456789abcdef0123456789abcdef","result":{}}`,
		`[`, `null`, `{"params":{"_meta":null}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s), "2025-11-25", "ls_0123456789abcdef0123456789abcdef.v1.AAAA")
	}
	f.Fuzz(func(t *testing.T, body []byte, version, sessionID string) {
		h := http.Header{}
		h.Set(mcp.HeaderProtocolVersion, version)
		if legacyBody(h, body) && version == mcp.Version {
			t.Fatalf("a 2026-07-28 header taken as legacy: %q", body)
		}
		if q, e := parseRequest(body); e == nil {
			for _, m := range []string{mcp.MethodToolsCall, mcp.MethodResourcesRead, mcp.MethodSubscribe} {
				q.method = m
				if _, e := q.readTarget(true); e != nil && e.Message == "" {
					t.Fatal("an empty error")
				}
			}
		}
		for _, m := range []string{mcp.MethodElicit, mcp.MethodCreateMessage} {
			params, eid := legParams(mrtr.InputRequest{Method: m, Params: body})
			if eid != "" && !json.Valid(params) {
				t.Fatalf("an elicitation id added to params that are not JSON: %q", params)
			}
		}
		var id string
		_ = json.Unmarshal(body, &id)
		_ = validLegID(id)
		_ = validSessionID(sessionID)
		_ = legacyResult(map[string]any{"resultType": "complete", "x": string(body)})
	})
}
