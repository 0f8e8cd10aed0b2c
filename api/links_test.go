package api_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/opsmcp/platform/catalogue"
	"github.com/opsmcp/platform/testkit/platformtest"
)

func viewResource(name, uri string) map[string]any {
	return map[string]any{"name": name, "uri": uri, "mimeType": catalogue.AppMimeType, "text": "<!DOCTYPE html><html><body>view</body></html>",
		"_meta": map[string]any{"ui": map[string]any{"csp": map[string]any{"connectDomains": []string{"https://api.acme.example"}}, "prefersBorder": true}}}
}

func linkedTool(name string, meta map[string]any) map[string]any {
	t := validTool(name)
	t["_meta"] = meta
	return t
}

// TestAToolsViewMustBeServedAndStaysServed: a tool may link only to a
// view the tenant serves (a static ui:// resource, or a ui:// template
// matching the link), named by field whichever spelling links it; a view
// a tool links to cannot be deleted or moved until the tool lets go, and
// the refused write changes nothing; on both databases.
func TestAToolsViewMustBeServedAndStaysServed(t *testing.T) {
	eachDialect(t, func(t *testing.T, p *platformtest.Platform) {
		p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "Acme"})
		base := "/api/v1/tenants/acme/"
		nested := map[string]any{"ui": map[string]any{"resourceUri": "ui://acme/rollout.html", "visibility": []string{"model", "app"}}}
		// No view yet: refused, nothing written.
		for _, tc := range []struct {
			meta  map[string]any
			field string
		}{
			{nested, "_meta.ui.resourceUri"},
			{map[string]any{"ui/resourceUri": "ui://acme/rollout.html"}, "_meta.ui/resourceUri"},
			{map[string]any{"ui": map[string]any{"resourceUri": "ui://acme/report/7"}}, "_meta.ui.resourceUri"},
		} {
			r := p.Admin(t, "POST", base+"tools", linkedTool("deploy", tc.meta))
			if r.Status != 422 || !strings.Contains(fieldErrors(t, r)[tc.field], "no resource or resource template") {
				t.Fatalf("a link to a missing view: %d %s", r.Status, r.Body)
			}
		}
		p.MustAdmin(t, 404, "GET", base+"tools/deploy", nil)
		// A resource that is not a view does not serve a link either.
		p.MustAdmin(t, 201, "POST", base+"resource-templates", map[string]any{"name": "text", "uriTemplate": "ui://acme/text/{id}",
			"mimeType": catalogue.AppMimeType, "handler": map[string]any{"url": "https://hooks.example.com/views"}})
		p.MustAdmin(t, 201, "POST", base+"resources", viewResource("rollout", "ui://acme/rollout.html"))
		created := p.MustAdmin(t, 201, "POST", base+"tools", linkedTool("deploy", nested))
		if fmt.Sprint(created["_meta"]) != fmt.Sprint(nested) {
			t.Fatalf("the tool's _meta came back as %v", created["_meta"])
		}
		// A tool linked through the template.
		p.MustAdmin(t, 201, "POST", base+"tools", linkedTool("report", map[string]any{"ui": map[string]any{"resourceUri": "ui://acme/text/7"}}))

		// The views cannot go, or move, while linked; nothing changes.
		for _, tc := range []struct{ method, path string }{
			{"DELETE", base + "resources/rollout"},
			{"DELETE", base + "resource-templates/text"},
		} {
			r := p.Admin(t, tc.method, tc.path, nil)
			if r.Status != 409 || !strings.Contains(string(r.Body), "links to") {
				t.Fatalf("%s %s: %d %s", tc.method, tc.path, r.Status, r.Body)
			}
		}
		moved := viewResource("rollout", "ui://acme/rollout-v2.html")
		if r := p.Admin(t, "PUT", base+"resources/rollout", moved); r.Status != 409 || !strings.Contains(string(r.Body), `tool \"deploy\"`) {
			t.Fatalf("moving a linked view: %d %s", r.Status, r.Body)
		}
		if got := p.MustAdmin(t, 200, "GET", base+"resources/rollout", nil); got["uri"] != "ui://acme/rollout.html" || got["version"].(float64) != 1 {
			t.Fatalf("a refused change changed the view: %v", got)
		}
		// The tool lets go (a link the new view serves): the old view goes.
		p.MustAdmin(t, 201, "POST", base+"resources", viewResource("rollout2", "ui://acme/rollout-v2.html"))
		p.MustAdmin(t, 200, "PUT", base+"tools/deploy", linkedTool("deploy", map[string]any{"ui": map[string]any{"resourceUri": "ui://acme/rollout-v2.html"}}))
		p.MustAdmin(t, 204, "DELETE", base+"resources/rollout", nil)
		p.MustAdmin(t, 204, "DELETE", base+"tools/report", nil)
		p.MustAdmin(t, 204, "DELETE", base+"resource-templates/text", nil)
	})
}

// TestALinkAndItsViewsDeletionNeverBothLand races a tool linking to a
// view against the view's deletion, many times, on PostgreSQL (where
// writes run concurrently): one of the two is refused every time, never
// leaving a tool linked to nothing.
func TestALinkAndItsViewsDeletionNeverBothLand(t *testing.T) {
	p := platformtest.Start(t, platformtest.PostgresSchemaURL(t))
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "Acme"})
	base := "/api/v1/tenants/acme/"
	for i := range 15 {
		uri := fmt.Sprintf("ui://acme/v%d.html", i)
		p.MustAdmin(t, 201, "POST", base+"resources", viewResource(fmt.Sprintf("v%d", i), uri))
		var wg sync.WaitGroup
		var linked, deleted int
		wg.Add(2)
		go func() {
			defer wg.Done()
			linked = p.Admin(t, "POST", base+"tools", linkedTool(fmt.Sprintf("t%d", i), map[string]any{"ui": map[string]any{"resourceUri": uri}})).Status
		}()
		go func() {
			defer wg.Done()
			deleted = p.Admin(t, "DELETE", base+fmt.Sprintf("resources/v%d", i), nil).Status
		}()
		wg.Wait()
		if linked == 201 && deleted == 204 {
			t.Fatalf("round %d: the tool linked to %s and the view was deleted", i, uri)
		}
		if (linked != 201 && linked != 422) || (deleted != 204 && deleted != 409) {
			t.Fatalf("round %d: link %d, delete %d", i, linked, deleted)
		}
	}
}
