package endpoint_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsmcp/platform/testkit/oidctest"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
	"github.com/opsmcp/platform/webhook"
)

// taskCaps declare form elicitation and the Tasks extension.
var taskCaps = obj{"elicitation": obj{}, "extensions": obj{"io.modelcontextprotocol/tasks": obj{}}}

// taskHook is a tenant backend for task tools: it accepts every call
// offered as a task (unless acceptIf says not), keeps the offers, and
// records what the platform tells it about them. Tests report for it
// with report.
type taskHook struct {
	*platformtest.Backend
	t        *testing.T
	mu       sync.Mutex
	secret   string // the tool's webhook secret, set with setSecret
	offers   map[string]*webhook.Task
	news     []*webhook.Request // task_input and task_cancel deliveries
	calls    []*webhook.Request
	seq      map[string]int64
	acceptIf func(*webhook.Request) bool
}

func newTaskHook(t *testing.T) *taskHook {
	h := &taskHook{t: t, offers: map[string]*webhook.Task{}, seq: map[string]int64{}}
	h.Backend = platformtest.NewBackend(t, func(w http.ResponseWriter, _ *http.Request, req *webhook.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		switch {
		case req.Kind == webhook.KindTaskInput || req.Kind == webhook.KindTaskCancel:
			h.news = append(h.news, req)
			w.WriteHeader(http.StatusNoContent)
		case req.Task != nil && (h.acceptIf == nil || h.acceptIf(req)):
			h.calls = append(h.calls, req)
			h.offers[req.Task.ID] = req.Task
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"type":"accepted","message":"queued"}`))
		default:
			h.calls = append(h.calls, req)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"type":"complete","result":{"content":[{"type":"text","text":"done at once"}]}}`))
		}
	})
	return h
}

// setSecret sets the tool's webhook secret, which deliveries verify with.
func (h *taskHook) setSecret(secret string) {
	h.mu.Lock()
	h.secret = secret
	h.mu.Unlock()
	h.SetSecrets(secret)
}

// report sends the task's next report, signed with its secret.
func (h *taskHook) report(id string, r webhook.Report) (*webhook.ReportAnswer, error) {
	h.mu.Lock()
	offer := h.offers[id]
	h.seq[id]++
	r.Seq = h.seq[id]
	h.mu.Unlock()
	if offer == nil {
		h.t.Fatalf("no offer for task %s", id)
	}
	return webhook.SendReport(context.Background(), nil, offer, &r)
}

func (h *taskHook) mustReport(id string, r webhook.Report) {
	h.t.Helper()
	if _, err := h.report(id, r); err != nil {
		h.t.Fatalf("report %s: %v", r.Type, err)
	}
}

func (h *taskHook) lastNews() *webhook.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.news) == 0 {
		return nil
	}
	return h.news[len(h.news)-1]
}

func taskTool(name, url, mode string) obj {
	return obj{"name": name, "description": "long work", "inputSchema": obj{"type": "object"},
		"handler": obj{"url": url}, "task": obj{"mode": mode, "pollIntervalMs": 500}}
}

// taskPlatform starts a platform with tenant acme whose tools "export"
// (may), "deploy" (must) and "echo" (never) are answered by h.
func taskPlatform(t *testing.T, h *taskHook, opts ...platformtest.Option) *platformtest.Platform {
	p := platformtest.Start(t, platformtest.SQLiteURL(t), opts...)
	p.Tenant(t, "acme")
	h.setSecret(p.Tool(t, "acme", taskTool("export", h.URL, "may")))
	// One backend, one secret: the other tools reuse export's by rotation
	// would be a detour; they get their own hooks' secret checks below.
	return p
}

func callTask(t *testing.T, p *platformtest.Platform, slug, tool string, caps obj) *platformtest.Response {
	t.Helper()
	return p.MCP(t, slug, "tools/call", obj{"name": tool, "arguments": obj{}, "_meta": platformtest.Meta(caps)})
}

func tasksCall(t *testing.T, p *platformtest.Platform, slug, method, id string, extra obj) *platformtest.Response {
	t.Helper()
	params := obj{"taskId": id, "_meta": platformtest.Meta(taskCaps)}
	for k, v := range extra {
		params[k] = v
	}
	return p.MCP(t, slug, method, params)
}

