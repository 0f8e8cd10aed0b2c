package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/server"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// generous bounds every wait on the platform in these tests: far above
// any configured timeout, so it only stops a hung test.
const generous = 30 * time.Second

// trickle writes head, then the rest one byte every 50 ms until a write
// fails (the server closed the connection) or stop is closed. It reports
// how many bytes of the rest it wrote.
func trickle(conn net.Conn, head string, rest int, stop <-chan struct{}) <-chan int {
	done := make(chan int, 1)
	go func() {
		n := 0
		defer func() { done <- n }()
		if _, err := io.WriteString(conn, head); err != nil {
			return
		}
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for n < rest {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if _, err := conn.Write([]byte{' '}); err != nil {
				return
			}
			n++
		}
	}()
	return done
}

// readUntilClosed reads conn until the server closes it and returns what
// it sent; it fails the test if the connection is still open after the
// generous bound.
func readUntilClosed(t *testing.T, conn net.Conn) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(generous))
	var got bytes.Buffer
	_, err := io.Copy(&got, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %s; it sent %q", generous, got.String())
	}
	return got.String()
}

func timeoutPlatform(t *testing.T) *platformtest.Platform {
	return platformtest.Start(t, platformtest.SQLiteURL(t), platformtest.WithConfig(func(c *config.Config) {
		c.HTTP.ReadTimeout = 300 * time.Millisecond
		c.HTTP.ReadHeaderTimeout = 300 * time.Millisecond
	}))
}

// TestASlowBodyIsCutOff: a client that sends its headers and then
// trickles the body a byte at a time is cut off at the read timeout, on the admin API and on an MCP endpoint: the connection is
// closed long before the body is complete, nothing is created, and the
// platform goes on serving.
func TestASlowBodyIsCutOff(t *testing.T) {
	p := timeoutPlatform(t)
	p.Tenant(t, "acme")
	addr := strings.TrimPrefix(p.URL, "http://")
	const length = 100000
	for _, target := range []struct{ path, headers string }{
		{"/api/v1/tenants", "Authorization: Bearer " + platformtest.AdminToken + "\r\nContent-Type: application/json\r\n"},
		{"/t/acme/mcp", "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\n"},
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %d\r\n\r\n{\"slug\":\"slow\",", target.path, addr, target.headers, length)
		stop := make(chan struct{})
		sent := trickle(conn, head, length, stop)
		answer := readUntilClosed(t, conn)
		close(stop)
		conn.Close()
		if n := <-sent; n >= length-20 {
			t.Fatalf("%s: the whole body was accepted at a byte every 50 ms", target.path)
		}
		// The admin API says why when the answer gets through before the
		// connection closes.
		if status, _, _ := strings.Cut(answer, "\r\n"); target.path == "/api/v1/tenants" && answer != "" && !strings.Contains(status, " 408 ") {
			t.Fatalf("%s: answered %q", target.path, status)
		}
	}
	if r := p.Admin(t, "GET", "/api/v1/tenants/slow", nil); r.Status != 404 {
		t.Fatalf("the cut-off body created a tenant: %d", r.Status)
	}
	p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme", nil)
}

