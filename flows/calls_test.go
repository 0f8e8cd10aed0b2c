package flows_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/internal/bounded"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
	"github.com/opsmcp/platform/webhook"
)

// failingBackend answers each tool its own way: ok completes, bad is a
// 502 with a body, garbage is not JSON, slow outlasts its timeout, odd is
// JSON outside the contract.
func failingBackend(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req webhook.Request
		_ = json.NewDecoder(r.Body).Decode(&req)
		switch req.Name {
		case "bad":
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, "upstream\tconnect error:\n  the database is down")
		case "garbage":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"type": "complete", oops}`)
		case "slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		case "odd":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"type": "complete", "result": {"content": "not an array"}}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"type":"complete","result":{"content":[{"type":"text","text":"done"}]}}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// deadURL is a webhook URL nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String() + "/hook"
	ln.Close()
	return u
}

// flowsOf lists a tenant's recorded flows (with the query), once at
// least n are there.
func flowsOf(t *testing.T, p *platformtest.Platform, slug, query string, n int) []map[string]any {
	t.Helper()
	var out []map[string]any
	testwait.Until(t, fmt.Sprintf("fewer than %d flows of %s recorded", n, slug), func() bool {
		r := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/"+slug+"/flows?limit=500&"+query, nil)
		out = out[:0]
		for _, it := range r["items"].([]any) {
			out = append(out, it.(map[string]any))
		}
		return len(out) >= n
	})
	return out
}

func byTarget(items []map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, it := range items {
		out[it["target"].(string)] = it
	}
	return out
}

func TestEveryOneRoundCallIsRecordedWithWhyItFailedInWords(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			p := platformtest.Start(t, d.New(t))
			slug := p.Tenant(t, "acme")
			hook := failingBackend(t)
			for _, name := range []string{"ok", "bad", "garbage", "odd"} {
				p.Tool(t, slug, obj{"name": name, "inputSchema": obj{"type": "object"}, "handler": obj{"url": hook}})
			}
			p.Tool(t, slug, obj{"name": "slow", "inputSchema": obj{"type": "object"}, "handler": obj{"url": hook, "timeoutMs": 300}})
			p.Tool(t, slug, obj{"name": "down", "inputSchema": obj{"type": "object"}, "handler": obj{"url": deadURL(t)}})
			for _, name := range []string{"ok", "bad", "garbage", "odd", "slow", "down"} {
				platformtest.Result(t, p.MCP(t, slug, "tools/call", obj{"name": name, "arguments": obj{"secret": "s3cr3t-argument"}}))
			}
			// A call of a tool the tenant does not have is recorded too.
			p.MCP(t, slug, "tools/call", obj{"name": "nope", "arguments": obj{}})

			got := byTarget(flowsOf(t, p, slug, "", 7))
			for target, want := range map[string]struct{ state, detail, message string }{
				"ok":      {"completed", "", ""},
				"bad":     {"failed", "webhook_status", "webhook HTTP 502 (text/plain)"},
				"garbage": {"failed", "webhook_invalid_json", "webhook answer is invalid JSON at byte 22"},
				"odd":     {"failed", "webhook_contract", "webhook answer outside the contract: "},
				"slow":    {"failed", "webhook_timeout", "webhook timeout after 300ms"},
				"down":    {"failed", "webhook_connect", "webhook connect: connection refused"},
				"nope":    {"failed", "-32602", "Unknown tool"},
			} {
				f := got[target]
				if f == nil {
					t.Fatalf("the call of %s was not recorded: %v", target, got)
				}
				if f["kind"] != "call" || f["state"] != want.state || fmt.Sprint(f["detail"]) != want.detail && want.detail != "" {
					t.Errorf("%s recorded as %v %v (%v); want call %s (%s)", target, f["kind"], f["state"], f["detail"], want.state, want.detail)
				}
				msg, _ := f["message"].(string)
				if !strings.HasPrefix(msg, want.message) || (want.message == "" && msg != "") {
					t.Errorf("%s: cause %q; want it to start %q", target, msg, want.message)
				}
				if f["rounds"] != 1.0 || f["startedAt"] == nil || f["updatedAt"] == nil {
					t.Errorf("%s: %v", target, f)
				}
			}
			// The round says it too, beside the webhook's outcome; nothing
			// of the arguments is anywhere in the record.
			r := p.MustAdmin(t, 200, "GET", "/api/v1/flows/"+got["down"]["id"].(string), nil)
			round := r["rounds"].([]any)[0].(map[string]any)
			wh, _ := round["webhook"].(map[string]any)
			if round["cause"] != "webhook connect: connection refused" || wh["outcome"] != "connect" || wh["detail"] != "connect: connection refused" {
				t.Fatalf("round of the call to a dead webhook: %v", round)
			}
			if msg := got["bad"]["message"].(string); strings.Contains(msg, "upstream") {
				t.Fatalf("a backend's body reached the record of a tenant that records no content: %q", msg)
			}
			// A tenant that records content sees how the body starts.
			p.MustAdmin(t, 201, "POST", "/api/v1/tenants", obj{"slug": "open", "displayName": "open",
				"settings": obj{"auth": obj{"public": true}, "recordAnswers": true}})
			p.Tool(t, "open", obj{"name": "bad", "inputSchema": obj{"type": "object"}, "handler": obj{"url": hook}})
			platformtest.Result(t, p.MCP(t, "open", "tools/call", obj{"name": "bad", "arguments": obj{}}))
			if msg := flowsOf(t, p, "open", "", 1)[0]["message"]; msg != `webhook HTTP 502 (text/plain), body starts "upstream connect error: the database is down"` {
				t.Fatalf("the cause for a tenant that records content: %q", msg)
			}
			all := p.Admin(t, "GET", "/api/v1/tenants/"+slug+"/flows?limit=500", nil)
			if strings.Contains(string(all.Body), "s3cr3t-argument") || strings.Contains(string(r2(t, p, got)), "s3cr3t-argument") {
				t.Fatal("a call's argument reached the record")
			}
		})
	}
}

// r2 reads every recorded flow's rounds, as the API shows them.
func r2(t *testing.T, p *platformtest.Platform, flows map[string]map[string]any) []byte {
	var all []byte
	for _, f := range flows {
		all = append(all, p.Admin(t, "GET", "/api/v1/flows/"+f["id"].(string), nil).Body...)
	}
	return all
}

func TestRefusalsAreRecordedWithinABudgetAndTheRestCounted(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t), platformtest.WithConfig(func(c *config.Config) {
		c.Flows.RefusalsPerMinute = 3
	}))
	slug := p.Tenant(t, "acme")
	p.Tool(t, slug, obj{"name": "ok", "inputSchema": obj{"type": "object"}, "handler": obj{"url": failingBackend(t)}})
	// Many spellings of a bad state: none opens, every one is refused.
	states := []any{"garbage", "", "eyJhbGciOiJub25lIn0.e30.", strings.Repeat("A", 400), "v1.AAAA.BBBB", "\u0000"}
	for _, s := range states {
		p.MCP(t, slug, "tools/call", obj{"name": "ok", "arguments": obj{}, "requestState": s,
			"inputResponses": obj{"x": obj{"action": "accept"}}})
	}
	// A tenant that takes tokens, and tokens that are not.
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants", obj{"slug": "closed", "displayName": "closed",
		"settings": obj{"auth": obj{"issuers": []obj{{"issuer": "https://issuer.example", "audiences": []string{"app"}}}}}})
	for _, tok := range []string{"Bearer not-a-jwt", "Basic dXNlcjpwYXNz", "Bearer a.b.c", "bearer " + strings.Repeat("x", 9000)} {
		h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/list"}, "Authorization": {tok}}
		if r := platformtest.Do(t, "POST", p.URL+"/t/closed/mcp", h, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)); r.Status != 401 {
			t.Fatalf("token %.20q: status %d", tok, r.Status)
		}
	}
	// A request without a token is how a client learns where to get one:
	// not recorded as a refusal.
	h := http.Header{"Content-Type": {"application/json"}, "Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/list"}}
	platformtest.Do(t, "POST", p.URL+"/t/closed/mcp", h, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))

	flowsOf(t, p, slug, "state=rejected", 3)
	flowsOf(t, p, "closed", "state=rejected", 3)
	// What the budget left out is counted, by tenant.
	var unrecorded float64
	testwait.Until(t, "refusals past the budget were not counted", func() bool {
		unrecorded = 0
		for _, s := range platformtest.Scrape(t, p.URL, platformtest.AdminToken) {
			if strings.HasPrefix(s.Name, "opsmcp_flows_record_unrecorded") && slices.Contains(mapsValues(s.Labels), "refusal_budget") {
				unrecorded += s.Value
			}
		}
		return unrecorded == float64(len(states)-3+4-3)
	})
	time.Sleep(300 * time.Millisecond) // a batch's time: nothing more comes
	refusedState := flowsOf(t, p, slug, "state=rejected", 3)
	refusedToken := flowsOf(t, p, "closed", "", 3)
	if len(refusedState) != 3 || len(refusedToken) != 3 {
		t.Fatalf("recorded %d refused states and %d refused tokens; the budget is 3 a tenant", len(refusedState), len(refusedToken))
	}
	for _, f := range append(refusedState, refusedToken...) {
		msg, _ := f["message"].(string)
		if f["state"] != "rejected" || !strings.HasPrefix(msg, "request state refused: ") && !strings.HasPrefix(msg, "bearer token refused: ") {
			t.Fatalf("a refusal recorded as %v", f)
		}
		if strings.Contains(msg, "not-a-jwt") || strings.Contains(msg, "dXNlcjpwYXNz") {
			t.Fatalf("a refused token's value reached the record: %q", msg)
		}
	}
}

// TestARefusedTokenIsRecordedWithTheCallItClaims: a request refused
// for its token is recorded before its body is read, with the method
// and target its headers claim (a 2026-07-28 client names them there),
// each as a read body's would be kept: a call, a prompt or a resource
// read only, the target bounded, a resource URI without what may hold a
// secret, undecodable bytes replaced.
func TestARefusedTokenIsRecordedWithTheCallItClaims(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants", obj{"slug": "closed", "displayName": "closed",
		"settings": obj{"auth": obj{"issuers": []obj{{"issuer": "https://issuer.example", "audiences": []string{"app"}}}}}})
	long := strings.Repeat("n", 1000)
	i := 0
	for _, tc := range []struct {
		method, name       string
		wantMethod, target string
	}{
		{"tools/call", "deploy", "tools/call", "deploy"},
		{"prompts/get", "summary", "prompts/get", "summary"},
		{"resources/read", "https://user:pw@files.example/report?token=s3cret#top", "resources/read", "https://files.example/report"},
		{"tools/call", long, "tools/call", long[:bounded.Value-len("…")] + "…"},
		{"tools/list", "", "", ""},
		{"evil/<script>", "<script>", "", ""},
	} {
		i++
		h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {tc.method}, "Authorization": {"Bearer not-a-jwt"}}
		if tc.name != "" {
			h.Set("Mcp-Name", tc.name)
		}
		if r := platformtest.Do(t, "POST", p.URL+"/t/closed/mcp", h, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)); r.Status != 401 {
			t.Fatalf("%s: status %d", tc.method, r.Status)
		}
		f := flowsOf(t, p, "closed", "", i)[0] // the newest change first
		if f["method"] != tc.wantMethod || f["target"] != tc.target || f["state"] != "rejected" {
			t.Errorf("Mcp-Method %q, Mcp-Name %.40q: recorded as %v %.40q (%v); want %q %.40q", tc.method, tc.name, f["method"], f["target"], f["state"], tc.wantMethod, tc.target)
		}
		if all := p.Admin(t, "GET", "/api/v1/tenants/closed/flows?limit=500", nil); strings.Contains(string(all.Body), "s3cret") {
			t.Fatalf("a claimed URI's secret reached the record: %s", all.Body)
		}
	}
}

func mapsValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestSamplingLeavesOutSuccessesButNeverAFailure, on both databases: a
// tenant that samples none of its successful calls has its failure
// recorded all the same, and one that samples all has every call.
func TestSamplingLeavesOutSuccessesButNeverAFailure(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) { sampling(t, platformtest.Start(t, d.New(t))) })
	}
}

func sampling(t *testing.T, p *platformtest.Platform) {
	hook := failingBackend(t)
	for _, tc := range []struct {
		slug     string
		settings obj
	}{
		{"none", obj{"auth": obj{"public": true}, "recordCallSample": 0}},
		{"all", obj{"auth": obj{"public": true}}},
	} {
		p.MustAdmin(t, 201, "POST", "/api/v1/tenants", obj{"slug": tc.slug, "displayName": tc.slug, "settings": tc.settings})
		p.Tool(t, tc.slug, obj{"name": "ok", "inputSchema": obj{"type": "object"}, "handler": obj{"url": hook}})
		p.Tool(t, tc.slug, obj{"name": "bad", "inputSchema": obj{"type": "object"}, "handler": obj{"url": hook}})
		for range 5 {
			platformtest.Result(t, p.MCP(t, tc.slug, "tools/call", obj{"name": "ok", "arguments": obj{}}))
		}
		platformtest.Result(t, p.MCP(t, tc.slug, "tools/call", obj{"name": "bad", "arguments": obj{}}))
	}
	all := flowsOf(t, p, "all", "", 6)
	flowsOf(t, p, "none", "", 1)
	time.Sleep(300 * time.Millisecond)
	none := flowsOf(t, p, "none", "", 1)
	if len(all) != 6 || len(none) != 1 || none[0]["target"] != "bad" {
		t.Fatalf("recorded %d calls of the tenant that samples none (want only its failure: %v), %d of the other (want 6)", len(none), none, len(all))
	}
	// Out-of-range samples are refused, in every spelling.
	for i, v := range []string{"-0.1", "1.5", `"0.5"`, "1e309", "-0", "2E0", "null1"} {
		body := fmt.Sprintf(`{"slug":"s%d","displayName":"x","settings":{"auth":{"public":true},"recordCallSample":%s}}`, i, v)
		if v == "-0" {
			if r := p.Admin(t, "POST", "/api/v1/tenants", body); r.Status != 201 {
				t.Fatalf("recordCallSample -0 (zero): status %d %s", r.Status, r.Body)
			}
			continue
		}
		if r := p.Admin(t, "POST", "/api/v1/tenants", body); r.Status != 400 && r.Status != 422 {
			t.Fatalf("recordCallSample %v: status %d %s", v, r.Status, r.Body)
		}
	}
}

func TestTheListSearchesByPrefixFiltersByKindAndRefusesUnknownParameters(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			p := platformtest.Start(t, d.New(t))
			slug := p.Tenant(t, "acme")
			hook := failingBackend(t)
			for _, name := range []string{"deploy", "deploy-eu", "report", "deja.vu"} {
				p.Tool(t, slug, obj{"name": name, "inputSchema": obj{"type": "object"}, "handler": obj{"url": hook}})
			}
			p.Tool(t, slug, orderTool("order", backend(t)))
			for _, name := range []string{"deploy", "deploy-eu", "report"} {
				platformtest.Result(t, p.MCP(t, slug, "tools/call", obj{"name": name, "arguments": obj{}}))
			}
			// A client whose name is not ASCII.
			meta := platformtest.Meta(nil)
			meta["io.modelcontextprotocol/clientInfo"] = obj{"name": "Zoë's app", "version": "2"}
			platformtest.Result(t, p.MCP(t, slug, "tools/call", obj{"name": "deja.vu", "arguments": obj{}, "_meta": meta}))
			call(t, p, slug, "order", nil, "") // a flow that waits
			items := flowsOf(t, p, slug, "", 5)
			names := func(q string) []string {
				r := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/"+slug+"/flows?"+q, nil)
				var out []string
				for _, it := range r["items"].([]any) {
					out = append(out, it.(map[string]any)["target"].(string))
				}
				slices.Sort(out)
				return out
			}
			for q, want := range map[string][]string{
				"q=dep":                     {"deploy", "deploy-eu"},
				"q=deploy-":                 {"deploy-eu"},
				"q=Dep":                     nil, // case-sensitive
				"q=Zo%C3%AB":                {"deja.vu"},
				"q=Zo":                      {"deja.vu"},
				"q=" + url.QueryEscape("%"): nil, // no wildcard
				"q=_":                       nil,
				"q=platformtest":            {"deploy", "deploy-eu", "order", "report"}, // the client's name
				"kind=flow":                 {"order"},
				"kind=call":                 {"deja.vu", "deploy", "deploy-eu", "report"},
				"kind=call,flow&q=or":       {"order"},
				"method=prompts/get":        nil,
			} {
				if got := names(q); !slices.Equal(got, want) {
					t.Errorf("%s: %v; want %v", q, got, want)
				}
			}
			// By a flow id's prefix.
			id := items[0]["id"].(string)
			if got := names("q=" + url.QueryEscape(id[:len(id)-3])); len(got) != 1 || got[0] != items[0]["target"] {
				t.Errorf("by id prefix: %v", got)
			}
			// The waiting sort lists every flow the filter selects: the one
			// that waits first, then the rest.
			r := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/"+slug+"/flows?sort=waiting&limit=2", nil)
			first := r["items"].([]any)
			seen := []string{first[0].(map[string]any)["target"].(string), first[1].(map[string]any)["target"].(string)}
			for cur, _ := r["nextCursor"].(string); cur != ""; cur, _ = r["nextCursor"].(string) {
				r = p.MustAdmin(t, 200, "GET", "/api/v1/tenants/"+slug+"/flows?sort=waiting&limit=2&cursor="+url.QueryEscape(cur), nil)
				for _, it := range r["items"].([]any) {
					seen = append(seen, it.(map[string]any)["target"].(string))
				}
			}
			if len(seen) != 5 || seen[0] != "order" {
				t.Fatalf("sorted by waiting: %v; want the waiting flow first, then the other four", seen)
			}
			// Unknown or misspelt parameters are refused (400), not
			// ignored; a known one with a bad value is a validation error.
			for _, q := range []string{"targt=deploy", "q=dep&Kind=call", "search=dep", "tenant=acme&tenants=acme", "Q=dep", "q%20=dep", "Session=ls_1", "sessionId=ls_1"} {
				if r := p.Admin(t, "GET", "/api/v1/tenants/"+slug+"/flows?"+q, nil); r.Status != 400 {
					t.Errorf("%s: status %d; want 400", q, r.Status)
				}
			}
			for _, q := range []string{"kind=calls", "kind=", "q=" + strings.Repeat("x", 201), "q=%FF", "q=Zo%C3", "q=a%00", "session=" + strings.Repeat("s", 1025)} {
				if r := p.Admin(t, "GET", "/api/v1/tenants/"+slug+"/flows?"+q, nil); r.Status != 422 && !(q == "kind=" && r.Status == 200) {
					t.Errorf("%s: status %d; want 422", q, r.Status)
				}
			}
		})
	}
}

func TestAFlowOpensByItsIDAloneForThoseAllowedItsTenant(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	hook := failingBackend(t)
	for _, slug := range []string{"acme", "other"} {
		p.Tenant(t, slug)
		p.Tool(t, slug, obj{"name": "ok", "inputSchema": obj{"type": "object"}, "handler": obj{"url": hook}})
		platformtest.Result(t, p.MCP(t, slug, "tools/call", obj{"name": "ok", "arguments": obj{}}))
	}
	acme := flowsOf(t, p, "acme", "", 1)[0]["id"].(string)
	r := p.MustAdmin(t, 200, "GET", "/api/v1/flows/"+acme, nil)
	if r["flow"].(map[string]any)["tenant"] != "acme" {
		t.Fatalf("by id: %v", r)
	}
	// Under another tenant's slug, the flow is not there.
	if r := p.Admin(t, "GET", "/api/v1/tenants/other/flows/"+acme, nil); r.Status != 404 {
		t.Fatalf("a flow read under another tenant's slug: %d", r.Status)
	}
	// A tenant admin of other: 404 by id, as for a flow that does not
	// exist, whatever the spelling of the id.
	tok := p.MustAdmin(t, 201, "POST", "/api/v1/tokens", obj{"name": "other-admin", "role": "tenant-admin", "tenants": []string{"other"}})["token"].(string)
	for _, id := range []string{acme, strings.ToUpper(acme), acme + "/", url.PathEscape(acme + " "), "fl_AAAAAAAAAAAAAAAAAAAAAA"} {
		r := platformtest.Do(t, "GET", p.URL+"/api/v1/flows/"+id, http.Header{"Authorization": {"Bearer " + tok}}, nil)
		if r.Status != 404 && r.Status != 301 && r.Status != 307 {
			t.Errorf("tenant admin of other reads %q: %d", id, r.Status)
		}
		if strings.Contains(string(r.Body), "acme") {
			t.Errorf("the answer names the flow's tenant: %s", r.Body)
		}
	}
	other := flowsOf(t, p, "other", "", 1)[0]["id"].(string)
	if r := platformtest.Do(t, "GET", p.URL+"/api/v1/flows/"+other, http.Header{"Authorization": {"Bearer " + tok}}, nil); r.Status != 200 {
		t.Fatalf("tenant admin of other reads its own flow: %d", r.Status)
	}
}
