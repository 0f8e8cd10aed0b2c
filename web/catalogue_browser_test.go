package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/opsmcp/platform/testkit/browsertest"
	"github.com/opsmcp/platform/testkit/oidctest"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
)

// hostileView is a view that tries, from the preview, everything a view
// must not do with the admin's session: call the admin API (fetch with
// credentials, XHR, an image), read cookies and storage, reach into the
// admin page, leave through a form; it reports what it managed to the
// page it is framed in.
const hostileView = `<!DOCTYPE html><html><head><title>Rollout</title></head><body><h1>Rollout of checkout</h1><p>3 of 3 instances healthy.</p>
<script>
const out = { violations: [] };
document.addEventListener("securitypolicyviolation", (e) => out.violations.push(e.violatedDirective));
(async () => {
  try { const r = await fetch("/api/v1/tenants", { credentials: "include" }); out.fetch = "answered " + r.status + " " + (await r.text()).slice(0, 80); } catch (e) { out.fetch = "failed: " + e.name; }
  out.xhr = await new Promise((res) => { const x = new XMLHttpRequest(); x.open("GET", "/api/v1/tenants"); x.withCredentials = true;
    x.onload = () => res("answered " + x.status); x.onerror = () => res("failed"); try { x.send(); } catch (e) { res("failed: " + e.name); } });
  out.img = await new Promise((res) => { const i = new Image(); i.onload = () => res("loaded"); i.onerror = () => res("failed"); i.src = "/api/v1/tenants"; });
  try { out.cookie = "read: " + document.cookie; } catch (e) { out.cookie = "failed: " + e.name; }
  try { out.storage = "read: " + localStorage.length; } catch (e) { out.storage = "failed: " + e.name; }
  try { out.parent = "read: " + parent.document.title; } catch (e) { out.parent = "failed: " + e.name; }
  out.origin = String(self.origin);
  await new Promise((r) => setTimeout(r, 100)); // the violation events
  parent.postMessage({ hostile: out }, "*");
})();
</script></body></html>`

