package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Register creates the conformance tenants on a platform through its
// admin API and registers every fixture, pointing webhook handlers at
// hookURL and giving the backend each secret the platform issues: tenant
// holds the core fixtures, TasksTenant(tenant) the Tasks extension's.
// They are apart because scenarios of the core suite call whichever tool
// a tenant lists first, as a client without the extension, which a tool
// that must run as a task refuses.
func Register(platformURL, adminToken, tenant, hookURL string, b *Backend) error {
	post := func(path string, body any) (map[string]any, error) {
		raw, _ := json.Marshal(body)
		raw = bytes.ReplaceAll(raw, []byte(`"{{hook}}"`), []byte(`"`+hookURL+`"`))
		req, _ := http.NewRequest(http.MethodPost, platformURL+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusCreated {
			return nil, fmt.Errorf("POST %s: HTTP %d: %s", path, resp.StatusCode, out)
		}
		var m map[string]any
		return m, json.Unmarshal(out, &m)
	}
	b.PlatformURL, b.AdminToken, b.Tenant = platformURL, adminToken, tenant
	type set struct {
		collection, kind string
		defs             []obj
	}
	for _, t := range []struct {
		slug, name string
		sets       []set
	}{
		{tenant, "MCP conformance fixtures", []set{
			{"tools", "tool", Tools()},
			{"prompts", "prompt", Prompts()},
			{"resources", "resource", Resources()},
			{"resource-templates", "resource_template", ResourceTemplates()},
		}},
		{TasksTenant(tenant), "MCP conformance fixtures: tasks", []set{{"tools", "tool", TaskTools()}}},
	} {
		if _, err := post("/api/v1/tenants", obj{"slug": t.slug, "displayName": t.name,
			"settings": obj{"auth": obj{"public": true}}}); err != nil {
			return err
		}
		base := "/api/v1/tenants/" + t.slug + "/"
		for _, st := range t.sets {
			for _, def := range st.defs {
				m, err := post(base+st.collection, def)
				if err != nil {
					return err
				}
				if s, ok := m["webhookSecret"].(string); ok {
					b.SetSecret(st.kind, def["name"].(string), s)
				}
			}
		}
	}
	return nil
}

// TasksTenant is the tenant of the Tasks extension's fixtures.
func TasksTenant(tenant string) string { return tenant + "-tasks" }

// MRTRScenarios are the suite's multi round-trip server scenarios.
var MRTRScenarios = []string{
	"input-required-result-basic-elicitation", "input-required-result-basic-sampling",
	"input-required-result-basic-list-roots", "input-required-result-request-state",
	"input-required-result-multiple-input-requests", "input-required-result-multi-round",
	"input-required-result-missing-input-response", "input-required-result-non-tool-request",
	"input-required-result-result-type", "input-required-result-unsupported-methods",
	"input-required-result-tampered-state", "input-required-result-capability-check",
	"input-required-result-ignore-extra-params", "input-required-result-validate-input",
}

// ServerScenarios are the suite's other 2026-07-28 server scenarios: the
// 23 scored ones and the 3 pending ones, which the platform passes too.
var ServerScenarios = strings.Fields(`
	server-stateless completion-complete tools-list
	tools-call-simple-text tools-call-image tools-call-audio tools-call-embedded-resource
	tools-call-mixed-content tools-call-error tools-call-with-progress
	server-sse-multiple-streams resources-list resources-read-text resources-read-binary
	resources-templates-read sep-2164-resource-not-found
	prompts-list prompts-get-simple prompts-get-with-args prompts-get-embedded-resource prompts-get-with-image
	dns-rebinding-protection caching
	json-schema-2020-12 http-header-validation http-custom-header-server-validation`)
