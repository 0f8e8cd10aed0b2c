package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
)

// maxPages bounds the pages the All* listings follow.
const maxPages = 1000

func decodeResult[T any](method string, raw json.RawMessage, out *T) error {
	if err := json.Unmarshal(raw, out); err != nil {
		return &ProtocolError{Msg: fmt.Sprintf("%s: malformed result: %v", method, err)}
	}
	return nil
}

func cursorParams(cursor string) map[string]any {
	if cursor == "" {
		return nil
	}
	return map[string]any{"cursor": cursor}
}

// ListTools fetches one page of tools/list (cursor "" for the first).
// Tools whose x-mcp-header annotations are invalid are dropped, as the
// protocol requires, and named in Dropped; they cannot be called.
func (c *Client) ListTools(ctx context.Context, cursor string) (*ListToolsResult, error) {
	raw, err := c.request(ctx, "tools/list", cursorParams(cursor), nil, nil)
	if err != nil {
		return nil, err
	}
	var res ListToolsResult
	if err := decodeResult("tools/list", raw, &res); err != nil {
		return nil, err
	}
	res.Raw = raw
	kept := res.Tools[:0]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tools == nil {
		c.tools = map[string]*Tool{}
		c.dropped = map[string]string{}
	}
	for _, t := range res.Tools {
		params, problem := headerParams(t.InputSchema)
		if problem != "" {
			res.Dropped = append(res.Dropped, DroppedTool{Name: t.Name, Reason: problem})
			c.dropped[t.Name] = problem
			delete(c.tools, t.Name)
			continue
		}
		t.HeaderParams = params
		tool := t
		c.tools[t.Name] = &tool
		delete(c.dropped, t.Name)
		kept = append(kept, t)
	}
	res.Tools = kept
	return &res, nil
}

// DroppedTools lists the tools the client has seen listed and dropped
// because their x-mcp-header annotations are invalid, by name.
func (c *Client) DroppedTools() []DroppedTool {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []DroppedTool
	for _, name := range sortedKeys(c.dropped) {
		out = append(out, DroppedTool{Name: name, Reason: c.dropped[name]})
	}
	return out
}

// AllTools lists every tool, following the pages.
func (c *Client) AllTools(ctx context.Context) ([]Tool, error) {
	var all []Tool
	err := pages(func(cursor string) (string, error) {
		res, err := c.ListTools(ctx, cursor)
		if err != nil {
			return "", err
		}
		all = append(all, res.Tools...)
		return res.NextCursor, nil
	})
	return all, err
}

// pages follows cursors until there are none, refusing a cursor seen
// before and stopping at maxPages.
func pages(page func(cursor string) (string, error)) error {
	seen := map[string]bool{}
	cursor := ""
	for range maxPages {
		next, err := page(cursor)
		if err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		if seen[next] {
			return &ProtocolError{Msg: "a list repeats the cursor " + strconv.Quote(next)}
		}
		seen[next] = true
		cursor = next
	}
	return &ProtocolError{Msg: fmt.Sprintf("a list has more than %d pages", maxPages)}
}

// ListPrompts fetches one page of prompts/list.
func (c *Client) ListPrompts(ctx context.Context, cursor string) (*ListPromptsResult, error) {
	raw, err := c.request(ctx, "prompts/list", cursorParams(cursor), nil, nil)
	if err != nil {
		return nil, err
	}
	var res ListPromptsResult
	res.Raw = raw
	return &res, decodeResult("prompts/list", raw, &res)
}

// AllPrompts lists every prompt, following the pages.
func (c *Client) AllPrompts(ctx context.Context) ([]Prompt, error) {
	var all []Prompt
	return all, pages(func(cursor string) (string, error) {
		res, err := c.ListPrompts(ctx, cursor)
		if err != nil {
			return "", err
		}
		all = append(all, res.Prompts...)
		return res.NextCursor, nil
	})
}

// ListResources fetches one page of resources/list.
func (c *Client) ListResources(ctx context.Context, cursor string) (*ListResourcesResult, error) {
	raw, err := c.request(ctx, "resources/list", cursorParams(cursor), nil, nil)
	if err != nil {
		return nil, err
	}
	var res ListResourcesResult
	res.Raw = raw
	return &res, decodeResult("resources/list", raw, &res)
}

// AllResources lists every resource, following the pages.
func (c *Client) AllResources(ctx context.Context) ([]Resource, error) {
	var all []Resource
	return all, pages(func(cursor string) (string, error) {
		res, err := c.ListResources(ctx, cursor)
		if err != nil {
			return "", err
		}
		all = append(all, res.Resources...)
		return res.NextCursor, nil
	})
}

