package main

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/opsmcp/platform/testkit/platformtest"
)

// TestExampleBackendServesItsToolsThroughThePlatform registers the
// example's definitions on a real platform and runs each through MCP.
func TestExampleBackendServesItsToolsThroughThePlatform(t *testing.T) {
	var secrets []string
	hook := httptest.NewServer(nil)
	defer hook.Close()
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.Tenant(t, "travel")
	for collection, defs := range Definitions(hook.URL) {
		for _, d := range defs {
			secrets = append(secrets, p.MustAdmin(t, 201, "POST", "/api/v1/tenants/travel/"+collection, d)["webhookSecret"].(string))
		}
	}
	hook.Config.Handler = Handler(secrets)
	caps := map[string]any{"elicitation": map[string]any{}}

	res := platformtest.Result(t, p.MCP(t, "travel", "tools/call", map[string]any{"name": "get_weather", "arguments": map[string]any{"city": "Oslo"}}))
	if !strings.Contains(res["content"].([]any)[0].(map[string]any)["text"].(string), "Oslo") {
		t.Fatalf("get_weather: %v", res)
	}

	args := map[string]any{"city": "Lisbon", "nights": 2}
	res = platformtest.Result(t, p.MCP(t, "travel", "tools/call", map[string]any{"name": "book_trip", "arguments": args, "_meta": platformtest.Meta(caps)}))
	if res["resultType"] != "input_required" {
		t.Fatalf("book_trip round 1: %v", res)
	}
	res = platformtest.Result(t, p.MCP(t, "travel", "tools/call", map[string]any{"name": "book_trip", "arguments": args,
		"inputResponses": map[string]any{"wh.confirm": map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}},
		"requestState":   res["requestState"], "_meta": platformtest.Meta(caps)}))
	if got := res["content"].([]any)[0].(map[string]any)["text"].(string); !strings.Contains(got, "Booked 2 nights in Lisbon for €180") {
		t.Fatalf("book_trip round 2: %q", got)
	}

	res = platformtest.Result(t, p.MCP(t, "travel", "prompts/get", map[string]any{"name": "packing_list", "arguments": map[string]any{"city": "Oslo"}, "_meta": platformtest.Meta(caps)}))
	res = platformtest.Result(t, p.MCP(t, "travel", "prompts/get", map[string]any{"name": "packing_list", "arguments": map[string]any{"city": "Oslo"},
		"inputResponses": map[string]any{"length": map[string]any{"action": "accept", "content": map[string]any{"nights": 3}}},
		"requestState":   res["requestState"], "_meta": platformtest.Meta(caps)}))
	if !strings.Contains(fmt.Sprint(res["messages"]), "3 nights in Oslo") {
		t.Fatalf("packing_list: %v", res)
	}
}