// createdTask checks a CreateTaskResult's shape and returns its id.
func createdTask(t *testing.T, r *platformtest.Response) string {
	t.Helper()
	res := platformtest.Result(t, r)
	id, _ := res["taskId"].(string)
	if res["resultType"] != "task" || !strings.HasPrefix(id, "tk_") || len(id) < 20 || res["status"] != "working" {
		t.Fatalf("not a CreateTaskResult: %v", res)
	}
	for _, k := range []string{"task", "result", "error", "inputRequests", "requestState", "ttl", "pollInterval"} {
		if _, ok := res[k]; ok {
			t.Fatalf("a CreateTaskResult with %q: %v", k, res)
		}
	}
	if ttl, ok := res["ttlMs"].(float64); !ok || ttl != 3_600_000 {
		t.Fatalf("ttlMs %v", res["ttlMs"])
	}
	if poll, ok := res["pollIntervalMs"].(float64); !ok || poll != 500 {
		t.Fatalf("pollIntervalMs %v", res["pollIntervalMs"])
	}
	for _, k := range []string{"createdAt", "lastUpdatedAt"} {
		if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(res[k])); err != nil {
			t.Fatalf("%s %v: %v", k, res[k], err)
		}
	}
	if res["statusMessage"] != "queued" {
		t.Fatalf("the backend's first message: %v", res["statusMessage"])
	}
	return id
}

func getTask(t *testing.T, p *platformtest.Platform, id string) map[string]any {
	t.Helper()
	res := platformtest.Result(t, tasksCall(t, p, "acme", "tasks/get", id, nil))
	if res["resultType"] != "complete" || res["taskId"] != id {
		t.Fatalf("tasks/get: %v", res)
	}
	return res
}

// TestATaskLivesFromCreationToItsResult: a may-mode tool called with the
// extension is offered to the backend as a task and answered with a
// CreateTaskResult once the task is durable; the backend's reports move
// it (progress, a question, the client's partial and full answers
// delivered signed, the result); terminal statuses never change; the
// result's resultType is inlined; requestState appears nowhere.
func TestATaskLivesFromCreationToItsResult(t *testing.T) {
	h := newTaskHook(t)
	p := taskPlatform(t, h)
	id := createdTask(t, callTask(t, p, "acme", "export", taskCaps))
	if got := getTask(t, p, id); got["status"] != "working" || got["statusMessage"] != "queued" {
		t.Fatalf("right after creation: %v", got)
	}
	offer := h.offers[id]
	if offer == nil || offer.Secret == "" || !strings.HasSuffix(offer.ReportURL, "/t/acme/tasks/"+id) || offer.DeadlineMs != 600_000 {
		t.Fatalf("the offer: %+v", offer)
	}

	h.mustReport(id, webhook.Report{Type: webhook.ReportProgress, Message: "3 of 10 exported"})
	if got := getTask(t, p, id); got["status"] != "working" || got["statusMessage"] != "3 of 10 exported" {
		t.Fatalf("after progress: %v", got)
	}
	ask := func(msg string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"method":"elicitation/create","params":{"mode":"form","message":%q,"requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}`, msg))
	}
	h.mustReport(id, webhook.Report{Type: webhook.ReportInputRequired, Message: "waiting for you",
		InputRequests: map[string]json.RawMessage{"first": ask("First?"), "second": ask("Second?")}})
	got := getTask(t, p, id)
	reqs, _ := got["inputRequests"].(map[string]any)
	if got["status"] != "input_required" || len(reqs) != 2 {
		t.Fatalf("after the question: %v", got)
	}
	if _, ok := got["requestState"]; ok {
		t.Fatal("tasks/get carries a requestState")
	}

	// A partial answer, with a key never asked: the known one is taken
	// (and delivered), the other ignored, and the next get says so.
	ackd := platformtest.Result(t, tasksCall(t, p, "acme", "tasks/update", id, obj{"inputResponses": obj{
		"first": obj{"action": "accept", "content": obj{"ok": true}}, "never-asked": obj{"action": "accept"}}}))
	if len(ackd) != 1 || ackd["resultType"] != "complete" {
		t.Fatalf("the update's acknowledgement: %v", ackd)
	}
	got = getTask(t, p, id)
	reqs, _ = got["inputRequests"].(map[string]any)
	if _, still := reqs["first"]; got["status"] != "input_required" || len(reqs) != 1 || still {
		t.Fatalf("after a partial answer: %v", got)
	}
	testwait.Until(t, "the answer reaches the backend", func() bool { return h.lastNews() != nil })
	n := h.lastNews()
	if n.Kind != webhook.KindTaskInput || n.Task.ID != id || len(n.InputResponses) != 1 || n.InputResponses["first"] == nil || n.Task.Secret != "" {
		t.Fatalf("the delivered answers: %+v", n)
	}
	platformtest.Result(t, tasksCall(t, p, "acme", "tasks/update", id, obj{"inputResponses": obj{
		"second": obj{"action": "decline"}, "first": obj{"action": "accept", "content": obj{"ok": false}}}}))
	got = getTask(t, p, id)
	if got["status"] != "working" {
		t.Fatalf("after every answer: %v", got)
	}
	testwait.Until(t, "the second answer reaches the backend", func() bool {
		n := h.lastNews()
		return n != nil && n.InputResponses["second"] != nil
	})
	if n := h.lastNews(); n.InputResponses["first"] != nil {
		t.Fatalf("an answered key was delivered again: %v", n.InputResponses)
	}

	h.mustReport(id, webhook.Report{Type: webhook.ReportComplete, Result: json.RawMessage(`{"content":[{"type":"text","text":"exported"}],"isError":true}`)})
	got = getTask(t, p, id)
	result, _ := got["result"].(map[string]any)
	if got["status"] != "completed" || result["resultType"] != "complete" || result["isError"] != true {
		t.Fatalf("a tool error completes the task: %v", got)
	}
	// Terminal: reports are refused, updates and cancels change nothing.
	if _, err := h.report(id, webhook.Report{Type: webhook.ReportProgress, Message: "more"}); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("a report after the end: %v", err)
	}
	platformtest.Result(t, tasksCall(t, p, "acme", "tasks/cancel", id, nil))
	if again := getTask(t, p, id); again["status"] != "completed" || again["lastUpdatedAt"] != got["lastUpdatedAt"] {
		t.Fatalf("a finished task changed: %v", again)
	}
}

