// Package client is a Go MCP client for Streamable HTTP at protocol
// 2026-07-28: stateless requests that carry their protocol version,
// capabilities and client identity in _meta and in headers, server/discover
// probing, and multi round-trip requests driven to completion by
// mrtr.Driver through the elicitation, sampling and roots handlers the
// caller registers.
//
//	c, err := client.New("https://mcp.example.com/t/acme/mcp", client.Options{
//		ElicitForm: func(ctx context.Context, req *client.ElicitRequest) (*client.ElicitResult, error) { … },
//	})
//	res, err := c.CallTool(ctx, "deploy", map[string]any{"env": "prod"})
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
)

// SupportedVersions lists every revision this client speaks, newest first.
var SupportedVersions = []string{mcp.Version}

// TokenSource supplies the bearer token sent with every request. It is
// asked once per HTTP request, so it may refresh tokens. (An
// oauth2.TokenSource is adapted with a one-line function.)
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}

// StaticToken is a TokenSource that always returns the same token.
type StaticToken string

// Token returns the token.
func (t StaticToken) Token(context.Context) (string, error) { return string(t), nil }

// TokenFunc adapts a function to TokenSource.
type TokenFunc func(ctx context.Context) (string, error)

// Token calls f.
func (f TokenFunc) Token(ctx context.Context) (string, error) { return f(ctx) }

// ElicitHandler answers an elicitation.
type ElicitHandler func(ctx context.Context, req *ElicitRequest) (*ElicitResult, error)

// SampleHandler answers a sampling request with the model's (or the
// person's) reply. Returning an error fails the call; a refusal is an
// error too, since a sampling answer cannot decline.
type SampleHandler func(ctx context.Context, req *SamplingRequest) (*SamplingResult, error)

// RootsHandler lists the client's roots.
type RootsHandler func(ctx context.Context) ([]Root, error)

// StaticRoots returns a RootsHandler listing roots.
func StaticRoots(roots ...Root) RootsHandler {
	return func(context.Context) ([]Root, error) { return roots, nil }
}

// Options configure a Client. The zero value is a client with no input
// handlers: it declares no capabilities, and a call that asks for input
// fails.
type Options struct {
	// HTTPClient sends the requests (nil means a client of its own). Its
	// Timeout, if any, bounds each HTTP request; bound whole calls with
	// the context instead.
	HTTPClient *http.Client
	// ClientInfo identifies the client in every request's _meta.
	ClientInfo Implementation
	// TokenSource, if set, supplies a bearer token for every request.
	TokenSource TokenSource
	// Header holds extra headers sent with every request.
	Header http.Header

	// Input handlers. Each one registered declares its capability in
	// every request: elicitation.form, elicitation.url, sampling, roots.
	ElicitForm ElicitHandler
	ElicitURL  ElicitHandler
	Sample     SampleHandler
	Roots      RootsHandler

	// OnProgress receives progress notifications; when set, every call
	// sends a progressToken (the server may then answer as an event
	// stream).
	OnProgress func(Progress)
	// LogLevel, when set, asks the server for log messages at or above
	// it, delivered to OnLog.
	LogLevel string
	OnLog    func(LogMessage)

	// MaxRounds bounds the rounds of a multi round-trip call (0 means
	// mrtr.DefaultMaxRounds).
	MaxRounds int
	// Clock is the driver's time source (nil means the system clock).
	Clock mrtr.Clock
	// Observer sees every round of every call.
	Observer mrtr.Observer

	// SkipDiscover sends no server/discover before the first request.
	SkipDiscover bool

	// NoTasks leaves the Tasks extension undeclared, so no call becomes a
	// task (a tool that must run as one is then refused by the server).
	NoTasks bool
	// OnTask receives a task a call created, and each change of it while
	// CallTool or WaitTask follows it (status, status message).
	OnTask func(*Task)
}

