package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/testkit/browsertest"
	"github.com/opsmcp/platform/testkit/oidctest"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
	"github.com/opsmcp/platform/webhook"
)

type obj = map[string]any

// chromium finds the browser: Debian's chromium, which ./scripts/test
// installs when missing. The test fails without it rather than skip: a
// UI nobody drove in a browser is not tested.
// adminPlatform starts a platform whose admins sign in at a real OpenID
// Provider (as web client clientID), with the bootstrap token kept for
// the test's own set-up, and more settings applied.
func adminPlatform(t *testing.T, clientID string, more ...func(*config.Config)) (*platformtest.Platform, *oidctest.Provider) {
	t.Helper()
	return adminPlatformWith(t, clientID, platformtest.WithConfig(func(c *config.Config) {
		for _, f := range more {
			f(c)
		}
	}))
}

// adminPlatformWith is adminPlatform with options of the platform's own
// (the config's options apply after the admin sign-in's).
func adminPlatformWith(t *testing.T, clientID string, opts ...platformtest.Option) (*platformtest.Platform, *oidctest.Provider) {
	t.Helper()
	op := oidctest.Start(t)
	admin := platformtest.WithConfig(func(c *config.Config) {
		c.AdminIssuer, c.AdminClientID, c.AdminClientSecret = op.Issuer, clientID, "s3cret"
		c.KeepBootstrapToken = true // the test sets up tenants with it
	})
	p := platformtest.Start(t, platformtest.SQLiteURL(t), append([]platformtest.Option{admin}, opts...)...)
	oidctest.RegisterWebClient(clientID, "s3cret", p.URL+"/admin/callback")
	return p, op
}

// signIn opens the UI, which sends the browser through the real OpenID
// Provider's login page, and types the user's credentials there.
func signIn(t *testing.T, ctx context.Context, url, user string) {
	t.Helper()
	browsertest.Do(t, ctx, "sign in as "+user,
		chromedp.Navigate(url+"/admin/flows"),
		chromedp.WaitVisible(browsertest.CSS(`#username`)),
		chromedp.SendKeys(browsertest.CSS(`#username`), user),
		chromedp.SendKeys(browsertest.CSS(`#password`), oidctest.Password),
		chromedp.Submit(browsertest.CSS(`#password`)),
		chromedp.WaitVisible(browsertest.CSS(`table[aria-label="Flows"]`)),
	)
}

// backend completes every call.
func backend(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req webhook.Request
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"complete","result":{"content":[{"type":"text","text":"deployed"}]}}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func deployTool(url string) obj {
	return obj{"name": "deploy", "title": "Deploy a service", "description": "Deploys after two confirmations",
		"inputSchema": obj{"type": "object", "properties": obj{"service": obj{"type": "string"}}},
		"handler":     obj{"url": url},
		"inputs": []obj{
			{"name": "region", "kind": "form", "message": "Which region should {{args.service}} go to?",
				"requestedSchema": obj{"type": "object", "properties": obj{"region": obj{"type": "string", "title": "Region", "enum": []string{"eu-west-1", "us-east-1", "ap-south-1"}}}, "required": []string{"region"}}},
			{"name": "confirm", "kind": "form", "message": "Deploy {{args.service}} now?", "when": obj{"input": "region"},
				"requestedSchema": obj{"type": "object", "properties": obj{"ok": obj{"type": "boolean", "title": "Go ahead"}}, "required": []string{"ok"}}},
		}}
}

var caps = obj{"elicitation": obj{}}

func callDeploy(t *testing.T, p *platformtest.Platform, slug, service string, responses obj, state string) *platformtest.Response {
	params := obj{"name": "deploy", "arguments": obj{"service": service}, "_meta": platformtest.Meta(caps)}
	if responses != nil {
		params["inputResponses"] = responses
	}
	if state != "" {
		params["requestState"] = state
	}
	return p.MCP(t, slug, "tools/call", params)
}

