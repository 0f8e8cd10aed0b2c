package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// The flow every target serves, at protocol 2026-07-28: tools/call of
// the tool "confirm" answers round 1 with an InputRequiredResult asking
// one form question (input "ok", a required boolean "confirm") and an
// opaque requestState; the retry carrying the answer and the state echoed
// completes with one text content, "confirmed".
const (
	protocolVersion = "2026-07-28"
	toolName        = "confirm"
	inputKey        = "ok"
	fieldName       = "confirm"
	question        = "Proceed?"
	doneText        = "confirmed"
)

// requestedSchema is the form the question asks for.
func requestedSchema() map[string]any {
	return map[string]any{"type": "object",
		"properties": map[string]any{fieldName: map[string]any{"type": "boolean"}},
		"required":   []string{fieldName}}
}

// requestMeta is the _meta every request carries: the protocol version
// and the client's capabilities (form elicitation).
const requestMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + protocolVersion + `","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}`

// firstRound is round 1's body.
var firstRound = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + toolName + `","arguments":{},` + requestMeta + `}}`)

// secondRound is round 2's body: the answer and the state echoed byte
// for byte (as a JSON string).
func secondRound(state string) []byte {
	s, _ := json.Marshal(state)
	b := make([]byte, 0, 256+len(s))
	b = append(b, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+toolName+`","arguments":{},"inputResponses":{"`+inputKey+`":{"action":"accept","content":{"`+fieldName+`":true}}},"requestState":`...)
	b = append(b, s...)
	b = append(b, ","+requestMeta+"}}"...)
	return b
}

// rpcResponse is what the load client reads of an answer.
type rpcResponse struct {
	Result *struct {
		ResultType    string `json:"resultType"`
		RequestState  string `json:"requestState"`
		InputRequests map[string]struct {
			Method string `json:"method"`
			Params struct {
				Mode    string `json:"mode"`
				Message string `json:"message"`
			} `json:"params"`
		} `json:"inputRequests"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// flowClient drives whole flows against one target from one worker.
type flowClient struct {
	http  *http.Client
	url   string
	token string // bearer token, or none
	buf   bytes.Buffer
}

// flow runs one two-round flow, appending each round's latency to lat.
// Any answer but the expected one is an error: a failed flow is never
// counted as throughput.
func (c *flowClient) flow(lat *[]time.Duration) error {
	var r rpcResponse
	if err := c.round(firstRound, &r, lat); err != nil {
		return fmt.Errorf("round 1: %w", err)
	}
	res := r.Result
	if res.ResultType != "input_required" {
		return fmt.Errorf("round 1: resultType %q, want input_required", res.ResultType)
	}
	ir, ok := res.InputRequests[inputKey]
	if !ok || ir.Method != "elicitation/create" || ir.Params.Message != question {
		return fmt.Errorf("round 1: no form question %q under %q", question, inputKey)
	}
	if res.RequestState == "" {
		return errors.New("round 1: no requestState")
	}
	r = rpcResponse{}
	if err := c.round(secondRound(res.RequestState), &r, lat); err != nil {
		return fmt.Errorf("round 2: %w", err)
	}
	res = r.Result
	// An absent resultType means complete (2026-07-28, basic §ResultType).
	if res.ResultType != "complete" && res.ResultType != "" {
		return fmt.Errorf("round 2: resultType %q, want complete", res.ResultType)
	}
	if res.IsError || len(res.Content) != 1 || res.Content[0].Text != doneText {
		return fmt.Errorf("round 2: result is not the text %q (isError %v, %d contents)", doneText, res.IsError, len(res.Content))
	}
	return nil
}

// round is one POST: a JSON-RPC result answered 200 as application/json.
func (c *flowClient) round(body []byte, into *rpcResponse, lat *[]time.Duration) error {
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("MCP-Protocol-Version", protocolVersion)
	h.Set("Mcp-Method", "tools/call")
	h.Set("Mcp-Name", toolName)
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	c.buf.Reset()
	_, err = c.buf.ReadFrom(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	*lat = append(*lat, time.Since(start))
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, snippet(c.buf.Bytes()))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" && ct != "application/json; charset=utf-8" {
		return fmt.Errorf("answer is %q, want application/json", ct)
	}
	if err := json.Unmarshal(c.buf.Bytes(), into); err != nil {
		return fmt.Errorf("answer is not JSON-RPC: %w", err)
	}
	if into.Error != nil {
		return fmt.Errorf("JSON-RPC error %d: %s", into.Error.Code, into.Error.Message)
	}
	if into.Result == nil {
		return errors.New("answer has no result")
	}
	return nil
}

// snippet is the start of a body for an error message.
func snippet(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