// Client is an MCP client for one endpoint. It is safe for concurrent use.
type Client struct {
	url  string
	opts Options
	http *http.Client
	caps json.RawMessage
	ids  atomic.Int64

	mu         sync.Mutex
	version    string
	discovered *DiscoverResult
	tools      map[string]*Tool
	dropped    map[string]string
}

// New returns a client for the MCP endpoint at url. It does no I/O: the
// first request discovers the server.
func New(url string, opts Options) (*Client, error) {
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return nil, fmt.Errorf("mcp: endpoint URL %q must be http:// or https://", url)
	}
	if opts.ClientInfo.Name == "" {
		opts.ClientInfo = Implementation{Name: "opsmcp-platform-client", Version: "1"}
	}
	if opts.ClientInfo.Version == "" {
		opts.ClientInfo.Version = "0"
	}
	c := &Client{url: url, opts: opts, http: opts.HTTPClient, version: mcp.Version}
	if c.http == nil {
		c.http = &http.Client{}
	}
	caps, err := json.Marshal(c.Capabilities())
	if err != nil {
		return nil, err
	}
	c.caps = caps
	return c, nil
}

// Capabilities returns what the client declares in every request, from
// the handlers registered.
func (c *Client) Capabilities() mrtr.ClientCapabilities {
	var caps mrtr.ClientCapabilities
	if c.opts.ElicitForm != nil || c.opts.ElicitURL != nil {
		caps.Elicitation = &mrtr.ElicitationCapability{}
		if c.opts.ElicitForm != nil {
			caps.Elicitation.Form = &struct{}{}
		}
		if c.opts.ElicitURL != nil {
			caps.Elicitation.URL = &struct{}{}
		}
	}
	if c.opts.Sample != nil {
		caps.Sampling = &mrtr.SamplingCapability{}
	}
	if c.opts.Roots != nil {
		caps.Roots = &mrtr.RootsCapability{}
	}
	if !c.opts.NoTasks {
		caps.Extensions = map[string]json.RawMessage{mcp.ExtensionTasks: json.RawMessage("{}")}
	}
	return caps
}

// URL returns the endpoint URL.
func (c *Client) URL() string { return c.url }

// Version returns the version the client currently sends.
func (c *Client) ProtocolVersion() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// Discover sends server/discover and records the answer. On -32022 naming
// a version both sides speak it re-probes once with that version; when
// they share none it fails with an *UnsupportedVersionError.
func (c *Client) Discover(ctx context.Context) (*DiscoverResult, error) {
	raw, err := c.request(ctx, "server/discover", nil, nil, nil)
	if err != nil {
		return nil, err
	}
	var d DiscoverResult
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, &ProtocolError{Msg: "server/discover: malformed result: " + err.Error()}
	}
	d.Raw = raw
	var extra struct {
		Meta map[string]json.RawMessage `json:"_meta"`
		Info *Implementation            `json:"serverInfo"`
	}
	_ = json.Unmarshal(raw, &extra)
	if si, ok := extra.Meta[mcp.MetaServerInfo]; ok {
		_ = json.Unmarshal(si, &d.ServerInfo)
	} else if extra.Info != nil {
		d.ServerInfo = *extra.Info
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(d.SupportedVersions) > 0 && !slices.Contains(d.SupportedVersions, c.version) {
		shared := sharedVersion(d.SupportedVersions)
		if shared == "" {
			return nil, &UnsupportedVersionError{Requested: c.version, ServerSupports: d.SupportedVersions, ClientSupports: SupportedVersions}
		}
		c.version = shared
	}
	c.discovered = &d
	return &d, nil
}

// Server returns the last server/discover result, or nil.
func (c *Client) Server() *DiscoverResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.discovered
}

// sharedVersion returns the newest version of ours the server names.
func sharedVersion(server []string) string {
	for _, v := range SupportedVersions {
		if slices.Contains(server, v) {
			return v
		}
	}
	return ""
}

