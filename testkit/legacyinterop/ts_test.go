package legacyinterop

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/opsmcp/platform/testkit/nodeclient"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
)

// flowsOf lists the tenant's recorded flows once every one is finished.
func finishedFlows(t *testing.T, p *platformtest.Platform) []map[string]any {
	t.Helper()
	var flows []map[string]any
	testwait.Until(t, "the flow record shows the flow finished", func() bool {
		flows = nil
		for _, f := range p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/flows", nil)["items"].([]any) {
			flows = append(flows, f.(map[string]any))
		}
		for _, f := range flows {
			if f["state"] == "awaiting_input" || f["state"] == "running" {
				return false
			}
		}
		return len(flows) > 0
	})
	return flows
}

func TestTypeScriptSDKv1ClientCompletesABridgedFlow(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	b := newBackend(t)
	register(t, p.URL, platformtest.AdminToken, b, nil)

	out := nodeclient.Script(t, nodeclient.Packages(t, "OPSMCP_TS_SDK", "v1"), "ts/client.mjs", p.URL+"/t/acme/mcp")
	var got struct {
		ProtocolVersion string   `json:"protocolVersion"`
		Asked           []string `json:"asked"`
		URLIDs          []string `json:"urlIds"`
		Completed       []string `json:"completed"`
		Sampled         int      `json:"sampled"`
		Result          struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	if got.ProtocolVersion != "2025-11-25" || got.Result.IsError || len(got.Result.Content) != 1 {
		t.Fatalf("client saw %s", out)
	}
	wantOnboarded(t, got.Result.Content[0].Text)
	// Asked in turn, one round each: a form, a URL (with the id
	// 2025-11-25 requires, completed once the flow moved on), sampling,
	// the webhook's own form.
	if strings.Join(got.Asked, ",") != "form,url,form" || got.Sampled != 1 {
		t.Fatalf("asked %v, sampled %d", got.Asked, got.Sampled)
	}
	if len(got.URLIDs) != 1 || got.URLIDs[0] == "" || !slices.Equal(got.Completed, got.URLIDs) {
		t.Fatalf("URL elicitation %v, completed %v", got.URLIDs, got.Completed)
	}
	// The platform's side: one flow of five rounds, in the client's era;
	// the session the client ended is over.
	flows := finishedFlows(t, p)
	if len(flows) != 1 || flows[0]["state"] != "completed" || flows[0]["era"] != "2025-11-25" || flows[0]["rounds"] != float64(5) {
		t.Fatalf("flows %v", flows)
	}
	if c := flows[0]["client"].(map[string]any); c["name"] != "opsmcp-legacy-interop" {
		t.Fatalf("client %v", c)
	}
	if live := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/sessions", nil)["items"].([]any); len(live) != 0 {
		t.Fatalf("the session the client ended is live: %v", live)
	}
}