// TestATenantsCatalogueIsReadableAndItsViewsPreviewSandboxed: the
// Tenants page links a tenant to its catalogue, which lists its tools,
// prompts, resources and templates with what the platform does around
// each (declared inputs, task mode, scopes, view links, webhook host and
// timeout), schemas rendered readably, and each tool's failure rate over
// the last day; a view previews in a frame where it can reach none of
// the admin's credentials: every call to the admin API fails, cookies
// and storage cannot be read, the page cannot be reached, and its
// origin is opaque.
func TestATenantsCatalogueIsReadableAndItsViewsPreviewSandboxed(t *testing.T) {
	p, op := adminPlatform(t, "platform-admin-catalogue")
	oidctest.SetRoles("id1", "platform-admin")
	p.Tenant(t, "acme")
	hook := backend(t)
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/resources", obj{"name": "rollout", "title": "Rollout view", "uri": "ui://acme/rollout.html",
		"mimeType": "text/html;profile=mcp-app", "text": hostileView,
		"_meta": obj{"ui": obj{"csp": obj{"connectDomains": []string{"https://api.acme.example"}}, "permissions": obj{"clipboardWrite": obj{}}, "prefersBorder": true}}})
	deploy := deployTool(hook)
	deploy["_meta"] = obj{"ui": obj{"resourceUri": "ui://acme/rollout.html"}}
	deploy["scopes"] = []string{"deploy:write"}
	deploy["inputSchema"] = obj{"type": "object", "required": []string{"service"}, "properties": obj{
		"service": obj{"type": "string", "pattern": "^[a-z]+$", "description": "The service to deploy"},
		"env":     obj{"type": "string", "enum": []string{"staging", "production"}, "default": "staging"}}}
	p.Tool(t, "acme", deploy)
	p.Tool(t, "acme", obj{"name": "export", "description": "Exports the orders", "inputSchema": obj{"type": "object"},
		"handler": obj{"url": "http://127.0.0.1:1/down", "timeoutMs": 2000}, "task": obj{"mode": "may"}})
	p.Tool(t, "acme", obj{"name": "rollout_status", "inputSchema": obj{"type": "object"}, "handler": obj{"url": hook},
		"_meta": obj{"ui": obj{"resourceUri": "ui://acme/rollout.html", "visibility": []string{"app"}}}})
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/prompts", obj{"name": "brief", "description": "A status brief",
		"arguments": []obj{{"name": "topic", "required": true}}, "messages": []obj{{"role": "user", "content": obj{"type": "text", "text": "Brief on {{topic}}"}}}})
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/resource-templates", obj{"name": "report", "uriTemplate": "ui://acme/report/{id}",
		"mimeType": "text/html;profile=mcp-app", "handler": obj{"url": hook, "timeoutMs": 4000}})
	// export's webhook is down: its one call failed.
	if r := p.MCP(t, "acme", "tools/call", obj{"name": "export", "arguments": obj{}}); r.Status != 200 {
		t.Fatalf("export: %d %s", r.Status, r.Body)
	}
	// report's handler answers a read as if it were a tool: each of
	// two reads of its URIs failed.
	for _, uri := range []string{"ui://acme/report/7", "ui://acme/report/8"} {
		if r := p.MCP(t, "acme", "resources/read", obj{"uri": uri}); r.Status != 502 {
			t.Fatalf("read %s: %d %s", uri, r.Status, r.Body)
		}
	}
	testwait.Until(t, "the failed calls recorded", func() bool {
		return len(p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/flows?target=export&state=failed", nil)["items"].([]any)) == 1 &&
			len(p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/flows?method=resources/read&state=failed", nil)["items"].([]any)) == 2
	})

	ctx := browsertest.New(t)()
	signIn(t, ctx, p.URL, op.UserName(1))
	browsertest.Do(t, ctx, "open acme's catalogue from the Tenants page",
		chromedp.Click(browsertest.CSS(`a[data-section="tenants"]`)),
		chromedp.WaitVisible(browsertest.CSS(`tr[data-slug="acme"] td.c-tenant a`)),
		chromedp.Click(browsertest.CSS(`tr[data-slug="acme"] td.c-tenant a`)),
		chromedp.WaitVisible(browsertest.CSS(`table.catalogue tr[data-name="deploy"]`)))
	text := func(sel string) string {
		return browsertest.Value(t, ctx, "read "+sel, chromedp.Evaluate[string](`(document.querySelector('`+sel+`')||{}).innerText||""`))
	}
	for _, c := range []struct{ sel, want string }{
		{`tr[data-name="deploy"] td.c-details`, "asks region (form), confirm (form)"},
		{`tr[data-name="deploy"] td.c-details`, "scopes deploy:write"},
		{`tr[data-name="deploy"] td.c-details`, "view ui://acme/rollout.html"},
		{`tr[data-name="deploy"] td.c-handler`, "127.0.0.1"},
		{`tr[data-name="export"] td.c-details`, "task: may"},
		{`tr[data-name="export"] td.c-handler`, "127.0.0.1:1 · 2 s"},
		{`tr[data-name="export"] td.c-failing`, "100%"},
		{`tr[data-name="deploy"] td.c-failing`, "–"},
		{`tr[data-name="rollout_status"] td.c-details`, "views only"},
		{`tr[data-name="brief"] td.c-details`, "answered from its templates"},
		{`tr[data-name="rollout"] td.c-details`, "text/html;profile=mcp-app"},
		{`tr[data-name="report"] td.c-handler`, "· 4 s"},
		{`tr[data-name="report"] td.c-failing`, "100%"},
	} {
		if got := text(c.sel); !strings.Contains(got, c.want) {
			t.Errorf("%s: %q lacks %q", c.sel, got, c.want)
		}
	}
	browsertest.Do(t, ctx, "open deploy's arguments",
		chromedp.Click(browsertest.CSS(`tr[data-name="deploy"] details.schema summary`)),
		chromedp.WaitVisible(browsertest.CSS(`tr[data-name="deploy"] ul.schema`)))
	if got := text(`tr[data-name="deploy"] ul.schema`); !strings.Contains(got, "service *") || !strings.Contains(got, "pattern ^[a-z]+$") ||
		!strings.Contains(got, `"staging" | "production"`) || !strings.Contains(got, "The service to deploy") {
		t.Errorf("deploy's arguments read %q", got)
	}
	checkLayout(t, ctx, "catalogue")

	// The preview: the hostile view reports what it managed.
	browsertest.Do(t, ctx, "preview the view",
		browsertest.Until(`(window.__said = [], addEventListener("message", (e) => { if (e.data && e.data.hostile) window.__said.push(e.data.hostile); }), true)`),
		chromedp.Click(browsertest.CSS(`tr[data-name="rollout"] button[data-action="preview"]`)),
		chromedp.WaitVisible(browsertest.CSS(`dialog.preview iframe`)),
		browsertest.Until(`window.__said.length > 0`))
	said := browsertest.Value(t, ctx, "what the view managed", chromedp.Evaluate[map[string]any](`window.__said[0]`))
	for _, k := range []string{"fetch", "xhr", "img", "cookie", "storage", "parent"} {
		if v, _ := said[k].(string); !strings.HasPrefix(v, "failed") {
			t.Errorf("the previewed view's %s: %q (it must fail)", k, v)
		}
	}
	if said["origin"] != "null" {
		t.Errorf("the previewed view's origin is %v, not opaque", said["origin"])
	}
	if v := said["violations"]; !strings.Contains(strings.Join(toStrings(v), " "), "connect-src") {
		t.Errorf("no connect-src violation reported: %v", v)
	}
	if got := text(`dialog.preview`); !strings.Contains(got, "It asks for clipboardWrite; the preview grants none") {
		t.Errorf("the preview says %q", got)
	}
	browsertest.Screenshot(t, ctx, "ui", "catalogue-preview")
	browsertest.Do(t, ctx, "close the preview with Escape",
		chromedp.KeyEvent("\x1b"),
		browsertest.Until(`!document.querySelector("dialog.preview").open`))

	// The preview's own answer: the CSP a host would build, sandboxed.
	r := p.Admin(t, http.MethodGet, "/api/v1/tenants/acme/resources/rollout/preview", nil)
	csp := r.Header.Get("Content-Security-Policy")
	for _, want := range []string{"sandbox allow-scripts", "default-src 'none'", "connect-src https://api.acme.example", "frame-src 'none'", "form-action 'none'", "frame-ancestors 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("the preview's CSP %q lacks %q", csp, want)
		}
	}
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") || string(r.Body) != hostileView {
		t.Errorf("the preview: %d %s", r.Status, r.Header.Get("Content-Type"))
	}
	if r := p.Admin(t, http.MethodGet, "/api/v1/tenants/acme/resources/nope/preview", nil); r.Status != 404 {
		t.Errorf("a missing view's preview: %d", r.Status)
	}
	// Not as a page of its own: a link a view lures an admin to.
	h := http.Header{"Authorization": {"Bearer " + platformtest.AdminToken}, "Sec-Fetch-Dest": {"document"}}
	if r := platformtest.Do(t, http.MethodGet, p.URL+"/api/v1/tenants/acme/resources/rollout/preview", h, nil); r.Status != 403 {
		t.Errorf("the preview opened as a page: %d", r.Status)
	}
	if got := text(`tr[data-name="rollout"] td.c-details`); !strings.Contains(got, "view of deploy, rollout_status") {
		t.Errorf("the view's row says %q", got)
	}
}

func toStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