// TestSlowHeadersAreCutOff: a client trickling its headers is cut off at
// the header read timeout.
func TestSlowHeadersAreCutOff(t *testing.T) {
	p := timeoutPlatform(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stop := make(chan struct{})
	sent := trickle(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ", 100000, stop)
	readUntilClosed(t, conn)
	close(stop)
	if n := <-sent; n >= 100000 {
		t.Fatal("the whole header was accepted")
	}
}

// TestTheReadDeadlineEndsWithTheBody: once a body has been read, the
// read deadline no longer applies: a kept-alive connection serves its next
// request after the deadline has passed, and a stream answered to a
// request (subscriptions/listen) goes on delivering events long after
// it.
func TestTheReadDeadlineEndsWithTheBody(t *testing.T) {
	const deadline = 200 * time.Millisecond
	p := platformtest.Start(t, platformtest.SQLiteURL(t), platformtest.WithConfig(func(c *config.Config) {
		c.HTTP.ReadTimeout = deadline
		c.HTTP.ReadHeaderTimeout = deadline
	}))
	p.Tenant(t, "acme")

	// A kept-alive connection.
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	send := func(method, path, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, p.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+platformtest.AdminToken)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if err := req.Write(conn); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(generous))
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			t.Fatalf("%s %s on the kept-alive connection: %v", method, path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := send("PATCH", "/api/v1/tenants/acme", `{"displayName":"A"}`); s != 200 {
		t.Fatalf("first request: %d", s)
	}
	time.Sleep(4 * deadline) // past the first request's read deadline
	if s := send("PATCH", "/api/v1/tenants/acme", `{"displayName":"B"}`); s != 200 {
		t.Fatalf("second request: %d", s)
	}

	// A stream.
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen",
		"params": map[string]any{"notifications": map[string]any{"toolsListChanged": true}, "_meta": platformtest.Meta(nil)}})
	req, _ := http.NewRequest("POST", p.URL+"/t/acme/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan string, 8)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- data
			}
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the stream ended")
			}
			return ev
		case <-time.After(generous):
			t.Fatal("no event")
		}
		return ""
	}
	if ev := next(); !strings.Contains(ev, "notifications/subscriptions/acknowledged") {
		t.Fatalf("first event %s", ev)
	}
	time.Sleep(4 * deadline) // past the stream request's read deadline
	p.Tool(t, "acme", map[string]any{"name": "late", "description": "x", "inputSchema": map[string]any{"type": "object"},
		"handler": map[string]any{"url": "http://127.0.0.1:1/hook"}})
	if ev := next(); !strings.Contains(ev, "notifications/tools/list_changed") {
		t.Fatalf("event after the deadline: %s", ev)
	}
}

// TestMetricsListener: with --metrics-listen, /metrics is served there
// (behind the metrics token) and nowhere on the main listener, which
// keeps serving everything else; the metrics listener serves nothing
// else, and shutting down closes both. Without it, /metrics is on the
// main listener, behind the token too.
func TestMetricsListener(t *testing.T) {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED"} {
		t.Setenv(k, "")
	}
	const token = "metrics-token-for-the-test"
	get := func(t *testing.T, url, tok string) int {
		t.Helper()
		h := http.Header{}
		if tok != "" {
			h.Set("Authorization", "Bearer "+tok)
		}
		r := platformtest.Do(t, "GET", url, h, nil)
		if r.Status == 200 && strings.HasSuffix(url, "/metrics") && !strings.Contains(string(r.Body), "# TYPE ") {
			t.Fatalf("GET %s: 200 without a Prometheus exposition", url)
		}
		return r.Status
	}

	t.Run("separate", func(t *testing.T) {
		p := platformtest.Start(t, platformtest.SQLiteURL(t), platformtest.WithConfig(func(c *config.Config) {
			c.HTTP.MetricsListen = "127.0.0.1:0"
			c.MetricsToken = token
		}))
		p.Tenant(t, "acme")
		p.MCP(t, "acme", "tools/list", nil)
		addr := p.Server.MetricsAddr()
		if addr == nil {
			t.Fatal("no metrics listener")
		}
		murl := "http://" + addr.String()
		if s := get(t, murl+"/metrics", token); s != 200 {
			t.Fatalf("metrics listener with the token: %d", s)
		}
		for _, tok := range []string{"", "wrong", token + "x"} {
			if s := get(t, murl+"/metrics", tok); s != 401 {
				t.Fatalf("metrics listener with %q: %d", tok, s)
			}
		}
		if s := get(t, p.URL+"/metrics", token); s != 404 {
			t.Fatalf("main listener still serves /metrics: %d", s)
		}
		for _, path := range []string{"/api/v1/tenants", "/t/acme/mcp", "/healthz", "/"} {
			if s := get(t, murl+path, platformtest.AdminToken); s != 404 && s != 405 {
				t.Fatalf("metrics listener serves %s: %d", path, s)
			}
		}
		p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme", nil)
		p.Stop()
		for _, a := range []string{addr.String(), strings.TrimPrefix(p.URL, "http://")} {
			if c, err := net.DialTimeout("tcp", a, generous); err == nil {
				c.Close()
				t.Fatalf("%s still accepts connections after shutdown", a)
			}
		}
	})

	t.Run("main", func(t *testing.T) {
		p := platformtest.Start(t, platformtest.SQLiteURL(t), platformtest.WithConfig(func(c *config.Config) { c.MetricsToken = token }))
		if p.Server.MetricsAddr() != nil {
			t.Fatal("a metrics listener without --metrics-listen")
		}
		if s := get(t, p.URL+"/metrics", token); s != 200 {
			t.Fatalf("main listener with the token: %d", s)
		}
		if s := get(t, p.URL+"/metrics", ""); s != 401 {
			t.Fatalf("main listener without the token: %d", s)
		}
	})

	t.Run("address taken", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		cfg := defaults(t)
		cfg.HTTP.MetricsListen = ln.Addr().String()
		if _, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler), "test"); err == nil || !strings.Contains(err.Error(), "metrics-listen") {
			t.Fatalf("start with the metrics address taken: %v", err)
		}
	})
}

