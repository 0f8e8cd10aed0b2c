package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/opsmcp/platform/testkit/browsertest"
	"github.com/opsmcp/platform/testkit/oidctest"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
	"github.com/opsmcp/platform/webhook"
)

// taskBackend accepts every call offered as a task and keeps the offers;
// it records the cancels it is told of.
type taskBackend struct {
	*httptest.Server
	mu        sync.Mutex
	offers    map[string]*webhook.Task
	cancelled map[string]string // task id -> cancelled by
}

func newTaskBackend(t *testing.T) *taskBackend {
	b := &taskBackend{offers: map[string]*webhook.Task{}, cancelled: map[string]string{}}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req webhook.Request
		_ = json.Unmarshal(body, &req)
		b.mu.Lock()
		defer b.mu.Unlock()
		switch {
		case req.Kind == webhook.KindTaskCancel:
			b.cancelled[req.Task.ID] = req.Task.CancelledBy
			w.WriteHeader(http.StatusNoContent)
		case req.Task != nil:
			b.offers[req.Task.ID] = req.Task
			fmt.Fprint(w, `{"type":"accepted","message":"export queued"}`)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *taskBackend) report(t *testing.T, id string, seq int64, r webhook.Report) {
	t.Helper()
	b.mu.Lock()
	offer := b.offers[id]
	b.mu.Unlock()
	r.Seq = seq
	if _, err := webhook.SendReport(context.Background(), nil, offer, &r); err != nil {
		t.Fatal(err)
	}
}

// TestAdminsSeeTasksAndCancelThem: a task appears in the live list as a
// task, with its latest progress and its age; its page shows its events
// (creation, progress, the question); an admin cancels it there, and the
// cancel reaches its backend naming the admin.
func TestAdminsSeeTasksAndCancelThem(t *testing.T) {
	p, op := adminPlatform(t, "platform-admin-ui")
	oidctest.SetRoles("id1", "platform-admin")
	b := newTaskBackend(t)
	p.Tenant(t, "acme")
	p.Tool(t, "acme", obj{"name": "export", "description": "Exports a month of orders", "inputSchema": obj{"type": "object"},
		"handler": obj{"url": b.URL}, "task": obj{"mode": "must"}})

	browser := browsertest.New(t)()
	signIn(t, browser, p.URL, op.UserName(1))
	taskCaps := obj{"elicitation": obj{}, "extensions": obj{"io.modelcontextprotocol/tasks": obj{}}}
	res := platformtest.Result(t, p.MCP(t, "acme", "tools/call", obj{"name": "export", "arguments": obj{}, "_meta": platformtest.Meta(taskCaps)}))
	id, _ := res["taskId"].(string)
	b.report(t, id, 1, webhook.Report{Type: "progress", Message: "4 of 12 months exported"})
	flowID := latestFlow(t, p, "acme", "running")
	row := fmt.Sprintf(`tr[data-id=%q]`, flowID)
	browsertest.Do(t, browser, "the task appears live with its progress",
		browsertest.Until(fmt.Sprintf(`document.querySelector(%q)?.textContent.includes("4 of 12 months exported")`, row)))
	rowText := browsertest.Value(t, browser, "read the row", chromedp.Text(browsertest.CSS(row)))
	for _, want := range []string{"running", "task", "export", "4 of 12 months exported"} {
		if !strings.Contains(rowText, want) {
			t.Errorf("row %q lacks %q", rowText, want)
		}
	}
	b.report(t, id, 2, webhook.Report{Type: "input_required", Message: "Which currency?", InputRequests: map[string]json.RawMessage{
		"currency": json.RawMessage(`{"method":"elicitation/create","params":{"mode":"form","message":"Export in which currency?","requestedSchema":{"type":"object","properties":{"currency":{"type":"string","enum":["EUR","USD"]}}}}}`)}})
	browsertest.Do(t, browser, "the row waits on the user",
		browsertest.Until(fmt.Sprintf(`document.querySelector(%q)?.textContent.includes("awaiting input")`, row)))
	browsertest.Screenshot(t, browser, "ui", "tasks")
	browsertest.ScreenshotWidths(t, browser, "ui", "tasks", 390, 1400)

	browsertest.Do(t, browser, "open the task",
		chromedp.Click(browsertest.CSS(row)),
		browsertest.Until(`document.querySelectorAll("ol.timeline li.round").length === 3`))
	timeline := browsertest.Value(t, browser, "read the timeline", chromedp.Text(browsertest.CSS(`ol.timeline`)))
	for _, want := range []string{"became a task", "progress", "4 of 12 months exported", "asked the user", "Export in which currency?", "by backend"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("timeline lacks %q:\n%s", want, timeline)
		}
	}
	browsertest.Screenshot(t, browser, "ui", "task")
	browsertest.ScreenshotWidths(t, browser, "ui", "task", 390, 1400)
	// A read that lands while the admin is on the cancel button leaves
	// the button where it is, focused: a live page that swapped it would
	// drop a keyboard user's place and lose a click in progress.
	if !browsertest.Value(t, browser, "focus the cancel button", chromedp.Evaluate[bool](
		`window.cancelButton = document.querySelector('button[data-action="cancel"]'); window.cancelButton.focus(); document.activeElement === window.cancelButton`)) {
		t.Fatal("the cancel button takes no focus")
	}
	b.report(t, id, 3, webhook.Report{Type: "progress", Message: "Still waiting on the currency"})
	browsertest.Do(t, browser, "the progress lands on the open page",
		browsertest.Until(`document.querySelectorAll("ol.timeline li.round").length === 4`))
	if kept := browsertest.Value(t, browser, "is the focused button the same one",
		chromedp.Evaluate[bool](`document.querySelector('button[data-action="cancel"]') === window.cancelButton && document.activeElement === window.cancelButton`)); !kept {
		t.Error("a live update replaced the focused cancel button")
	}
	browsertest.Do(t, browser, "cancel the task",
		chromedp.Click(browsertest.CSS(`button[data-action="cancel"]`)),
		chromedp.WaitVisible(browsertest.CSS(`dialog textarea`)),
		chromedp.SendKeys(browsertest.CSS(`dialog textarea`), "the month is wrong"),
		chromedp.Click(browsertest.CSS(`dialog button[type="submit"]`)),
		chromedp.WaitVisible(browsertest.CSS(`.badge.s-cancelled`)),
		// Nothing is left to cancel: the button is hidden, not just inert.
		browsertest.Until(`getComputedStyle(document.querySelector('button[data-action="cancel"]')).display === "none"`))
	testwait.Until(t, "the cancel reaches the backend", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return strings.HasPrefix(b.cancelled[id], "admin:")
	})
	got := platformtest.Result(t, p.MCP(t, "acme", "tasks/get", obj{"taskId": id, "_meta": platformtest.Meta(taskCaps)}))
	if got["status"] != "cancelled" {
		t.Fatalf("the client sees %v", got["status"])
	}
	browsertest.Do(t, browser, "the cancel is an event of the task",
		browsertest.Until(`document.querySelector("ol.timeline").textContent.includes("by admin")`))
}
