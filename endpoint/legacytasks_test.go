package endpoint_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
	"github.com/opsmcp/platform/webhook"
)

// sessionStream opens a legacy session's GET stream and returns its
// messages one by one, in a channel, until the test ends.
func sessionStream(t *testing.T, c *legacyClient, url string) <-chan map[string]any {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	req.Header = c.header()
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET stream: %v %v", err, resp)
	}
	out := make(chan map[string]any, 64)
	go func() {
		defer resp.Body.Close()
		next := eventReader(resp.Body)
		for m := next(); m != nil; m = next() {
			select {
			case out <- m:
			case <-t.Context().Done():
				return
			}
		}
	}()
	return out
}

// nextStatus waits for the stream's notifications/tasks/status saying
// status.
func nextStatus(t *testing.T, ch <-chan map[string]any, status string) map[string]any {
	t.Helper()
	for {
		m := testwait.Recv(t, ch, "notifications/tasks/status "+status+" on the session's stream")
		p, _ := m["params"].(map[string]any)
		if m["method"] == "notifications/tasks/status" && p["status"] == status {
			return p
		}
	}
}

func rpcCode(msg map[string]any) float64 {
	e, _ := msg["error"].(map[string]any)
	code, _ := e["code"].(float64)
	return code
}

// TestALegacySessionRunsATaskToItsResult: a 2025-11-25 session sees the
// tasks capability and each tool's execution.taskSupport, asks for a
// task with params.task, follows it with tasks/get and its GET stream's
// notifications/tasks/status, answers the task's question on the
// tasks/result stream (posting the answer to another replica), and gets
// from tasks/result exactly the tool's result, tagged with the task. The
// 2026-07-28 view of the same tenant shows none of the v1 wire.
func TestALegacySessionRunsATaskToItsResult(t *testing.T) {
	h := newTaskHook(t)
	url := platformtest.PostgresSchemaURL(t)
	keys := platformtest.WithStateKeys("c3RhdGUta2V5LTAxMjM0NTY3ODlhYmNkZWYwMTIzNDU2Nzg5")
	a := platformtest.Start(t, url, keys)
	b := platformtest.Start(t, url, keys, platformtest.WithConfig(func(c *config.Config) { c.PublicURL = a.URL }))
	a.Tenant(t, "acme")
	h.setSecret(a.Tool(t, "acme", taskTool("export", h.URL, "may")))
	a.Tool(t, "acme", taskTool("deploy", h.URL, "must"))
	a.Tool(t, "acme", echoTool("echo", h.URL))

	c := newLegacyClient(t, legacyURL(a, "acme"))
	c.answerTo = legacyURL(b, "acme")
	init := c.initialize("2025-11-25", obj{"elicitation": obj{}})
	caps, _ := init["capabilities"].(map[string]any)
	if fmt.Sprint(caps["tasks"]) != "map[cancel:map[] list:map[] requests:map[tools:map[call:map[]]]]" {
		t.Fatalf("initialize capabilities.tasks: %v", caps["tasks"])
	}
	support := map[string]any{}
	for _, tl := range c.result("tools/list", obj{})["tools"].([]any) {
		m := tl.(map[string]any)
		ex, _ := m["execution"].(map[string]any)
		support[m["name"].(string)] = ex["taskSupport"]
	}
	if support["export"] != "optional" || support["deploy"] != "required" || support["echo"] != nil {
		t.Fatalf("execution.taskSupport: %v", support)
	}
	for _, tl := range platformtest.Result(t, a.MCP(t, "acme", "tools/list", nil))["tools"].([]any) {
		if _, ok := tl.(map[string]any)["execution"]; ok {
			t.Fatalf("2026-07-28 tools/list carries execution: %v", tl)
		}
	}

	status := sessionStream(t, c, legacyURL(b, "acme"))
	created := c.result("tools/call", obj{"name": "export", "arguments": obj{}, "task": obj{"ttl": 60000}})
	task, _ := created["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if !strings.HasPrefix(id, "tk_") || task["status"] != "working" || task["ttl"] != float64(60000) || task["pollInterval"] != float64(500) ||
		task["statusMessage"] != "queued" || task["createdAt"] == nil || task["lastUpdatedAt"] == nil || created["resultType"] != nil {
		t.Fatalf("CreateTaskResult: %v", created)
	}
	if _, ok := task["ttlMs"]; ok {
		t.Fatalf("a v1 task carries ttlMs: %v", task)
	}
	if got := c.result("tasks/get", obj{"taskId": id}); got["status"] != "working" || got["taskId"] != id {
		t.Fatalf("tasks/get: %v", got)
	}

	q := json.RawMessage(`{"method":"elicitation/create","params":{"mode":"form","message":"Which format?","requestedSchema":{"type":"object","properties":{"format":{"type":"string"}}}}}`)
	h.mustReport(id, webhook.Report{Type: webhook.ReportInputRequired, InputRequests: map[string]json.RawMessage{"format": q}})
	nextStatus(t, status, "input_required")

	var asked map[string]any
	c.onRequest = func(method string, params map[string]any) (any, obj) {
		asked = params
		return obj{"action": "accept", "content": obj{"format": "csv"}}, nil
	}
	go func() {
		// The backend completes once the answer reached it.
		for h.lastNews() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		h.mustReport(id, webhook.Report{Type: webhook.ReportComplete, Result: json.RawMessage(`{"content":[{"type":"text","text":"exported as csv"}]}`)})
	}()
	res := c.result("tasks/result", obj{"taskId": id})
	meta, _ := asked["_meta"].(map[string]any)
	if related, _ := meta["io.modelcontextprotocol/related-task"].(map[string]any); related["taskId"] != id || asked["mode"] != nil || asked["message"] != "Which format?" {
		t.Fatalf("the task's question on the tasks/result stream: %v", asked)
	}
	if c.answerStatus != 202 {
		t.Fatalf("the answer posted to the other replica: HTTP %d", c.answerStatus)
	}
	news := h.lastNews()
	if news.Kind != webhook.KindTaskInput || news.Task.ID != id || !strings.Contains(string(news.InputResponses["format"]), `"csv"`) {
		t.Fatalf("the backend got: %+v", news)
	}
	rmeta, _ := res["_meta"].(map[string]any)
	if related, _ := rmeta["io.modelcontextprotocol/related-task"].(map[string]any); toolText(t, res) != "exported as csv" || related["taskId"] != id || res["resultType"] != nil {
		t.Fatalf("tasks/result: %v", res)
	}
	if n := nextStatus(t, status, "completed"); n["taskId"] != id || n["ttl"] == nil {
		t.Fatalf("the last notification: %v", n)
	}
	// Finished, it answers at once; it cannot be cancelled; it is listed.
	if again := c.result("tasks/result", obj{"taskId": id}); toolText(t, again) != "exported as csv" {
		t.Fatalf("tasks/result again: %v", again)
	}
	if msg, _ := c.call("tasks/cancel", obj{"taskId": id}); rpcCode(msg) != -32602 {
		t.Fatalf("cancelling a completed task: %v", msg)
	}
	listed := c.result("tasks/list", obj{})["tasks"].([]any)
	if len(listed) != 1 || listed[0].(map[string]any)["taskId"] != id || listed[0].(map[string]any)["status"] != "completed" {
		t.Fatalf("tasks/list: %v", listed)
	}
	// A 2026-07-28 client of the same (public) tenant reaches the task.
	if got := getTask(t, a, id); got["status"] != "completed" {
		t.Fatalf("the 2026-07-28 view: %v", got)
	}
}

// TestLegacyTaskRulesHold: taskSupport is enforced (-32601 both ways),
// a malformed params.task is -32602, the ttl asked for is honoured only
// downwards (and not below 10 s), a call the backend answers at once is
// a finished task, a tool error is failed in v1 (and completed at
// 2026-07-28), cancel answers the cancelled task and tells the backend,
// tasks/result of a cancelled task is a tool error, and unknown ids are
// -32602 everywhere.
func TestLegacyTaskRulesHold(t *testing.T) {
	h := newTaskHook(t)
	p := taskPlatform(t, h)
	p.Tool(t, "acme", taskTool("deploy", h.URL, "must"))
	p.Tool(t, "acme", echoTool("echo", h.URL))
	// A tenant without task tools declares no tasks, and ignores
	// params.task, as v1 asks of a receiver that declares none.
	p.Tenant(t, "plain")
	p.Tool(t, "plain", echoTool("echo", h.URL))
	plain := newLegacyClient(t, legacyURL(p, "plain"))
	if caps := plain.initialize("2025-11-25", obj{})["capabilities"].(map[string]any); caps["tasks"] != nil {
		t.Fatalf("a tenant without task tools advertises tasks: %v", caps)
	}
	if res := plain.result("tools/call", obj{"name": "echo", "arguments": obj{}, "task": obj{"ttl": 1000}}); res["task"] != nil || res["content"] == nil {
		t.Fatalf("params.task where no tasks are declared: %v", res)
	}
	// 2025-06-18 has no tasks: none declared or listed, params.task
	// ignored, tasks/* unknown.
	old := newLegacyClient(t, legacyURL(p, "acme"))
	if caps := old.initialize("2025-06-18", obj{})["capabilities"].(map[string]any); caps["tasks"] != nil || old.version != "2025-06-18" {
		t.Fatalf("a 2025-06-18 session: %v", caps)
	}
	for _, tl := range old.result("tools/list", obj{})["tools"].([]any) {
		if _, ok := tl.(map[string]any)["execution"]; ok {
			t.Fatalf("a 2025-06-18 session lists execution: %v", tl)
		}
	}
	if res := old.result("tools/call", obj{"name": "export", "arguments": obj{}, "task": obj{}}); res["task"] != nil || toolText(t, res) != "done at once" {
		t.Fatalf("params.task on a 2025-06-18 session: %v", res)
	}
	for _, m := range []string{"tasks/get", "tasks/list", "tasks/result", "tasks/cancel"} {
		if msg, _ := old.call(m, obj{"taskId": "tk_x"}); rpcCode(msg) != -32601 {
			t.Errorf("%s on a 2025-06-18 session: %v", m, msg)
		}
	}
	c := newLegacyClient(t, legacyURL(p, "acme"))
	c.initialize("2025-11-25", obj{})

	for _, tc := range []struct {
		name   string
		params obj
		code   float64
	}{
		{"a required tool called plainly", obj{"name": "deploy", "arguments": obj{}}, -32601},
		{"a forbidden tool as a task", obj{"name": "echo", "arguments": obj{}, "task": obj{}}, -32601},
		{"task as a string", obj{"name": "export", "arguments": obj{}, "task": "yes"}, -32602},
		{"task as an array", obj{"name": "export", "arguments": obj{}, "task": []any{}}, -32602},
		{"a negative ttl", obj{"name": "export", "arguments": obj{}, "task": obj{"ttl": -1}}, -32602},
		{"a ttl as a string", obj{"name": "export", "arguments": obj{}, "task": obj{"ttl": "60000"}}, -32602},
	} {
		if msg, status := c.call("tools/call", tc.params); rpcCode(msg) != tc.code || status != 200 {
			t.Errorf("%s: HTTP %d %v, want %v", tc.name, status, msg, tc.code)
		}
	}
	if n := platformtest.SQL(t, p.DatabaseURL).Strings(t, "SELECT id FROM tasks"); len(n) != 0 {
		t.Fatalf("refused calls left tasks: %v", n)
	}
	// An extension claimed in initialize enables nothing on a session.
	x := newLegacyClient(t, legacyURL(p, "acme"))
	x.initialize("2025-11-25", obj{"extensions": obj{"io.modelcontextprotocol/tasks": obj{}}})
	if res := x.result("tools/call", obj{"name": "export", "arguments": obj{}}); res["task"] != nil || toolText(t, res) != "done at once" {
		t.Fatalf("a session claiming the extension got a task: %v", res)
	}

	ttlOf := func(ttl any) any {
		res := c.result("tools/call", obj{"name": "export", "arguments": obj{}, "task": obj{"ttl": ttl}})
		return res["task"].(map[string]any)["ttl"]
	}
	for _, tc := range []struct{ asked, got any }{
		{20000, float64(20000)}, {1, float64(10000)}, {1e12, float64(3_600_000)}, {0, float64(3_600_000)}, {12345.6, float64(12345)},
	} {
		if got := ttlOf(tc.asked); got != tc.got {
			t.Errorf("ttl asked %v: got %v, want %v", tc.asked, got, tc.got)
		}
	}

	// Answered at once: a finished task all the same.
	h.mu.Lock()
	h.acceptIf = func(*webhook.Request) bool { return false }
	h.mu.Unlock()
	done := c.result("tools/call", obj{"name": "export", "arguments": obj{}, "task": obj{}})["task"].(map[string]any)
	if done["status"] != "working" {
		t.Fatalf("answered at once: created %v; a v1 task begins working", done)
	}
	if got := c.result("tasks/get", obj{"taskId": done["taskId"]}); got["status"] != "completed" {
		t.Fatalf("answered at once, then: %v", got)
	}
	if res := c.result("tasks/result", obj{"taskId": done["taskId"]}); toolText(t, res) != "done at once" {
		t.Fatalf("its result: %v", res)
	}
	h.mu.Lock()
	h.acceptIf = nil
	h.mu.Unlock()

	// A tool error: failed in v1, completed at 2026-07-28.
	id := c.result("tools/call", obj{"name": "export", "arguments": obj{}, "task": obj{}})["task"].(map[string]any)["taskId"].(string)
	h.mustReport(id, webhook.Report{Type: webhook.ReportComplete, Result: json.RawMessage(`{"isError":true,"content":[{"type":"text","text":"disk full"}]}`)})
	if got := c.result("tasks/get", obj{"taskId": id}); got["status"] != "failed" {
		t.Fatalf("v1 view of a tool error: %v", got)
	}
	if got := getTask(t, p, id); got["status"] != "completed" {
		t.Fatalf("2026-07-28 view of a tool error: %v", got)
	}
	if res := c.result("tasks/result", obj{"taskId": id}); res["isError"] != true || toolText(t, res) != "disk full" {
		t.Fatalf("tasks/result of a tool error: %v", res)
	}
	// A backend's error: tasks/result is that JSON-RPC error.
	id = c.result("tools/call", obj{"name": "export", "arguments": obj{}, "task": obj{}})["task"].(map[string]any)["taskId"].(string)
	h.mustReport(id, webhook.Report{Type: webhook.ReportError, Error: &webhook.ReportedError{Code: -32000, Message: "quota exceeded"}})
	if msg, _ := c.call("tasks/result", obj{"taskId": id}); rpcCode(msg) != -32000 || !strings.Contains(fmt.Sprint(msg), "quota exceeded") {
		t.Fatalf("tasks/result of a failed task: %v", msg)
	}
	if got := c.result("tasks/get", obj{"taskId": id}); got["status"] != "failed" || got["statusMessage"] != "quota exceeded" {
		t.Fatalf("a failed task: %v", got)
	}

	// Cancelled: the answer is the cancelled task; the backend hears.
	id = c.result("tools/call", obj{"name": "export", "arguments": obj{}, "task": obj{}})["task"].(map[string]any)["taskId"].(string)
	if got := c.result("tasks/cancel", obj{"taskId": id}); got["status"] != "cancelled" || got["taskId"] != id {
		t.Fatalf("tasks/cancel: %v", got)
	}
	testwait.Until(t, "the backend hears of the cancel", func() bool {
		n := h.lastNews()
		return n != nil && n.Kind == webhook.KindTaskCancel && n.Task.ID == id && n.Task.CancelledBy == "client"
	})
	if res := c.result("tasks/result", obj{"taskId": id}); res["isError"] != true || !strings.Contains(toolText(t, res), "cancelled") {
		t.Fatalf("tasks/result of a cancelled task: %v", res)
	}
	if msg, _ := c.call("tasks/cancel", obj{"taskId": id}); rpcCode(msg) != -32602 {
		t.Fatalf("cancelling twice: %v", msg)
	}
	if _, err := h.report(id, webhook.Report{Type: webhook.ReportComplete, Result: json.RawMessage(`{"content":[]}`)}); err == nil {
		t.Fatal("a report after the cancel was taken")
	}

	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		for _, bad := range []any{"tk_nosuchtasknosuchtasknosuch", "", 42, nil} {
			if msg, _ := c.call(m, obj{"taskId": bad}); rpcCode(msg) != -32602 {
				t.Errorf("%s %v: %v", m, bad, msg)
			}
		}
	}
	if msg, _ := c.call("tasks/update", obj{"taskId": id}); rpcCode(msg) != -32601 {
		t.Errorf("tasks/update on a session: %v", msg)
	}
	for _, cur := range []any{"tk_nosuchtask", 7, ""} {
		if msg, _ := c.call("tasks/list", obj{"cursor": cur}); rpcCode(msg) != -32602 {
			t.Errorf("tasks/list cursor %v: %v", cur, msg)
		}
	}
}

