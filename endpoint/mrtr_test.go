package endpoint_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
	"github.com/opsmcp/platform/webhook"
)

func key() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

var allCaps = obj{"elicitation": obj{}, "sampling": obj{}, "roots": obj{}}

func formInput(name, msg, field string) obj {
	return obj{"name": name, "kind": "form", "message": msg,
		"requestedSchema": obj{"type": "object", "properties": obj{field: obj{"type": "string"}}, "required": []string{field}}}
}

// chainTool needs three rounds: a name, then a colour, then a size.
func chainTool(name, url string) obj {
	return obj{"name": name, "description": "three questions in turn",
		"inputSchema": obj{"type": "object", "properties": obj{"order": obj{"type": "string"}}},
		"handler":     obj{"url": url},
		"inputs": []obj{
			formInput("who", "Your name?", "name"),
			func() obj {
				m := formInput("colour", "Colour for {{args.order}}?", "colour")
				m["when"] = obj{"input": "who"}
				return m
			}(),
			func() obj { m := formInput("size", "Size?", "size"); m["when"] = obj{"input": "colour"}; return m }(),
		}}
}

// answersHook completes with the answers it was given, as JSON text.
func answersHook(w http.ResponseWriter, req *webhook.Request) {
	b, _ := json.Marshal(req.Answers)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"type":"complete","result":{"content":[{"type":"text","text":%q}]}}`, b)
}

func call(t *testing.T, p *platformtest.Platform, slug, tool string, args obj, responses obj, state any, caps obj) *platformtest.Response {
	t.Helper()
	params := obj{"name": tool, "arguments": args, "_meta": platformtest.Meta(caps)}
	if responses != nil {
		params["inputResponses"] = responses
	}
	if state != nil {
		params["requestState"] = state
	}
	return p.MCP(t, slug, "tools/call", params)
}

func accept(field, value string) obj {
	return obj{"action": "accept", "content": obj{field: value}}
}

// inputRequired asserts an InputRequiredResult and returns its questions
// and state.
func inputRequired(t *testing.T, r *platformtest.Response) (map[string]any, string) {
	t.Helper()
	res := platformtest.Result(t, r)
	if res["resultType"] != "input_required" {
		t.Fatalf("want input_required, got %v", res)
	}
	reqs, _ := res["inputRequests"].(map[string]any)
	state, _ := res["requestState"].(string)
	return reqs, state
}

func assertFrozen(t *testing.T, r *platformtest.Response) {
	t.Helper()
	if r.Status != 400 {
		t.Fatalf("HTTP %d, want 400: %s", r.Status, r.Body)
	}
	code, msg, data := platformtest.RPCError(t, r)
	if code != -32602 || msg != "Invalid or expired requestState" || data["reason"] != "invalid_request_state" || len(data) != 1 {
		t.Fatalf("not the frozen rejection: %d %q %v", code, msg, data)
	}
}

func TestThreeRoundChainCompletesAcrossTwoInstances(t *testing.T) {
	keys := key()
	db := platformtest.PostgresSchemaURL(t)
	a := platformtest.Start(t, db, platformtest.WithStateKeys(keys))
	// Replicas share keys, the database and the public URL (the audience).
	b := platformtest.Start(t, db, platformtest.WithStateKeys(keys), platformtest.WithConfig(func(c *config.Config) { c.PublicURL = a.URL }))
	h := newHook(t, answersHook)
	a.Tenant(t, "acme")
	h.setSecret(a.Tool(t, "acme", chainTool("order", h.URL)))
	// b serves the tenant from the shared database under the same public
	// audience as a.
	args := obj{"order": "o-1"}
	q1, s1 := inputRequired(t, call(t, a, "acme", "order", args, nil, nil, allCaps))
	if _, ok := q1["who"]; !ok || len(q1) != 1 {
		t.Fatalf("round 1 asks %v", q1)
	}
	_, s2 := inputRequired(t, call(t, b, "acme", "order", args, obj{"who": accept("name", "Ada")}, s1, allCaps))
	if s2 == s1 {
		t.Fatal("round 2 reused round 1's state")
	}
	q3, s3 := inputRequired(t, call(t, a, "acme", "order", args, obj{"colour": accept("colour", "red")}, s2, allCaps))
	if _, ok := q3["size"]; !ok {
		t.Fatalf("round 3 asks %v", q3)
	}
	res := platformtest.Result(t, call(t, b, "acme", "order", args, obj{"size": accept("size", "L")}, s3, allCaps))
	got := toolText(t, res)
	for _, want := range []string{`"who"`, `"Ada"`, `"red"`, `"L"`} {
		if !strings.Contains(got, want) {
			t.Fatalf("webhook saw %s, missing %s", got, want)
		}
	}
	if n := len(h.requests); n != 1 {
		t.Fatalf("the webhook was called %d times; declared inputs call it once", n)
	}
	if h.last().Flow.Round != 4 {
		t.Fatalf("final round %d", h.last().Flow.Round)
	}
}

func TestStateIsBoundToTenantTargetAndArguments(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	h := newHook(t, answersHook)
	for _, slug := range []string{"alpha", "beta"} {
		p.Tenant(t, slug)
		h.setSecret(p.Tool(t, slug, chainTool("order", h.URL))) // same tool name, same key ring
	}
	p.Tool(t, "alpha", chainTool("other", h.URL))
	args := obj{"order": "o-1"}
	_, state := inputRequired(t, call(t, p, "alpha", "order", args, nil, nil, allCaps))
	ans := obj{"who": accept("name", "Ada")}
	assertFrozen(t, call(t, p, "beta", "order", args, ans, state, allCaps))                 // another tenant
	assertFrozen(t, call(t, p, "alpha", "other", args, ans, state, allCaps))                // another tool
	assertFrozen(t, call(t, p, "alpha", "order", obj{"order": "o-2"}, ans, state, allCaps)) // other arguments
	// The same arguments spelled differently are the same arguments.
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"arguments":{"order":"o-1"},"name":"order","inputResponses":{"who":{"action":"accept","content":{"name":"Ada"}}},"requestState":` + mustQuote(state) + `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`
	r := platformtest.Do(t, "POST", p.URL+"/t/alpha/mcp", http.Header{"Content-Type": {"application/json"}, "Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"order"}}, []byte(body))
	inputRequired(t, r)
	logs := p.Logs.String()
	if strings.Contains(logs, state) {
		t.Fatal("a token reached the log")
	}
	for _, reason := range []string{`"reason":"tenant"`, `"reason":"binding"`} {
		if !strings.Contains(logs, reason) {
			t.Fatalf("log lacks %s", reason)
		}
	}
}

func mustQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestEveryInboundStateIsVerifiedEvenOnToolsThatNeverMintOne(t *testing.T) {
	h := newHook(t, replyText("ran"))
	p := setup(t, h)
	for name, state := range map[string]any{"plaintext": "awaiting-confirm", "number": 5, "object": obj{"a": 1}, "empty": ""} {
		assertFrozen(t, call(t, p, "acme", "echo", obj{}, nil, state, nil))
		_ = name
	}
	if h.last() != nil {
		t.Fatal("a tool ran with unverified state")
	}
	// Explicit null is absent.
	params := obj{"name": "echo", "arguments": obj{}, "requestState": nil, "_meta": platformtest.Meta(nil)}
	if res := platformtest.Result(t, p.MCP(t, "acme", "tools/call", params)); toolText(t, res) != "ran" {
		t.Fatalf("null state: %v", res)
	}
}

func TestMalformedInputResponsesAreInvalidParams(t *testing.T) {
	h := newHook(t, answersHook)
	p := setup(t, h)
	p.Tool(t, "acme", chainTool("order", h.URL))
	for _, v := range []any{nil, "x", 5, []any{1}} {
		params := obj{"name": "order", "arguments": obj{}, "inputResponses": v, "_meta": platformtest.Meta(allCaps)}
		code, _, _ := platformtest.RPCError(t, p.MCP(t, "acme", "tools/call", params))
		if code != -32602 {
			t.Fatalf("inputResponses %v: code %d", v, code)
		}
	}
	// An entry of the wrong shape is asked again; unknown keys are ignored.
	_, state := inputRequired(t, call(t, p, "acme", "order", obj{}, nil, nil, allCaps))
	q, _ := inputRequired(t, call(t, p, "acme", "order", obj{}, obj{"who": 12345, "ghost": accept("x", "y")}, state, allCaps))
	if _, ok := q["who"]; !ok {
		t.Fatalf("wrong-shape answer not re-asked: %v", q)
	}
}

func TestStateFromARetiredKeyIsRefused(t *testing.T) {
	oldKey, newKey := key(), key()
	db := platformtest.SQLiteURL(t)
	h := newHook(t, answersHook)
	a := platformtest.Start(t, db, platformtest.WithStateKeys(oldKey))
	a.Tenant(t, "acme")
	h.setSecret(a.Tool(t, "acme", chainTool("order", h.URL)))
	_, state := inputRequired(t, call(t, a, "acme", "order", obj{}, nil, nil, allCaps))
	a.Stop()
	// Phase two of a rotation: the new key mints, the old one still verifies.
	b := platformtest.Start(t, db, platformtest.WithStateKeys(newKey+","+oldKey), platformtest.WithConfig(func(c *config.Config) { c.PublicURL = a.URL }))
	_, state2 := inputRequired(t, call(t, b, "acme", "order", obj{}, obj{"who": accept("name", "Ada")}, state, allCaps))
	b.Stop()
	// Phase three: the old key is retired.
	c := platformtest.Start(t, db, platformtest.WithStateKeys(newKey), platformtest.WithConfig(func(c *config.Config) { c.PublicURL = a.URL }))
	assertFrozen(t, call(t, c, "acme", "order", obj{}, obj{"who": accept("name", "Ada")}, state, allCaps))
	inputRequired(t, call(t, c, "acme", "order", obj{}, obj{"colour": accept("colour", "red")}, state2, allCaps))
}

func TestStateExpiresAfterTheTenantsTTL(t *testing.T) {
	h := newHook(t, answersHook)
	p := setup(t, h)
	p.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", obj{"settings": obj{"stateTtlSeconds": 1}})
	p.Tool(t, "acme", chainTool("order", h.URL))
	_, state := inputRequired(t, call(t, p, "acme", "order", obj{}, nil, nil, allCaps))
	time.Sleep(1100 * time.Millisecond)
	assertFrozen(t, call(t, p, "acme", "order", obj{}, obj{"who": accept("name", "Ada")}, state, allCaps))
	if !strings.Contains(p.Logs.String(), `"reason":"expired"`) {
		t.Fatal("the log does not say why")
	}
}

func TestMissingCapabilityIsRefusedWithRequiredCapabilities(t *testing.T) {
	h := newHook(t, answersHook)
	p := setup(t, h)
	p.Tool(t, "acme", obj{"name": "needs_model", "description": "x", "inputSchema": obj{"type": "object"}, "handler": obj{"url": h.URL},
		"inputs": []obj{{"name": "m", "kind": "sampling", "sampling": obj{"messages": []obj{{"role": "user", "content": obj{"type": "text", "text": "hi"}}}, "maxTokens": 5}}}})
	p.Tool(t, "acme", obj{"name": "needs_url", "description": "x", "inputSchema": obj{"type": "object"}, "handler": obj{"url": h.URL},
		"inputs": []obj{{"name": "login", "kind": "url", "message": "Sign in", "url": "https://auth.example.com/start"}}})
	for tool, want := range map[string]string{"needs_model": `{"sampling":{}}`, "needs_url": `{"elicitation":{"url":{}}}`} {
		r := call(t, p, "acme", tool, obj{}, nil, nil, obj{"elicitation": obj{}})
		if r.Status != 400 {
			t.Fatalf("%s: HTTP %d", tool, r.Status)
		}
		code, _, data := platformtest.RPCError(t, r)
		got, _ := json.Marshal(data["requiredCapabilities"])
		if code != -32021 || string(got) != want {
			t.Fatalf("%s: %d %s, want %s", tool, code, got, want)
		}
	}
	q, _ := inputRequired(t, call(t, p, "acme", "needs_url", obj{}, nil, nil, obj{"elicitation": obj{"url": obj{}}}))
	params := q["login"].(map[string]any)["params"].(map[string]any)
	if params["mode"] != "url" || params["url"] != "https://auth.example.com/start" {
		t.Fatalf("url elicitation %v", params)
	}
}

// confirmHook is webhook-driven input: it asks for confirmation with its
// own key and state, and completes when confirmed.
func confirmHook(w http.ResponseWriter, req *webhook.Request) {
	w.Header().Set("Content-Type", "application/json")
	if req.State == "secret-step-1" {
		var ans struct {
			Action  string         `json:"action"`
			Content map[string]any `json:"content"`
		}
		_ = json.Unmarshal(req.InputResponses["confirm"], &ans)
		if ans.Content["ok"] == true {
			fmt.Fprintf(w, `{"type":"complete","result":{"content":[{"type":"text","text":%q}]}}`, "confirmed by "+string(req.Answers["who"].Content))
			return
		}
	}
	io := `{"type":"input_required","state":"secret-step-1","inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"Sure?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}}}}}`
	fmt.Fprint(w, io)
}

func TestWebhookDrivenInputCombinesWithDeclaredInputs(t *testing.T) {
	h := newHook(t, confirmHook)
	p := setup(t, h)
	h.setSecret(p.Tool(t, "acme", obj{"name": "deploy", "description": "x", "inputSchema": obj{"type": "object"}, "handler": obj{"url": h.URL},
		"inputs": []obj{formInput("who", "Name?", "name")}}))
	_, s1 := inputRequired(t, call(t, p, "acme", "deploy", obj{}, nil, nil, allCaps))
	if h.last() != nil {
		t.Fatal("the webhook was called before the declared inputs were in")
	}
	q2, s2 := inputRequired(t, call(t, p, "acme", "deploy", obj{}, obj{"who": accept("name", "Ada")}, s1, allCaps))
	if _, ok := q2["wh.confirm"]; !ok || len(q2) != 1 {
		t.Fatalf("webhook question not in its own namespace: %v", q2)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s2, "v1."))
	if strings.Contains(s2, "secret-step-1") || strings.Contains(string(raw), "secret-step-1") {
		t.Fatal("the webhook's state is visible in the token")
	}
	// A response under the bare key (the webhook's own name) is not the
	// webhook's question; the prefixed key is.
	res := platformtest.Result(t, call(t, p, "acme", "deploy", obj{}, obj{"wh.confirm": obj{"action": "accept", "content": obj{"ok": true}}}, s2, allCaps))
	if got := toolText(t, res); !strings.Contains(got, "confirmed by") || !strings.Contains(got, "Ada") {
		t.Fatalf("got %q", got)
	}
	if last := h.last(); last.State != "secret-step-1" || last.Flow.Round != 3 {
		t.Fatalf("final delivery %+v", last)
	}
}

