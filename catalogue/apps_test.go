package catalogue_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/opsmcp/platform/catalogue"
)

func meta(s string) func(*catalogue.Tool) {
	return func(tl *catalogue.Tool) { tl.Meta = json.RawMessage(s) }
}

// TestAToolsMetaLinksItsViewAndFollowsTheKeyRule: a tool's _meta takes
// the view link (nested, the deprecated flat key, both when they agree)
// and namespaced keys; every other spelling is refused naming the field.
func TestAToolsMetaLinksItsViewAndFollowsTheKeyRule(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta string
		want []string // fields named; nil: valid
		msg  map[string]string
	}{
		{"the link", `{"ui":{"resourceUri":"ui://acme/rollout.html"}}`, nil, nil},
		{"the link and visibility", `{"ui":{"resourceUri":"ui://acme/rollout.html","visibility":["model","app"]}}`, nil, nil},
		{"an app-only helper", `{"ui":{"visibility":["app"]}}`, nil, nil},
		{"the flat key alone", `{"ui/resourceUri":"ui://acme/rollout.html"}`, nil, nil},
		{"both, agreeing", `{"ui":{"resourceUri":"ui://a/v"},"ui/resourceUri":"ui://a/v"}`, nil, nil},
		{"an upper-case scheme", `{"ui":{"resourceUri":"UI://a/v"}}`, nil, nil},
		{"namespaced keys", `{"com.example/trace":{"x":1},"com.example.mcp/ok":true,"plain":1,"a.b-c_d":2,"x":null}`, nil, nil},
		{"both, disagreeing", `{"ui":{"resourceUri":"ui://a/v"},"ui/resourceUri":"ui://a/w"}`, []string{"_meta.ui/resourceUri"}, map[string]string{"_meta.ui/resourceUri": "must equal"}},
		{"not ui://", `{"ui":{"resourceUri":"https://acme.example/v.html"}}`, []string{"_meta.ui.resourceUri"}, map[string]string{"_meta.ui.resourceUri": "ui://"}},
		{"a flat key not ui://", `{"ui/resourceUri":"file:///etc/passwd"}`, []string{"_meta.ui/resourceUri"}, nil},
		{"a flat key not a string", `{"ui/resourceUri":["ui://a/v"]}`, []string{"_meta.ui/resourceUri"}, nil},
		{"a relative link", `{"ui":{"resourceUri":"rollout.html"}}`, []string{"_meta.ui.resourceUri"}, nil},
		{"an empty link", `{"ui":{"resourceUri":""}}`, []string{"_meta.ui.resourceUri"}, nil},
		{"a link too long", `{"ui":{"resourceUri":"ui://a/` + strings.Repeat("v", 2048) + `"}}`, []string{"_meta.ui.resourceUri"}, nil},
		{"ui not an object", `{"ui":"ui://a/v"}`, []string{"_meta.ui"}, nil},
		{"ui empty", `{"ui":{}}`, []string{"_meta.ui"}, map[string]string{"_meta.ui": "resourceUri or a visibility"}},
		{"a resource's field on the tool", `{"ui":{"resourceUri":"ui://a/v","csp":{"connectDomains":["https://x.example"]}}}`, []string{"_meta.ui.csp"}, map[string]string{"_meta.ui.csp": "resource"}},
		{"an unknown ui field", `{"ui":{"resourceURI":"ui://a/v"}}`, []string{"_meta.ui.resourceURI"}, nil},
		{"a visibility unknown", `{"ui":{"visibility":["user"]}}`, []string{"_meta.ui.visibility[0]"}, nil},
		{"a visibility repeated", `{"ui":{"visibility":["app","app"]}}`, []string{"_meta.ui.visibility[1]"}, nil},
		{"a visibility empty", `{"ui":{"visibility":[]}}`, []string{"_meta.ui.visibility"}, nil},
		{"a visibility not a list", `{"ui":{"visibility":"app"}}`, []string{"_meta.ui"}, nil},
		{"meta not an object", `["ui"]`, []string{"_meta"}, nil},
		{"meta null", `null`, []string{"_meta"}, nil},
		{"a link twice", `{"ui":{"resourceUri":"ui://a/v"},"ui":{"resourceUri":"ui://a/w"}}`, []string{"_meta"}, nil},
		{"a link spelt in capitals beside it", `{"ui":{"resourceUri":"ui://a/v","ResourceUri":"https://evil.example"}}`, []string{"_meta.ui.ResourceUri"}, nil},
		{"a reserved prefix", `{"io.modelcontextprotocol/ui":{}}`, []string{"_meta"}, map[string]string{"_meta": "reserved for MCP"}},
		{"a reserved prefix, mcp", `{"dev.mcp/x":1}`, []string{"_meta"}, nil},
		{"a reserved prefix, cased", `{"io.ModelContextProtocol/x":1}`, []string{"_meta"}, nil},
		{"a trace key", `{"traceparent":"00-x"}`, []string{"_meta"}, map[string]string{"_meta": "trace context"}},
		{"a bad key: label starts with a digit", `{"1com.example/x":1}`, []string{"_meta"}, nil},
		{"a bad key: name ends with a dot", `{"com.example/x.":1}`, []string{"_meta"}, nil},
		{"a bad key: spaces", `{"my key":1}`, []string{"_meta"}, nil},
		{"a bad key: empty", `{"":1}`, []string{"_meta"}, nil},
		{"a bad key: two slashes", `{"a/b/c":1}`, []string{"_meta"}, nil},
		{"too large", `{"x":"` + strings.Repeat("y", 16<<10) + `"}`, []string{"_meta"}, map[string]string{"_meta": "at most"}},
	} {
		check(t, tc.name, catalogue.ValidateTool(tool(meta(tc.meta))), tc.want, tc.msg)
	}
}

