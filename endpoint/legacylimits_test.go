package endpoint_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/endpoint"
	"github.com/opsmcp/platform/testkit/oidctest"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
)

var initializeBody = []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"limits","version":"1"}}}`)

// initializeFrom starts a session on slug as a client behind a proxy
// that names it in X-Forwarded-For (none: "").
func initializeFrom(t *testing.T, p *platformtest.Platform, slug, xff string) *platformtest.Response {
	t.Helper()
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
	if xff != "" {
		h.Set("X-Forwarded-For", xff)
	}
	return platformtest.Do(t, http.MethodPost, legacyURL(p, slug), h, initializeBody)
}

// TestInitializeIsLimitedPerCallerAndPerTenant, on a public tenant
// behind a trusted proxy: a caller, however its address is spelt, starts
// its minute's sessions and is then refused with 429, a JSON-RPC error
// and Retry-After; other callers have their own until the tenant's
// allowance is spent; another tenant's is its own; a refused start
// writes no session.
func TestInitializeIsLimitedPerCallerAndPerTenant(t *testing.T) {
	h := newHook(t, replyText("hi"))
	p := setup(t, h, platformtest.WithConfig(func(c *config.Config) {
		c.Legacy.InitializePerCaller, c.Legacy.InitializePerTenant = 2, 5
		c.HTTP.TrustedProxies = "127.0.0.1"
	}))
	p.Tenant(t, "other")
	for i, st := range []struct {
		slug, xff string
		status    int
	}{
		{"acme", "203.0.113.7", 200},
		{"acme", "203.0.113.7", 200},
		{"acme", "203.0.113.7", 429},
		{"acme", "::ffff:203.0.113.7", 429},        // the same caller, mapped into IPv6
		{"acme", "198.51.100.1, 203.0.113.7", 429}, // the rightmost untrusted address is the caller
		{"acme", "2001:db8:1:2::1", 200},           // an IPv6 caller is its /64
		{"acme", "2001:db8:1:2:abcd::9", 200},
		{"acme", "2001:DB8:1:2:0:0:0:ffff", 429},
		{"acme", "198.51.100.1", 200}, // the tenant's fifth
		{"acme", "198.51.100.2", 429}, // the tenant's five are spent
		{"other", "203.0.113.7", 200}, // another tenant's allowance is its own
	} {
		r := initializeFrom(t, p, st.slug, st.xff)
		if r.Status != st.status {
			t.Fatalf("step %d (%s from %s): HTTP %d, want %d: %s", i, st.slug, st.xff, r.Status, st.status, r.Body)
		}
		if r.Status != 429 {
			continue
		}
		if secs, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || secs < 1 || secs > 60 {
			t.Fatalf("step %d: Retry-After %q", i, r.Header.Get("Retry-After"))
		}
		var msg struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(r.Body, &msg); err != nil || string(msg.ID) != "0" || msg.Error.Code == 0 ||
			!strings.Contains(msg.Error.Message, "Too many sessions started") || r.Header.Get("Mcp-Session-Id") != "" {
			t.Fatalf("step %d: a refused initialize answered %s (session %q)", i, r.Body, r.Header.Get("Mcp-Session-Id"))
		}
	}
	// Five sessions of acme were started, no more.
	items := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/sessions", nil)["items"].([]any)
	if len(items) != 5 {
		t.Fatalf("acme has %d sessions; five were started", len(items))
	}
}

// TestInitializeLimitsTrustNoForwardedAddressFromAnUntrustedPeer: with no
// proxy trusted, X-Forwarded-For is the client's own say and names no
// caller: every spelling of it is the connecting peer, one caller.
func TestInitializeLimitsTrustNoForwardedAddressFromAnUntrustedPeer(t *testing.T) {
	h := newHook(t, replyText("hi"))
	p := setup(t, h, platformtest.WithConfig(func(c *config.Config) {
		c.Legacy.InitializePerCaller, c.Legacy.InitializePerTenant = 2, 100
	}))
	for i, xff := range []string{"203.0.113.1", "203.0.113.2", "203.0.113.3", "2001:db8::1", ""} {
		want := 200
		if i >= 2 {
			want = 429
		}
		if r := initializeFrom(t, p, "acme", xff); r.Status != want {
			t.Fatalf("start %d (claiming %q): HTTP %d, want %d", i, xff, r.Status, want)
		}
	}
}

// refusedLive checks a refused initialize: 429, Retry-After, a JSON-RPC
// error naming whose live sessions are too many, and no session.
func refusedLive(t *testing.T, step string, r *platformtest.Response, whose string) {
	t.Helper()
	var msg struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if r.Status != 429 || r.Header.Get("Retry-After") == "" || r.Header.Get("Mcp-Session-Id") != "" ||
		json.Unmarshal(r.Body, &msg) != nil || msg.Error.Code == 0 || !strings.Contains(msg.Error.Message, whose) {
		t.Fatalf("%s: HTTP %d (Retry-After %q): %s; want 429 naming %q", step, r.Status, r.Header.Get("Retry-After"), r.Body, whose)
	}
}

// TestLiveSessionsAreCappedPerCallerAndPerTenant, on a public tenant
// behind a trusted proxy: a caller, however its address is spelt, holds
// at most its share of live sessions, fleet-wide; others theirs until
// the tenant's are all live; ending one frees its place; a session
// ended or expired does not count.
func TestLiveSessionsAreCappedPerCallerAndPerTenant(t *testing.T) {
	h := newHook(t, replyText("hi"))
	p := setup(t, h, platformtest.WithConfig(func(c *config.Config) {
		c.Legacy.SessionsPerCaller, c.Legacy.SessionsPerTenant = 2, 4
		c.HTTP.TrustedProxies = "127.0.0.1"
	}))
	p.Tenant(t, "other")
	start := func(slug, xff string) *platformtest.Response { t.Helper(); return initializeFrom(t, p, slug, xff) }
	var first string
	for i, xff := range []string{"203.0.113.7", "::ffff:203.0.113.7"} {
		r := start("acme", xff)
		if r.Status != 200 {
			t.Fatalf("session %d of the caller: HTTP %d %s", i, r.Status, r.Body)
		}
		if i == 0 {
			first = r.Header.Get("Mcp-Session-Id")
		}
	}
	for _, xff := range []string{"203.0.113.7", "::ffff:cb00:7107", "198.51.100.1, 203.0.113.7"} {
		refusedLive(t, "the caller's third, from "+xff, start("acme", xff), "this caller has 2 live sessions")
	}
	// Another tenant's caps are its own.
	if r := start("other", "203.0.113.7"); r.Status != 200 {
		t.Fatalf("another tenant: HTTP %d", r.Status)
	}
	// Two more callers fill the tenant; a fourth caller is refused.
	for _, xff := range []string{"2001:db8:1:2::1", "198.51.100.9"} {
		if r := start("acme", xff); r.Status != 200 {
			t.Fatalf("caller %s: HTTP %d %s", xff, r.Status, r.Body)
		}
	}
	refusedLive(t, "a new caller on a full tenant", start("acme", "192.0.2.55"), "this tenant has 4 live sessions")
	// Ended by its client, a session frees its place, for its caller too.
	h2 := http.Header{"Mcp-Session-Id": {first}, "X-Forwarded-For": {"203.0.113.7"}}
	if r := platformtest.Do(t, http.MethodDelete, legacyURL(p, "acme"), h2, nil); r.Status != 204 {
		t.Fatalf("DELETE: %d %s", r.Status, r.Body)
	}
	if r := start("acme", "203.0.113.7"); r.Status != 200 {
		t.Fatalf("after one ended: HTTP %d %s", r.Status, r.Body)
	}
	if items := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/sessions", nil)["items"].([]any); len(items) != 4 {
		t.Fatalf("acme has %d live sessions; its cap is 4", len(items))
	}
}

// TestACallerWithManyTokensIsOneCaller: on a tenant that identifies its
// callers, a user is its principal however many tokens it holds, and
// another user of the same client has a cap of their own.
func TestACallerWithManyTokensIsOneCaller(t *testing.T) {
	op := oidctest.Start(t)
	p := platformtest.Start(t, platformtest.SQLiteURL(t), platformtest.WithConfig(func(c *config.Config) {
		c.Legacy.SessionsPerCaller, c.Legacy.SessionsPerTenant = 2, 100
	}))
	authTenant(t, p, "acme", op, oidctest.ClientA, false)
	startAs := func(tok string) *platformtest.Response {
		t.Helper()
		h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}, "Authorization": {"Bearer " + tok}}
		return platformtest.Do(t, http.MethodPost, legacyURL(p, "acme"), h, initializeBody)
	}
	for i := range 2 {
		if r := startAs(op.UserToken(t, oidctest.ClientA, op.UserName(1))); r.Status != 200 {
			t.Fatalf("alice's session %d: HTTP %d %s", i, r.Status, r.Body)
		}
	}
	for range 2 {
		refusedLive(t, "alice's third, with a fresh token", startAs(op.UserToken(t, oidctest.ClientA, op.UserName(1))), "this caller has 2 live sessions")
	}
	if r := startAs(op.UserToken(t, oidctest.ClientA, op.UserName(2))); r.Status != 200 {
		t.Fatalf("bob: HTTP %d %s", r.Status, r.Body)
	}
}

// TestIdleSessionsEnd: a session unused past the idle limit ends (the
// admin API no longer lists it, its id gets 404), while one in use
// lives on.
func TestIdleSessionsEnd(t *testing.T) {
	h := newHook(t, replyText("hi"))
	p := setup(t, h, platformtest.WithServer(func(o *endpoint.Options) {
		o.Legacy.SessionIdle, o.Legacy.Sweep, o.Legacy.TouchEvery = 1500*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
	}))
	idle := newLegacyClient(t, legacyURL(p, "acme"))
	idle.initialize("2025-11-25", legacyCaps)
	busy := newLegacyClient(t, legacyURL(p, "acme"))
	busy.initialize("2025-11-25", legacyCaps)
	deadline := time.Now().Add(30 * time.Second)
	for {
		busy.result("ping", obj{})
		items := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/sessions", nil)["items"].([]any)
		if len(items) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle session never ended: %v", items)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, status := idle.call("ping", obj{}); status != 404 {
		t.Fatalf("the idle session answered HTTP %d", status)
	}
	if _, status := busy.call("ping", obj{}); status != 200 {
		t.Fatalf("the session in use answered HTTP %d", status)
	}
}

// TestASessionsCallsInFlightAreCapped: a session may have at most
// CallsPerSession bridged calls in flight (here 2), counting calls whose
// client went away and that wait to be resumed; the next gets HTTP 429,
// a JSON-RPC error naming the cap and Retry-After, and reaches no
// webhook; another session is not held back; once a call ends
// (cancelled), the session may call again.
func TestASessionsCallsInFlightAreCapped(t *testing.T) {
	h := newHook(t, answersHook)
	p := setup(t, h, platformtest.WithServer(func(o *endpoint.Options) { o.Legacy.CallsPerSession = 2 }))
	h.setSecret(p.Tool(t, "acme", chainTool("order", h.URL)))
	c := newLegacyClient(t, legacyURL(p, "acme"))
	c.initialize("2025-11-25", legacyCaps)
	asked := func(m map[string]any) bool { return m["method"] == "elicitation/create" } // then the client goes away
	for range 2 {
		if _, status := c.exchange("tools/call", obj{"name": "order", "arguments": obj{}}, asked); status != 200 {
			t.Fatalf("a call within the cap: HTTP %d", status)
		}
	}
	deliveries := h.count()
	third := c.post(c.url, obj{"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": obj{"name": "order", "arguments": obj{}}})
	var msg struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(third.Body, &msg); err != nil || third.Status != 429 || third.Header.Get("Retry-After") == "" ||
		msg.Error.Code != -32600 || !strings.Contains(msg.Error.Message, "this session has 2") {
		t.Fatalf("a third call: HTTP %d, Retry-After %q, %s", third.Status, third.Header.Get("Retry-After"), third.Body)
	}
	if h.count() != deliveries {
		t.Fatal("the refused call reached the webhook")
	}
	d := newLegacyClient(t, legacyURL(p, "acme"))
	d.initialize("2025-11-25", legacyCaps)
	if _, status := d.exchange("tools/call", obj{"name": "order", "arguments": obj{}}, asked); status != 200 {
		t.Fatalf("another session's call: HTTP %d", status)
	}
	// The first call is cancelled: it ends, and the session may call again.
	if r := c.post(c.url, obj{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": obj{"requestId": 1, "reason": "changed my mind"}}); r.Status != 202 {
		t.Fatalf("cancel: HTTP %d %s", r.Status, r.Body)
	}
	testwait.Until(t, "a call admitted once one ended", func() bool {
		_, status := c.exchange("tools/call", obj{"name": "order", "arguments": obj{}}, asked)
		return status == 200
	})
}