func TestWebhookAskingBeyondTheClientsCapabilitiesIsRefused(t *testing.T) {
	h := newHook(t, confirmHook)
	p := setup(t, h)
	h.setSecret(p.Tool(t, "acme", obj{"name": "deploy", "description": "x", "inputSchema": obj{"type": "object"}, "handler": obj{"url": h.URL}}))
	code, _, data := platformtest.RPCError(t, call(t, p, "acme", "deploy", obj{}, nil, nil, obj{"sampling": obj{}}))
	if code != -32021 || data["requiredCapabilities"] == nil {
		t.Fatalf("got %d %v", code, data)
	}
}

func TestTheServersRoundBoundStopsAFlow(t *testing.T) {
	h := newHook(t, answersHook)
	p := setup(t, h)
	p.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", obj{"settings": obj{"maxRounds": 2}})
	p.Tool(t, "acme", chainTool("order", h.URL))
	_, s1 := inputRequired(t, call(t, p, "acme", "order", obj{}, nil, nil, allCaps))
	_, s2 := inputRequired(t, call(t, p, "acme", "order", obj{}, obj{"who": accept("name", "A")}, s1, allCaps))
	res := platformtest.Result(t, call(t, p, "acme", "order", obj{}, obj{"colour": accept("colour", "red")}, s2, allCaps))
	if res["isError"] != true || !strings.Contains(toolText(t, res), "more than 2 rounds") {
		t.Fatalf("got %v", res)
	}
}

