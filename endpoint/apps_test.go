package endpoint_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/opsmcp/platform/catalogue"
	"github.com/opsmcp/platform/testkit/oidctest"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/webhook"
)

const rolloutHTML = `<!DOCTYPE html><html><head><title>Rollout</title></head><body><div id="bar"></div></body></html>`

// The view metadata as registered: _meta must come back exactly so.
var (
	deployMeta = `{"ui":{"resourceUri":"ui://acme/rollout.html","visibility":["model","app"]},"ui/resourceUri":"ui://acme/rollout.html","com.example/team":"ops"}`
	viewMeta   = `{"ui":{"csp":{"connectDomains":["https://api.acme.example"],"resourceDomains":["https://*.cdn.example"]},"permissions":{"clipboardWrite":{}},"prefersBorder":true}}`
	icons      = []obj{{"src": "https://acme.example/deploy.png", "mimeType": "image/png", "sizes": []string{"48x48"}}}
)

// viewAnswer is what the report template's handler answers: a good view
// unless the test changes it.
type viewAnswer struct {
	mu   sync.Mutex
	body string // the result's contents, as JSON
}

func (v *viewAnswer) set(s string) { v.mu.Lock(); v.body = s; v.mu.Unlock() }

// appsPlatform is a platform whose tenant acme has a deploy tool linked
// to its rollout view, an app-only helper tool, a view template served
// by a webhook, and icons on each kind and on the server.
func appsPlatform(t *testing.T) (*platformtest.Platform, *viewAnswer) {
	t.Helper()
	va := &viewAnswer{}
	h := newHook(t, func(w http.ResponseWriter, req *webhook.Request) {
		w.Header().Set("Content-Type", "application/json")
		if req.Kind == webhook.KindResource {
			va.mu.Lock()
			defer va.mu.Unlock()
			fmt.Fprintf(w, `{"type":"complete","result":{"contents":%s}}`, strings.ReplaceAll(va.body, "{uri}", req.URI))
			return
		}
		fmt.Fprint(w, `{"type":"complete","result":{"content":[{"type":"text","text":"rolled out"}],"structuredContent":{"progress":100}}}`)
	})
	p := setup(t, h)
	p.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", obj{"settings": obj{"auth": obj{"public": true}, "icons": icons}})
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/resources", obj{"name": "rollout", "uri": "ui://acme/rollout.html",
		"mimeType": catalogue.AppMimeType, "text": rolloutHTML, "_meta": json.RawMessage(viewMeta), "icons": icons})
	h.AddSecret(p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/resource-templates", obj{"name": "report", "uriTemplate": "ui://acme/report/{id}",
		"mimeType": catalogue.AppMimeType, "handler": obj{"url": h.URL}, "_meta": json.RawMessage(`{"ui":{"prefersBorder":false}}`)})["webhookSecret"].(string))
	deploy := echoTool("deploy", h.URL)
	deploy["_meta"], deploy["icons"] = json.RawMessage(deployMeta), icons
	h.AddSecret(p.Tool(t, "acme", deploy))
	helper := echoTool("rollout_status", h.URL)
	helper["_meta"] = json.RawMessage(`{"ui":{"visibility":["app"]}}`)
	h.AddSecret(p.Tool(t, "acme", helper))
	va.set(`[{"uri":"{uri}","mimeType":"` + catalogue.AppMimeType + `","text":"<html>report</html>","_meta":{"ui":{"prefersBorder":false}}}]`)
	return p, va
}

