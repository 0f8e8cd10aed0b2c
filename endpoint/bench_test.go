package endpoint_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/opsmcp/platform/testkit/platformtest"
)

// benchHook answers every delivery with a fixed result, without
// verifying, so the figures measure the platform.
func benchHook(b *testing.B) *httptest.Server {
	body := []byte(`{"type":"complete","result":{"content":[{"type":"text","text":"ok"}]}}`)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	b.Cleanup(s.Close)
	return s
}

func post(b *testing.B, client *http.Client, url, name string, body []byte) map[string]any {
	m, err := tryPost(client, url, name, body)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// tryPost is one tools/call round over HTTP; an error unless it answers
// 200 with a JSON body. Safe off the benchmark's goroutine.
func tryPost(client *http.Client, url, name string, body []byte) (map[string]any, error) {
	return postMCP(client, url, "tools/call", name, body)
}

// postMCP is one 2026-07-28 request of method, naming name, over HTTP.
func postMCP(client *http.Client, url, method, name string, body []byte) (map[string]any, error) {
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
		return nil, fmt.Errorf("HTTP %d %v", resp.StatusCode, err)
	}
	return m, nil
}

// BenchmarkToolsCallRound is one tools/call round through the full HTTP
// stack (client, platform, webhook, all in process), for a small and a
// large catalogue: lookups are O(1), so the two cost the same.
func BenchmarkToolsCallRound(b *testing.B) {
	for _, size := range []int{10, 1000} {
		b.Run(fmt.Sprintf("catalogue=%d", size), func(b *testing.B) {
			hook := benchHook(b)
			p := platformtest.Start(b, platformtest.SQLiteURL(b))
			p.Tenant(b, "acme")
			for i := 0; i < size; i++ {
				p.Tool(b, "acme", echoTool(fmt.Sprintf("tool%04d", i), hook.URL))
			}
			body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tool0007","arguments":{"msg":"hi"},` + validMeta + `}}`)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			url := p.URL + "/t/acme/mcp"
			post(b, client, url, "tool0007", body) // warm the catalogue cache
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				post(b, client, url, "tool0007", body)
			}
		})
	}
}

// BenchmarkFlowTwoRounds is a whole two-round flow over HTTP: the first
// call gets an InputRequiredResult with sealed state, the retry answers
// it, the webhook is called once, and the result comes back.
func BenchmarkFlowTwoRounds(b *testing.B) {
	hook := benchHook(b)
	p := platformtest.Start(b, platformtest.SQLiteURL(b))
	p.Tenant(b, "acme")
	p.Tool(b, "acme", confirmTool(hook.URL))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	url := p.URL + "/t/acme/mcp"
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := tryFlow(client, url); err != nil {
			b.Fatal(err)
		}
	}
}

// confirmTool asks one form question before its webhook is called.
func confirmTool(hook string) obj {
	return obj{"name": "confirm", "description": "x", "inputSchema": obj{"type": "object"},
		"handler": obj{"url": hook}, "inputs": []obj{formInput("ok", "Proceed?", "answer")}}
}