// TestTheServerAloneDecidesWhatBecomesATask: without the extension a
// may-mode tool answers at once (its backend offered nothing), a
// must-mode tool is -32021 naming the extension, and the 2025-11-25
// params.task changes nothing; with it, a backend that answers at once
// gives a plain result and no task survives; server/discover advertises
// the extension (and never capabilities.tasks) only while a tool may run
// as one.
func TestTheServerAloneDecidesWhatBecomesATask(t *testing.T) {
	h := newTaskHook(t)
	p := taskPlatform(t, h)
	discover := func() map[string]any {
		return platformtest.Result(t, p.MCP(t, "acme", "server/discover", nil))["capabilities"].(map[string]any)
	}
	caps := discover()
	if ext, _ := caps["extensions"].(map[string]any); ext == nil || fmt.Sprint(ext["io.modelcontextprotocol/tasks"]) != "map[]" {
		t.Fatalf("discover: %v", caps)
	}
	if _, ok := caps["tasks"]; ok {
		t.Fatal("capabilities.tasks advertised at 2026-07-28")
	}

	res := platformtest.Result(t, callTask(t, p, "acme", "export", obj{}))
	if res["resultType"] != "complete" || toolText(t, res) != "done at once" || h.calls[len(h.calls)-1].Task != nil {
		t.Fatalf("without the extension: %v", res)
	}
	r := p.MCP(t, "acme", "tools/call", obj{"name": "export", "arguments": obj{}, "task": obj{"ttl": 60000}, "_meta": platformtest.Meta(obj{})})
	if res := platformtest.Result(t, r); res["resultType"] != "complete" {
		t.Fatalf("with the legacy params.task: %v", res)
	}

	secret := p.Tool(t, "acme", taskTool("deploy", h.URL, "must"))
	_ = secret // the hook verifies with export's secret; deploy is refused before any delivery
	r = callTask(t, p, "acme", "deploy", obj{"elicitation": obj{}})
	code, _, data := platformtest.RPCError(t, r)
	req, _ := data["requiredCapabilities"].(map[string]any)
	ext, _ := req["extensions"].(map[string]any)
	if code != -32021 || ext == nil || ext["io.modelcontextprotocol/tasks"] == nil {
		t.Fatalf("a must-mode tool without the extension: %d %v", code, data)
	}

	h.mu.Lock()
	h.acceptIf = func(*webhook.Request) bool { return false }
	h.mu.Unlock()
	res = platformtest.Result(t, callTask(t, p, "acme", "export", taskCaps))
	if res["resultType"] != "complete" || h.calls[len(h.calls)-1].Task == nil {
		t.Fatalf("offered, answered at once: %v", res)
	}
	if n := platformtest.SQL(t, p.DatabaseURL).Strings(t, "SELECT id FROM tasks"); len(n) != 0 {
		t.Fatalf("a call answered at once left its task: %v", n)
	}

	p.MustAdmin(t, 204, "DELETE", "/api/v1/tenants/acme/tools/export", nil)
	p.MustAdmin(t, 204, "DELETE", "/api/v1/tenants/acme/tools/deploy", nil)
	p.Tool(t, "acme", echoTool("echo", h.URL))
	testwait.Until(t, "discover stops advertising tasks", func() bool {
		ext, _ := discover()["extensions"].(map[string]any)
		_, tasks := ext["io.modelcontextprotocol/tasks"]
		return !tasks
	})
}