// TestAdminsWatchFlowsLiveAndCancelThem drives the UI in a real browser:
// sign-in through the OpenID Provider, a flow appearing live while a
// client drives it, its page, cancelling it (and the client's next round
// refused), and a tenant admin who sees only their tenant.
func TestAdminsWatchFlowsLiveAndCancelThem(t *testing.T) {
	p, op := adminPlatform(t, "platform-admin-ui", func(c *config.Config) {
		c.Flows.TraceURL = "https://tempo.example/trace/{traceId}"
		c.Flows.Replica = "replica-1"
		c.Keys.Provider, c.Keys.MasterKey = "local", "b3BzbWNwLXRlc3QtbWFzdGVyLWtleS0wMDAwMDAwMDE=" // per-tenant rings for the Keys page
	})
	oidctest.SetRoles("id1", "platform-admin")
	oidctest.SetRoles("id2", "tenant-admin:acme")
	url := backend(t)
	for _, slug := range []string{"acme", "globex"} {
		p.Tenant(t, slug)
		p.Tool(t, slug, deployTool(url))
	}
	// Some history, so the page shows more than one state.
	_, st := inputRequired(t, callDeploy(t, p, "acme", "billing", nil, ""))
	_, st = inputRequired(t, callDeploy(t, p, "acme", "billing", obj{"region": accept(obj{"region": "eu-west-1"})}, st))
	platformtest.Result(t, callDeploy(t, p, "acme", "billing", obj{"confirm": accept(obj{"ok": true})}, st))
	inputRequired(t, callDeploy(t, p, "globex", "payroll", nil, ""))

	newBrowser := browsertest.New(t)
	admin := newBrowser()
	signIn(t, admin, p.URL, op.UserName(1))
	who := browsertest.Value(t, admin, "who is signed in", chromedp.Text(browsertest.CSS(`#who`)))
	if !strings.Contains(who, "platform-admin") {
		t.Fatalf("header shows %q", who)
	}

	// A client starts a flow: the row appears without a reload.
	reqs, state := inputRequired(t, callDeploy(t, p, "acme", "checkout", nil, ""))
	if _, ok := reqs["region"]; !ok {
		t.Fatalf("first round asked %v", reqs)
	}
	flowID := latestFlow(t, p, "acme", "awaiting_input")
	row := fmt.Sprintf(`tr[data-id=%q]`, flowID)
	browsertest.Do(t, admin, "the new flow appears live", chromedp.WaitVisible(browsertest.CSS(row)))
	rowText := browsertest.Value(t, admin, "read the row", chromedp.Text(browsertest.CSS(row)))
	for _, want := range []string{"awaiting input", "acme", "deploy", "form", flowID, "now"} {
		if !strings.Contains(rowText, want) {
			t.Errorf("row %q lacks %q", rowText, want)
		}
	}
	// The client answers the first question: the same row updates.
	_, state = inputRequired(t, callDeploy(t, p, "acme", "checkout", obj{"region": accept(obj{"region": "nowhere"})}, state))
	browsertest.Do(t, admin, "the row shows round 2", browsertest.Until(fmt.Sprintf(`document.querySelector(%q)?.cells[5].textContent === "2"`, row)))
	browsertest.Screenshot(t, admin, "ui", "flows")

	// Paused, the table holds still: a change waits until resumed.
	browsertest.Do(t, admin, "pause", chromedp.KeyEvent("p"), browsertest.Until(`document.querySelector(".live").textContent.includes("paused")`))
	_, state = inputRequired(t, callDeploy(t, p, "acme", "checkout", obj{"region": accept(obj{"region": "us-east-1"})}, state))
	browsertest.Do(t, admin, "a held change is announced", browsertest.Until(`document.querySelector(".live").textContent.includes("1 updates waiting")`))
	if got := browsertest.Value(t, admin, "read the held row", chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).cells[5].textContent`, row))); got != "2" {
		t.Fatalf("a paused table changed: round %s", got)
	}
	browsertest.Do(t, admin, "resume", chromedp.KeyEvent("p"),
		browsertest.Until(fmt.Sprintf(`document.querySelector(%q)?.cells[5].textContent === "3"`, row)))

	// Keyboard: j selects the first row, Enter opens it.
	browsertest.Do(t, admin, "open the flow by keyboard",
		chromedp.Click(browsertest.CSS(`h1`)),
		chromedp.KeyEvent("j"), chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(browsertest.CSS(`ol.timeline li.round`)))
	path := browsertest.Value(t, admin, "read the location", chromedp.Evaluate[string](`location.pathname`))
	if path != "/admin/flows/"+flowID {
		t.Fatalf("Enter opened %s", path)
	}
	timeline := browsertest.Value(t, admin, "read the timeline", chromedp.Text(browsertest.CSS(`ol.timeline`)))
	for _, want := range []string{"Round 1", "Round 2", "Round 3", "Which region should checkout go to?", "Deploy checkout now?", "user took",
		"Answered: region accept", "(state ", " · seal "} {
		if !strings.Contains(timeline, want) {
			t.Errorf("timeline lacks %q:\n%s", want, timeline)
		}
	}
	if strings.Contains(timeline, "us-east-1\"") || strings.Contains(timeline, "Answers") {
		t.Errorf("the timeline shows an answer's content:\n%s", timeline)
	}
	checkLayout(t, admin, "flow")
	// A multi-round flow's page names its kind beside its state.
	if kind := browsertest.Value(t, admin, "read the kind label", chromedp.Evaluate[string](
		`[...document.querySelectorAll(".bar .kind")].filter(e => getComputedStyle(e).display !== "none").map(e => e.textContent).join(",")`)); kind != "flow" {
		t.Errorf("the flow's page labels its kind %q, want flow", kind)
	}

	// Cancel with a reason; the client's next round is refused.
	browsertest.Do(t, admin, "cancel the flow",
		chromedp.Click(browsertest.CSS(`button[data-action="cancel"]`)),
		chromedp.WaitVisible(browsertest.CSS(`dialog textarea`)),
		chromedp.SendKeys(browsertest.CSS(`dialog textarea`), "customer called to stop it"),
		chromedp.Click(browsertest.CSS(`dialog button[type="submit"]`)),
		chromedp.WaitVisible(browsertest.CSS(`.badge.s-cancelled`)))
	browsertest.Screenshot(t, admin, "ui", "flow-cancelled")
	r := callDeploy(t, p, "acme", "checkout", obj{"confirm": accept(obj{"ok": true})}, state)
	if code, msg, _ := platformtest.RPCError(t, r); code != -32602 || msg != "Invalid or expired requestState" {
		t.Fatalf("the client's next round after cancelling: %d %s", code, msg)
	}
	audit := p.MustAdmin(t, 200, "GET", "/api/v1/audit", nil)
	if !strings.Contains(fmt.Sprint(audit), flowID) {
		t.Fatal("the cancellation is not in the audit log")
	}

	// The other pages: tenants with what waits on people, the key ring
	// (rotating it), the audit log with the cancellation.
	browsertest.Do(t, admin, "open the tenants page",
		chromedp.Click(browsertest.CSS(`a[data-section="tenants"]`)),
		chromedp.WaitVisible(browsertest.CSS(`tr[data-slug="globex"]`)))
	if got := browsertest.Value(t, admin, "read globex's waiting count", chromedp.Text(browsertest.CSS(`tr[data-slug="globex"] td.c-waiting`))); !strings.Contains(got, "1") {
		t.Fatalf("globex waiting: %q", got)
	}
	// acme's last hour: four calls (a completed flow, a cancelled one,
	// and so on), none failed; its rate links to its calls.
	acme := browsertest.Value(t, admin, "read acme's figures", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('tr[data-slug="acme"] td.num')].map(td => td.textContent)`))
	if len(acme) != 5 || acme[0] == "0" || acme[1] != "0%" || acme[2] == "–" {
		t.Fatalf("acme's overview figures (calls/min, failing, p95, waiting, oldest): %q", acme)
	}
	checkLayout(t, admin, "tenants")
	browsertest.Do(t, admin, "rotate acme's keys",
		chromedp.Navigate(p.URL+"/admin/keys?tenant=acme"),
		chromedp.WaitVisible(browsertest.CSS(`table[aria-label="Keys of acme"] tbody tr`)),
		chromedp.Click(browsertest.CSS(`button.primary`)),
		chromedp.WaitVisible(browsertest.CSS(`dialog button[type="submit"]`)),
		chromedp.Click(browsertest.CSS(`dialog button[type="submit"]`)),
		browsertest.Until(`document.querySelectorAll('table[aria-label="Keys of acme"] tbody tr').length === 2`))
	// The fleet's rings: globex's one flow waiting is under its key.
	browsertest.Do(t, admin, "the fleet's rings count the flows in flight under each key",
		browsertest.Until(`document.querySelector('table[aria-label="Key rings of the fleet"] tr[data-slug="globex"]')?.textContent.includes("· 1")`))
	checkLayout(t, admin, "keys")
	browsertest.Do(t, admin, "open the audit log",
		chromedp.Click(browsertest.CSS(`a[data-section="audit"]`)),
		browsertest.Until(fmt.Sprintf(`document.querySelector("main").textContent.includes(%q)`, flowID)))
	checkLayout(t, admin, "audit")

	// A tenant admin sees only their tenant's flows.
	tenantAdmin := newBrowser()
	signIn(t, tenantAdmin, p.URL, op.UserName(2))
	globexFlow := latestFlow(t, p, "globex", "awaiting_input")
	browsertest.Do(t, tenantAdmin, "list the tenant admin's flows", chromedp.WaitVisible(browsertest.CSS(`tbody tr`)))
	tenantsShown := browsertest.Value(t, tenantAdmin, "read the tenants of the rows",
		chromedp.Evaluate[[]string](`[...document.querySelectorAll("tbody tr")].map(tr => tr.cells[1].textContent)`))
	for _, s := range tenantsShown {
		if s != "acme" {
			t.Fatalf("a tenant admin of acme sees a flow of %q (all: %v)", s, tenantsShown)
		}
	}
	if len(tenantsShown) < 2 {
		t.Fatalf("the tenant admin sees %d flows, want acme's", len(tenantsShown))
	}
	browsertest.Do(t, tenantAdmin, "open another tenant's flow by URL",
		chromedp.Navigate(p.URL+"/admin/flows/globex/"+globexFlow),
		chromedp.WaitVisible(browsertest.CSS(`.error`)))
	page := browsertest.Value(t, tenantAdmin, "read the page", chromedp.Text(browsertest.CSS(`main`)))
	if !strings.Contains(page, "not found") || strings.Contains(page, "payroll") {
		t.Fatalf("a tenant admin opening another tenant's flow sees:\n%s", page)
	}
	browsertest.Screenshot(t, tenantAdmin, "ui", "tenant-admin")
}