// TestLegacyTasksAreListedAndAnsweredOnlyByTheirOwn: on a public tenant
// a session lists its own tasks only (pages of 50, newest first), and a
// response naming a task's question is taken only as an answer to a
// question the task asks: forged, malformed or unasked ids change
// nothing.
func TestLegacyTasksAreListedAndAnsweredOnlyByTheirOwn(t *testing.T) {
	h := newTaskHook(t)
	p := taskPlatform(t, h)
	c := newLegacyClient(t, legacyURL(p, "acme"))
	c.initialize("2025-11-25", obj{"elicitation": obj{}})
	other := newLegacyClient(t, legacyURL(p, "acme"))
	other.initialize("2025-11-25", obj{"elicitation": obj{}})

	var ids []string
	for range 53 {
		ids = append(ids, c.result("tools/call", obj{"name": "export", "arguments": obj{}, "task": obj{}})["task"].(map[string]any)["taskId"].(string))
	}
	theirs := other.result("tools/call", obj{"name": "export", "arguments": obj{}, "task": obj{}})["task"].(map[string]any)["taskId"].(string)
	page := c.result("tasks/list", obj{})
	first := page["tasks"].([]any)
	cursor, _ := page["nextCursor"].(string)
	if len(first) != 50 || cursor == "" {
		t.Fatalf("first page: %d tasks, cursor %q", len(first), cursor)
	}
	second := c.result("tasks/list", obj{"cursor": cursor})
	rest := second["tasks"].([]any)
	if len(rest) != 3 || second["nextCursor"] != nil {
		t.Fatalf("second page: %v", second)
	}
	seen := map[string]bool{}
	for _, tk := range append(first, rest...) {
		seen[tk.(map[string]any)["taskId"].(string)] = true
	}
	if len(seen) != 53 || seen[theirs] || !seen[ids[0]] || first[0].(map[string]any)["taskId"] != ids[52] {
		t.Fatalf("listed %d tasks (theirs %v), newest first: %v", len(seen), seen[theirs], first[0])
	}

	id := ids[0]
	q := json.RawMessage(`{"method":"elicitation/create","params":{"message":"Sure?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}`)
	h.mustReport(id, webhook.Report{Type: webhook.ReportInputRequired, InputRequests: map[string]json.RawMessage{"ok": q}})
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	answer := obj{"action": "accept", "content": obj{"ok": true}}
	for _, forged := range []any{
		"opsmcp-task." + id + "." + b64("never-asked"),
		"opsmcp-task." + id + ".!!!",
		"opsmcp-task." + id,
		"opsmcp-task.." + b64("ok"),
		"opsmcp-task.tk_nosuchtask." + b64("ok"),
		"opsmcp-task." + theirs + "." + b64("ok"),
		"opsmcp-task." + id + "." + b64("ok") + ".extra",
		"opsmcp-task." + strings.Repeat("x", 500),
		42,
	} {
		r := c.post(c.url, obj{"jsonrpc": "2.0", "id": forged, "result": answer})
		if r.Status != 202 {
			t.Errorf("forged answer %v: HTTP %d %s", forged, r.Status, r.Body)
		}
	}
	// A result that is not an object answers nothing; another session's
	// answer, on this public tenant, neither.
	c.post(c.url, obj{"jsonrpc": "2.0", "id": "opsmcp-task." + id + "." + b64("ok"), "result": "yes"})
	other.post(other.url, obj{"jsonrpc": "2.0", "id": "opsmcp-task." + id + "." + b64("ok"), "result": answer})
	if got := c.result("tasks/get", obj{"taskId": id}); got["status"] != "input_required" || h.lastNews() != nil {
		t.Fatalf("after forged answers: %v, backend news %+v", got, h.lastNews())
	}
	// On a public tenant a session's task is the session's alone.
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		if msg, _ := other.call(m, obj{"taskId": id}); rpcCode(msg) != -32602 {
			t.Errorf("%s of another session's task: %v", m, msg)
		}
	}
	if msg, _ := other.call("tasks/list", obj{"cursor": id}); rpcCode(msg) != -32602 {
		t.Errorf("another session's task as a cursor: %v", msg)
	}
	// A refused elicitation, from the session that was asked, declines.
	if r := c.post(c.url, obj{"jsonrpc": "2.0", "id": "opsmcp-task." + id + "." + b64("ok"), "error": obj{"code": -1, "message": "no"}}); r.Status != 202 {
		t.Fatalf("the refusal: HTTP %d", r.Status)
	}
	if got := c.result("tasks/get", obj{"taskId": id}); got["status"] != "working" {
		t.Fatalf("after the refusal: %v", got)
	}
	testwait.Until(t, "the backend gets the decline", func() bool {
		n := h.lastNews()
		return n != nil && n.Kind == webhook.KindTaskInput && n.Task.ID == id && string(n.InputResponses["ok"]) == `{"action":"decline"}`
	})
}