// ListResourceTemplates fetches one page of resources/templates/list.
func (c *Client) ListResourceTemplates(ctx context.Context, cursor string) (*ListResourceTemplatesResult, error) {
	raw, err := c.request(ctx, "resources/templates/list", cursorParams(cursor), nil, nil)
	if err != nil {
		return nil, err
	}
	var res ListResourceTemplatesResult
	res.Raw = raw
	return &res, decodeResult("resources/templates/list", raw, &res)
}

// AllResourceTemplates lists every resource template, following the pages.
func (c *Client) AllResourceTemplates(ctx context.Context) ([]ResourceTemplate, error) {
	var all []ResourceTemplate
	return all, pages(func(cursor string) (string, error) {
		res, err := c.ListResourceTemplates(ctx, cursor)
		if err != nil {
			return "", err
		}
		all = append(all, res.ResourceTemplates...)
		return res.NextCursor, nil
	})
}

// Complete asks completion/complete for values of argument arg of ref,
// given its current value and the other arguments already chosen.
func (c *Client) Complete(ctx context.Context, ref CompletionRef, arg, value string, chosen map[string]string) (*CompleteResult, error) {
	params := map[string]any{"ref": ref, "argument": map[string]string{"name": arg, "value": value}}
	if len(chosen) > 0 {
		params["context"] = map[string]any{"arguments": chosen}
	}
	raw, err := c.request(ctx, "completion/complete", params, nil, nil)
	if err != nil {
		return nil, err
	}
	var res struct {
		Completion CompleteResult `json:"completion"`
	}
	if err := decodeResult("completion/complete", raw, &res); err != nil {
		return nil, err
	}
	res.Completion.Raw = raw
	return &res.Completion, nil
}

// CallOption adjusts one tools/call, prompts/get or resources/read.
type CallOption func(*callConfig)

type callConfig struct {
	manual     bool
	noWait     bool
	seed       *mrtr.Seed
	meta       map[string]any
	observer   mrtr.Observer
	onProgress func(Progress)
}

// Manual returns the InputRequiredResult to the caller (in the result's
// InputRequired field) instead of answering it; resume with WithSeed.
func Manual() CallOption { return func(c *callConfig) { c.manual = true } }

// WithSeed resumes a flow: the first request carries the seed's
// inputResponses and requestState (saved, perhaps, by another process).
func WithSeed(seed mrtr.Seed) CallOption { return func(c *callConfig) { c.seed = &seed } }

// WithMeta adds a member to the request's _meta (every round carries it).
func WithMeta(key string, value any) CallOption {
	return func(c *callConfig) {
		if c.meta == nil {
			c.meta = map[string]any{}
		}
		c.meta[key] = value
	}
}

// WithObserver adds an observer of this call's rounds.
func WithObserver(o mrtr.Observer) CallOption { return func(c *callConfig) { c.observer = o } }

// WithProgress sends a progressToken and hands this call's progress
// notifications to f.
func WithProgress(f func(Progress)) CallOption { return func(c *callConfig) { c.onProgress = f } }

var progressTokens atomic.Int64

// carrier runs tools/call, prompts/get or resources/read: the first
// request (seeded or not), then, unless manual, the driver's rounds.
func (c *Client) carrier(ctx context.Context, method string, params map[string]any, header http.Header, opts []CallOption) (json.RawMessage, *mrtr.Pending, error) {
	var cfg callConfig
	for _, o := range opts {
		o(&cfg)
	}
	cl := &call{method: method, header: header, meta: cfg.meta, onProgress: cfg.onProgress}
	if cfg.onProgress != nil || c.opts.OnProgress != nil {
		meta := map[string]any{"progressToken": "progress-" + strconv.FormatInt(progressTokens.Add(1), 10)}
		for k, v := range cfg.meta {
			meta[k] = v
		}
		cl.meta = meta
	}
	send := func(ctx context.Context, responses map[string]json.RawMessage, state json.RawMessage) (json.RawMessage, error) {
		p := make(map[string]any, len(params)+2)
		for k, v := range params {
			p[k] = v
		}
		if responses != nil {
			p["inputResponses"] = responses
		}
		if state != nil {
			p["requestState"] = state
		}
		retry := *cl
		retry.params = p
		return c.do(ctx, &retry)
	}
	var first json.RawMessage
	var err error
	if cfg.seed != nil {
		first, err = send(ctx, cfg.seed.InputResponses, cfg.seed.RequestState)
	} else {
		first, err = send(ctx, nil, nil)
	}
	if err != nil {
		return nil, nil, err
	}
	if cfg.manual {
		pending, err := mrtr.ParseResult(first)
		return first, pending, err
	}
	d := &mrtr.Driver{MaxRounds: c.opts.MaxRounds, Clock: c.opts.Clock, Observer: joinObservers(c.opts.Observer, cfg.observer)}
	res, err := d.Run(ctx, first, c.dispatch, func(ctx context.Context, r mrtr.Retry) (json.RawMessage, error) {
		return send(ctx, r.InputResponses, r.RequestState)
	})
	return res, nil, err
}