func accept(content obj) obj { return obj{"action": "accept", "content": content} }

func inputRequired(t *testing.T, r *platformtest.Response) (map[string]any, string) {
	t.Helper()
	res := platformtest.Result(t, r)
	if res["resultType"] != "input_required" {
		t.Fatalf("want input_required, got %v", res)
	}
	reqs, _ := res["inputRequests"].(map[string]any)
	s, _ := res["requestState"].(string)
	return reqs, s
}

// latestFlow is the id of the tenant's most recently changed flow in
// state, once the record has it.
func latestFlow(t *testing.T, p *platformtest.Platform, slug, state string) string {
	t.Helper()
	var id string
	testwait.Until(t, "no "+state+" flow of "+slug+" recorded", func() bool {
		items, _ := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/"+slug+"/flows?state="+state+"&limit=1", nil)["items"].([]any)
		if len(items) == 0 {
			return false
		}
		id = items[0].(map[string]any)["id"].(string)
		return true
	})
	return id
}

// TestOpenedAnswersStayOpenAcrossLiveReads: on the page of a flow whose
// tenant records answers, the answers an admin opened stay open when the
// flow's next round arrives and the page reads it again.
func TestOpenedAnswersStayOpenAcrossLiveReads(t *testing.T) {
	p, op := adminPlatform(t, "platform-admin-answers")
	oidctest.SetRoles("id1", "platform-admin")
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants", obj{"slug": "acme", "displayName": "Acme",
		"settings": obj{"auth": obj{"public": true}, "recordAnswers": true}})
	p.Tool(t, "acme", deployTool(backend(t)))
	_, st := inputRequired(t, callDeploy(t, p, "acme", "billing", nil, ""))
	_, st = inputRequired(t, callDeploy(t, p, "acme", "billing", obj{"region": accept(obj{"region": "eu-west-1"})}, st))
	id := latestFlow(t, p, "acme", "awaiting_input")

	admin := browsertest.New(t)()
	signIn(t, admin, p.URL, op.UserName(1))
	answered := `li.round[data-round="2"] details`
	browsertest.Do(t, admin, "open the region's answers",
		chromedp.Navigate(p.URL+"/admin/flows/"+id),
		chromedp.WaitVisible(browsertest.CSS(answered+" summary")),
		chromedp.Click(browsertest.CSS(answered+" summary")),
		browsertest.Until(fmt.Sprintf(`document.querySelector(%q).open`, answered)))
	platformtest.Result(t, callDeploy(t, p, "acme", "billing", obj{"confirm": accept(obj{"ok": true})}, st))
	browsertest.Do(t, admin, "the last round lands on the open page",
		browsertest.Until(`document.querySelectorAll("ol.timeline li.round").length === 3`))
	if open := browsertest.Value(t, admin, "are the region's answers still open", chromedp.Evaluate[bool](
		fmt.Sprintf(`document.querySelector(%q).open`, answered))); !open {
		t.Error("a live read closed the answers the admin opened")
	}
	if closed := browsertest.Value(t, admin, "are the confirmation's answers closed", chromedp.Evaluate[bool](
		`!document.querySelector('li.round[data-round="3"] details').open`)); !closed {
		t.Error("answers the admin did not open are open")
	}
}
