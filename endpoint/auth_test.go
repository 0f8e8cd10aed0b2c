package endpoint_test

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/egress"
	"github.com/opsmcp/platform/server"
	"github.com/opsmcp/platform/testkit/oidctest"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// authTenant creates a tenant trusting op, accepting tokens issued to
// client (the OP puts the client id in aud).
func authTenant(t *testing.T, p *platformtest.Platform, slug string, op *oidctest.Provider, client string, machine bool) {
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants", obj{"slug": slug, "displayName": slug, "settings": obj{"auth": obj{
		"allowMachinePrincipals": machine, "scopes": []string{"mcp"},
		"issuers": []obj{{"issuer": op.Issuer, "audiences": []string{client}}}}}})
}

func bearerCall(t *testing.T, p *platformtest.Platform, slug, token string, params obj) *platformtest.Response {
	t.Helper()
	body, _ := json.Marshal(obj{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	h := http.Header{"Content-Type": {"application/json"}, "Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {params["name"].(string)}}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return platformtest.Do(t, "POST", p.URL+"/t/"+slug+"/mcp", h, body)
}

func TestAFlowStartedByOneUserCannotBeFinishedByAnother(t *testing.T) {
	op := oidctest.Start(t)
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	authTenant(t, p, "acme", op, oidctest.ClientA, false)
	h := newHook(t, confirmHook)
	h.setSecret(p.Tool(t, "acme", obj{"name": "deploy", "description": "x", "inputSchema": obj{"type": "object"}, "handler": obj{"url": h.URL}}))
	alice := op.UserToken(t, oidctest.ClientA, op.UserName(1))
	bob := op.UserToken(t, oidctest.ClientA, op.UserName(2))

	r := bearerCall(t, p, "acme", alice, obj{"name": "deploy", "arguments": obj{}, "_meta": platformtest.Meta(allCaps)})
	_, state := inputRequired(t, r)
	if got := h.last().Principal; got == nil || got.Subject != "id1" || got.Client != oidctest.ClientA || got.Issuer != op.Issuer {
		t.Fatalf("webhook principal %+v", got)
	}
	retry := obj{"name": "deploy", "arguments": obj{}, "requestState": state, "_meta": platformtest.Meta(allCaps),
		"inputResponses": obj{"wh.confirm": obj{"action": "accept", "content": obj{"ok": true}}}}
	assertFrozen(t, bearerCall(t, p, "acme", bob, retry))
	if !strings.Contains(p.Logs.String(), `"reason":"principal"`) {
		t.Fatal("the log does not say why")
	}
	res := platformtest.Result(t, bearerCall(t, p, "acme", alice, retry))
	if res["resultType"] != "complete" {
		t.Fatalf("alice could not finish her own flow: %v", res)
	}
	for _, tok := range []string{alice, bob} {
		if strings.Contains(p.Logs.String(), tok) {
			t.Fatal("a bearer token reached the log")
		}
	}
}

func TestTokensAreHonouredOnlyWhereTheirIssuerAndAudienceAreTrusted(t *testing.T) {
	opA, opB := oidctest.Start(t), oidctest.Start(t)
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	authTenant(t, p, "alpha", opA, oidctest.ClientA, false)
	authTenant(t, p, "beta", opA, oidctest.ClientB, false) // same issuer, other audience
	authTenant(t, p, "gamma", opB, oidctest.ClientA, false)
	h := newHook(t, replyText("ok"))
	for _, slug := range []string{"alpha", "beta", "gamma"} {
		h.setSecret(p.Tool(t, slug, echoTool("echo", h.URL)))
	}
	tok := opA.UserToken(t, oidctest.ClientA, opA.UserName(1))
	call := obj{"name": "echo", "arguments": obj{}, "_meta": platformtest.Meta(nil)}
	if r := bearerCall(t, p, "alpha", tok, call); r.Status != 200 {
		t.Fatalf("alpha: %d %s", r.Status, r.Body)
	}
	for slug, reason := range map[string]string{"beta": "audience", "gamma": "untrusted_issuer"} {
		before := len(p.Logs.String())
		r := bearerCall(t, p, slug, tok, call)
		if r.Status != 401 {
			t.Fatalf("%s: HTTP %d", slug, r.Status)
		}
		if got := refusalReasons(t, p.Logs.String()[before:]); len(got) != 1 || got[0] != reason {
			t.Fatalf("%s: logged refusal reasons %q, want [%s]", slug, got, reason)
		}
	}
}

func TestMachinePrincipalsNeedTheTenantsConsentAndBindClientOnly(t *testing.T) {
	op := oidctest.Start(t)
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	authTenant(t, p, "people", op, oidctest.ServiceClient, false)
	authTenant(t, p, "robots", op, oidctest.ServiceClient, true)
	h := newHook(t, replyText("ok"))
	for _, slug := range []string{"people", "robots"} {
		h.setSecret(p.Tool(t, slug, echoTool("echo", h.URL)))
	}
	tok := op.ClientToken(t)
	call := obj{"name": "echo", "arguments": obj{}, "_meta": platformtest.Meta(nil)}
	if r := bearerCall(t, p, "people", tok, call); r.Status != 401 {
		t.Fatalf("people: %d", r.Status)
	}
	if r := bearerCall(t, p, "robots", tok, call); r.Status != 200 {
		t.Fatalf("robots: %d %s", r.Status, r.Body)
	}
	if got := h.last().Principal; got == nil || got.Subject != "" || got.Client != oidctest.ServiceClient {
		t.Fatalf("machine principal delivered as %+v", got)
	}
}

func TestChallengesAndProtectedResourceMetadataFollowTheSpec(t *testing.T) {
	op := oidctest.Start(t)
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	authTenant(t, p, "acme", op, oidctest.ClientA, false)
	h := newHook(t, replyText("ok"))
	tool := echoTool("admin_only", h.URL)
	tool["scopes"] = []string{"deploy:write", "audit:read"}
	h.setSecret(p.Tool(t, "acme", tool))
	meta := p.URL + "/.well-known/oauth-protected-resource/t/acme/mcp"

	r := bearerCall(t, p, "acme", "", obj{"name": "admin_only", "arguments": obj{}, "_meta": platformtest.Meta(nil)})
	want := `Bearer resource_metadata="` + meta + `", scope="mcp deploy:write audit:read"`
	if r.Status != 401 || r.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("401 challenge %d %q, want %q", r.Status, r.Header.Get("WWW-Authenticate"), want)
	}
	doc := platformtest.Do(t, "GET", meta, nil, nil)
	m := doc.JSON(t)
	if doc.Status != 200 || m["resource"] != p.URL+"/t/acme/mcp" || m["authorization_servers"].([]any)[0] != op.Issuer {
		t.Fatalf("metadata %d %v", doc.Status, m)
	}
	tok := op.UserToken(t, oidctest.ClientA, op.UserName(1)) // carries no deploy scopes
	r = bearerCall(t, p, "acme", tok, obj{"name": "admin_only", "arguments": obj{}, "_meta": platformtest.Meta(nil)})
	want = `Bearer error="insufficient_scope", scope="deploy:write audit:read", resource_metadata="` + meta + `"`
	if r.Status != 403 || r.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("403 challenge %d %q, want %q", r.Status, r.Header.Get("WWW-Authenticate"), want)
	}
	if h.last() != nil {
		t.Fatal("the tool ran without its scopes")
	}
	// A public tenant has no metadata and takes no token.
	p.Tenant(t, "open")
	if r := platformtest.Do(t, "GET", p.URL+"/.well-known/oauth-protected-resource/t/open/mcp", nil, nil); r.Status != 404 {
		t.Fatalf("public tenant metadata: %d", r.Status)
	}
	// A tenant that is neither public nor trusts an issuer refuses everyone.
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants", obj{"slug": "closed", "displayName": "closed"})
	h.setSecret(p.Tool(t, "closed", echoTool("echo", h.URL)))
	if r := bearerCall(t, p, "closed", tok, obj{"name": "echo", "arguments": obj{}, "_meta": platformtest.Meta(nil)}); r.Status != 401 {
		t.Fatalf("closed tenant: %d", r.Status)
	}
}

// jwks returns the provider's first signing key.
func jwks(t *testing.T, op *oidctest.Provider) jose.JSONWebKey {
	resp, err := http.Get(op.Issuer + "/keys")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &set); err != nil || len(set.Keys) == 0 {
		t.Fatalf("jwks: %v %s", err, b)
	}
	return set.Keys[0]
}

