package endpoint_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/testkit/platformtest"
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