func joinObservers(a, b mrtr.Observer) mrtr.Observer {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(r mrtr.Round) { a(r); b(r) }
}

// CallTool calls a tool with arguments (anything that marshals to a JSON
// object; nil sends none) and drives any rounds of input to the complete
// result. The tool's x-mcp-header arguments are mirrored into
// Mcp-Param-* headers; the client lists the tools first when it has not
// seen this one. A tool result with isError is a result, not an error.
func (c *Client) CallTool(ctx context.Context, name string, arguments any, opts ...CallOption) (*CallToolResult, error) {
	var args json.RawMessage
	if arguments != nil {
		b, err := marshalNoEscape(arguments)
		if err != nil {
			return nil, fmt.Errorf("mcp: tools/call %s: arguments: %w", name, err)
		}
		if len(b) == 0 || b[0] != '{' {
			if string(b) != "null" {
				return nil, fmt.Errorf("mcp: tools/call %s: arguments must be a JSON object", name)
			}
			b = nil
		}
		args = b
	}
	tool, err := c.tool(ctx, name)
	if err != nil {
		return nil, err
	}
	header := http.Header{"Mcp-Name": {mcp.EncodeHeaderValue(name)}}
	if tool != nil {
		setHeaderParams(header, tool.HeaderParams, args)
	}
	params := map[string]any{"name": name}
	if args != nil {
		params["arguments"] = args
	}
	raw, pending, err := c.carrier(ctx, "tools/call", params, header, opts)
	if err != nil {
		return nil, err
	}
	if pending != nil {
		return &CallToolResult{Raw: raw, InputRequired: pending}, nil
	}
	if resultType(raw) == mcp.ResultTypeTask {
		var cfg callConfig
		for _, o := range opts {
			o(&cfg)
		}
		return c.followTask(ctx, raw, cfg.noWait)
	}
	var res CallToolResult
	if err := decodeResult("tools/call", raw, &res); err != nil {
		return nil, err
	}
	res.Raw = raw
	return &res, nil
}

// tool returns what the client knows of a tool, listing the tools when
// it does not know it (a server that refuses to list leaves the call
// without Mcp-Param headers); an *InvalidToolError for a dropped tool.
func (c *Client) tool(ctx context.Context, name string) (*Tool, error) {
	c.mu.Lock()
	t, reason := c.tools[name], c.dropped[name]
	c.mu.Unlock()
	if t == nil && reason == "" {
		_, err := c.AllTools(ctx)
		var re *RPCError
		if err != nil && !errors.As(err, &re) {
			return nil, err
		}
		c.mu.Lock()
		t, reason = c.tools[name], c.dropped[name]
		c.mu.Unlock()
	}
	if reason != "" {
		return nil, &InvalidToolError{Name: name, Reason: reason}
	}
	return t, nil
}

// GetPrompt gets a prompt with string arguments, driving any rounds of
// input to the complete result.
func (c *Client) GetPrompt(ctx context.Context, name string, arguments map[string]string, opts ...CallOption) (*GetPromptResult, error) {
	params := map[string]any{"name": name}
	if arguments != nil {
		params["arguments"] = arguments
	}
	raw, pending, err := c.carrier(ctx, "prompts/get", params, http.Header{"Mcp-Name": {mcp.EncodeHeaderValue(name)}}, opts)
	if err != nil {
		return nil, err
	}
	if pending != nil {
		return &GetPromptResult{Raw: raw, InputRequired: pending}, nil
	}
	var res GetPromptResult
	if err := decodeResult("prompts/get", raw, &res); err != nil {
		return nil, err
	}
	res.Raw = raw
	return &res, nil
}

// ReadResource reads a resource, driving any rounds of input to the
// complete result.
func (c *Client) ReadResource(ctx context.Context, uri string, opts ...CallOption) (*ReadResourceResult, error) {
	raw, pending, err := c.carrier(ctx, "resources/read", map[string]any{"uri": uri}, http.Header{"Mcp-Name": {mcp.EncodeHeaderValue(uri)}}, opts)
	if err != nil {
		return nil, err
	}
	if pending != nil {
		return &ReadResourceResult{Raw: raw, InputRequired: pending}, nil
	}
	var res ReadResourceResult
	if err := decodeResult("resources/read", raw, &res); err != nil {
		return nil, err
	}
	res.Raw = raw
	return &res, nil
}

// marshalNoEscape encodes v without HTML escaping and without the
// trailing newline.
func marshalNoEscape(v any) (json.RawMessage, error) {
	if raw, ok := v.(json.RawMessage); ok {
		return raw, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