func TestOversizeWebhookStateIsASanitizedInternalError(t *testing.T) {
	h := newHook(t, func(w http.ResponseWriter, req *webhook.Request) {
		fmt.Fprintf(w, `{"type":"input_required","state":%q,"inputRequests":{"c":{"method":"roots/list"}}}`, strings.Repeat("s", 3000))
	})
	p := setup(t, h)
	p.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", obj{"settings": obj{"maxStateBytes": 2048}})
	r := call(t, p, "acme", "echo", obj{}, nil, nil, allCaps)
	code, msg, data := platformtest.RPCError(t, r)
	if code != -32603 || msg != "Internal error" || data != nil {
		t.Fatalf("got %d %q %v", code, msg, data)
	}
}

func TestPromptsAndTemplatedResourcesRunFlowsToo(t *testing.T) {
	h := newHook(t, func(w http.ResponseWriter, req *webhook.Request) {
		ctx := string(req.Answers["ctx"].Content)
		if req.Kind == "prompt" {
			fmt.Fprintf(w, `{"type":"complete","result":{"messages":[{"role":"user","content":{"type":"text","text":%q}}]}}`, ctx)
			return
		}
		fmt.Fprintf(w, `{"type":"complete","result":{"contents":[{"uri":%q,"text":%q}]}}`, req.URI, ctx)
	})
	p := setup(t, h)
	in := []obj{formInput("ctx", "Context?", "c")}
	h.setSecret(p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/prompts", obj{"name": "brief", "description": "x", "handler": obj{"url": h.URL}, "inputs": in})["webhookSecret"].(string))
	tmplSecret := p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/resource-templates", obj{"name": "doc", "uriTemplate": "docs://{id}", "handler": obj{"url": h.URL}, "inputs": in})["webhookSecret"].(string)
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/resources", obj{"name": "static", "uri": "docs://static", "text": "fixed"})

	r := p.MCP(t, "acme", "prompts/get", obj{"name": "brief", "_meta": platformtest.Meta(allCaps)})
	_, state := inputRequired(t, r)
	res := platformtest.Result(t, p.MCP(t, "acme", "prompts/get", obj{"name": "brief", "inputResponses": obj{"ctx": accept("c", "sunny")}, "requestState": state, "_meta": platformtest.Meta(allCaps)}))
	if !strings.Contains(fmt.Sprint(res["messages"]), "sunny") {
		t.Fatalf("prompt %v", res)
	}

	h.setSecret(tmplSecret)
	_, state = inputRequired(t, p.MCP(t, "acme", "resources/read", obj{"uri": "docs://42", "_meta": platformtest.Meta(allCaps)}))
	// State minted for one URI is refused for another.
	assertFrozen(t, p.MCP(t, "acme", "resources/read", obj{"uri": "docs://43", "inputResponses": obj{"ctx": accept("c", "x")}, "requestState": state, "_meta": platformtest.Meta(allCaps)}))
	res = platformtest.Result(t, p.MCP(t, "acme", "resources/read", obj{"uri": "docs://42", "inputResponses": obj{"ctx": accept("c", "rainy")}, "requestState": state, "_meta": platformtest.Meta(allCaps)}))
	if res["resultType"] != "complete" || !strings.Contains(fmt.Sprint(res["contents"]), "rainy") || res["cacheScope"] == nil {
		t.Fatalf("resource %v", res)
	}
	// Static resources and lists never ask.
	res = platformtest.Result(t, p.MCP(t, "acme", "resources/read", obj{"uri": "docs://static", "_meta": platformtest.Meta(allCaps)}))
	if res["resultType"] != "complete" {
		t.Fatalf("static %v", res)
	}
	code, _, data := platformtest.RPCError(t, p.MCP(t, "acme", "resources/read", obj{"uri": "nope://x"}))
	if code != -32602 || data["uri"] != "nope://x" {
		t.Fatalf("not found: %d %v", code, data)
	}
}

func TestACancelledFlowIsRefusedOnEveryReplica(t *testing.T) {
	keys := key()
	db := platformtest.PostgresSchemaURL(t)
	a := platformtest.Start(t, db, platformtest.WithStateKeys(keys))
	b := platformtest.Start(t, db, platformtest.WithStateKeys(keys), platformtest.WithConfig(func(c *config.Config) { c.PublicURL = a.URL }))
	h := newHook(t, confirmHook)
	a.Tenant(t, "acme")
	h.setSecret(a.Tool(t, "acme", obj{"name": "deploy", "description": "x", "inputSchema": obj{"type": "object"}, "handler": obj{"url": h.URL}}))
	_, state := inputRequired(t, call(t, a, "acme", "deploy", obj{}, nil, nil, allCaps))
	flowID := h.last().Flow.ID
	_, other := inputRequired(t, call(t, a, "acme", "deploy", obj{}, nil, nil, allCaps))

	// A flow the record does not know cannot be cancelled, whatever its
	// spelling.
	for _, id := range []string{"not-a-flow", "fl_AAAAAAAAAAAAAAAA", flowID + "x", strings.ToUpper(flowID)} {
		if r := a.Admin(t, "POST", "/api/v1/tenants/acme/flows/"+id+"/cancel", nil); r.Status != 404 {
			t.Fatalf("cancel %q: %d %s", id, r.Status, r.Body)
		}
	}
	// The record learns of the flow within a batch delay.
	testwait.Until(t, "the flow never reached the record", func() bool {
		return a.Admin(t, "GET", "/api/v1/tenants/acme/flows/"+flowID, nil).Status == 200
	})
	if got := a.MustAdmin(t, 200, "POST", "/api/v1/tenants/acme/flows/"+flowID+"/cancel", obj{"reason": "wrong target"}); got["state"] != "cancelled" || got["cancelReason"] != "wrong target" {
		t.Fatalf("cancelled flow %v", got)
	}
	confirm := obj{"wh.confirm": obj{"action": "accept", "content": obj{"ok": true}}}
	assertFrozen(t, call(t, a, "acme", "deploy", obj{}, confirm, state, allCaps))
	testwait.Until(t, "replica b learns of the cancellation", func() bool {
		r := call(t, b, "acme", "deploy", obj{}, confirm, state, allCaps)
		if r.Status != 400 {
			return false
		}
		assertFrozen(t, r)
		return true
	})
	if !strings.Contains(a.Logs.String(), `"reason":"revoked"`) {
		t.Fatal("the log does not say why")
	}
	// Other flows of the same tool carry on.
	res := platformtest.Result(t, call(t, b, "acme", "deploy", obj{}, confirm, other, allCaps))
	if res["resultType"] != "complete" {
		t.Fatalf("another flow was affected: %v", res)
	}
}