func b64(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestEveryKindOfBadTokenIsRefusedAndLoggedWithoutTheToken(t *testing.T) {
	op := oidctest.Start(t)
	verifier := auth.NewVerifier(auth.VerifierOptions{Egress: egress.Policy{AllowPrivate: true}, MinRefetch: time.Hour})
	clock := time.Now()
	verifier.Now = func() time.Time { return clock }
	p := platformtest.Start(t, platformtest.SQLiteURL(t), platformtest.WithServer(server.WithVerifier(verifier)))
	authTenant(t, p, "acme", op, oidctest.ClientA, false)
	h := newHook(t, replyText("ok"))
	h.setSecret(p.Tool(t, "acme", echoTool("echo", h.URL)))
	call := obj{"name": "echo", "arguments": obj{}, "_meta": platformtest.Meta(nil)}

	good := op.UserToken(t, oidctest.ClientA, op.UserName(1))
	if r := bearerCall(t, p, "acme", good, call); r.Status != 200 {
		t.Fatalf("good token: %d %s", r.Status, r.Body)
	}
	now := time.Now().Unix()
	claims := obj{"iss": op.Issuer, "sub": "id1", "aud": []string{oidctest.ClientA}, "client_id": oidctest.ClientA, "iat": now, "exp": now + 300}
	pub := jwks(t, op)
	forgedKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	sign := func(kid string, c obj) string {
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: forgedKey}, (&jose.SignerOptions{}).WithHeader("kid", kid))
		if err != nil {
			t.Fatal(err)
		}
		payload, _ := json.Marshal(c)
		obj, _ := signer.Sign(payload)
		s, _ := obj.CompactSerialize()
		return s
	}
	pubDER, _ := json.Marshal(pub)
	mac := hmac.New(sha256.New, pubDER)
	hsHead := b64(obj{"alg": "HS256", "kid": pub.KeyID})
	mac.Write([]byte(hsHead + "." + b64(claims)))
	hmacWithPublicKey := hsHead + "." + b64(claims) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	otherOP := oidctest.Start(t)

	cases := []struct {
		name, token, reason string
		clock               time.Duration // the verifier's clock, from now
	}{
		{"malformed", "not.a.jwt", "malformed", 0},
		{"alg none", b64(obj{"alg": "none"}) + "." + b64(claims) + ".", "malformed", 0},
		{"unknown kid", sign("no-such-kid", claims), "unknown_key", 0},
		{"forged with known kid", sign(pub.KeyID, claims), "signature", 0},
		{"hmac with a public key", hmacWithPublicKey, "malformed", 0},
		{"wrong issuer", otherOP.UserToken(t, oidctest.ClientA, otherOP.UserName(1)), "untrusted_issuer", 0},
		{"wrong audience", op.UserToken(t, oidctest.ClientB, op.UserName(1)), "audience", 0},
		{"oversize", strings.Repeat("a", auth.MaxTokenBytes+1), "oversize", 0},
		// Expired and not yet valid, judged by a moved clock.
		{"expired", good, "expired", 2 * time.Hour},
		{"not yet valid", good, "not_yet_valid", -2 * time.Hour},
	}
	for _, tc := range cases {
		clock = time.Now().Add(tc.clock)
		before := len(p.Logs.String())
		if r := bearerCall(t, p, "acme", tc.token, call); r.Status != 401 || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer ") {
			t.Errorf("%s: HTTP %d", tc.name, r.Status)
		}
		// The refusal is logged before the answer is written, so this
		// call's line is in the log by now, and it is the only one.
		if got := refusalReasons(t, p.Logs.String()[before:]); len(got) != 1 || got[0] != tc.reason {
			t.Errorf("%s: logged refusal reasons %q, want [%s]", tc.name, got, tc.reason)
		}
	}
	clock = time.Now()
	logs := p.Logs.String()
	for _, tc := range cases {
		if len(tc.token) > 20 && strings.Contains(logs, tc.token) {
			t.Errorf("%s: the token reached the log", tc.name)
		}
	}
	// Unknown kids trigger at most one refetch per interval, not one per request.
	before := verifier.JWKSFetches(op.Issuer)
	for i := 0; i < 20; i++ {
		bearerCall(t, p, "acme", sign("kid-"+string(rune('a'+i)), claims), call)
	}
	if n := verifier.JWKSFetches(op.Issuer) - before; n > 0 {
		t.Errorf("%d JWKS fetches for 20 unknown kids inside one refetch interval", n)
	}
	// The issuer going down does not stop verification with cached keys.
	another := op.UserToken(t, oidctest.ClientA, op.UserName(2))
	op.Stop()
	if r := bearerCall(t, p, "acme", another, call); r.Status != 200 {
		t.Fatalf("with the issuer down: %d %s", r.Status, r.Body)
	}
}

// refusalReasons returns the reason of every "bearer token refused" line
// in logs (JSON lines), in order.
func refusalReasons(t *testing.T, logs string) []string {
	t.Helper()
	var reasons []string
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var entry struct {
			Msg    string  `json:"msg"`
			Reason *string `json:"reason"`
		}
		if line == "" {
			continue
		}
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if entry.Msg != "bearer token refused" {
			continue
		}
		if entry.Reason == nil {
			t.Fatalf("refusal without a reason: %s", line)
		}
		reasons = append(reasons, *entry.Reason)
	}
	return reasons
}