// TestTasksMethodsAreGatedAndRoutedAsTheExtensionSays: every tasks/*
// method needs the extension in its own _meta (-32021, before the task
// is looked up); Mcp-Name must be the task id (-32020); tasks/result and
// tasks/list are gone (-32601); an id that is not a task of the caller
// is -32602 like one that never existed.
func TestTasksMethodsAreGatedAndRoutedAsTheExtensionSays(t *testing.T) {
	h := newTaskHook(t)
	p := taskPlatform(t, h)
	id := createdTask(t, callTask(t, p, "acme", "export", taskCaps))
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		for _, tid := range []string{id, "tk_doesnotexist"} {
			r := p.MCP(t, "acme", m, obj{"taskId": tid, "_meta": platformtest.Meta(obj{"elicitation": obj{}})})
			if code, _, data := platformtest.RPCError(t, r); code != -32021 || data["requiredCapabilities"] == nil {
				t.Fatalf("%s %s without the extension: %d %v", m, tid, code, data)
			}
		}
		body, _ := json.Marshal(obj{"jsonrpc": "2.0", "id": 1, "method": m, "params": obj{"taskId": id, "_meta": platformtest.Meta(taskCaps)}})
		for _, name := range []string{"tk_other", "", strings.ToUpper(id), id[:len(id)-1]} {
			hdr := http.Header{"Content-Type": {"application/json"}, "Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {m}}
			if name != "" {
				hdr.Set("Mcp-Name", name)
			}
			r := platformtest.Do(t, "POST", p.URL+"/t/acme/mcp", hdr, body)
			if code, _, _ := platformtest.RPCError(t, r); code != -32020 || r.Status != 400 {
				t.Fatalf("%s with Mcp-Name %q: HTTP %d, %d", m, name, r.Status, code)
			}
		}
	}
	for _, m := range []string{"tasks/result", "tasks/list"} {
		r := p.MCP(t, "acme", m, obj{"taskId": id, "_meta": platformtest.Meta(taskCaps)})
		if code, _, _ := platformtest.RPCError(t, r); code != -32601 {
			t.Fatalf("%s: %d", m, code)
		}
	}
	unknown := func(r *platformtest.Response) string {
		code, msg, data := platformtest.RPCError(t, r)
		return fmt.Sprint(r.Status, code, msg, data)
	}
	want := unknown(tasksCall(t, p, "acme", "tasks/get", "tk_AAAAAAAAAAAAAAAAAAAAAAAA", nil))
	if !strings.Contains(want, "-32602") {
		t.Fatalf("an unknown id: %s", want)
	}
	// Another tenant's task (same platform, its own backend) is unknown
	// here, for every method, in every spelling of its id.
	p.Tenant(t, "beta")
	hb := newTaskHook(t)
	hb.setSecret(p.Tool(t, "beta", taskTool("export", hb.URL, "may")))
	betaID := createdTask(t, callTask(t, p, "beta", "export", taskCaps))
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		for _, tid := range []string{betaID, strings.ToUpper(betaID), betaID + "x", betaID[:len(betaID)-1], strings.Replace(betaID, "tk_", "fl_", 1)} {
			if got := unknown(tasksCall(t, p, "acme", m, tid, obj{"inputResponses": obj{}})); got != want {
				t.Fatalf("%s of %q from another tenant: %s, want %s", m, tid, got, want)
			}
		}
	}
	if got := getTask(t, p, id); got["status"] != "working" {
		t.Fatalf("acme's task changed: %v", got)
	}
	beta := platformtest.Result(t, tasksCall(t, p, "beta", "tasks/get", betaID, nil))
	if beta["status"] != "working" {
		t.Fatalf("beta's task was touched through acme: %v", beta)
	}
}

