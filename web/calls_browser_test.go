package web_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/opsmcp/platform/testkit/browsertest"
	"github.com/opsmcp/platform/testkit/nodeclient"
	"github.com/opsmcp/platform/testkit/oidctest"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
)

// layoutHolds is a script that reports what of the page does not fit
// the window: the page wider than it, a table column narrower than its
// header's first word, a visible cell of the flow list narrower than
// its content's first word, a number or a badge cut short anywhere (they
// are never ellipsized). "" when everything fits.
const layoutHolds = `(() => {
  const bad = [];
  if (document.documentElement.scrollWidth > window.innerWidth + 1) bad.push("page " + document.documentElement.scrollWidth + "px wide in a " + window.innerWidth + "px window");
  const probe = document.createElement("span");
  probe.style.setProperty("position", "absolute");
  probe.style.setProperty("visibility", "hidden");
  probe.style.setProperty("white-space", "nowrap");
  const firstWord = (el) => {
    const w = (el.textContent || "").trim().split(/\s+/)[0];
    if (!w) return 0;
    const cs = getComputedStyle(el);
    probe.style.setProperty("font", cs.font);
    probe.textContent = w;
    el.append(probe);
    const width = probe.getBoundingClientRect().width;
    probe.remove();
    return width;
  };
  for (const el of document.querySelectorAll("table.grid th, table.grid.flows td")) {
    if (el.offsetParent === null) continue;
    const cs = getComputedStyle(el);
    const room = el.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    const need = firstWord(el);
    if (need > room + 1) bad.push((el.tagName === "TH" ? "column " : "cell ") + JSON.stringify(el.textContent.trim().slice(0, 30)) + " " + Math.round(room) + "px for a " + Math.round(need) + "px word");
  }
  for (const el of document.querySelectorAll("table.grid td")) {
    if (el.offsetParent === null || !(el.classList.contains("num") || el.querySelector(".badge"))) continue;
    if (el.scrollWidth > el.clientWidth + 1) bad.push("cut short: " + JSON.stringify(el.textContent.trim().slice(0, 30)) + " needs " + el.scrollWidth + "px of " + el.clientWidth);
  }
  return bad.join("; ");
})()`

// checkLayout lays the page out at a phone's width and a desktop's,
// fails on what does not fit at either (layoutHolds) and on what axe-core
// finds serious or critical at either, and shoots both.
func checkLayout(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	for _, w := range []int64{390, 1400} {
		browsertest.Do(t, ctx, fmt.Sprintf("lay out %s at %d px", name, w), chromedp.EmulateViewport(w, 900),
			browsertest.Until(`new Promise(r => requestAnimationFrame(() => r(true)))`))
		if hold := browsertest.Value(t, ctx, fmt.Sprintf("check %s at %d px", name, w), chromedp.Evaluate[string](layoutHolds)); hold != "" {
			t.Errorf("%s at %d px: %s", name, w, hold)
		}
		if v := axeViolations(t, ctx); v != "" {
			t.Errorf("%s at %d px, axe-core: %s", name, w, v)
		}
	}
	browsertest.ScreenshotWidths(t, ctx, "ui", name, 390, 1400)
}

// axe is axe-core's script, from npm (scripts/ts-sdk axe), read once.
var axe struct {
	sync.Once
	src string
}

// axeViolations injects axe-core into the page and runs it: its serious
// and critical violations, each with the elements it names, or "".
func axeViolations(t *testing.T, ctx context.Context) string {
	t.Helper()
	axe.Do(func() {
		b, err := os.ReadFile(filepath.Join(nodeclient.Packages(t, "OPSMCP_AXE", "axe"), "node_modules", "axe-core", "axe.min.js"))
		if err != nil {
			t.Fatalf("axe-core: %v", err)
		}
		axe.src = string(b)
	})
	if axe.src == "" {
		t.Fatal("axe-core did not load")
	}
	browsertest.Value(t, ctx, "inject axe-core", chromedp.Evaluate[bool](`window.axe ? true : (() => { `+axe.src+`; return true })()`))
	return browsertest.Value(t, ctx, "run axe-core", chromedp.Evaluate[string](`axe.run(document, { resultTypes: ["violations"] }).then(r =>
  r.violations.filter(v => v.impact === "serious" || v.impact === "critical")
    .map(v => v.id + " (" + v.impact + "): " + v.help + " at " + v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(", ")).join("; "))`,
		chromedp.EvalAwaitPromise))
}

