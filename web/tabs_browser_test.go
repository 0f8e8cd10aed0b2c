package web_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/opsmcp/platform/testkit/browsertest"
	"github.com/opsmcp/platform/testkit/oidctest"
)

// TestTenTabsShareOneStreamAndActionsNeverQueueBehindIt opens the flow
// list in ten tabs of one browser: over HTTP/1.1 the browser holds six
// connections to a host, so ten tabs each with a stream of its own
// would leave actions waiting on a connection that never frees. Every
// tab still follows changes live, no tab holds a stream itself, and a
// cancel from the tenth tab goes through.
func TestTenTabsShareOneStreamAndActionsNeverQueueBehindIt(t *testing.T) {
	p, op := adminPlatform(t, "platform-admin-tabs")
	oidctest.SetRoles("id1", "platform-admin")
	p.Tenant(t, "acme")
	p.Tool(t, "acme", deployTool(backend(t)))

	first := browsertest.New(t)()
	signIn(t, first, p.URL, op.UserName(1))
	tabs := []context.Context{first}
	for i := 2; i <= 10; i++ {
		tab, cancel := chromedp.NewContext(first) // a tab of the same browser: its cookies, its connections
		t.Cleanup(cancel)
		browsertest.Do(t, tab, fmt.Sprintf("open tab %d", i),
			chromedp.Navigate(p.URL+"/admin/flows"),
			browsertest.Until(`document.querySelector(".live")?.textContent === "live"`))
		tabs = append(tabs, tab)
	}

	// A flow starts: every tab shows it, live.
	inputRequired(t, callDeploy(t, p, "acme", "checkout", nil, ""))
	id := latestFlow(t, p, "acme", "awaiting_input")
	for i, tab := range tabs {
		browsertest.Do(t, tab, fmt.Sprintf("tab %d shows the new flow", i+1),
			chromedp.WaitVisible(browsertest.CSS(fmt.Sprintf(`tr[data-id=%q]`, id))))
		// No tab holds a stream of its own: the worker does, for all.
		own := browsertest.Value(t, tab, "count the tab's own streams",
			chromedp.Evaluate[int](`performance.getEntriesByType("resource").filter(e => e.name.includes("/api/v1/flows/stream")).length`))
		if own != 0 {
			t.Fatalf("tab %d opened %d streams of its own", i+1, own)
		}
	}

	// The tenth tab cancels it, and the others see it cancelled.
	last := tabs[len(tabs)-1]
	browsertest.Do(t, last, "cancel from the tenth tab",
		chromedp.Navigate(p.URL+"/admin/flows/"+id),
		chromedp.WaitVisible(browsertest.CSS(`button[data-action="cancel"]`)),
		chromedp.Click(browsertest.CSS(`button[data-action="cancel"]`)),
		chromedp.WaitVisible(browsertest.CSS(`dialog textarea`)),
		chromedp.SendKeys(browsertest.CSS(`dialog textarea`), "ten tabs"),
		chromedp.Click(browsertest.CSS(`dialog button[type="submit"]`)),
		chromedp.WaitVisible(browsertest.CSS(`.badge.s-cancelled`)))
	for i, tab := range tabs[:len(tabs)-1] {
		browsertest.Do(t, tab, fmt.Sprintf("tab %d sees the cancel", i+1),
			browsertest.Until(fmt.Sprintf(`document.querySelector('tr[data-id=%q]')?.textContent.includes("cancelled")`, id)))
	}
	browsertest.Screenshot(t, first, "ui", "ten-tabs")
}