// TestATasksResultWaitIsHeldAsAStream: tasks/result waits as long as a
// stream may stay open, and no longer: at the stream's maximum lifetime
// it ends with an error that says to ask again, and the task goes on.
func TestATasksResultWaitIsHeldAsAStream(t *testing.T) {
	h := newTaskHook(t)
	p := taskPlatform(t, h, platformtest.WithConfig(func(c *config.Config) { c.Limits.StreamMaxLifetime = time.Second }))
	c := newLegacyClient(t, legacyURL(p, "acme"))
	c.initialize("2025-11-25", obj{})
	id := c.result("tools/call", obj{"name": "export", "arguments": obj{}, "task": obj{}})["task"].(map[string]any)["taskId"].(string)
	msg, _ := c.call("tasks/result", obj{"taskId": id})
	if e, _ := msg["error"].(map[string]any); rpcCode(msg) != -32603 || !strings.Contains(fmt.Sprint(e["message"]), "call tasks/result again") {
		t.Fatalf("a wait past the stream's lifetime: %v", msg)
	}
	if got := c.result("tasks/get", obj{"taskId": id}); got["status"] != "working" {
		t.Fatalf("the task after the wait: %v", got)
	}
}

// TestASessionStreamCatchesUpWithoutTheRecord: with the flow record
// turned off (no change reaches the stream through it), a task the
// session creates after its GET stream opened is still reported there,
// by the catch-up read, and each change once.
func TestASessionStreamCatchesUpWithoutTheRecord(t *testing.T) {
	t.Parallel() // it waits on the catch-up, seconds apart
	h := newTaskHook(t)
	p := taskPlatform(t, h, platformtest.WithConfig(func(c *config.Config) { c.Flows.Record = false }))
	c := newLegacyClient(t, legacyURL(p, "acme"))
	c.initialize("2025-11-25", obj{})
	status := sessionStream(t, c, c.url)
	id := c.result("tools/call", obj{"name": "export", "arguments": obj{}, "task": obj{}})["task"].(map[string]any)["taskId"].(string)
	if n := nextStatus(t, status, "working"); n["taskId"] != id {
		t.Fatalf("the new task: %v", n)
	}
	h.mustReport(id, webhook.Report{Type: webhook.ReportComplete, Result: json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)})
	if n := nextStatus(t, status, "completed"); n["taskId"] != id {
		t.Fatalf("its end: %v", n)
	}
	// Nothing more of it: each change is told once.
	select {
	case m := <-status:
		if m["method"] == "notifications/tasks/status" {
			t.Fatalf("a change told twice: %v", m)
		}
	case <-time.After(6 * time.Second): // past the next catch-up
	}
}
