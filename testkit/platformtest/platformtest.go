// Package platformtest starts real platform instances for tests: on a
// fresh SQLite file or a fresh PostgreSQL schema, behind a real HTTP
// listener, with helpers to drive the admin API and MCP endpoints.
package platformtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/server"
)

// PostgresURL is the server the tests use, from PLATFORM_TEST_POSTGRES.
// On this project's machines PostgreSQL listens on 127.0.0.1:5432 with
// trust auth and a database named test.
func PostgresURL() string {
	if u := os.Getenv("PLATFORM_TEST_POSTGRES"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// Dialect is a database a test runs against.
type Dialect struct {
	Name string
	// New returns the URL of a fresh, empty database for one test.
	New func(t testing.TB) string
}

// Dialects lists SQLite and PostgreSQL, so storage tests run on both.
func Dialects() []Dialect {
	return []Dialect{
		{Name: "sqlite", New: SQLiteURL},
		{Name: "postgres", New: PostgresSchemaURL},
	}
}

// SQLiteURL returns a fresh SQLite database file in the test's temp dir.
func SQLiteURL(t testing.TB) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "platform.db")
}

// PostgresSchemaURL creates a schema of its own for this test in the
// shared PostgreSQL database and returns a URL that uses it, so parallel
// runs never collide. The schema is dropped when the test ends.
func PostgresSchemaURL(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	db, err := gorm.Open(postgres.Open(PostgresURL()), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatalf("connect to PostgreSQL at %s: %v (is it running? set PLATFORM_TEST_POSTGRES)", PostgresURL(), err)
	}
	sqlDB, _ := db.DB()
	if err := db.Exec("CREATE SCHEMA " + schema).Error; err != nil {
		sqlDB.Close()
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		db.Exec("DROP SCHEMA " + schema + " CASCADE")
		sqlDB.Close()
	})
	sep := "?"
	if strings.Contains(PostgresURL(), "?") {
		sep = "&"
	}
	return PostgresURL() + sep + "search_path=" + schema
}

// AdminToken is the bootstrap admin token every test platform accepts
// (at least 32 characters, as every bootstrap token must be).
const AdminToken = "test-admin-token-0123456789abcdef"

// Platform is one running replica.
type Platform struct {
	URL string
	// DatabaseURL is the database it runs on (SQL reads it apart).
	DatabaseURL string
	Server      *server.Server
	Logs        *LogBuffer
	cancel      context.CancelFunc
	done        chan error
	served      error // what Serve returned, once stopped
}

// Option adjusts a test platform's configuration.
type Option func(*startOptions)

type startOptions struct {
	cfg    *config.Config
	server []server.Option
}

// SecretsKey seals webhook secrets in every test platform (one key, so
// instances sharing a database read each other's); WithConfig can clear
// or replace it.
const SecretsKey = "b3BzbWNwLXRlc3Qtd2ViaG9vay1zZWNyZXRzLWtleS0wMDAx" // "opsmcp-test-webhook-secrets-key-0001"

// WithStateKeys shares request-state keys between instances.
func WithStateKeys(keys string) Option { return func(o *startOptions) { o.cfg.StateKeys = keys } }

// WithServer passes options to server.New.
func WithServer(opts ...server.Option) Option {
	return func(o *startOptions) { o.server = append(o.server, opts...) }
}