// postReport POSTs body to a task's report URL with signature header sig
// (none when empty) and returns the HTTP status.
func postReport(t *testing.T, url, sig string, body []byte) int {
	t.Helper()
	h := http.Header{"Content-Type": {"application/json"}}
	if sig != "" {
		h.Set(webhook.SignatureHeader, sig)
	}
	return platformtest.Do(t, "POST", url, h, body).Status
}

// taskRow is what tasks/get shows of a task: a report refused must leave
// it as it was.
func taskRow(t *testing.T, p *platformtest.Platform, id string) string {
	t.Helper()
	got := getTask(t, p, id)
	b, _ := json.Marshal(got)
	return string(b)
}

// TestReportsAreVerifiedAppliedOnceAndRefusedOtherwise: a report with no
// signature, another secret's (another task's, the tool's own webhook
// secret), a body changed after signing, a timestamp outside the
// tolerance, sent to another task's URL or another tenant's path is
// refused and changes nothing; a report sent again (its seq applied) is
// acknowledged as a duplicate and changes nothing; reports that break
// the contract are refused with a reason; a report for a finished task is
// 409.
func TestReportsAreVerifiedAppliedOnceAndRefusedOtherwise(t *testing.T) {
	h := newTaskHook(t)
	p := taskPlatform(t, h)
	id := createdTask(t, callTask(t, p, "acme", "export", taskCaps))
	other := createdTask(t, callTask(t, p, "acme", "export", taskCaps))
	offer := h.offers[id]
	body := []byte(`{"seq":1,"type":"progress","message":"forged"}`)
	before := taskRow(t, p, id)
	for name, c := range map[string]struct {
		url, sig string
		body     []byte
		status   int
	}{
		"no signature":          {offer.ReportURL, "", body, 401},
		"a malformed header":    {offer.ReportURL, "v1=abc", body, 401},
		"another task's secret": {offer.ReportURL, webhook.Sign(h.offers[other].Secret, time.Now(), body), body, 401},
		"the webhook secret":    {offer.ReportURL, webhook.Sign(h.secret, time.Now(), body), body, 401},
		"a changed body":        {offer.ReportURL, webhook.Sign(offer.Secret, time.Now(), body), []byte(`{"seq":1,"type":"progress","message":"forgeD"}`), 401},
		"an old timestamp":      {offer.ReportURL, webhook.Sign(offer.Secret, time.Now().Add(-10*time.Minute), body), body, 401},
		"a future timestamp":    {offer.ReportURL, webhook.Sign(offer.Secret, time.Now().Add(10*time.Minute), body), body, 401},
		"another task's URL":    {h.offers[other].ReportURL, webhook.Sign(offer.Secret, time.Now(), body), body, 401},
		"another tenant's path": {strings.Replace(offer.ReportURL, "/t/acme/", "/t/beta/", 1), webhook.Sign(offer.Secret, time.Now(), body), body, 404},
		"an unknown task":       {strings.TrimSuffix(offer.ReportURL, id) + "tk_unknown", webhook.Sign(offer.Secret, time.Now(), body), body, 404},
	} {
		if got := postReport(t, c.url, c.sig, c.body); got != c.status {
			t.Errorf("%s: HTTP %d, want %d", name, got, c.status)
		}
	}
	if after := taskRow(t, p, id); after != before {
		t.Fatalf("a refused report changed the task:\n%s\n%s", before, after)
	}
	if after := getTask(t, p, other); after["statusMessage"] != "queued" {
		t.Fatalf("the other task changed: %v", after)
	}

	// Contract breaches, each refused with a reason and no change.
	for name, r := range map[string]webhook.Report{
		"seq 0":                {Seq: 0, Type: "progress"},
		"an unknown type":      {Seq: 5, Type: "finished"},
		"no input requests":    {Seq: 5, Type: "input_required"},
		"a method not allowed": {Seq: 5, Type: "input_required", InputRequests: map[string]json.RawMessage{"x": json.RawMessage(`{"method":"tools/call","params":{}}`)}},
		"sampling, undeclared": {Seq: 5, Type: "input_required", InputRequests: map[string]json.RawMessage{"x": json.RawMessage(`{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}`)}},
		"a result w/o content": {Seq: 5, Type: "complete", Result: json.RawMessage(`{"structuredContent":{}}`)},
		"a result not object":  {Seq: 5, Type: "complete", Result: json.RawMessage(`[1]`)},
		"an error w/o message": {Seq: 5, Type: "error", Error: &webhook.ReportedError{Code: -32603}},
		"a key of 65 bytes":    {Seq: 5, Type: "input_required", InputRequests: map[string]json.RawMessage{strings.Repeat("k", 65): json.RawMessage(`{"method":"roots/list"}`)}},
	} {
		raw, _ := json.Marshal(r)
		if got := postReport(t, offer.ReportURL, webhook.Sign(offer.Secret, time.Now(), raw), raw); got != 400 {
			t.Errorf("%s: HTTP %d, want 400", name, got)
		}
	}
	if got := postReport(t, offer.ReportURL, webhook.Sign(offer.Secret, time.Now(), []byte("{not json")), []byte("{not json")); got != 400 {
		t.Errorf("not JSON: HTTP %d", got)
	}
	if after := taskRow(t, p, id); after != before {
		t.Fatalf("a refused report changed the task:\n%s\n%s", before, after)
	}

	// Applied once: the same report again, or an older one, is a
	// duplicate; a question's key is never reused.
	ask := json.RawMessage(`{"method":"elicitation/create","params":{"mode":"form","message":"Go?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}`)
	first := webhook.Report{Seq: 1, Type: "input_required", InputRequests: map[string]json.RawMessage{"go": ask}}
	raw, _ := json.Marshal(first)
	sig := webhook.Sign(offer.Secret, time.Now(), raw)
	if got := postReport(t, offer.ReportURL, sig, raw); got != 200 {
		t.Fatalf("a good report: HTTP %d", got)
	}
	asked := taskRow(t, p, id)
	if got := platformtest.Do(t, "POST", offer.ReportURL, http.Header{"Content-Type": {"application/json"}, webhook.SignatureHeader: {sig}}, raw); got.Status != 200 || !strings.Contains(string(got.Body), `"duplicate":true`) {
		t.Fatalf("the same report again: %d %s", got.Status, got.Body)
	}
	platformtest.Result(t, tasksCall(t, p, "acme", "tasks/update", id, obj{"inputResponses": obj{"go": obj{"action": "accept", "content": obj{"ok": true}}}}))
	h.seq[id] = 1
	if _, err := h.report(id, webhook.Report{Type: "input_required", InputRequests: map[string]json.RawMessage{"go": ask}}); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("a key asked again: %v", err)
	}
	if asked == taskRow(t, p, id) {
		t.Fatal("the answer did not move the task")
	}
	h.mustReport(id, webhook.Report{Type: "error", Error: &webhook.ReportedError{Code: -32000, Message: "the export broke"}})
	got := getTask(t, p, id)
	errObj, _ := got["error"].(map[string]any)
	if _, hasResult := got["result"]; got["status"] != "failed" || errObj["code"] != float64(-32000) || errObj["message"] != "the export broke" || hasResult {
		t.Fatalf("a failed task: %v", got)
	}
	if _, err := h.report(id, webhook.Report{Type: "progress"}); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("a report after the end: %v", err)
	}
}

