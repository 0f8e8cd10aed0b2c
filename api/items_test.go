package api_test

import (
	"strings"
	"testing"

	"github.com/opsmcp/platform/testkit/platformtest"
)

func validTool(name string) map[string]any {
	return map[string]any{
		"name":        name,
		"description": "Looks up the weather",
		"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
		"handler":     map[string]any{"url": "https://hooks.example.com/weather", "timeoutMs": 5000},
	}
}

// kindCase is one catalogue kind with a valid definition.
type kindCase struct {
	collection string
	def        func(name string) map[string]any
	hasSecret  bool
}

var kindCases = []kindCase{
	{"tools", validTool, true},
	{"prompts", func(name string) map[string]any {
		return map[string]any{"name": name, "arguments": []any{map[string]any{"name": "topic", "required": true}},
			"messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "Tell me about {{topic}}"}}}}
	}, false},
	{"resources", func(name string) map[string]any {
		return map[string]any{"name": name, "uri": "docs://" + name, "mimeType": "text/plain", "text": "hello"}
	}, false},
	{"resource-templates", func(name string) map[string]any {
		return map[string]any{"name": name, "uriTemplate": "files://{path}", "handler": map[string]any{"url": "https://hooks.example.com/files"}}
	}, true},
}

func TestEveryCatalogueKindRoundTrips(t *testing.T) {
	eachDialect(t, func(t *testing.T, p *platformtest.Platform) {
		p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "Acme"})
		base := "/api/v1/tenants/acme/"
		catVersion := func() float64 {
			return p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme", nil)["catalogueVersion"].(float64)
		}
		for _, k := range kindCases {
			before := catVersion()
			created := p.MustAdmin(t, 201, "POST", base+k.collection, k.def("item1"))
			secret, _ := created["webhookSecret"].(string)
			if k.hasSecret != strings.HasPrefix(secret, "whsec_") {
				t.Fatalf("%s: webhook secret on create = %q", k.collection, secret)
			}
			if catVersion() <= before {
				t.Fatalf("%s: create did not bump the catalogue version", k.collection)
			}
			got := p.Admin(t, "GET", base+k.collection+"/item1", nil)
			if got.Status != 200 || strings.Contains(string(got.Body), "whsec_") || got.Header.Get("ETag") != `"1"` {
				t.Fatalf("%s: get %d etag %q: %s", k.collection, got.Status, got.Header.Get("ETag"), got.Body)
			}
			list := p.Admin(t, "GET", base+k.collection, nil)
			if strings.Contains(string(list.Body), "whsec_") || len(list.JSON(t)["items"].([]any)) != 1 {
				t.Fatalf("%s: list %s", k.collection, list.Body)
			}
			// A GET edited and PUT back replaces the definition.
			edited := got.JSON(t)
			edited["description"] = "changed"
			replaced := p.MustAdmin(t, 200, "PUT", base+k.collection+"/item1", edited)
			if replaced["description"] != "changed" || replaced["version"].(float64) != 2 || replaced["webhookSecret"] != nil {
				t.Fatalf("%s: replaced %v", k.collection, replaced)
			}
			if r := p.Admin(t, "PUT", base+k.collection+"/item1", edited); r.Status != 412 {
				t.Fatalf("%s: replace with stale body version: %d %s", k.collection, r.Status, r.Body)
			}
			if k.hasSecret {
				rot := p.MustAdmin(t, 200, "POST", base+k.collection+"/item1/webhook-secret", nil)
				if s := rot["webhookSecret"].(string); s == secret || !strings.HasPrefix(s, "whsec_") {
					t.Fatalf("%s: rotation gave %q", k.collection, s)
				}
			} else if r := p.Admin(t, "POST", base+k.collection+"/item1/webhook-secret", nil); r.Status != 409 {
				t.Fatalf("%s: rotating a secret that does not exist: %d", k.collection, r.Status)
			}
			if r := p.Admin(t, "POST", base+k.collection, k.def("item1")); r.Status != 409 || problemType(t, r) != "conflict" {
				t.Fatalf("%s: duplicate name: %d %s", k.collection, r.Status, r.Body)
			}
			p.MustAdmin(t, 204, "DELETE", base+k.collection+"/item1", nil)
			if r := p.Admin(t, "GET", base+k.collection+"/item1", nil); r.Status != 404 {
				t.Fatalf("%s: after delete %d", k.collection, r.Status)
			}
		}
	})
}

