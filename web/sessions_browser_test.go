package web_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/opsmcp/platform/endpoint"
	"github.com/opsmcp/platform/testkit/browsertest"
	"github.com/opsmcp/platform/testkit/oidctest"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
)

// legacySession starts a 2025-11-25 session on slug as client name and
// returns its id.
func legacySession(t *testing.T, p *platformtest.Platform, slug, name string) string {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":%q,"version":"2.1"}}}`, name)
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
	r := platformtest.Do(t, http.MethodPost, p.URL+"/t/"+slug+"/mcp", h, []byte(body))
	if r.Status != 200 || r.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d %s", r.Status, r.Body)
	}
	return r.Header.Get("Mcp-Session-Id")
}

// waitingCall calls deploy in a legacy session and returns once its
// question has arrived (the call then waits in flight).
func waitingCall(t *testing.T, p *platformtest.Platform, session string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/t/acme/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deploy","arguments":{"service":"checkout"}}}`))
	req.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}, "Mcp-Session-Id": {session}}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.Contains(sc.Text(), "elicitation/create") {
	}
}

// TestAdminsSeeLegacySessionsAndEndThem: the Sessions page lists a
// tenant's live legacy sessions with their client, protocol, times and
// its open streams and the calls each has waiting, linked to exactly
// that session's flows
// (not another session's of the same client); an admin ends one, then
// all, each with a reason the audit log keeps; an ended session's id
// gets 404.
func TestAdminsSeeLegacySessionsAndEndThem(t *testing.T) {
	// Replicas report open streams every 200 ms here (30 s by default).
	p, op := adminPlatformWith(t, "platform-admin-sessions", platformtest.WithServer(func(o *endpoint.Options) { o.Legacy.TouchEvery = 200 * time.Millisecond }))
	oidctest.SetRoles("id1", "platform-admin")
	p.Tenant(t, "acme")
	p.Tool(t, "acme", deployTool(backend(t)))
	desk := legacySession(t, p, "acme", "Desk Client")
	ide := legacySession(t, p, "acme", "IDE Extension")
	third := legacySession(t, p, "acme", "IDE Extension") // the same client, another window
	// Both IDE windows have a call waiting on its question.
	waitingCall(t, p, ide)
	waitingCall(t, p, third)
	nonce := func(id string) string { return strings.SplitN(id, ".", 2)[0] }
	flowOf := func(session string) string {
		items := p.MustAdmin(t, 200, "GET", "/api/v1/flows?tenant=acme&session="+nonce(session), nil)["items"].([]any)
		if len(items) != 1 {
			return fmt.Sprintf("%d flows", len(items))
		}
		return items[0].(map[string]any)["id"].(string)
	}
	testwait.Until(t, "both calls recorded, each under its session", func() bool {
		return strings.HasPrefix(flowOf(ide), "fl_") && strings.HasPrefix(flowOf(third), "fl_")
	})
	ideFlow := flowOf(ide)
	if ideFlow == flowOf(third) {
		t.Fatalf("two sessions list the same flow %s", ideFlow)
	}

	ctx := browsertest.New(t)()
	signIn(t, ctx, p.URL, op.UserName(1))
	row := func(id string) string { return fmt.Sprintf(`tr[data-id=%q]`, nonce(id)) }
	browsertest.Do(t, ctx, "open the sessions page",
		chromedp.Click(browsertest.CSS(`a[data-section="sessions"]`)),
		chromedp.WaitVisible(browsertest.CSS(`table.sessions`)),
		chromedp.WaitVisible(browsertest.CSS(row(desk))),
		chromedp.WaitVisible(browsertest.CSS(row(ide)+` td.c-inflight .badge`)),
		chromedp.WaitVisible(browsertest.CSS(row(third)+` td.c-inflight .badge`)),
		// Each IDE window's call stream is open; the desk client has none.
		browsertest.Until(`document.querySelector('`+row(ide)+` td.c-streams').innerText === "1" && document.querySelector('`+row(third)+` td.c-streams').innerText === "1"`))
	if got := browsertest.Value(t, ctx, "the desk client's streams", chromedp.Evaluate[string](`document.querySelector('`+row(desk)+` td.c-streams').innerText`)); got != "0" {
		t.Fatalf("the desk client, with no stream open, shows %q streams", got)
	}
	got := browsertest.Value(t, ctx, "read the rows", chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.sessions tbody tr")].map(tr => tr.innerText.replace(/\s+/g, " "))`))
	if len(got) != 3 {
		t.Fatalf("rows %q", got)
	}
	for _, want := range []string{"Desk Client 2.1 2025-11-25", "IDE Extension 2.1 2025-11-25", "no principal"} {
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Fatalf("rows %q lack %q", got, want)
		}
	}
	checkLayout(t, ctx, "sessions")
	browsertest.Screenshot(t, ctx, "ui", "sessions")

	// The in-flight count opens exactly this session's flows in flight,
	// and the page says which session it shows.
	if link := browsertest.Value(t, ctx, "the in-flight link", chromedp.Evaluate[string](`document.querySelector('`+row(ide)+` td.c-inflight a').getAttribute("href")`)); link != "/admin/flows?tenant=acme&session="+nonce(ide)+"&state=awaiting_input%2Crunning" {
		t.Fatalf("in-flight link %q", link)
	}
	browsertest.Do(t, ctx, "open the IDE session's flows",
		chromedp.Click(browsertest.CSS(row(ide)+` td.c-inflight a`)),
		chromedp.WaitVisible(browsertest.CSS(`table.flows tbody tr[data-id="`+ideFlow+`"]`)),
		chromedp.WaitVisible(browsertest.CSS(`.exact button[data-filter="session"]`)))
	shown := browsertest.Value(t, ctx, "the flows listed", chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.flows tbody tr[data-id]")].map(tr => tr.dataset.id)`))
	if len(shown) != 1 || shown[0] != ideFlow {
		t.Fatalf("the session's flows page lists %q, want only %s", shown, ideFlow)
	}
	if chip := browsertest.Value(t, ctx, "the session chip", chromedp.Evaluate[string](`document.querySelector('.exact button[data-filter="session"]').innerText`)); !strings.Contains(chip, nonce(ide)) {
		t.Fatalf("the chip says %q", chip)
	}
	browsertest.ScreenshotWidths(t, ctx, "ui", "flows-of-a-session", 390, 1400)
	// Removing the chip shows both windows' flows.
	browsertest.Do(t, ctx, "remove the session filter",
		chromedp.Click(browsertest.CSS(`.exact button[data-filter="session"]`)),
		browsertest.Until(`document.querySelectorAll("table.flows tbody tr[data-id]").length === 2 && !new URLSearchParams(location.search).has("session")`))
	browsertest.Do(t, ctx, "back to the sessions page",
		chromedp.Click(browsertest.CSS(`a[data-section="sessions"]`)),
		chromedp.WaitVisible(browsertest.CSS(row(desk))))

	// End one, with a reason.
	browsertest.Do(t, ctx, "end the desk client's session",
		chromedp.Click(browsertest.CSS(row(desk)+` button[data-action="end"]`)),
		chromedp.WaitVisible(browsertest.CSS(`dialog textarea`)),
		chromedp.SendKeys(browsertest.CSS(`dialog textarea`), "lost laptop"),
		chromedp.Click(browsertest.CSS(`dialog button[type="submit"]`)),
		browsertest.Until(`!document.querySelector('`+row(desk)+`')`))
	hd := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}, "Mcp-Session-Id": {desk}}
	if r := platformtest.Do(t, http.MethodPost, p.URL+"/t/acme/mcp", hd, []byte(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)); r.Status != 404 {
		t.Fatalf("the ended session answered %d", r.Status)
	}
	// End the rest: the dialog asks for the tenant's name first.
	browsertest.Do(t, ctx, "end all",
		chromedp.Click(browsertest.CSS(`button[data-action="end-all"]`)),
		chromedp.WaitVisible(browsertest.CSS(`dialog input[name="confirm"]`)),
		browsertest.Until(`document.querySelector('dialog button[type="submit"]').disabled`),
		chromedp.SendKeys(browsertest.CSS(`dialog input[name="confirm"]`), "acme"),
		chromedp.SendKeys(browsertest.CSS(`dialog textarea`), "incident 42"),
		chromedp.Click(browsertest.CSS(`dialog button[type="submit"]`)),
		browsertest.Until(`document.querySelector("table.sessions tbody").innerText.includes("No live sessions")`))
	browsertest.Screenshot(t, ctx, "ui", "sessions-ended")
	if r := platformtest.Do(t, http.MethodPost, p.URL+"/t/acme/mcp", http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}, "Mcp-Session-Id": {third}},
		[]byte(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)); r.Status != 404 {
		t.Fatalf("a session ended in bulk answered %d", r.Status)
	}
	// The audit log has both, with their reasons and who.
	audit := p.MustAdmin(t, 200, "GET", "/api/v1/audit?tenant=acme", nil)["items"].([]any)
	var said []string
	for _, e := range audit {
		m := e.(map[string]any)
		if a, _ := m["action"].(string); strings.Contains(a, "/sessions") {
			d, _ := json.Marshal(m["detail"])
			said = append(said, a+" "+fmt.Sprint(m["object"])+" "+string(d))
		}
	}
	joined := strings.Join(said, "\n")
	if len(said) != 2 || !strings.Contains(joined, "lost laptop") || !strings.Contains(joined, `"ended":2`) || !strings.Contains(joined, "incident 42") {
		t.Fatalf("audit entries %q", said)
	}
}
