package endpoint_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/testkit/platformtest"
)

// legacySession initializes a 2025-11-25 session that may elicit forms.
func legacySession(client *http.Client, url string) (string, error) {
	body := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"bench","version":"1"}}}`
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" {
		return "", fmt.Errorf("initialize: HTTP %d", resp.StatusCode)
	}
	return resp.Header.Get("Mcp-Session-Id"), nil
}

func legacyPost(client *http.Client, url, session string, body []byte) (*http.Response, error) {
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	return client.Do(req)
}

var bridgedCall = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"confirm","arguments":{}}}`)

// tryBridgedFlow is the same two-round flow as tryFlow, bridged: one
// tools/call whose stream carries the elicitation, the answer posted
// (another request), then the result on the stream.
func tryBridgedFlow(client *http.Client, url, session string) error {
	resp, err := legacyPost(client, url, session, bridgedCall)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	next := func() (map[string]json.RawMessage, error) {
		for sc.Scan() {
			// An empty data line is the stream's priming event.
			if data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok && len(data) > 0 {
				var m map[string]json.RawMessage
				return m, json.Unmarshal(data, &m)
			}
		}
		return nil, fmt.Errorf("the stream ended: %v", sc.Err())
	}
	ask, err := next()
	if err != nil {
		return err
	}
	if string(ask["method"]) != `"elicitation/create"` {
		return fmt.Errorf("first event %v", ask)
	}
	answer := []byte(`{"jsonrpc":"2.0","id":` + string(ask["id"]) + `,"result":{"action":"accept","content":{"answer":"yes"}}}`)
	ar, err := legacyPost(client, url, session, answer)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, ar.Body)
	ar.Body.Close()
	if ar.StatusCode != http.StatusAccepted {
		return fmt.Errorf("answer: HTTP %d", ar.StatusCode)
	}
	res, err := next()
	if err != nil {
		return err
	}
	if !bytes.Contains(res["result"], []byte(`"content"`)) {
		return fmt.Errorf("flow did not complete: %v", res)
	}
	return nil
}

// BenchmarkFlowTwoRoundsBridgedAndStateless runs the same two-round flow
// (a form question, then the webhook) both ways on one platform,
// interleaved flow by flow (alternating which goes first) so both see
// the same machine: at 2026-07-28 (two requests, the state sealed into
// the first answer) and bridged for a 2025-11-25 session (one request
// whose stream carries the question, plus the posted answer; the state
// sealed and verified all the same, the session's record read once).
// It reports each side's time per flow.
func BenchmarkFlowTwoRoundsBridgedAndStateless(b *testing.B) {
	hook := benchHook(b)
	p := platformtest.Start(b, platformtest.SQLiteURL(b))
	p.Tenant(b, "acme")
	p.Tool(b, "acme", confirmTool(hook.URL))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	url := p.URL + "/t/acme/mcp"
	session, err := legacySession(client, url)
	if err != nil {
		b.Fatal(err)
	}
	stateless := func() error { return tryFlow(client, url) }
	bridged := func() error { return tryBridgedFlow(client, url, session) }
	for _, f := range []func() error{stateless, bridged} { // warm both paths
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	// Wall time, and the process's CPU time, spent during each side's
	// flows (the CPU includes what the process did meanwhile, such as the
	// flow record's writes, which alternating the sides shares out).
	var took, cpu [2]time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range 2 {
			side := (i + j) % 2
			start, cpu0 := time.Now(), platformtest.CPUTime()
			if err := []func() error{stateless, bridged}[side](); err != nil {
				b.Fatal(err)
			}
			took[side] += time.Since(start)
			cpu[side] += platformtest.CPUTime() - cpu0
		}
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(b.N) }
	b.ReportMetric(per(took[0]), "stateless-µs/flow")
	b.ReportMetric(per(took[1]), "bridged-µs/flow")
	b.ReportMetric(per(cpu[0]), "stateless-cpu-µs/flow")
	b.ReportMetric(per(cpu[1]), "bridged-cpu-µs/flow")
}