// TestViewOnlyToolsTakeNoInputsNorTasks: a tool for views only cannot
// declare inputs or run as a task; one the model sees too can.
func TestViewOnlyToolsTakeNoInputsNorTasks(t *testing.T) {
	inputs := json.RawMessage(`[{"name":"ok","kind":"form","message":"Sure?","requestedSchema":{"type":"object","properties":{"yes":{"type":"boolean"}}}}]`)
	appOnly := func(tl *catalogue.Tool) { tl.Meta = json.RawMessage(`{"ui":{"visibility":["app"]}}`) }
	check(t, "inputs on an app-only tool", catalogue.ValidateTool(tool(func(tl *catalogue.Tool) { appOnly(tl); tl.Inputs = inputs })),
		[]string{"inputs"}, map[string]string{"inputs": "views only"})
	check(t, "a task on an app-only tool", catalogue.ValidateTool(tool(func(tl *catalogue.Tool) {
		appOnly(tl)
		tl.Task = &catalogue.TaskSettings{Mode: catalogue.TaskMay}
	})), []string{"task.mode"}, nil)
	check(t, "inputs on a tool the model sees", catalogue.ValidateTool(tool(func(tl *catalogue.Tool) {
		tl.Meta, tl.Inputs = json.RawMessage(`{"ui":{"resourceUri":"ui://a/v","visibility":["model","app"]}}`), inputs
	})), nil, nil)
}

func view(f func(*catalogue.Resource)) *catalogue.Resource {
	html := "<!DOCTYPE html><html><body>rollout</body></html>"
	r := &catalogue.Resource{Name: "rollout_view", URI: "ui://acme/rollout.html", MimeType: catalogue.AppMimeType, Text: &html}
	if f != nil {
		f(r)
	}
	return r
}