// ensureDiscovered probes the server once before the first request. A
// server that answers -32601 (a modern server without discover) is used
// as is; any other failure is returned and retried on the next call.
func (c *Client) ensureDiscovered(ctx context.Context) error {
	if c.opts.SkipDiscover {
		return nil
	}
	c.mu.Lock()
	done := c.discovered != nil
	c.mu.Unlock()
	if done {
		return nil
	}
	_, err := c.Discover(ctx)
	if IsCode(err, mcp.CodeMethodNotFound) {
		c.mu.Lock()
		if c.discovered == nil {
			c.discovered = &DiscoverResult{}
		}
		c.mu.Unlock()
		return nil
	}
	return err
}

// call is one request: method, params (without _meta), extra headers and
// the per-call _meta additions.
type call struct {
	method string
	params map[string]any
	header http.Header
	meta   map[string]any
	// onProgress receives this call's progress notifications.
	onProgress func(Progress)
}

// request sends one JSON-RPC request and returns its result.
func (c *Client) request(ctx context.Context, method string, params map[string]any, header http.Header, meta map[string]any) (json.RawMessage, error) {
	return c.do(ctx, &call{method: method, params: params, header: header, meta: meta})
}

// do sends a call, discovering the server first, and re-sends it once
// with a shared version when the server answers -32022 naming one.
func (c *Client) do(ctx context.Context, cl *call) (json.RawMessage, error) {
	if cl.method != "server/discover" {
		if err := c.ensureDiscovered(ctx); err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		version := c.ProtocolVersion()
		raw, err := c.post(ctx, cl, version)
		var re *RPCError
		if !errors.As(err, &re) || re.Code != mcp.CodeUnsupportedVersion {
			return raw, err
		}
		var data struct {
			Supported []string `json:"supported"`
			Requested string   `json:"requested"`
		}
		_ = json.Unmarshal(re.Data, &data)
		shared := sharedVersion(data.Supported)
		if shared == "" || attempt > 0 {
			return nil, &UnsupportedVersionError{Requested: version, ServerSupports: data.Supported, ClientSupports: SupportedVersions}
		}
		c.mu.Lock()
		c.version = shared
		c.mu.Unlock()
	}
}

