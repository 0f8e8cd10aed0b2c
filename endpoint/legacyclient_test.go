package endpoint_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/opsmcp/platform/testkit/platformtest"
)

// legacyClient is a minimal initialization-era (2025-11-25) client
// speaking the wire directly, so the tests can see and bend every
// message: it initializes, sends requests, reads their answers as JSON
// or as an event stream, and answers the requests the server sends on a
// stream through onRequest (posting each answer to answerTo, which may
// be another replica).
type legacyClient struct {
	t        testing.TB
	url      string
	answerTo string
	token    string
	session  string
	version  string
	nextID   int

	// onRequest answers a server request: a result, or a JSON-RPC error
	// object (errObj non-nil). Unset, requests are left unanswered.
	onRequest func(method string, params map[string]any) (result any, errObj obj)

	mu sync.Mutex
	// seen is every message read from a stream, in order.
	seen []map[string]any
	// answered counts the answers posted; answerStatus is the last
	// status a posted answer got.
	answered     int
	answerStatus int
	// lastID is the id of the last event read.
	lastID string
}

func newLegacyClient(t testing.TB, endpoint string) *legacyClient {
	return &legacyClient{t: t, url: endpoint}
}

// clone is another client on the same session (and what it sees starts
// empty).
func (c *legacyClient) clone() *legacyClient {
	return &legacyClient{t: c.t, url: c.url, answerTo: c.answerTo, token: c.token, session: c.session,
		version: c.version, nextID: c.nextID, onRequest: c.onRequest}
}

func (c *legacyClient) header() http.Header {
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
	if c.session != "" {
		h.Set("Mcp-Session-Id", c.session)
	}
	if c.version != "" {
		h.Set("MCP-Protocol-Version", c.version)
	}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	return h
}

// initialize starts a session at version with caps, failing the test
// unless it is granted.
func (c *legacyClient) initialize(version string, caps obj) map[string]any {
	c.t.Helper()
	r := c.post(c.url, obj{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": obj{
		"protocolVersion": version, "capabilities": caps, "clientInfo": obj{"name": "legacy-test", "version": "1.0"}}})
	if r.Status != 200 {
		c.t.Fatalf("initialize: HTTP %d: %s", r.Status, r.Body)
	}
	res := platformtest.Result(c.t, r)
	c.session = r.Header.Get("Mcp-Session-Id")
	if c.session == "" {
		c.t.Fatal("initialize: no Mcp-Session-Id")
	}
	c.version, _ = res["protocolVersion"].(string)
	if r := c.post(c.url, obj{"jsonrpc": "2.0", "method": "notifications/initialized"}); r.Status != 202 {
		c.t.Fatalf("initialized: HTTP %d: %s", r.Status, r.Body)
	}
	return res
}

// post sends one message and reads the whole answer.
func (c *legacyClient) post(url string, msg any) *platformtest.Response {
	c.t.Helper()
	b, err := json.Marshal(msg)
	if err != nil {
		c.t.Fatal(err)
	}
	return platformtest.Do(c.t, http.MethodPost, url, c.header(), b)
}

// call sends a request and returns its response (the JSON-RPC message)
// and the HTTP status, answering server requests met on the way.
func (c *legacyClient) call(method string, params obj) (map[string]any, int) {
	c.t.Helper()
	return c.exchange(method, params, nil)
}

// result is call that fails the test unless a result came back.
func (c *legacyClient) result(method string, params obj) map[string]any {
	c.t.Helper()
	msg, status := c.call(method, params)
	res, ok := msg["result"].(map[string]any)
	if !ok {
		c.t.Fatalf("%s: HTTP %d, no result: %v", method, status, msg)
	}
	return res
}

// exchange sends a request and reads its answer. until, when set, is
// shown every message read from the stream and may end the exchange
// early (returning true): the connection is then closed, as a client
// that goes away closes it.
func (c *legacyClient) exchange(method string, params obj, until func(msg map[string]any) bool) (map[string]any, int) {
	c.t.Helper()
	c.nextID++
	body, _ := json.Marshal(obj{"jsonrpc": "2.0", "id": c.nextID, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	req.Header = c.header()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			c.t.Fatalf("%s: HTTP %d, not JSON: %s", method, resp.StatusCode, b)
		}
		return m, resp.StatusCode
	}
	return c.read(resp, until)
}

// read reads an event stream as exchange does, noting the last event id.
func (c *legacyClient) read(resp *http.Response, until func(msg map[string]any) bool) (map[string]any, int) {
	next := eventReader(resp.Body)
	for {
		m := next()
		if m == nil {
			break
		}
		c.mu.Lock()
		c.seen = append(c.seen, m)
		if id, ok := m["__id"].(string); ok {
			c.lastID = id
		}
		c.mu.Unlock()
		if until != nil && until(m) {
			return nil, resp.StatusCode
		}
		_, hasMethod := m["method"]
		id, hasID := m["id"]
		switch {
		case hasMethod && hasID:
			c.answer(id, m)
		case !hasMethod:
			return m, resp.StatusCode
		}
	}
	return nil, resp.StatusCode // the stream ended without an answer
}

// resume reopens a stream with a GET carrying Last-Event-ID (to url, or
// the client's endpoint), and reads it as exchange does; a refusal is
// returned as its JSON body.
func (c *legacyClient) resume(url, lastID string, until func(msg map[string]any) bool) (map[string]any, int) {
	c.t.Helper()
	if url == "" {
		url = c.url
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header = c.header()
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", lastID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("resume: %v", err)
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			c.t.Fatalf("resume: HTTP %d, not JSON: %s", resp.StatusCode, b)
		}
		return m, resp.StatusCode
	}
	return c.read(resp, until)
}

// answer posts the answer to a server request.
func (c *legacyClient) answer(id any, req map[string]any) {
	if c.onRequest == nil {
		return
	}
	params, _ := req["params"].(map[string]any)
	result, errObj := c.onRequest(req["method"].(string), params)
	msg := obj{"jsonrpc": "2.0", "id": id}
	if errObj != nil {
		msg["error"] = errObj
	} else {
		msg["result"] = result
	}
	to := c.answerTo
	if to == "" {
		to = c.url
	}
	r := c.post(to, msg)
	c.mu.Lock()
	c.answered++
	c.answerStatus = r.Status
	c.mu.Unlock()
}

// messages returns what the streams carried so far with this method
// ("" for responses).
func (c *legacyClient) messages(method string) []map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []map[string]any
	for _, m := range c.seen {
		if got, _ := m["method"].(string); got == method {
			out = append(out, m)
		}
	}
	return out
}

// eventReader returns the JSON messages of an event stream one by one
// (nil at its end), each with its event id, if it had one, under
// "__id". Events without data (a stream's priming event) only set the
// id, as they do for an EventSource.
func eventReader(r io.Reader) func() map[string]any {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return func() map[string]any {
		var id, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				var m map[string]any
				if data != "" && json.Unmarshal([]byte(data), &m) == nil {
					if id != "" {
						m["__id"] = id
					}
					return m
				}
				id, data = "", ""
			case strings.HasPrefix(line, "id:"):
				id = strings.TrimSpace(line[3:])
			case strings.HasPrefix(line, "data:"):
				data += strings.TrimPrefix(line[5:], " ")
			}
		}
		return nil
	}
}