// sameJSON reports whether two JSON documents hold the same value.
func sameJSON(t *testing.T, got any, want string) bool {
	t.Helper()
	g, _ := json.Marshal(got)
	var a, b any
	if json.Unmarshal(g, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		t.Fatalf("not JSON: %s / %s", g, want)
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func byName(list []any, key, name string) map[string]any {
	for _, e := range list {
		if m := e.(map[string]any); m[key] == name {
			return m
		}
	}
	return nil
}

// TestViewsAndTheirLinksAreServedAsRegistered: tools/list carries each
// tool's _meta exactly as registered (the view link, both spellings, other
// keys) and its icons; resources/list and templates/list carry the
// view's _meta.ui; resources/read carries it on the content, with the
// exact app type and a private cache scope; server/discover advertises
// the extension, and serverInfo the tenant's icons.
func TestViewsAndTheirLinksAreServedAsRegistered(t *testing.T) {
	p, _ := appsPlatform(t)
	tools := platformtest.Result(t, p.MCP(t, "acme", "tools/list", nil))["tools"].([]any)
	deploy := byName(tools, "name", "deploy")
	if deploy == nil || !sameJSON(t, deploy["_meta"], deployMeta) || !sameJSON(t, deploy["icons"], `[{"src":"https://acme.example/deploy.png","mimeType":"image/png","sizes":["48x48"]}]`) {
		t.Fatalf("deploy listed as %v", deploy)
	}
	if helper := byName(tools, "name", "rollout_status"); helper == nil || !sameJSON(t, helper["_meta"], `{"ui":{"visibility":["app"]}}`) {
		t.Fatalf("the app-only helper listed as %v (hosts hide it from the model; the server lists it)", helper)
	}
	if echo := byName(tools, "name", "echo"); echo == nil || echo["_meta"] != nil || echo["icons"] != nil {
		t.Fatalf("a plain tool listed as %v", echo)
	}
	res := platformtest.Result(t, p.MCP(t, "acme", "resources/list", nil))["resources"].([]any)
	if v := byName(res, "uri", "ui://acme/rollout.html"); v == nil || v["mimeType"] != catalogue.AppMimeType || !sameJSON(t, v["_meta"], viewMeta) || v["icons"] == nil {
		t.Fatalf("the view listed as %v", v)
	}
	tmpl := platformtest.Result(t, p.MCP(t, "acme", "resources/templates/list", nil))["resourceTemplates"].([]any)
	if v := byName(tmpl, "name", "report"); v == nil || !sameJSON(t, v["_meta"], `{"ui":{"prefersBorder":false}}`) {
		t.Fatalf("the view template listed as %v", v)
	}
	read := platformtest.Result(t, p.MCP(t, "acme", "resources/read", obj{"uri": "ui://acme/rollout.html"}))
	c := read["contents"].([]any)[0].(map[string]any)
	if c["uri"] != "ui://acme/rollout.html" || c["mimeType"] != catalogue.AppMimeType || c["text"] != rolloutHTML || !sameJSON(t, c["_meta"], viewMeta) ||
		c["blob"] != nil || read["cacheScope"] != "private" {
		t.Fatalf("the view read as %v", read)
	}
	disc := platformtest.Result(t, p.MCP(t, "acme", "server/discover", nil))
	ext, _ := disc["capabilities"].(map[string]any)["extensions"].(map[string]any)
	if !sameJSON(t, ext["io.modelcontextprotocol/ui"], `{}`) {
		t.Fatalf("discover's extensions: %v", ext)
	}
	info := disc["_meta"].(map[string]any)["io.modelcontextprotocol/serverInfo"].(map[string]any)
	if !sameJSON(t, info["icons"], `[{"src":"https://acme.example/deploy.png","mimeType":"image/png","sizes":["48x48"]}]`) {
		t.Fatalf("serverInfo %v", info)
	}
	// The tool's result reaches the view whole: content and structuredContent.
	call := platformtest.Result(t, p.MCP(t, "acme", "tools/call", obj{"name": "deploy", "arguments": obj{"text": "go"}}))
	if !sameJSON(t, call["structuredContent"], `{"progress":100}`) {
		t.Fatalf("the call's result %v", call)
	}
}

// TestALegacySessionSeesTheSameViews: a 2025-11-25 session lists and
// reads the same metadata.
func TestALegacySessionSeesTheSameViews(t *testing.T) {
	p, _ := appsPlatform(t)
	c := newLegacyClient(t, legacyURL(p, "acme"))
	init := c.initialize("2025-11-25", legacyCaps)
	if info, _ := init["serverInfo"].(map[string]any); info == nil || info["icons"] == nil {
		t.Fatalf("serverInfo %v", init["serverInfo"])
	}
	deploy := byName(c.result("tools/list", obj{})["tools"].([]any), "name", "deploy")
	if deploy == nil || !sameJSON(t, deploy["_meta"], deployMeta) {
		t.Fatalf("deploy listed as %v", deploy)
	}
	v := byName(c.result("resources/list", obj{})["resources"].([]any), "uri", "ui://acme/rollout.html")
	if v == nil || !sameJSON(t, v["_meta"], viewMeta) {
		t.Fatalf("the view listed as %v", v)
	}
	read := c.result("resources/read", obj{"uri": "ui://acme/rollout.html"})
	if cont := read["contents"].([]any)[0].(map[string]any); cont["mimeType"] != catalogue.AppMimeType || !sameJSON(t, cont["_meta"], viewMeta) {
		t.Fatalf("the view read as %v", read)
	}
	tread := c.result("resources/read", obj{"uri": "ui://acme/report/7"})
	if cs, _ := tread["contents"].([]any); len(cs) != 1 || cs[0].(map[string]any)["uri"] != "ui://acme/report/7" ||
		cs[0].(map[string]any)["mimeType"] != catalogue.AppMimeType || !sameJSON(t, cs[0].(map[string]any)["_meta"], `{"ui":{"prefersBorder":false}}`) {
		t.Fatalf("the template's view read as %v", tread)
	}
}

// TestATemplatesViewIsCheckedBeforeAHostGetsIt: a view template's
// handler must answer one content item of the URI read, of exactly the
// app type, with one of text and blob within the bound and a _meta.ui
// the extension defines; anything else is a contract failure (HTTP 502)
// that names it, and a good answer passes as it was given.
func TestATemplatesViewIsCheckedBeforeAHostGetsIt(t *testing.T) {
	p, va := appsPlatform(t)
	app := catalogue.AppMimeType
	read := func() *platformtest.Response {
		return p.MCP(t, "acme", "resources/read", obj{"uri": "ui://acme/report/7"})
	}
	good := platformtest.Result(t, read())
	if c := good["contents"].([]any)[0].(map[string]any); c["text"] != "<html>report</html>" || !sameJSON(t, c["_meta"], `{"ui":{"prefersBorder":false}}`) || good["cacheScope"] != "private" {
		t.Fatalf("a good view: %v", good)
	}
	blob := base64.StdEncoding.EncodeToString([]byte("<html>report</html>"))
	va.set(`[{"uri":"{uri}","mimeType":"` + app + `","blob":"` + blob + `"}]`)
	platformtest.Result(t, read())
	big := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", catalogue.MaxViewBytes+1)))
	for _, tc := range []struct{ name, contents, says string }{
		{"no item", `[]`, "one content item"},
		{"two items", `[{"uri":"{uri}","mimeType":"` + app + `","text":"a"},{"uri":"{uri}","mimeType":"` + app + `","text":"b"}]`, "one content item"},
		{"another URI", `[{"uri":"ui://acme/report/8","mimeType":"` + app + `","text":"a"}]`, "URI read"},
		{"another scheme", `[{"uri":"https://acme.example/report/7","mimeType":"` + app + `","text":"a"}]`, "URI read"},
		{"plain HTML", `[{"uri":"{uri}","mimeType":"text/html","text":"a"}]`, "exactly"},
		{"the type spelt otherwise", `[{"uri":"{uri}","mimeType":"text/html; profile=mcp-app","text":"a"}]`, "exactly"},
		{"no type", `[{"uri":"{uri}","text":"a"}]`, "exactly"},
		{"text and blob", `[{"uri":"{uri}","mimeType":"` + app + `","text":"a","blob":"` + blob + `"}]`, "exactly one of text and blob"},
		{"neither", `[{"uri":"{uri}","mimeType":"` + app + `"}]`, "exactly one of text and blob"},
		{"a bad blob", `[{"uri":"{uri}","mimeType":"` + app + `","blob":"***"}]`, "base64"},
		{"too large", `[{"uri":"{uri}","mimeType":"` + app + `","blob":"` + big + `"}]`, "at most"},
		{"a bare * origin", `[{"uri":"{uri}","mimeType":"` + app + `","text":"a","_meta":{"ui":{"csp":{"connectDomains":["*"]}}}}]`, "connectDomains"},
		{"an unknown ui field", `[{"uri":"{uri}","mimeType":"` + app + `","text":"a","_meta":{"ui":{"sandbox":"allow-top-navigation"}}}]`, "ui"},
		{"a _meta not an object", `[{"uri":"{uri}","mimeType":"` + app + `","text":"a","_meta":[1]}]`, "object"},
		{"ui hidden behind UI", `[{"uri":"{uri}","mimeType":"` + app + `","text":"a","_meta":{"ui":{"csp":{"connectDomains":["*"]}},"UI":{}}}]`, "connectDomains"},
		{"csp hidden behind CSP", `[{"uri":"{uri}","mimeType":"` + app + `","text":"a","_meta":{"ui":{"csp":{"connectDomains":["*"]},"CSP":null}}}]`, "exactly so spelt"},
		{"a key twice", `[{"uri":"{uri}","mimeType":"` + app + `","text":"a","_meta":{"ui":{"prefersBorder":true},"ui":{}}}]`, "twice"},
		{"contents not items", `[1]`, "array of resource contents"},
	} {
		va.set(tc.contents)
		r := read()
		code, msg, _ := platformtest.RPCError(t, r)
		if r.Status != 502 || code != -32603 || !strings.Contains(msg, tc.says) {
			t.Errorf("%s: HTTP %d, %d %q; want 502 saying %q", tc.name, r.Status, code, msg, tc.says)
		}
	}
}

// TestViewOnlyToolsAreAuthorizedAsAnyOther: a tool only views call
// (visibility ["app"]) needs the same token, scopes and binding as any
// other: without the tool's scope its call is refused, before its
// webhook; its webhook may not ask for input (a host has no way to ask
// it), and a view's read may not either.
func TestViewOnlyToolsAreAuthorizedAsAnyOther(t *testing.T) {
	op := oidctest.Start(t)
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	authTenant(t, p, "acme", op, oidctest.ClientA, false)
	h := newHook(t, func(w http.ResponseWriter, req *webhook.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"input_required","inputRequests":{"ok":{"method":"elicitation/create","params":{"mode":"form","message":"Sure?","requestedSchema":{"type":"object","properties":{"yes":{"type":"boolean"}}}}}}}`)
	})
	helper := echoTool("rollout_status", h.URL)
	helper["_meta"], helper["scopes"] = json.RawMessage(`{"ui":{"visibility":["app"]}}`), []string{"deploy:read"}
	h.AddSecret(p.Tool(t, "acme", helper))
	args := obj{"name": "rollout_status", "arguments": obj{"text": "x"}, "_meta": platformtest.Meta(allCaps)}
	if r := bearerCall(t, p, "acme", "", args); r.Status != 401 {
		t.Fatalf("no token: HTTP %d", r.Status)
	}
	tok := op.UserToken(t, oidctest.ClientA, op.UserName(1)) // no deploy:read
	if r := bearerCall(t, p, "acme", tok, args); r.Status != 403 || !strings.Contains(r.Header.Get("WWW-Authenticate"), `scope="deploy:read"`) {
		t.Fatalf("without its scope: HTTP %d %q", r.Status, r.Header.Get("WWW-Authenticate"))
	}
	if h.count() != 0 {
		t.Fatal("the app-only tool's webhook ran without its scope")
	}
	// One the caller may call: its webhook's question is refused, and
	// so is a view read's.
	open := echoTool("rollout_poll", h.URL)
	open["_meta"] = json.RawMessage(`{"ui":{"visibility":["app"]}}`)
	h.AddSecret(p.Tool(t, "acme", open))
	res := platformtest.Result(t, bearerCall(t, p, "acme", tok, obj{"name": "rollout_poll", "arguments": obj{"text": "x"}, "_meta": platformtest.Meta(allCaps)}))
	if res["isError"] != true || !strings.Contains(toolText(t, res), "cannot ask for input") {
		t.Fatalf("an app-only tool whose webhook asked: %v", res)
	}
	h.AddSecret(p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/resource-templates", obj{"name": "report", "uriTemplate": "ui://acme/report/{id}",
		"mimeType": catalogue.AppMimeType, "handler": obj{"url": h.URL}})["webhookSecret"].(string))
	body, _ := json.Marshal(obj{"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": obj{"uri": "ui://acme/report/7", "_meta": platformtest.Meta(allCaps)}})
	hd := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}, "Mcp-Protocol-Version": {"2026-07-28"},
		"Mcp-Method": {"resources/read"}, "Mcp-Name": {"ui://acme/report/7"}, "Authorization": {"Bearer " + tok}}
	r := platformtest.Do(t, http.MethodPost, p.URL+"/t/acme/mcp", hd, body)
	if code, msg, _ := platformtest.RPCError(t, r); r.Status != 502 || code != -32603 || !strings.Contains(msg, "cannot ask for input") {
		t.Fatalf("a view read whose webhook asked: HTTP %d %d %q", r.Status, code, msg)
	}
}

// TestAToolsMetaIsServedByteForByte: a tool's _meta reaches tools/list
// as the tenant wrote it: its keys in their order, and <, > and & as
// written (JSON's whitespace aside).
func TestAToolsMetaIsServedByteForByte(t *testing.T) {
	p, _ := appsPlatform(t)
	meta := `{"ui":{"visibility":["app","model"],"resourceUri":"ui://acme/rollout.html"},"com.example/note":"<b>rollout & health</b>","ui/resourceUri":"ui://acme/rollout.html"}`
	body := `{"name":"watch","inputSchema":{"type":"object"},"handler":{"url":"https://hooks.example.com/watch"},"_meta":` + meta + `}`
	h := http.Header{"Authorization": {"Bearer " + platformtest.AdminToken}, "Content-Type": {"application/json"}}
	if r := platformtest.Do(t, http.MethodPost, p.URL+"/api/v1/tenants/acme/tools", h, []byte(body)); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	r := p.MCP(t, "acme", "tools/list", nil)
	if !strings.Contains(string(r.Body), `"_meta":`+meta) {
		t.Fatalf("tools/list does not carry the _meta as written:\n%s\nin\n%s", meta, r.Body)
	}
}
