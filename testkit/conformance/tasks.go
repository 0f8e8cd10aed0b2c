package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/opsmcp/platform/webhook"
)

// The Tasks extension's fixtures (the suite's tasks-* scenarios): tools
// whose backend accepts the call as a task and reports on it later.
// greet never runs as a task; slow_compute may (a client without the
// extension gets its answer at once); the others must.

// TaskScenarios are the suite's tasks-* server scenarios. The suite
// always skips tasks-status-notifications (its harness waits on
// subscriptions/listen), so notifications/tasks has a test of the
// platform's own.
var TaskScenarios = []string{
	"tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields", "tasks-request-state-removal",
	"tasks-mrtr-input", "tasks-request-headers", "tasks-dispatch-and-envelope", "tasks-status-notifications",
	"tasks-required-task-error", "tasks-mrtr-composition",
}

// SkippedScenarios are scenarios the suite reports as skipped whatever
// the server does: a run passes them without checks.
var SkippedScenarios = map[string]bool{"tasks-status-notifications": true}

func taskTool(name, description, mode string, schema obj, inputs ...obj) obj {
	t := tool(name, description, schema, inputs...)
	t["task"] = obj{"mode": mode, "pollIntervalMs": 200}
	return t
}

// TaskTools are the task fixtures' definitions.
func TaskTools() []obj {
	str, integer := obj{"type": "string"}, obj{"type": "integer"}
	return []obj{
		tool("greet", "Greets someone at once", obj{"type": "object", "properties": obj{"name": str}, "required": []string{"name"}}),
		taskTool("slow_compute", "Computes for a number of seconds, as a task for clients that can follow one", "may",
			obj{"type": "object", "properties": obj{"seconds": integer, "label": str}, "required": []string{"seconds"}}),
		taskTool("failing_job", "A task that ends with a tool error", "must", nil),
		taskTool("protocol_error_job", "A task that fails with a protocol error", "must", nil),
		taskTool("confirm_delete", "Asks for a confirmation, then deletes", "must",
			obj{"type": "object", "properties": obj{"filename": str}, "required": []string{"filename"}}),
		taskTool("multi_input", "Asks two questions at once", "must", nil),
		taskTool("test_tool_with_task", "Asks the user's name before the task, then greets them from it", "must", nil,
			form("user_name", "What is your name?", obj{"name": str}, "name")),
	}
}

// backendTask is a task the backend accepted.
type backendTask struct {
	offer   webhook.Task
	seq     int64
	answers map[string]json.RawMessage
	news    chan struct{} // answers came, or a cancel
	cancel  chan struct{}
	once    sync.Once
}

// taskFixture reports whether name is a task fixture.
func taskFixture(name string) bool {
	switch name {
	case "slow_compute", "failing_job", "protocol_error_job", "confirm_delete", "multi_input", "test_tool_with_task":
		return true
	}
	return false
}

// takeTask answers a delivery of a task fixture: at once when it is
// quick or was not offered as a task, else accepted, with the work run
// apart.
func (b *Backend) takeTask(req *webhook.Request) *webhook.Response {
	var args struct {
		Seconds  int    `json:"seconds"`
		Label    string `json:"label"`
		Filename string `json:"filename"`
	}
	_ = json.Unmarshal(req.Arguments, &args)
	if req.Task == nil || (req.Name == "slow_compute" && args.Seconds == 0) {
		time.Sleep(time.Duration(args.Seconds) * time.Second)
		return toolText(fmt.Sprintf("Computed %s in %ds", args.Label, args.Seconds))
	}
	t := &backendTask{offer: *req.Task, answers: map[string]json.RawMessage{}, news: make(chan struct{}, 1), cancel: make(chan struct{})}
	b.mu.Lock()
	if b.tasks == nil {
		b.tasks = map[string]*backendTask{}
	}
	b.tasks[t.offer.ID] = t
	b.mu.Unlock()
	name := answerField(req, "user_name", "name")
	go b.work(t, req.Name, args.Seconds, args.Label, args.Filename, name)
	return &webhook.Response{Type: webhook.TypeAccepted, Message: "Accepted " + req.Name}
}

// taskNews takes a delivery about a task: the client's answers, or a
// cancel.
func (b *Backend) taskNews(req *webhook.Request) {
	b.mu.Lock()
	t := b.tasks[req.Task.ID]
	if t != nil {
		for k, v := range req.InputResponses {
			t.answers[k] = v
		}
	}
	b.mu.Unlock()
	if t == nil {
		return
	}
	if req.Kind == webhook.KindTaskCancel {
		t.once.Do(func() { close(t.cancel) })
		return
	}
	select {
	case t.news <- struct{}{}:
	default:
	}
}