func TestAOneRoundCallToADeadWebhookAppearsLiveWithItsCause(t *testing.T) {
	p, op := adminPlatform(t, "platform-admin-calls")
	oidctest.SetRoles("id1", "platform-admin")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/hook"
	ln.Close()
	p.Tenant(t, "acme")
	p.Tool(t, "acme", deployTool(backend(t)))
	p.Tool(t, "acme", obj{"name": "report", "inputSchema": obj{"type": "object"}, "handler": obj{"url": dead}})
	for _, svc := range []string{"billing", "search", "payroll"} {
		inputRequired(t, callDeploy(t, p, "acme", svc, nil, ""))
	}

	admin := browsertest.New(t)()
	signIn(t, admin, p.URL, op.UserName(1))
	browsertest.Do(t, admin, "the flows waiting are listed", browsertest.Until(`document.querySelectorAll("tbody tr").length === 3`))

	// The call fails at once; its row comes by the live stream, saying
	// why in words.
	platformtest.Result(t, p.MCP(t, "acme", "tools/call", obj{"name": "report", "arguments": obj{}}))
	browsertest.Do(t, admin, "the failed call appears live",
		browsertest.Until(`[...document.querySelectorAll("tbody tr")].some(tr => tr.textContent.includes("report"))`))
	row := browsertest.Value(t, admin, "read its row", chromedp.Evaluate[string](
		`[...document.querySelectorAll("tbody tr")].find(tr => tr.textContent.includes("report")).textContent`))
	for _, want := range []string{"failed", "report", "webhook connect: connection refused", "now"} {
		if !strings.Contains(row, want) {
			t.Errorf("the failed call's row %q lacks %q", row, want)
		}
	}
	browsertest.Do(t, admin, "open the failed call",
		browsertest.Until(`(() => { [...document.querySelectorAll("tbody tr")].find(tr => tr.textContent.includes("report")).click(); return true })()`),
		chromedp.WaitVisible(browsertest.CSS(`ol.timeline li.round .cause`)))
	page := browsertest.Value(t, admin, "read the call's page", chromedp.Text(browsertest.CSS(`main`)))
	for _, want := range []string{"Why", "webhook connect: connection refused", "webhook_connect", "Round 1", "(webhook "} {
		if !strings.Contains(page, want) {
			t.Errorf("the call's page lacks %q:\n%s", want, page)
		}
	}
	checkLayout(t, admin, "call-failed")
	// A call's page names no kind: the label is there for flows and tasks.
	if shown := browsertest.Value(t, admin, "look for a kind label", chromedp.Evaluate[bool](
		`[...document.querySelectorAll(".bar .kind")].some(e => getComputedStyle(e).display !== "none")`)); shown {
		t.Error("a call's page shows a kind label")
	}

	// Search by prefix, in the URL and the box: the target's start, then
	// a flow id's.
	browsertest.Do(t, admin, "back to the list", chromedp.Navigate(p.URL+"/admin/flows"), chromedp.WaitVisible(browsertest.CSS(`tbody tr`)))
	// (chromedp's key event types the character too, into the box the
	// key focused: it is cleared first.)
	browsertest.Do(t, admin, "/ focuses the search", chromedp.KeyEvent("/"), browsertest.Until(`document.activeElement.name === "q"`),
		browsertest.Until(`(() => { document.activeElement.value = ""; return true })()`))
	browsertest.Do(t, admin, "search for rep",
		chromedp.SendKeys(browsertest.CSS(`input[name="q"]`), "rep"),
		browsertest.Until(`document.querySelectorAll("tbody tr").length === 1 && document.querySelector("tbody tr").textContent.includes("report")`))
	if q := browsertest.Value(t, admin, "read the URL", chromedp.Evaluate[string](`location.search`)); q != "?q=rep" {
		t.Fatalf("the search is not in the URL: %q", q)
	}
	id := latestFlow(t, p, "acme", "awaiting_input")
	browsertest.Do(t, admin, "search by a flow id's start",
		browsertest.Until(`(() => { document.querySelector('input[name="q"]').value = ""; return true })()`),
		chromedp.SendKeys(browsertest.CSS(`input[name="q"]`), id[:len(id)-4]),
		browsertest.Until(fmt.Sprintf(`document.querySelectorAll("tbody tr").length === 1 && document.querySelector("tbody tr").dataset.id === %q`, id)))

	// Bulk cancel what the filters select: a preview of how many, a
	// reason, then exactly those.
	browsertest.Do(t, admin, "filter acme's multi-round flows",
		chromedp.Navigate(p.URL+"/admin/flows?tenant=acme&kind=flow"),
		browsertest.Until(`document.querySelectorAll("tbody tr").length === 3`))
	checkLayout(t, admin, "flows-filtered")
	browsertest.Do(t, admin, "preview the bulk cancel",
		chromedp.Click(browsertest.CSS(`button.danger`)),
		chromedp.WaitVisible(browsertest.CSS(`dialog textarea`)))
	title := browsertest.Value(t, admin, "read the preview", chromedp.Text(browsertest.CSS(`dialog h2`)))
	if title != "Cancel 3 in-flight flows?" {
		t.Fatalf("the preview says %q", title)
	}
	browsertest.Screenshot(t, admin, "ui", "bulk-cancel")
	browsertest.Do(t, admin, "confirm with a reason",
		chromedp.SendKeys(browsertest.CSS(`dialog textarea`), "freeze for the incident"),
		chromedp.Click(browsertest.CSS(`dialog button[type="submit"]`)),
		browsertest.Until(`[...document.querySelectorAll("tbody tr")].every(tr => tr.textContent.includes("cancelled"))`))
	testwait.Until(t, "the flows are not all cancelled", func() bool {
		m := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/flows?state=cancelled", nil)
		items := m["items"].([]any)
		if len(items) != 3 {
			return false
		}
		f := items[0].(map[string]any)
		by, _ := f["cancelledBy"].(string)
		return f["cancelReason"] == "freeze for the incident" && strings.Contains(by, "#") && f["cancelledAt"] != nil
	})
}