// TestASilentBackendFailsItsTaskAtTheDeadline: a working task whose
// backend sends nothing within the tool's deadline fails, with a message
// and the cause; the clock stops while the task waits on the client.
func TestASilentBackendFailsItsTaskAtTheDeadline(t *testing.T) {
	h := newTaskHook(t)
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.Tenant(t, "acme")
	tool := taskTool("export", h.URL, "may")
	tool["task"].(obj)["deadlineMs"] = 1500
	h.setSecret(p.Tool(t, "acme", tool))
	waiting := createdTask(t, callTask(t, p, "acme", "export", taskCaps))
	silent := createdTask(t, callTask(t, p, "acme", "export", taskCaps))
	h.mustReport(waiting, webhook.Report{Type: "input_required", InputRequests: map[string]json.RawMessage{
		"go": json.RawMessage(`{"method":"elicitation/create","params":{"mode":"form","message":"Go?","requestedSchema":{"type":"object","properties":{}}}}`)}})
	testwait.Until(t, "the silent task fails", func() bool { return getTask(t, p, silent)["status"] == "failed" })
	got := getTask(t, p, silent)
	e, _ := got["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	if e["code"] != float64(-32603) || data["cause"] != "deadline" || !strings.Contains(fmt.Sprint(got["statusMessage"]), "1.5s") {
		t.Fatalf("the failure: %v", got)
	}
	time.Sleep(2 * time.Second)
	if got := getTask(t, p, waiting); got["status"] != "input_required" {
		t.Fatalf("a task waiting on its client failed: %v", got)
	}
}