// TestViewsAreUIResourcesOfTheAppTypeWithCheckedMetadata: a view is a
// ui:// resource of exactly the app type, within the size bound, whose
// _meta.ui has origins, known permissions, a host name and a border
// preference; each other spelling is refused naming its field.
func TestViewsAreUIResourcesOfTheAppTypeWithCheckedMetadata(t *testing.T) {
	ui := func(s string) func(*catalogue.Resource) {
		return func(r *catalogue.Resource) { r.Meta = json.RawMessage(`{"ui":` + s + `}`) }
	}
	big := strings.Repeat("x", catalogue.MaxViewBytes+1)
	for _, tc := range []struct {
		name string
		f    func(*catalogue.Resource)
		want []string
		msg  map[string]string
	}{
		{"a plain view", nil, nil, nil},
		{"full metadata", ui(`{"csp":{"connectDomains":["https://api.acme.example","wss://live.acme.example:8443"],"resourceDomains":["https://*.cdn.example"],"frameDomains":["https://embed.example"],"baseUriDomains":["https://acme.example"]},"permissions":{"clipboardWrite":{},"camera":{}},"domain":"acme.views.example","prefersBorder":false}`), nil, nil},
		{"an IP origin", ui(`{"csp":{"connectDomains":["https://192.0.2.7:8443"]}}`), nil, nil},
		{"an IPv6 origin", ui(`{"csp":{"connectDomains":["https://[2001:db8::1]"]}}`), []string{"_meta.ui.csp.connectDomains[0]"}, nil},
		{"an empty query", ui(`{"csp":{"connectDomains":["https://a.example?"]}}`), []string{"_meta.ui.csp.connectDomains[0]"}, nil},
		{"an empty port", ui(`{"csp":{"connectDomains":["https://a.example:"]}}`), []string{"_meta.ui.csp.connectDomains[0]"}, nil},
		{"a port too large", ui(`{"csp":{"connectDomains":["https://a.example:99999"]}}`), []string{"_meta.ui.csp.connectDomains[0]"}, nil},
		{"port zero", ui(`{"csp":{"connectDomains":["https://a.example:0"]}}`), []string{"_meta.ui.csp.connectDomains[0]"}, nil},
		{"wss for scripts", ui(`{"csp":{"resourceDomains":["wss://live.example"]}}`), []string{"_meta.ui.csp.resourceDomains[0]"}, nil},
		{"a CSP list spelt in capitals, hiding a bare *", ui(`{"csp":{"connectDomains":["*"],"ConnectDomains":[]}}`), []string{"_meta.ui.csp"}, nil},
		{"csp spelt in capitals, hiding bad origins", ui(`{"csp":{"connectDomains":["*"]},"CSP":null}`), []string{"_meta.ui"}, nil},
		{"a key twice", ui(`{"prefersBorder":true,"prefersBorder":false}`), []string{"_meta"}, nil},
		{"ui twice", func(r *catalogue.Resource) {
			r.Meta = json.RawMessage(`{"ui":{"prefersBorder":true},"ui":{"csp":{"connectDomains":["*"]}}}`)
		}, []string{"_meta"}, nil},
		{"_meta null", func(r *catalogue.Resource) { r.Meta = json.RawMessage(`null`) }, []string{"_meta"}, nil},
		{"public", func(r *catalogue.Resource) { r.CacheScope = "public" }, nil, nil},
		{"a blob", func(r *catalogue.Resource) {
			r.Text, r.Blob = nil, base64.StdEncoding.EncodeToString([]byte("<html></html>"))
		}, nil, nil},
		{"at the size bound", func(r *catalogue.Resource) { s := big[1:]; r.Text = &s }, nil, nil},
		{"over the size bound", func(r *catalogue.Resource) { r.Text = &big }, []string{"text"}, map[string]string{"text": "at most"}},
		{"a blob over the size bound", func(r *catalogue.Resource) {
			r.Text, r.Blob = nil, base64.StdEncoding.EncodeToString([]byte(big))
		}, []string{"blob"}, nil},
		{"a ui:// resource of another type", func(r *catalogue.Resource) { r.MimeType = "text/html" }, []string{"mimeType"}, map[string]string{"mimeType": "exactly"}},
		{"a ui:// resource without a type", func(r *catalogue.Resource) { r.MimeType = "" }, []string{"mimeType"}, nil},
		{"the app type spelt otherwise", func(r *catalogue.Resource) { r.MimeType = "text/html; profile=mcp-app" }, []string{"mimeType", "mimeType"}, nil},
		{"the app type in capitals", func(r *catalogue.Resource) { r.MimeType = "TEXT/HTML;PROFILE=MCP-APP" }, []string{"mimeType", "mimeType"}, nil},
		{"a view without ui://", func(r *catalogue.Resource) { r.URI = "https://acme.example/v.html" }, []string{"uri"}, map[string]string{"uri": "ui://"}},
		{"ui metadata on a plain resource", func(r *catalogue.Resource) {
			r.URI, r.MimeType, r.Meta = "file:///notes.txt", "text/plain", json.RawMessage(`{"ui":{"prefersBorder":true}}`)
		}, []string{"_meta.ui"}, nil},
		{"a bare * origin", ui(`{"csp":{"connectDomains":["*"]}}`), []string{"_meta.ui.csp.connectDomains[0]"}, nil},
		{"an http origin", ui(`{"csp":{"connectDomains":["http://api.acme.example"]}}`), []string{"_meta.ui.csp.connectDomains[0]"}, map[string]string{"_meta.ui.csp.connectDomains[0]": "https or wss"}},
		{"an origin with a path", ui(`{"csp":{"resourceDomains":["https://cdn.example/js/"]}}`), []string{"_meta.ui.csp.resourceDomains[0]"}, nil},
		{"an origin with a query", ui(`{"csp":{"resourceDomains":["https://cdn.example?x=1"]}}`), []string{"_meta.ui.csp.resourceDomains[0]"}, nil},
		{"an origin with credentials", ui(`{"csp":{"frameDomains":["https://u:p@embed.example"]}}`), []string{"_meta.ui.csp.frameDomains[0]"}, nil},
		{"a CSP keyword", ui(`{"csp":{"connectDomains":["'self'"]}}`), []string{"_meta.ui.csp.connectDomains[0]"}, nil},
		{"a CSP injection", ui(`{"csp":{"connectDomains":["https://a.example; script-src *"]}}`), []string{"_meta.ui.csp.connectDomains[0]"}, nil},
		{"a scheme only", ui(`{"csp":{"connectDomains":["https:"]}}`), []string{"_meta.ui.csp.connectDomains[0]"}, nil},
		{"a wildcard not leftmost", ui(`{"csp":{"connectDomains":["https://api.*.example"]}}`), []string{"_meta.ui.csp.connectDomains[0]"}, nil},
		{"a bad port", ui(`{"csp":{"connectDomains":["https://a.example:http"]}}`), []string{"_meta.ui.csp.connectDomains[0]"}, nil},
		{"too many origins", ui(`{"csp":{"connectDomains":[` + strings.Repeat(`"https://a.example",`, 32) + `"https://b.example"]}}`), []string{"_meta.ui.csp.connectDomains"}, nil},
		{"an unknown CSP list", ui(`{"csp":{"scriptDomains":["https://a.example"]}}`), []string{"_meta.ui"}, nil},
		{"an unknown permission", ui(`{"permissions":{"usb":{}}}`), []string{"_meta.ui.permissions.usb"}, nil},
		{"a permission not {}", ui(`{"permissions":{"camera":true}}`), []string{"_meta.ui.permissions.camera"}, nil},
		{"a domain with a scheme", ui(`{"domain":"https://acme.views.example"}`), []string{"_meta.ui.domain"}, nil},
		{"a domain with a path", ui(`{"domain":"acme.example/x"}`), []string{"_meta.ui.domain"}, nil},
		{"prefersBorder not a boolean", ui(`{"prefersBorder":"yes"}`), []string{"_meta.ui"}, nil},
		{"ui not an object", ui(`"on"`), []string{"_meta.ui"}, nil},
		{"a misspelt field", ui(`{"prefers_border":true}`), []string{"_meta.ui"}, nil},
		{"a cache scope unknown", func(r *catalogue.Resource) { r.CacheScope = "shared" }, []string{"cacheScope"}, nil},
	} {
		check(t, tc.name, catalogue.ValidateResource(view(tc.f)), tc.want, tc.msg)
	}
}

