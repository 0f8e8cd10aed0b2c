package endpoint_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/endpoint"
	"github.com/opsmcp/platform/testkit/oidctest"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
)

// newNonce is a session nonce of the platform's shape.
func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "ls_" + hex.EncodeToString(b[:])
}

func legacyURL(p *platformtest.Platform, slug string) string { return p.URL + "/t/" + slug + "/mcp" }

var legacyCaps = obj{"elicitation": obj{"form": obj{}, "url": obj{}}, "sampling": obj{}, "roots": obj{}}

func TestEachRequestIsServedInTheEraItClaims(t *testing.T) {
	h := newHook(t, replyText("hi"))
	p := setup(t, h)
	c := newLegacyClient(t, legacyURL(p, "acme"))

	// initialize without any 2026-07-28 marker starts a session, at the
	// version asked for when it is served, else the newest.
	for asked, want := range map[string]string{"2025-11-25": "2025-11-25", "2025-06-18": "2025-06-18",
		"2025-03-26": "2025-03-26", "2024-11-05": "2025-11-25", "2099-01-01": "2025-11-25"} {
		res := newLegacyClient(t, c.url).initialize(asked, obj{})
		if res["protocolVersion"] != want {
			t.Errorf("asked %s, got %v, want %s", asked, res["protocolVersion"], want)
		}
		caps, _ := res["capabilities"].(map[string]any)
		if caps["tools"] == nil || caps["logging"] == nil || caps["completions"] == nil || caps["resources"].(map[string]any)["subscribe"] != true {
			t.Errorf("capabilities %v", caps)
		}
		if info, _ := res["serverInfo"].(map[string]any); info["name"] != "opsmcp/acme" {
			t.Errorf("serverInfo %v", res["serverInfo"])
		}
	}
	c.initialize("2025-11-25", legacyCaps)
	for _, ch := range c.session {
		if ch < 0x21 || ch > 0x7e {
			t.Fatalf("session id has %q, outside 0x21-0x7E", ch)
		}
	}
	// A session's results have the legacy shape: no resultType, no
	// caching hints; the stateless path keeps them.
	list := c.result("tools/list", obj{})
	for _, k := range []string{"resultType", "ttlMs", "cacheScope"} {
		if _, ok := list[k]; ok {
			t.Errorf("legacy tools/list carries %s", k)
		}
	}
	if tools, _ := list["tools"].([]any); len(tools) != 1 {
		t.Fatalf("tools %v", list)
	}
	modern := platformtest.Result(t, p.MCP(t, "acme", "tools/list", nil))
	if modern["resultType"] != "complete" || modern["ttlMs"] == nil {
		t.Fatalf("the stateless path changed: %v", modern)
	}
	if got := c.result("ping", obj{}); len(got) != 0 {
		t.Fatalf("ping: %v", got)
	}
	if got := toolText(t, c.result("tools/call", obj{"name": "echo", "arguments": obj{"msg": "x", "n": 5}})); got != "hi" {
		t.Fatalf("tools/call %q", got)
	}

	// A claim in _meta wins, even on initialize: the stateless answer.
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	r := raw(t, p, "POST", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{`+meta+`}}`, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "initialize")
	if code, _, _ := platformtest.RPCError(t, r); r.Status != 404 || code != -32601 {
		t.Fatalf("claimed initialize: %d %d", r.Status, code)
	}
	// A 2026-07-28 header without the claim is a malformed modern request.
	r = raw(t, p, "POST", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "initialize")
	if code, _, _ := platformtest.RPCError(t, r); r.Status != 400 || code != -32602 {
		t.Fatalf("modern header without _meta: %d %d", r.Status, code)
	}
	// The key appearing elsewhere than params._meta is no claim.
	r = raw(t, p, "POST", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"io.modelcontextprotocol/protocolVersion","version":"1"}}}`)
	if r.Status != 200 || r.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize naming the key in clientInfo: %d %s", r.Status, r.Body)
	}
	// GET and DELETE: a session's, or 405 (none named, or 2026-07-28).
	for _, hdr := range [][]string{nil, {"Mcp-Session-Id", c.session, "MCP-Protocol-Version", "2026-07-28"}} {
		for _, m := range []string{"GET", "DELETE"} {
			if r := raw(t, p, m, "", hdr...); r.Status != 405 {
				t.Errorf("%s %v: %d", m, hdr, r.Status)
			}
		}
	}
	// Batches, responses without a session and bad JSON are refused.
	if r := raw(t, p, "POST", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`); r.Status != 400 {
		t.Errorf("batch: %d", r.Status)
	}
	if r := raw(t, p, "POST", `{"jsonrpc":"2.0","id":"opsmcp-00000000000000000000000000000000","result":{}}`); r.Status != 400 {
		t.Errorf("response without a session: %d %s", r.Status, r.Body)
	}
	if r := raw(t, p, "POST", `{"jsonrpc":`); r.Status != 400 {
		t.Errorf("parse error: %d", r.Status)
	}
	// Unknown and modern-only methods on a session: -32601 in the body.
	for _, m := range []string{"server/discover", "subscriptions/listen", "x/y"} {
		msg, status := c.call(m, obj{})
		if e, _ := msg["error"].(map[string]any); status != 200 || e["code"] != float64(-32601) {
			t.Errorf("%s: %d %v", m, status, msg)
		}
	}
}

func TestLegacyServingCanBeTurnedOff(t *testing.T) {
	h := newHook(t, replyText("hi"))
	p := setup(t, h, platformtest.WithConfig(func(c *config.Config) { c.Legacy.Serve = false }))
	r := raw(t, p, "POST", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	if code, _, _ := platformtest.RPCError(t, r); r.Status != 400 || code != -32020 {
		t.Fatalf("initialize with legacy off: %d %d", r.Status, code)
	}
	if r := raw(t, p, "GET", "", "Mcp-Session-Id", "x"); r.Status != 405 {
		t.Fatalf("GET with legacy off: %d", r.Status)
	}
}

func TestASessionServesOnlyItsOwnerOnItsTenant(t *testing.T) {
	op := oidctest.Start(t)
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	h := newHook(t, replyText("hi"))
	authTenant(t, p, "acme", op, oidctest.ClientA, false)
	authTenant(t, p, "globex", op, oidctest.ClientA, false) // the same tokens pass its bearer check
	h.setSecret(p.Tool(t, "acme", echoTool("echo", h.URL)))
	alice := op.UserToken(t, oidctest.ClientA, op.UserName(1))
	bob := op.UserToken(t, oidctest.ClientA, op.UserName(2))
	c := newLegacyClient(t, legacyURL(p, "acme"))
	c.token = alice
	c.initialize("2025-11-25", obj{})
	if rows := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/sessions", nil)["items"].([]any); len(rows) != 1 ||
		rows[0].(map[string]any)["principal"].(map[string]any)["subject"] != "id1" {
		t.Fatalf("sessions %v", rows)
	}
	ok := func(c *legacyClient) int {
		msg, status := c.call("tools/list", obj{})
		if status == 200 && msg["result"] == nil {
			t.Fatalf("200 without a result: %v", msg)
		}
		return status
	}
	if got := ok(c); got != 200 {
		t.Fatalf("the owner: %d", got)
	}
	try := func(name string, change func(c *legacyClient), want int) {
		t.Helper()
		d := c.clone()
		change(d)
		msg, status := d.call("tools/list", obj{})
		if status != want {
			t.Errorf("%s: HTTP %d, want %d: %v", name, status, want, msg)
		}
		if e, _ := msg["error"].(map[string]any); want == 404 && e["code"] != float64(-32001) {
			t.Errorf("%s: %v", name, msg)
		}
	}
	nonce, token, _ := strings.Cut(c.session, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(token, "v1."))
	tampered := append([]byte(nil), raw...)
	tampered[len(tampered)/2] ^= 1
	try("no session", func(d *legacyClient) { d.session = "" }, 400)
	try("forged", func(d *legacyClient) {
		d.session = nonce + ".v1." + base64.RawURLEncoding.EncodeToString(make([]byte, 200))
	}, 404)
	try("tampered", func(d *legacyClient) { d.session = nonce + ".v1." + base64.RawURLEncoding.EncodeToString(tampered) }, 404)
	try("another nonce", func(d *legacyClient) { d.session = newNonce() + "." + token }, 404)
	try("the nonce alone", func(d *legacyClient) { d.session = nonce }, 404)
	try("not even a token", func(d *legacyClient) { d.session = "hello" }, 404)
	try("another user's token", func(d *legacyClient) { d.token = bob }, 404)
	try("no token", func(d *legacyClient) { d.token = "" }, 401)
	try("another tenant", func(d *legacyClient) { d.url = legacyURL(p, "globex") }, 404)
	// A request with a 2026-07-28 header is the stateless path's (here:
	// without _meta, invalid), never served from the session.
	try("the 2026-07-28 header", func(d *legacyClient) { d.version = "2026-07-28" }, 400)
	try("an unknown version header", func(d *legacyClient) { d.version = "1999-01-01" }, 400)
	if !strings.Contains(p.Logs.String(), `"reason":"principal"`) {
		t.Error("the log does not say the principal differed")
	}

	// DELETE ends it: 204, then 404 for everything, even its owner.
	if r := platformtest.Do(t, "DELETE", c.url, c.header(), nil); r.Status != 204 {
		t.Fatalf("DELETE: %d %s", r.Status, r.Body)
	}
	if got := ok(c); got != 404 {
		t.Fatalf("after DELETE: %d", got)
	}
	if r := platformtest.Do(t, "DELETE", c.url, c.header(), nil); r.Status != 404 {
		t.Fatalf("DELETE again: %d", r.Status)
	}
	if rows := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/sessions", nil)["items"].([]any); len(rows) != 0 {
		t.Fatalf("an ended session is listed: %v", rows)
	}
}

func TestASessionEndsWithAnAdminOrItsTenantOnEveryReplica(t *testing.T) {
	keys := key()
	db := platformtest.PostgresSchemaURL(t)
	a := platformtest.Start(t, db, platformtest.WithStateKeys(keys))
	b := platformtest.Start(t, db, platformtest.WithStateKeys(keys), platformtest.WithConfig(func(c *config.Config) { c.PublicURL = a.URL }))
	h := newHook(t, replyText("hi"))
	a.Tenant(t, "acme")
	h.setSecret(a.Tool(t, "acme", echoTool("echo", h.URL)))
	open := func() (*legacyClient, *legacyClient) {
		ca := newLegacyClient(t, legacyURL(a, "acme"))
		ca.initialize("2025-11-25", obj{})
		cb := ca.clone()
		cb.url = legacyURL(b, "acme")
		if _, status := cb.call("tools/list", obj{}); status != 200 {
			t.Fatalf("a session made on one replica is not served by another: %d", status)
		}
		return ca, cb
	}
	gone := func(c *legacyClient) bool { _, s := c.call("tools/list", obj{}); return s == 404 }

	// The client's DELETE on one replica ends it on the other.
	ca, cb := open()
	if r := platformtest.Do(t, "DELETE", cb.url, cb.header(), nil); r.Status != 204 {
		t.Fatalf("DELETE: %d", r.Status)
	}
	testwait.Until(t, "a session deleted on b is refused on a", func() bool { return gone(ca) })

	// An admin ends one by its id.
	ca, cb = open()
	items := a.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/sessions", nil)["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("sessions: %v", items)
	}
	id := items[0].(map[string]any)["id"].(string)
	if !strings.HasPrefix(ca.session, id+".v1.") {
		t.Fatal("the session id is not its nonce and its sealed token")
	}
	if strings.Contains(string(a.Admin(t, "GET", "/api/v1/tenants/acme/sessions", nil).Body), ca.session[len(id):]) {
		t.Fatal("the admin API shows a session's token")
	}
	for _, bad := range []string{"ls_nope", "../x", strings.Repeat("a", 35)} {
		if r := b.Admin(t, "DELETE", "/api/v1/tenants/acme/sessions/"+bad, nil); r.Status != 404 {
			t.Fatalf("ending %q: %d", bad, r.Status)
		}
	}
	// A reason too long, or not text, is refused and ends nothing.
	for _, body := range []obj{{"reason": strings.Repeat("x", 501)}, {"reason": 5}} {
		if r := b.Admin(t, "DELETE", "/api/v1/tenants/acme/sessions/"+id, body); r.Status != 422 || gone(cb) {
			t.Fatalf("ending with %v: %d", body, r.Status)
		}
	}
	b.MustAdmin(t, 204, "DELETE", "/api/v1/tenants/acme/sessions/"+id, obj{"reason": "a stolen laptop"})
	if !gone(cb) {
		t.Fatal("ended by an admin on b, still served by b")
	}
	testwait.Until(t, "a session ended by an admin on b is refused on a", func() bool { return gone(ca) })
	if r := b.Admin(t, "DELETE", "/api/v1/tenants/acme/sessions/"+id, nil); r.Status != 404 {
		t.Fatalf("ending an ended session: %d", r.Status)
	}
	if audit := a.Admin(t, "GET", "/api/v1/audit", nil); !strings.Contains(string(audit.Body), `"object":"`+id+`"`) || !strings.Contains(string(audit.Body), "a stolen laptop") {
		t.Fatalf("ending a session is not audited with its id: %s", audit.Body)
	}

	// Disabling the tenant ends its sessions for good.
	ca, cb = open()
	a.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", obj{"disabled": true})
	testwait.Until(t, "a disabled tenant's sessions are refused", func() bool { return gone(ca) && gone(cb) })
	a.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", obj{"disabled": false})
	initialize := func(p *platformtest.Platform) bool {
		r := platformtest.Do(t, "POST", legacyURL(p, "acme"), http.Header{"Content-Type": {"application/json"}},
			[]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
		return r.Status == 200
	}
	// The replica that disabled it knows at once; the other within a
	// refresh, never serving the tenant again before.
	if !initialize(a) || !gone(ca) {
		t.Fatal("a session of a disabled tenant came back on the replica that disabled it")
	}
	testwait.Until(t, "b serves the tenant again", func() bool { return initialize(b) })
	if !gone(cb) {
		t.Fatal("a session of a disabled tenant came back on another replica")
	}
	n := a.MustAdmin(t, 200, "DELETE", "/api/v1/tenants/acme/sessions", nil)["ended"]
	if n != float64(2) { // the two initialize opened above
		t.Fatalf("ended %v", n)
	}

	// A deleted tenant's sessions are gone, even once its slug is given
	// to a new tenant.
	ca, cb = open()
	a.MustAdmin(t, 204, "DELETE", "/api/v1/tenants/acme", nil)
	a.MustAdmin(t, 201, "POST", "/api/v1/tenants", obj{"slug": "acme", "displayName": "Acme again", "reuseRetiredSlug": true,
		"settings": obj{"auth": obj{"public": true}}})
	testwait.Until(t, "b does not serve the new tenant", func() bool { return initialize(b) })
	if !gone(ca) || !gone(cb) {
		t.Fatal("a deleted tenant's session is served by the tenant that took its slug")
	}
}

func TestASessionExpires(t *testing.T) {
	h := newHook(t, replyText("hi"))
	p := setup(t, h, platformtest.WithServer(func(o *endpoint.Options) { o.Legacy.SessionTTL = 300 * time.Millisecond }))
	c := newLegacyClient(t, legacyURL(p, "acme"))
	c.initialize("2025-11-25", obj{})
	time.Sleep(400 * time.Millisecond)
	if _, status := c.call("tools/list", obj{}); status != 404 {
		t.Fatalf("an expired session: %d", status)
	}
	if !strings.Contains(p.Logs.String(), `"reason":"expired"`) {
		t.Fatal("the log does not say it expired")
	}
}

// TestNULBytesInAClientsInfoStillGetItASession: a client whose clientInfo
// carries NUL bytes, which no database keeps in text, still gets its
// session on both databases (PostgreSQL refused the session's row, and the
// client was told sessions were unavailable): the platform keeps a mark
// in their place.
func TestNULBytesInAClientsInfoStillGetItASession(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			h := newHook(t, replyText("hi"))
			p := platformtest.Start(t, d.New(t))
			p.Tenant(t, "acme")
			h.setSecret(p.Tool(t, "acme", echoTool("echo", h.URL)))
			r := raw(t, p, "POST", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"evil\u0000client","version":"1\u0000"}}}`)
			if r.Status != 200 || r.Header.Get("Mcp-Session-Id") == "" {
				t.Fatalf("initialize with NULs in clientInfo: %d %s", r.Status, r.Body)
			}
		})
	}
}