// TestACancelReachesTheBackendAndEndsTheTask: tasks/cancel cancels a
// live task at once and delivers a signed cancel naming the client; the
// backend's later reports are refused; a second cancel changes nothing.
func TestACancelReachesTheBackendAndEndsTheTask(t *testing.T) {
	h := newTaskHook(t)
	p := taskPlatform(t, h)
	id := createdTask(t, callTask(t, p, "acme", "export", taskCaps))
	ack := platformtest.Result(t, tasksCall(t, p, "acme", "tasks/cancel", id, nil))
	if len(ack) != 1 || ack["resultType"] != "complete" {
		t.Fatalf("the cancel's acknowledgement: %v", ack)
	}
	got := getTask(t, p, id)
	if got["status"] != "cancelled" {
		t.Fatalf("after the cancel: %v", got)
	}
	testwait.Until(t, "the cancel reaches the backend", func() bool { return h.lastNews() != nil })
	if n := h.lastNews(); n.Kind != webhook.KindTaskCancel || n.Task.ID != id || n.Task.CancelledBy != "client" {
		t.Fatalf("the cancel delivered: %+v", n.Task)
	}
	if _, err := h.report(id, webhook.Report{Type: "complete", Result: json.RawMessage(`{"content":[]}`)}); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("a report after the cancel: %v", err)
	}
	platformtest.Result(t, tasksCall(t, p, "acme", "tasks/cancel", id, nil))
	if again := getTask(t, p, id); again["lastUpdatedAt"] != got["lastUpdatedAt"] {
		t.Fatalf("a second cancel changed the task: %v", again)
	}
}

// TestLiveTasksAreCappedPerTenantAndPerCaller: past its tenant's limit,
// or its caller's, a call that would become a task gets HTTP 429 with a
// JSON-RPC error, nothing is delivered, and another tenant is unaffected;
// a finished task frees its place.
func TestLiveTasksAreCappedPerTenantAndPerCaller(t *testing.T) {
	h := newTaskHook(t)
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants", obj{"slug": "acme", "displayName": "Acme",
		"settings": obj{"auth": obj{"public": true}, "maxLiveTasks": 2}})
	h.setSecret(p.Tool(t, "acme", taskTool("export", h.URL, "may")))
	p.Tenant(t, "beta")
	hb := newTaskHook(t)
	hb.setSecret(p.Tool(t, "beta", taskTool("export", hb.URL, "may")))
	first := createdTask(t, callTask(t, p, "acme", "export", taskCaps))
	createdTask(t, callTask(t, p, "acme", "export", taskCaps))
	calls := len(h.calls)
	for range 3 {
		r := callTask(t, p, "acme", "export", taskCaps)
		code, msg, _ := platformtest.RPCError(t, r)
		if r.Status != 429 || code != -32600 || !strings.Contains(msg, "Too many live tasks") {
			t.Fatalf("over the limit: HTTP %d, %d %q", r.Status, code, msg)
		}
	}
	if len(h.calls) != calls {
		t.Fatal("a call over the limit reached the backend")
	}
	createdTask(t, callTask(t, p, "beta", "export", taskCaps))
	h.mustReport(first, webhook.Report{Type: "complete", Result: json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)})
	createdTask(t, callTask(t, p, "acme", "export", taskCaps))
}