// post sends one HTTP request and reads its answer.
func (c *Client) post(ctx context.Context, cl *call, version string) (json.RawMessage, error) {
	id := c.ids.Add(1)
	meta := map[string]any{
		mcp.MetaProtocolVersion:    version,
		mcp.MetaClientCapabilities: c.caps,
		mcp.MetaClientInfo:         c.opts.ClientInfo,
	}
	if c.opts.LogLevel != "" {
		meta[mcp.MetaLogLevel] = c.opts.LogLevel
	}
	for k, v := range cl.meta {
		meta[k] = v
	}
	params := make(map[string]any, len(cl.params)+1)
	for k, v := range cl.params {
		params[k] = v
	}
	params["_meta"] = meta
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	// No HTML escaping: raw members (requestState, arguments) go out
	// byte for byte.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{"jsonrpc": "2.0", "id": id, "method": cl.method, "params": params}); err != nil {
		return nil, fmt.Errorf("mcp: encoding %s: %w", cl.method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body.Bytes()))
	if err != nil {
		return nil, err
	}
	for k, vs := range c.opts.Header {
		req.Header[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", version)
	req.Header.Set("Mcp-Method", cl.method)
	for k, vs := range cl.header {
		req.Header[k] = vs
	}
	if c.opts.TokenSource != nil {
		tok, err := c.opts.TokenSource.Token(ctx)
		if err != nil {
			return nil, fmt.Errorf("mcp: getting a token: %w", err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("mcp: %s: %w", cl.method, err)
	}
	defer resp.Body.Close()
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "text/event-stream" {
		return c.readStream(resp, id, cl)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("mcp: %s: reading the answer: %w", cl.method, err)
	}
	if len(b) > maxResponseBytes {
		return nil, &ProtocolError{Msg: fmt.Sprintf("%s: the answer exceeds %d bytes", cl.method, maxResponseBytes)}
	}
	msg, ok := parseMessage(b)
	if !ok {
		return nil, &HTTPError{StatusCode: resp.StatusCode, Header: resp.Header, Body: string(b[:min(len(b), 512)])}
	}
	return msg.outcome(resp.StatusCode, cl.method)
}

// maxResponseBytes caps one answer (or one event of a stream).
const maxResponseBytes = 64 << 20

// message is an inbound JSON-RPC message.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func parseMessage(b []byte) (*message, bool) {
	var m message
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, false
	}
	if m.Error == nil && m.Result == nil && m.Method == "" {
		return nil, false
	}
	return &m, true
}

func (m *message) outcome(status int, method string) (json.RawMessage, error) {
	if m.Error != nil {
		return nil, &RPCError{Code: m.Error.Code, Message: m.Error.Message, Data: m.Error.Data, HTTPStatus: status}
	}
	if m.Result == nil || string(m.Result) == "null" {
		return nil, &ProtocolError{Msg: method + ": the answer has no result"}
	}
	return m.Result, nil
}

func (m *message) isFor(id int64) bool {
	if m.Result == nil && m.Error == nil {
		return false
	}
	raw := strings.TrimSpace(string(m.ID))
	if raw == strconv.FormatInt(id, 10) {
		return true
	}
	var n json.Number
	if json.Unmarshal(m.ID, &n) == nil {
		if v, err := n.Int64(); err == nil {
			return v == id
		}
	}
	var s string
	return json.Unmarshal(m.ID, &s) == nil && s == strconv.FormatInt(id, 10)
}

// readStream reads an event stream until the response to id arrives,
// handing progress and log notifications to their callbacks.
func (c *Client) readStream(resp *http.Response, id int64, cl *call) (json.RawMessage, error) {
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	var data bytes.Buffer
	var hasData bool
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: gather it whole.
			rest, err2 := r.ReadBytes('\n')
			line = append(append([]byte(nil), line...), rest...)
			err = err2
		}
		if data.Len()+len(line) > maxResponseBytes {
			return nil, &ProtocolError{Msg: fmt.Sprintf("%s: an event exceeds %d bytes", cl.method, maxResponseBytes)}
		}
		trimmed := bytes.TrimRight(line, "\r\n")
		switch {
		case len(trimmed) == 0 && len(line) > 0:
			// End of an event.
			if hasData {
				if res, done, ferr := c.event(data.Bytes(), id, cl, resp.StatusCode); done {
					return res, ferr
				}
			}
			data.Reset()
			hasData = false
		case bytes.HasPrefix(trimmed, []byte("data:")):
			v := bytes.TrimPrefix(trimmed[5:], []byte(" "))
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(v)
			hasData = true
		}
		if err != nil {
			if hasData {
				if res, done, ferr := c.event(data.Bytes(), id, cl, resp.StatusCode); done {
					return res, ferr
				}
			}
			if errors.Is(err, io.EOF) {
				return nil, &ProtocolError{Msg: cl.method + ": the event stream ended before the response"}
			}
			return nil, fmt.Errorf("mcp: %s: reading the event stream: %w", cl.method, err)
		}
	}
}

// event handles one event's data: the response to id ends the stream;
// notifications go to their callbacks; anything else is ignored.
func (c *Client) event(data []byte, id int64, cl *call, status int) (json.RawMessage, bool, error) {
	msg, ok := parseMessage(data)
	if !ok {
		return nil, false, nil
	}
	if msg.isFor(id) {
		res, err := msg.outcome(status, cl.method)
		return res, true, err
	}
	switch msg.Method {
	case "notifications/progress":
		var p Progress
		if json.Unmarshal(msg.Params, &p) == nil {
			if cl.onProgress != nil {
				cl.onProgress(p)
			} else if c.opts.OnProgress != nil {
				c.opts.OnProgress(p)
			}
		}
	case "notifications/message":
		var l LogMessage
		if json.Unmarshal(msg.Params, &l) == nil && c.opts.OnLog != nil {
			c.opts.OnLog(l)
		}
	}
	return nil, false, nil
}