// TestUITemplatesAreViewsWithoutInputs: a ui:// template is a view (the
// app type), takes view metadata, and declares no inputs.
func TestUITemplatesAreViewsWithoutInputs(t *testing.T) {
	tmpl := func(f func(*catalogue.ResourceTemplate)) *catalogue.ResourceTemplate {
		rt := &catalogue.ResourceTemplate{Name: "report_view", URITemplate: "ui://acme/report/{id}", MimeType: catalogue.AppMimeType,
			Handler: &catalogue.Handler{URL: "https://hooks.example.com/mcp"}, Meta: json.RawMessage(`{"ui":{"prefersBorder":true}}`)}
		if f != nil {
			f(rt)
		}
		return rt
	}
	check(t, "a view template", catalogue.ValidateResourceTemplate(tmpl(nil)), nil, nil)
	check(t, "a view template of another type", catalogue.ValidateResourceTemplate(tmpl(func(rt *catalogue.ResourceTemplate) { rt.MimeType = "text/html" })),
		[]string{"mimeType"}, nil)
	check(t, "a view template with inputs", catalogue.ValidateResourceTemplate(tmpl(func(rt *catalogue.ResourceTemplate) {
		rt.Inputs = json.RawMessage(`[{"name":"ok","kind":"form","message":"Sure?","requestedSchema":{"type":"object","properties":{"yes":{"type":"boolean"}}}}]`)
	})), []string{"inputs"}, map[string]string{"inputs": "ui://"})
	check(t, "view metadata on a plain template", catalogue.ValidateResourceTemplate(tmpl(func(rt *catalogue.ResourceTemplate) {
		rt.URITemplate, rt.MimeType = "file:///reports/{id}", "text/plain"
	})), []string{"_meta.ui"}, nil)
}