// Start runs a platform on dbURL, listening on a free loopback port, and
// stops it when the test ends.
func Start(t testing.TB, dbURL string, opts ...Option) *Platform {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg, err := config.Load(fs, nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.DatabaseURL = dbURL
	cfg.Listen = ln.Addr().String()
	cfg.PublicURL = "http://" + ln.Addr().String()
	cfg.BootstrapToken = AdminToken
	cfg.AllowPrivateTargets = true
	cfg.SecretsKeys = SecretsKey
	cfg.CatalogueRefresh = 50 * time.Millisecond
	cfg.ShutdownTimeout = 5 * time.Second
	// Tests start legacy sessions from one address far faster than any
	// caller should; the limits' own tests set them low.
	cfg.Legacy.InitializePerCaller, cfg.Legacy.InitializePerTenant = 100_000, 1_000_000
	so := &startOptions{cfg: cfg}
	for _, o := range opts {
		o(so)
	}
	logs := &LogBuffer{}
	log := slog.New(slog.NewJSONHandler(io.MultiWriter(logs, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, log, "test", so.server...)
	if err != nil {
		cancel()
		ln.Close()
		t.Fatalf("start platform: %v", err)
	}
	p := &Platform{URL: "http://" + ln.Addr().String(), DatabaseURL: cfg.DatabaseURL, Server: srv, Logs: logs, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- srv.Serve(ctx, ln) }()
	t.Cleanup(p.Stop)
	return p
}

// Stop shuts the platform down and waits for it.
func (p *Platform) Stop() { _ = p.Shutdown() }

// Shutdown stops the platform as Stop does and returns what its Serve
// returned (nil after a clean drain).
func (p *Platform) Shutdown() error {
	if p.cancel == nil {
		return p.served
	}
	p.cancel()
	p.served = <-p.done
	p.Server.Close()
	p.cancel = nil
	return p.served
}

// testWriter sends log lines to the test log, shown on failure.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	defer func() { _ = recover() }() // a late line after the test ended
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// LogBuffer keeps every log line, for tests that check what was logged.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *LogBuffer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

// String returns everything logged so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Response is an HTTP answer, read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic map.
func (r *Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("response is not a JSON object (status %d): %v\n%s", r.Status, err, r.Body)
	}
	return m
}

// Do sends a request and reads the whole answer.
func Do(t testing.TB, method, url string, header http.Header, body []byte) *Response {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// Admin calls the admin API with the bootstrap token; body, when not nil,
// is sent as JSON (a string or []byte is sent verbatim).
func (p *Platform) Admin(t testing.TB, method, path string, body any, header ...string) *Response {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + AdminToken}}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	if raw != nil && h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	return Do(t, method, p.URL+path, h, raw)
}

// MustAdmin is Admin that fails the test unless the status is want.
func (p *Platform) MustAdmin(t testing.TB, want int, method, path string, body any) map[string]any {
	t.Helper()
	r := p.Admin(t, method, path, body)
	if r.Status != want {
		t.Fatalf("%s %s: status %d, want %d\n%s", method, path, r.Status, want, r.Body)
	}
	if len(r.Body) == 0 {
		return nil
	}
	return r.JSON(t)
}

// Meta is the required per-request _meta of protocol 2026-07-28 with the
// given client capabilities.
func Meta(caps map[string]any) map[string]any {
	if caps == nil {
		caps = map[string]any{}
	}
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": caps,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "platformtest", "version": "1"},
	}
}

var rpcID struct {
	sync.Mutex
	n int
}

// MCP sends one JSON-RPC request to a tenant endpoint with correct
// headers (Mcp-Name from params name, uri or taskId) and returns the
// answer.
func (p *Platform) MCP(t testing.TB, slug, method string, params map[string]any) *Response {
	t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	if _, ok := params["_meta"]; !ok {
		params["_meta"] = Meta(nil)
	}
	rpcID.Lock()
	rpcID.n++
	id := rpcID.n
	rpcID.Unlock()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	h := http.Header{
		"Content-Type":         {"application/json"},
		"Accept":               {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {"2026-07-28"},
		"Mcp-Method":           {method},
	}
	if n, ok := params["name"].(string); ok {
		h.Set("Mcp-Name", n)
	} else if u, ok := params["uri"].(string); ok {
		h.Set("Mcp-Name", u)
	} else if id, ok := params["taskId"].(string); ok {
		h.Set("Mcp-Name", id)
	}
	return Do(t, http.MethodPost, fmt.Sprintf("%s/t/%s/mcp", p.URL, slug), h, body)
}

// Result returns the JSON-RPC result of an MCP response, failing the test
// on an error response.
func Result(t testing.TB, r *Response) map[string]any {
	t.Helper()
	m := r.JSON(t)
	if e, ok := m["error"]; ok {
		t.Fatalf("JSON-RPC error (HTTP %d): %v", r.Status, e)
	}
	res, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result in %s", r.Body)
	}
	return res
}

// RPCError returns the JSON-RPC error code and message of a response.
func RPCError(t testing.TB, r *Response) (int, string, map[string]any) {
	t.Helper()
	m := r.JSON(t)
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("expected a JSON-RPC error (HTTP %d), got %s", r.Status, r.Body)
	}
	data, _ := e["data"].(map[string]any)
	return int(e["code"].(float64)), e["message"].(string), data
}

// WithConfig adjusts any setting.
func WithConfig(f func(*config.Config)) Option { return func(o *startOptions) { f(o.cfg) } }

// Tenant creates a public tenant (no bearer tokens) and returns its slug.
func (p *Platform) Tenant(t testing.TB, slug string) string {
	t.Helper()
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": slug, "displayName": slug,
		"settings": map[string]any{"auth": map[string]any{"public": true}}})
	return slug
}

// Tool registers a tool and returns its webhook secret.
func (p *Platform) Tool(t testing.TB, slug string, def map[string]any) string {
	t.Helper()
	m := p.MustAdmin(t, 201, "POST", "/api/v1/tenants/"+slug+"/tools", def)
	s, _ := m["webhookSecret"].(string)
	return s
}
