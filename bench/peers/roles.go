package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsmcp/platform/webhook"
)

// roleEnv names the role a re-executed harness binary plays: the
// servers other than the platform run as separate processes of the
// harness binary itself, so each one's CPU can be read on its own.
const roleEnv = "PEERS_ROLE"

// Roles.
const (
	roleEcho     = "echo"
	roleEchoHook = "echo-webhook"
	roleSDK      = "go-sdk"
	roleWebhook  = "webhook"
)

// runRole serves one role on a loopback port until its standard input
// closes (the harness stopped or died) or it is signalled. Its first line
// of standard output is the address it listens on.
func runRole(role string) int {
	var h http.Handler
	var stdin func(line []byte)
	switch role {
	case roleEcho:
		h = &echoServer{}
	case roleEchoHook:
		e := &echoServer{hook: newHookCaller(&http.Client{Timeout: 5 * time.Second,
			Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1024, DisableCompression: true}})}
		h, stdin = e, e.hook.configure
	case roleSDK:
		h = sdkHandler()
	case roleWebhook:
		b := &hookBackend{secrets: map[string]string{}}
		h, stdin = b, b.setSecret
	default:
		fmt.Fprintf(os.Stderr, "peers: unknown role %q\n", role)
		return 2
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		return 1
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if addr := os.Getenv(pprofEnv); addr != "" {
		stop, err := servePprof(addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "peers:", err)
			return 1
		}
		defer stop()
	}
	fmt.Println(ln.Addr().String())
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if stdin != nil {
				stdin(sc.Bytes())
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "peers:", err)
		return 1
	}
	return 0
}

// servePprof serves net/http/pprof's CPU profile on addr (-cpuprofile).
func servePprof(addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, nil
}

// echoState is the bare echo's requestState: fixed and opaque.
const echoState = "ZWNoby1zdGF0ZS12MQ"

// Wire shapes of the bare echo's answers, the same as the platform's.
type (
	echoRequest struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  struct {
			Name           string                `json:"name"`
			Arguments      json.RawMessage       `json:"arguments"`
			InputResponses map[string]echoAnswer `json:"inputResponses"`
			RequestState   string                `json:"requestState"`
			Meta           struct {
				ProtocolVersion    string          `json:"io.modelcontextprotocol/protocolVersion"`
				ClientCapabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
			} `json:"_meta"`
		} `json:"params"`
	}
	echoAnswer struct {
		Action  string         `json:"action"`
		Content map[string]any `json:"content"`
	}
	echoResponse struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   *echoError      `json:"error,omitempty"`
	}
	echoError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	echoInputRequired struct {
		ResultType    string                      `json:"resultType"`
		InputRequests map[string]echoInputRequest `json:"inputRequests"`
		RequestState  string                      `json:"requestState"`
		Meta          echoMeta                    `json:"_meta"`
	}
	echoInputRequest struct {
		Method string     `json:"method"`
		Params echoElicit `json:"params"`
	}
	echoElicit struct {
		Message         string         `json:"message"`
		RequestedSchema map[string]any `json:"requestedSchema"`
	}
	echoComplete struct {
		ResultType string        `json:"resultType"`
		Content    []echoContent `json:"content"`
		IsError    bool          `json:"isError,omitempty"`
		Meta       echoMeta      `json:"_meta"`
	}
	echoContent struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	echoMeta struct {
		ServerInfo struct {
			Name    string `json:"name"`
			Title   string `json:"title"`
			Version string `json:"version"`
		} `json:"io.modelcontextprotocol/serverInfo"`
	}
)

// echoServer is the ceiling: net/http and encoding/json answering the
// same two rounds with the same JSON shapes, checking what a stateless
// 2026-07-28 server must (headers against the body, the state, the
// answer) and nothing else: no auth, no sealing, no record. With a hook
// (echo-webhook), round 2 also delivers the answer to the tool's webhook
// in the webhook process and answers with its result, as the platform
// must: the floor of a design that calls its tools over HTTP.
type echoServer struct{ hook *hookCaller }