// TestIconsAreHTTPSOrBoundedImageData: icons on every kind are https:
// URLs or bounded base64 data: images, with sizes and a theme.
func TestIconsAreHTTPSOrBoundedImageData(t *testing.T) {
	png := "data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n"))
	for _, tc := range []struct {
		name  string
		icons []catalogue.Icon
		want  []string
	}{
		{"an https icon", []catalogue.Icon{{Src: "https://acme.example/icon.png", MimeType: "image/png", Sizes: []string{"48x48", "any"}, Theme: "dark"}}, nil},
		{"a data icon", []catalogue.Icon{{Src: png}}, nil},
		{"an svg data icon", []catalogue.Icon{{Src: "data:image/svg+xml;base64,PHN2Zy8+"}}, nil},
		{"http", []catalogue.Icon{{Src: "http://acme.example/icon.png"}}, []string{"icons[0].src"}},
		{"javascript", []catalogue.Icon{{Src: "javascript:alert(1)"}}, []string{"icons[0].src"}},
		{"file", []catalogue.Icon{{Src: "file:///etc/passwd"}}, []string{"icons[0].src"}},
		{"relative", []catalogue.Icon{{Src: "/icon.png"}}, []string{"icons[0].src"}},
		{"credentials", []catalogue.Icon{{Src: "https://u:p@acme.example/i.png"}}, []string{"icons[0].src"}},
		{"data of HTML", []catalogue.Icon{{Src: "data:text/html;base64,PGgxPg=="}}, []string{"icons[0].src"}},
		{"data not base64", []catalogue.Icon{{Src: "data:image/png,<svg/>"}}, []string{"icons[0].src"}},
		{"data badly encoded", []catalogue.Icon{{Src: "data:image/png;base64,***"}}, []string{"icons[0].src"}},
		{"data with a line break", []catalogue.Icon{{Src: "data:image/png;base64,PHN2\nZy8+"}}, []string{"icons[0].src"}},
		{"BASE64 in capitals", []catalogue.Icon{{Src: "data:image/svg+xml;BASE64,PHN2Zy8+"}}, nil},
		{"data too large", []catalogue.Icon{{Src: "data:image/png;base64," + strings.Repeat("AAAA", 8<<10)}}, []string{"icons[0].src"}},
		{"a bad size", []catalogue.Icon{{Src: "https://a.example/i.png", Sizes: []string{"48"}}}, []string{"icons[0].sizes[0]"}},
		{"a bad type", []catalogue.Icon{{Src: "https://a.example/i.png", MimeType: "text/html"}}, []string{"icons[0].mimeType"}},
		{"a bad theme", []catalogue.Icon{{Src: "https://a.example/i.png", Theme: "blue"}}, []string{"icons[0].theme"}},
		{"too many", make([]catalogue.Icon, 9), []string{"icons"}},
	} {
		check(t, "tool: "+tc.name, catalogue.ValidateTool(tool(func(tl *catalogue.Tool) { tl.Icons = tc.icons })), tc.want, nil)
		check(t, "resource: "+tc.name, catalogue.ValidateResource(view(func(r *catalogue.Resource) { r.Icons = tc.icons })), tc.want, nil)
		check(t, "prompt: "+tc.name, catalogue.ValidatePrompt(&catalogue.Prompt{Name: "p", Messages: []catalogue.PromptMessage{
			{Role: "user", Content: json.RawMessage(`{"type":"text","text":"hi"}`)}}, Icons: tc.icons}), tc.want, nil)
	}
}

// TestALinkResolvesToAViewOfTheTenant: a link is served by a static view
// of that URI, else by the first matching template that is a view;
// anything else is named.
func TestALinkResolvesToAViewOfTheTenant(t *testing.T) {
	html := "<html></html>"
	resources := map[string]*catalogue.Resource{
		"ui://acme/rollout.html": {Name: "rollout", URI: "ui://acme/rollout.html", MimeType: catalogue.AppMimeType, Text: &html},
		"ui://acme/plain":        {Name: "plain", URI: "ui://acme/plain", MimeType: "text/plain", Text: &html},
	}
	find := func(uri string) *catalogue.Resource { return resources[uri] }
	templates := []catalogue.ResourceTemplate{
		{Name: "b_report", URITemplate: "ui://acme/report/{id}", MimeType: catalogue.AppMimeType},
		{Name: "a_text", URITemplate: "ui://acme/text/{id}", MimeType: "text/plain"},
	}
	for _, tc := range []struct {
		uri, err string
	}{
		{"ui://acme/rollout.html", ""},
		{"ui://acme/report/7", ""},
		{"ui://acme/plain", "not a view"},
		{"ui://acme/text/7", "not a view"},
		{"ui://acme/missing", "no resource or resource template"},
		{"ui://other/rollout.html", "no resource or resource template"},
	} {
		err := catalogue.AppViewServed(tc.uri, find, templates)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, want %q", tc.uri, err, tc.err)
		}
	}
}