// defaults is the default configuration on a fresh SQLite database.
func defaults(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Load(flag.NewFlagSet("t", flag.ContinueOnError), nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.DatabaseURL = platformtest.SQLiteURL(t)
	return cfg
}

// TestNewRefusesABadConfigurationBuiltInCode: server.New applies the
// same rules as the flags, so a program that builds its configuration
// in code cannot start with a short bootstrap token, a leftover one next
// to an admin issuer, or a zero timeout; it opens no database.
func TestNewRefusesABadConfigurationBuiltInCode(t *testing.T) {
	for _, c := range []struct {
		name string
		mut  func(*config.Config)
		want string
	}{
		{"short token", func(c *config.Config) { c.BootstrapToken = "change-me" }, "at least 32 characters"},
		{"token beside an issuer", func(c *config.Config) {
			c.BootstrapToken, c.AdminIssuer, c.AdminClientID = strings.Repeat("t", 40), "https://id.example", "c"
		}, "keep"},
		{"zero read timeout", func(c *config.Config) { c.HTTP.ReadTimeout = 0 }, "read-timeout"},
		{"bad proxies", func(c *config.Config) { c.HTTP.TrustedProxies = "proxy.internal" }, "trusted-proxies"},
	} {
		cfg := defaults(t)
		path := strings.TrimPrefix(cfg.DatabaseURL, "sqlite:")
		c.mut(cfg)
		_, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler), "test")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the refused start opened the database", c.name)
		}
	}
}

// TestAConnectionThatNeverSpokeDoesNotHoldUpShutdown: a connection that
// has sent no request (a browser opens some ahead of need) holds nothing
// to drain, so shutdown closes it instead of waiting for it: with a
// shutdown timeout shorter than the five seconds net/http alone gives
// such a connection, the drain still ends clean, and the connection is
// closed.
func TestAConnectionThatNeverSpokeDoesNotHoldUpShutdown(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t),
		platformtest.WithConfig(func(c *config.Config) { c.ShutdownTimeout = time.Second }))
	// A request first, so the server is accepting, then one that never
	// speaks.
	if r := platformtest.Do(t, "GET", p.URL+"/healthz", nil, nil); r.Status != 200 {
		t.Fatalf("healthz: %d", r.Status)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := p.Shutdown(); err != nil {
		t.Fatalf("shutdown with a silent connection open: %v", err)
	}
	if n, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatalf("the silent connection is still open (read %d bytes)", n)
	}
}