// report sends the task's next report.
func (b *Backend) report(t *backendTask, r webhook.Report) {
	b.mu.Lock()
	t.seq++
	r.Seq = t.seq
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = webhook.SendReport(ctx, nil, &t.offer, &r)
}

// answered waits for answers to keys (or a cancel): their content, or
// nil when the task was cancelled.
func (b *Backend) answered(t *backendTask, keys ...string) map[string]map[string]any {
	for {
		b.mu.Lock()
		out := map[string]map[string]any{}
		for _, k := range keys {
			if raw, ok := t.answers[k]; ok {
				var a struct {
					Action  string         `json:"action"`
					Content map[string]any `json:"content"`
				}
				_ = json.Unmarshal(raw, &a)
				if a.Content == nil {
					a.Content = map[string]any{}
				}
				a.Content["action"] = a.Action
				out[k] = a.Content
			}
		}
		b.mu.Unlock()
		if len(out) == len(keys) {
			return out
		}
		select {
		case <-t.news:
		case <-t.cancel:
			return nil
		case <-time.After(time.Minute):
			return nil
		}
	}
}

// work runs a task fixture and reports as it goes.
func (b *Backend) work(t *backendTask, tool string, seconds int, label, filename, user string) {
	defer func() {
		b.mu.Lock()
		delete(b.tasks, t.offer.ID)
		b.mu.Unlock()
	}()
	result := func(isError bool, s string) json.RawMessage {
		raw, _ := json.Marshal(obj{"content": []obj{text(s)}, "isError": isError})
		return raw
	}
	elicit := func(message string, props obj) json.RawMessage {
		raw, _ := json.Marshal(obj{"method": "elicitation/create", "params": obj{"mode": "form", "message": message,
			"requestedSchema": obj{"type": "object", "properties": props, "required": keys(props)}}})
		return raw
	}
	switch tool {
	case "slow_compute":
		b.report(t, webhook.Report{Type: webhook.ReportProgress, Message: "Computing " + label})
		select {
		case <-time.After(time.Duration(seconds) * time.Second):
			b.report(t, webhook.Report{Type: webhook.ReportComplete, Result: result(false, fmt.Sprintf("Computed %s in %ds", label, seconds))})
		case <-t.cancel:
		}
	case "failing_job":
		time.Sleep(500 * time.Millisecond)
		b.report(t, webhook.Report{Type: webhook.ReportComplete, Result: result(true, "The job failed, as it always does")})
	case "protocol_error_job":
		time.Sleep(500 * time.Millisecond)
		b.report(t, webhook.Report{Type: webhook.ReportError, Error: &webhook.ReportedError{Code: -32603, Message: "The job hit an internal error"}})
	case "confirm_delete":
		b.report(t, webhook.Report{Type: webhook.ReportInputRequired, Message: "Waiting for a confirmation",
			InputRequests: map[string]json.RawMessage{"confirm": elicit("Delete "+filename+"?", obj{"confirm": obj{"type": "boolean"}})}})
		a := b.answered(t, "confirm")
		if a == nil {
			return
		}
		if a["confirm"]["action"] == "accept" && a["confirm"]["confirm"] == true {
			b.report(t, webhook.Report{Type: webhook.ReportComplete, Result: result(false, "Deleted "+filename)})
		} else {
			b.report(t, webhook.Report{Type: webhook.ReportComplete, Result: result(false, "Kept "+filename)})
		}
	case "multi_input":
		b.report(t, webhook.Report{Type: webhook.ReportInputRequired, InputRequests: map[string]json.RawMessage{
			"name":    elicit("What is your name?", obj{"name": obj{"type": "string"}}),
			"confirm": elicit("Go ahead?", obj{"confirm": obj{"type": "boolean"}}),
		}})
		a := b.answered(t, "name", "confirm")
		if a == nil {
			return
		}
		b.report(t, webhook.Report{Type: webhook.ReportComplete, Result: result(false, fmt.Sprintf("Hello, %v; confirmed: %v", a["name"]["name"], a["confirm"]["confirm"]))})
	case "test_tool_with_task":
		time.Sleep(200 * time.Millisecond)
		b.report(t, webhook.Report{Type: webhook.ReportComplete, Result: result(false, "Hello, "+user+"! (computed in task)")})
	}
}

func keys(m obj) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