func TestInvalidDefinitionsNameTheOffendingField(t *testing.T) {
	eachDialect(t, func(t *testing.T, p *platformtest.Platform) {
		p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "Acme"})
		with := func(mut func(m map[string]any)) map[string]any {
			m := validTool("t")
			mut(m)
			return m
		}
		cases := []struct {
			name, collection string
			body             any
			field            string
		}{
			{"bad tool name", "tools", with(func(m map[string]any) { m["name"] = "has space" }), "name"},
			{"long tool name", "tools", with(func(m map[string]any) { m["name"] = strings.Repeat("a", 129) }), "name"},
			{"schema keyword of wrong type", "tools", with(func(m map[string]any) {
				m["inputSchema"] = map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"minimum": "ten"}}}
			}), "inputSchema/properties/n/minimum"},
			{"schema not an object type", "tools", with(func(m map[string]any) { m["inputSchema"] = map[string]any{"type": "string"} }), "inputSchema/type"},
			{"schema foreign dialect", "tools", with(func(m map[string]any) {
				m["inputSchema"] = map[string]any{"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"}
			}), "inputSchema/$schema"},
			{"schema external ref", "tools", with(func(m map[string]any) {
				m["inputSchema"] = map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"$ref": "file:///etc/passwd"}}}
			}), "inputSchema"},
			{"missing schema", "tools", with(func(m map[string]any) { delete(m, "inputSchema") }), "inputSchema"},
			{"bad output schema", "tools", with(func(m map[string]any) { m["outputSchema"] = map[string]any{"type": 7} }), "outputSchema/type"},
			{"bad header param", "tools", with(func(m map[string]any) {
				m["inputSchema"] = map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number", "x-mcp-header": "N"}}}
			}), "inputSchema/properties/n/x-mcp-header"},
			{"missing handler", "tools", with(func(m map[string]any) { delete(m, "handler") }), "handler"},
			{"handler url scheme", "tools", with(func(m map[string]any) { m["handler"] = map[string]any{"url": "file:///etc/passwd"} }), "handler.url"},
			{"handler url credentials", "tools", with(func(m map[string]any) { m["handler"] = map[string]any{"url": "https://u:p@h.example/x"} }), "handler.url"},
			{"handler url relative", "tools", with(func(m map[string]any) { m["handler"] = map[string]any{"url": "/hook"} }), "handler.url"},
			{"handler timeout", "tools", with(func(m map[string]any) { m["handler"] = map[string]any{"url": "https://h.example", "timeoutMs": 999999} }), "handler.timeoutMs"},
			{"bad declared input", "tools", with(func(m map[string]any) { m["inputs"] = []any{map[string]any{"name": "x", "kind": "telepathy"}} }), "inputs"},
			{"prompt without messages or handler", "prompts", map[string]any{"name": "p"}, "messages"},
			{"prompt bad role", "prompts", map[string]any{"name": "p", "messages": []any{map[string]any{"role": "system", "content": map[string]any{"type": "text", "text": "x"}}}}, "messages[0].role"},
			{"resource without content", "resources", map[string]any{"name": "r", "uri": "docs://r"}, "text"},
			{"resource bad blob", "resources", map[string]any{"name": "r", "uri": "docs://r", "blob": "!!!"}, "blob"},
			{"resource relative uri", "resources", map[string]any{"name": "r", "uri": "no-scheme", "text": "x"}, "uri"},
			{"template unclosed", "resource-templates", map[string]any{"name": "t", "uriTemplate": "files://{path", "handler": map[string]any{"url": "https://h.example"}}, "uriTemplate"},
			{"template completion of unknown var", "resource-templates", map[string]any{"name": "t", "uriTemplate": "files://{path}", "completions": map[string]any{"nope": []string{"a"}}, "handler": map[string]any{"url": "https://h.example"}}, "completions.nope"},
			{"secret cannot be set", "tools", with(func(m map[string]any) { m["webhookSecret"] = "mine" }), "webhookSecret"},
			{"unknown field", "tools", with(func(m map[string]any) { m["colour"] = "red" }), "colour"},
			{"wrong type", "tools", with(func(m map[string]any) { m["description"] = 5 }), "description"},
		}
		for _, tc := range cases {
			r := p.Admin(t, "POST", "/api/v1/tenants/acme/"+tc.collection, tc.body)
			if r.Status != 422 {
				t.Errorf("%s: status %d, want 422: %s", tc.name, r.Status, r.Body)
				continue
			}
			if msg, ok := fieldErrors(t, r)[tc.field]; !ok || msg == "" {
				t.Errorf("%s: no message for field %q in %s", tc.name, tc.field, r.Body)
			}
		}
		if v := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme", nil)["catalogueVersion"].(float64); v != 1 {
			t.Fatalf("refused definitions bumped the catalogue version to %v", v)
		}
	})
}

func TestItemCannotBeRenamedByReplace(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "Acme"})
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/tools", validTool("a"))
	r := p.Admin(t, "PUT", "/api/v1/tenants/acme/tools/a", validTool("b"))
	if r.Status != 422 || fieldErrors(t, r)["name"] == "" {
		t.Fatalf("rename: %d %s", r.Status, r.Body)
	}
}

func TestWebhookSecretsNeverAppearInLogs(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "Acme"})
	created := p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/tools", validTool("a"))
	rotated := p.MustAdmin(t, 200, "POST", "/api/v1/tenants/acme/tools/a/webhook-secret", nil)
	logs := p.Logs.String()
	for _, s := range []string{created["webhookSecret"].(string), rotated["webhookSecret"].(string), platformtest.AdminToken} {
		if strings.Contains(logs, s) {
			t.Fatalf("a secret reached the log")
		}
	}
}