func (e *echoServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req echoRequest
	fail := func(status, code int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(echoResponse{JSONRPC: "2.0", ID: req.ID, Error: &echoError{Code: code, Message: msg}})
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 4<<20)).Decode(&req); err != nil {
		fail(http.StatusBadRequest, -32700, "parse error")
		return
	}
	switch {
	case req.JSONRPC != "2.0" || len(req.ID) == 0:
		fail(http.StatusBadRequest, -32600, "invalid request")
		return
	case req.Method != "tools/call":
		fail(http.StatusNotFound, -32601, "method not found")
		return
	case r.Header.Get("MCP-Protocol-Version") != protocolVersion || req.Params.Meta.ProtocolVersion != protocolVersion ||
		r.Header.Get("Mcp-Method") != req.Method || r.Header.Get("Mcp-Name") != req.Params.Name:
		fail(http.StatusBadRequest, -32020, "header mismatch")
		return
	case req.Params.Name != toolName:
		fail(http.StatusOK, -32602, "unknown tool")
		return
	}
	resp := echoResponse{JSONRPC: "2.0", ID: req.ID}
	var meta echoMeta
	meta.ServerInfo.Name, meta.ServerInfo.Title, meta.ServerInfo.Version = "echo", "bare echo", "1"
	switch {
	case req.Params.RequestState == "":
		resp.Result = echoInputRequired{ResultType: "input_required", RequestState: echoState, Meta: meta,
			InputRequests: map[string]echoInputRequest{inputKey: {Method: "elicitation/create",
				Params: echoElicit{Message: question, RequestedSchema: requestedSchema()}}}}
	case req.Params.RequestState != echoState:
		fail(http.StatusOK, -32602, "Invalid or expired requestState")
		return
	case e.hook != nil:
		res, err := e.hook.call(r.Context(), req.Params.Arguments, req.Params.InputResponses)
		if err != nil {
			fail(http.StatusOK, -32603, "webhook: "+err.Error())
			return
		}
		res.ResultType, res.Meta = "complete", meta
		resp.Result = res
	default:
		res := echoComplete{ResultType: "complete", Meta: meta, Content: []echoContent{{Type: "text", Text: doneText}}}
		if a, ok := req.Params.InputResponses[inputKey]; !ok || a.Action != "accept" || a.Content[fieldName] != true {
			res.Content[0].Text, res.IsError = "not confirmed", true
		}
		resp.Result = res
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// hookCaller delivers echo-webhook's round 2 as the platform delivers a
// tool call: a signed webhook.Request POSTed over a keep-alive
// connection, the webhook.Response read back.
type hookCaller struct {
	client *http.Client
	// ready is closed by the first configuration: the harness hands it
	// over after the process starts, so a round that comes first waits.
	ready  chan struct{}
	once   sync.Once
	mu     sync.RWMutex
	url    string
	secret string
}

func newHookCaller(client *http.Client) *hookCaller {
	return &hookCaller{client: client, ready: make(chan struct{})}
}

// configure takes the webhook's URL and secret from a line of standard
// input (a secretLine whose Path is the whole URL).
func (h *hookCaller) configure(line []byte) {
	var s secretLine
	if json.Unmarshal(line, &s) != nil || s.Path == "" {
		return
	}
	h.mu.Lock()
	h.url, h.secret = s.Path, s.Secret
	h.mu.Unlock()
	h.once.Do(func() { close(h.ready) })
}

func (h *hookCaller) call(ctx context.Context, args json.RawMessage, answers map[string]echoAnswer) (echoComplete, error) {
	var res echoComplete
	select {
	case <-h.ready:
	case <-ctx.Done():
		return res, errors.New("no webhook configured")
	}
	h.mu.RLock()
	url, secret := h.url, h.secret
	h.mu.RUnlock()
	d := webhook.Request{Version: webhook.Version, Kind: webhook.KindTool, Name: toolName, Arguments: args,
		Answers: map[string]webhook.Answer{}, Flow: webhook.Flow{ID: "fl_echo", Round: 2}}
	for k, a := range answers {
		content, err := json.Marshal(a.Content)
		if err != nil {
			return res, err
		}
		d.Answers[k] = webhook.Answer{Action: a.Action, Content: content}
	}
	body, err := json.Marshal(d)
	if err != nil {
		return res, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return res, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhook.SignatureHeader, webhook.Sign(secret, time.Now(), body))
	resp, err := h.client.Do(req)
	if err != nil {
		return res, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return res, err
	}
	if resp.StatusCode != http.StatusOK {
		return res, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var out webhook.Response
	if err := json.Unmarshal(raw, &out); err != nil {
		return res, err
	}
	if out.Type != webhook.TypeComplete {
		return res, fmt.Errorf("answer type %q", out.Type)
	}
	err = json.Unmarshal(out.Result, &res)
	return res, err
}

// sdkState is the Go SDK server's requestState: fixed and opaque, like
// the echo's (the SDK leaves state, and any sealing of it, to the tool).
const sdkState = "c2RrLXN0YXRlLXYx"

// sdkHandler is the official Go SDK's stateless Streamable HTTP server
// (2026-07-28, multi round-trip through CallToolResult.InputRequests and
// RequestState) with the tool in process: no auth, no sealing, no
// webhook. It answers application/json (JSONResponse), as the platform
// and the echo do, rather than a one-event SSE stream.
func sdkHandler() http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "go-sdk-peer", Version: "1.8.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: toolName, Description: "Asks for confirmation, then confirms"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if req.Params.RequestState == "" {
				return &mcp.CallToolResult{RequestState: sdkState, InputRequests: mcp.InputRequestMap{
					inputKey: &mcp.ElicitParams{Message: question, RequestedSchema: requestedSchema()}}}, nil, nil
			}
			if req.Params.RequestState != sdkState {
				return nil, nil, errors.New("invalid or expired requestState")
			}
			text, isErr := doneText, false
			if a, _ := req.Params.InputResponses[inputKey].(*mcp.ElicitResult); a == nil || a.Action != "accept" || a.Content[fieldName] != true {
				text, isErr = "not confirmed", true
			}
			return &mcp.CallToolResult{IsError: isErr, Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
}

// hookBackend is the tenant's webhook: it verifies every delivery's
// signature with package webhook and answers the flow's one delivery
// (round 2, with the gathered answer). Its secrets, one per tenant path,
// arrive on standard input as JSON lines {"path", "secret"}, so they
// never sit in an argument list or the environment.
type hookBackend struct {
	mu      sync.RWMutex
	secrets map[string]string
}

type secretLine struct {
	Path   string `json:"path"`
	Secret string `json:"secret"`
}

func (b *hookBackend) setSecret(line []byte) {
	var s secretLine
	if json.Unmarshal(line, &s) != nil || s.Path == "" {
		return
	}
	b.mu.Lock()
	b.secrets[s.Path] = s.Secret
	b.mu.Unlock()
}

var (
	hookDone   = []byte(`{"type":"complete","result":{"content":[{"type":"text","text":"` + doneText + `"}]}}`)
	hookRefuse = []byte(`{"type":"complete","result":{"content":[{"type":"text","text":"not confirmed"}],"isError":true}}`)
)

func (b *hookBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.RLock()
	secret, ok := b.secrets[r.URL.Path]
	b.mu.RUnlock()
	if !ok || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "reading the delivery", http.StatusBadRequest)
		return
	}
	if err := webhook.Verify(secret, r.Header.Get(webhook.SignatureHeader), body, time.Now(), webhook.DefaultTolerance); err != nil {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var req webhook.Request
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "malformed delivery", http.StatusBadRequest)
		return
	}
	// The bearer tenant's deliveries name the verified caller; the public
	// tenant's name none.
	wantPrincipal := strings.HasPrefix(r.URL.Path, bearerHookPath)
	answer := hookDone
	var confirmed struct {
		Confirm bool `json:"confirm"`
	}
	a, ok := req.Answers[inputKey]
	if !ok || a.Action != "accept" || json.Unmarshal(a.Content, &confirmed) != nil || !confirmed.Confirm ||
		req.Kind != webhook.KindTool || req.Name != toolName || (req.Principal != nil && req.Principal.Subject != "") != wantPrincipal {
		answer = hookRefuse
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(answer)
}

// Paths of the two tenants' tools on the webhook backend.
const (
	publicHookPath = "/public"
	bearerHookPath = "/bearer"
	echoHookPath   = "/echo"
)