// bearerTasks sends a tasks/* request with token.
func bearerTasks(t *testing.T, p *platformtest.Platform, token, method, id string, extra obj) *platformtest.Response {
	t.Helper()
	params := obj{"taskId": id, "_meta": platformtest.Meta(taskCaps)}
	for k, v := range extra {
		params[k] = v
	}
	body, _ := json.Marshal(obj{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	h := http.Header{"Content-Type": {"application/json"}, "Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {method},
		"Mcp-Name": {id}, "Authorization": {"Bearer " + token}}
	return platformtest.Do(t, "POST", p.URL+"/t/acme/mcp", h, body)
}

// TestATaskIsItsCreatorsAlone: a task created by one user does not
// exist for another user of the tenant, nor for the same user through
// another client: every tasks/* method answers as for an id never
// issued, and nothing changes; the creator's limit of live tasks is its
// own.
func TestATaskIsItsCreatorsAlone(t *testing.T) {
	op := oidctest.Start(t)
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants", obj{"slug": "acme", "displayName": "acme", "settings": obj{
		"maxLiveTasksPerPrincipal": 1, "auth": obj{"scopes": []string{"mcp"},
			"issuers": []obj{{"issuer": op.Issuer, "audiences": []string{oidctest.ClientA, oidctest.ClientB}}}}}})
	h := newTaskHook(t)
	h.setSecret(p.Tool(t, "acme", taskTool("export", h.URL, "may")))
	alice := op.UserToken(t, oidctest.ClientA, op.UserName(1))
	bob := op.UserToken(t, oidctest.ClientA, op.UserName(2))
	aliceB := op.UserToken(t, oidctest.ClientB, op.UserName(1))
	id := createdTask(t, bearerCall(t, p, "acme", alice, obj{"name": "export", "arguments": obj{}, "_meta": platformtest.Meta(taskCaps)}))
	unknown := func(r *platformtest.Response) string {
		code, msg, data := platformtest.RPCError(t, r)
		return fmt.Sprint(r.Status, code, msg, data)
	}
	want := unknown(bearerTasks(t, p, bob, "tasks/get", "tk_neverissuedneverissued", nil))
	for _, who := range []string{bob, aliceB} {
		for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			if got := unknown(bearerTasks(t, p, who, m, id, obj{"inputResponses": obj{}})); got != want {
				t.Fatalf("%s by another: %s, want %s", m, got, want)
			}
		}
	}
	res := platformtest.Result(t, bearerTasks(t, p, alice, "tasks/get", id, nil))
	if res["status"] != "working" {
		t.Fatalf("alice's own task: %v", res)
	}
	r := bearerCall(t, p, "acme", alice, obj{"name": "export", "arguments": obj{}, "_meta": platformtest.Meta(taskCaps)})
	if r.Status != 429 {
		t.Fatalf("alice's second live task: HTTP %d %s", r.Status, r.Body)
	}
	createdTask(t, bearerCall(t, p, "acme", bob, obj{"name": "export", "arguments": obj{}, "_meta": platformtest.Meta(taskCaps)}))
	for _, tok := range []string{alice, bob, aliceB} {
		if strings.Contains(p.Logs.String(), tok) {
			t.Fatal("a bearer token reached the log")
		}
	}
}

// TestStreamsFollowTheTasksTheyName: subscriptions/listen with taskIds
// needs the extension (-32021); its acknowledgement lists the ids it
// follows (the caller's tasks only); each change of a followed task
// comes as notifications/tasks, the task as tasks/get shows it, on a
// stream of another replica too.
func TestStreamsFollowTheTasksTheyName(t *testing.T) {
	h := newTaskHook(t)
	url := platformtest.PostgresSchemaURL(t)
	keys := platformtest.WithStateKeys("c3RhdGUta2V5LTAxMjM0NTY3ODlhYmNkZWYwMTIzNDU2Nzg5")
	a := platformtest.Start(t, url, keys)
	b := platformtest.Start(t, url, keys)
	a.Tenant(t, "acme")
	h.setSecret(a.Tool(t, "acme", taskTool("export", h.URL, "may")))
	id := createdTask(t, callTask(t, a, "acme", "export", taskCaps))
	if s := openListen(t, b.URL, "acme", "", obj{"taskIds": []string{id}}, obj{}); s.Status != 400 || !strings.Contains(s.Body, "-32021") {
		t.Fatalf("taskIds without the extension: %d %s", s.Status, s.Body)
	}
	s := openListen(t, b.URL, "acme", "", obj{"taskIds": []string{id, "tk_nosuchtasknosuchtask"}}, taskCaps)
	params, _ := s.ack["params"].(map[string]any)
	agreed, _ := params["notifications"].(map[string]any)
	if fmt.Sprint(agreed["taskIds"]) != fmt.Sprintf("[%s]", id) {
		t.Fatalf("the acknowledgement: %v", s.ack)
	}
	h.mustReport(id, webhook.Report{Type: "progress", Message: "halfway"})
	n := s.next(t)
	np, _ := n["params"].(map[string]any)
	meta, _ := np["_meta"].(map[string]any)
	if n["method"] != "notifications/tasks" || np["taskId"] != id || np["statusMessage"] != "halfway" || meta["io.modelcontextprotocol/subscriptionId"] != "sub-1" {
		t.Fatalf("the notification: %v", n)
	}
	h.mustReport(id, webhook.Report{Type: "complete", Result: json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)})
	for {
		n = s.next(t)
		np, _ = n["params"].(map[string]any)
		if np["status"] == "completed" {
			break
		}
	}
	if res, _ := np["result"].(map[string]any); res["resultType"] != "complete" {
		t.Fatalf("the last notification: %v", n)
	}
}
