package tasksinterop

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsmcp/platform/testkit/nodeclient"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
	"github.com/opsmcp/platform/webhook"
)

// backend accepts every task offered: confirm asks one question and
// completes with the answer; report reports progress, then completes;
// slow works until it is cancelled.
type backend struct {
	*platformtest.Backend
	t         *testing.T
	mu        sync.Mutex
	offers    map[string]*webhook.Task
	answers   map[string]json.RawMessage
	cancelled []string
}

func newBackend(t *testing.T) *backend {
	b := &backend{t: t, offers: map[string]*webhook.Task{}, answers: map[string]json.RawMessage{}}
	b.Backend = platformtest.NewBackend(t, func(w http.ResponseWriter, _ *http.Request, req *webhook.Request) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch {
		case req.Kind == webhook.KindTaskCancel:
			b.cancelled = append(b.cancelled, req.Task.ID)
		case req.Kind == webhook.KindTaskInput:
			b.answers[req.Task.ID] = req.InputResponses["ok"]
			go b.report(req.Task.ID, 2, webhook.Report{Type: webhook.ReportComplete,
				Result: json.RawMessage(fmt.Sprintf(`{"content":[{"type":"text","text":"confirmed with %s"}]}`, strings.ReplaceAll(string(req.InputResponses["ok"]), `"`, `'`)))})
		case req.Task != nil:
			b.offers[req.Task.ID] = req.Task
			if req.Name == "report" {
				go func(id string) {
					time.Sleep(100 * time.Millisecond)
					b.report(id, 1, webhook.Report{Type: webhook.ReportProgress, Message: "counting orders"})
					time.Sleep(100 * time.Millisecond)
					b.report(id, 2, webhook.Report{Type: webhook.ReportComplete, Result: json.RawMessage(`{"content":[{"type":"text","text":"1,204 orders"}]}`)})
				}(req.Task.ID)
			}
			if req.Name == "confirm" {
				go func(id string) {
					time.Sleep(100 * time.Millisecond) // after the creation is answered
					b.report(id, 1, webhook.Report{Type: webhook.ReportInputRequired, Message: "asking", InputRequests: map[string]json.RawMessage{
						"ok": json.RawMessage(`{"method":"elicitation/create","params":{"mode":"form","message":"Go ahead with the export?","requestedSchema":{"type":"object","properties":{"confirm":{"type":"boolean"}},"required":["confirm"]}}}`)}})
				}(req.Task.ID)
			}
			fmt.Fprint(w, `{"type":"accepted","message":"queued"}`)
			return
		default:
			http.Error(w, "this backend only takes tasks", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return b
}

func (b *backend) report(id string, seq int64, r webhook.Report) {
	b.mu.Lock()
	offer := b.offers[id]
	b.mu.Unlock()
	r.Seq = seq
	if _, err := webhook.SendReport(context.Background(), nil, offer, &r); err != nil {
		b.t.Errorf("report %d of %s: %v", seq, id, err)
	}
}

// platformWithTasks starts a platform whose tenant acme has the tools
// confirm (must run as a task, and asks a question), slow (may) and
// report (must, and reports its way to the end), answered by a backend.
func platformWithTasks(t *testing.T) (*platformtest.Platform, *backend) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.Tenant(t, "acme")
	b := newBackend(t)
	for _, tool := range []map[string]any{
		{"name": "confirm", "description": "Asks before it exports", "inputSchema": map[string]any{"type": "object", "properties": map[string]any{"what": map[string]any{"type": "string"}}},
			"handler": map[string]any{"url": b.URL}, "task": map[string]any{"mode": "must", "pollIntervalMs": 100}},
		{"name": "slow", "description": "Works until cancelled", "inputSchema": map[string]any{"type": "object"},
			"handler": map[string]any{"url": b.URL}, "task": map[string]any{"mode": "may", "pollIntervalMs": 100}},
		{"name": "report", "description": "Counts the orders, as a task, and reports", "inputSchema": map[string]any{"type": "object"},
			"handler": map[string]any{"url": b.URL}, "task": map[string]any{"mode": "must", "pollIntervalMs": 100}},
	} {
		b.AddSecret(p.Tool(t, "acme", tool))
	}
	return p, b
}

// TestTheTypeScriptTasksClientCompletesATaskThatAsksAndCancelsAnother:
// the official ext-tasks client, on the SDK v2 client, gets a task for a
// tool that must run as one, answers the question the task asks through
// its input handler (delivered as a tasks/update), and settles the
// task's result; it cancels a second task, whose backend is told.
func TestTheTypeScriptTasksClientCompletesATaskThatAsksAndCancelsAnother(t *testing.T) {
	p, b := platformWithTasks(t)
	out := nodeclient.Script(t, nodeclient.Packages(t, "OPSMCP_TS_SDK_V2", "v2"), "ts/tasks.mjs", p.URL+"/t/acme/mcp")
	var got struct {
		Asked []struct {
			Message, Delivery string
			TaskID            *string
		}
		ConfirmKind, ConfirmTaskID, ConfirmStatus, ConfirmText string
		SlowKind, SlowTaskID, SlowStatus                       string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the client printed %s: %v", out, err)
	}
	if got.ConfirmKind != "task" || !strings.HasPrefix(got.ConfirmTaskID, "tk_") || got.ConfirmStatus != "completed" ||
		got.ConfirmText != `confirmed with {'action':'accept','content':{'confirm':true}}` {
		t.Fatalf("the confirm task: %+v", got)
	}
	if len(got.Asked) != 1 || got.Asked[0].Message != "Go ahead with the export?" || got.Asked[0].Delivery != "task-update" {
		t.Fatalf("what the client was asked: %+v", got.Asked)
	}
	if got.SlowKind != "task" || got.SlowStatus != "cancelled" {
		t.Fatalf("the cancelled task: %+v", got)
	}
	testwait.Until(t, "the cancel reaches the backend", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.cancelled) == 1 && b.cancelled[0] == got.SlowTaskID
	})
}

// TestTheTypeScriptSDKv1ClientRunsTasksOnALegacySession: the official SDK
// v1 client's experimental tasks, on a 2025-11-25 session, see the tasks
// capability and each tool's execution.taskSupport, stream a call of a
// tool that must run as a task to its result (answering the question the
// task asks, which comes on the tasks/result stream tagged with the
// task), start another as a task and cancel it (its backend is told),
// and list both.
func TestTheTypeScriptSDKv1ClientRunsTasksOnALegacySession(t *testing.T) {
	p, b := platformWithTasks(t)
	out := nodeclient.Script(t, nodeclient.Packages(t, "OPSMCP_TS_SDK", "v1"), "ts/legacy.mjs", p.URL+"/t/acme/mcp")
	var got struct {
		ProtocolVersion string
		ServerTasks     map[string]any
		TaskSupport     map[string]*string
		Asked           []struct {
			Message string
			TaskID  *string
		}
		Confirm []struct{ Type, TaskID, Status, Text, Error string }
		Slow    struct {
			Created          struct{ TaskID, Status string }
			Cancelled, After string
		}
		Listed []struct{ TaskID, Status string }
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the client printed %s: %v", out, err)
	}
	if got.ProtocolVersion != "2025-11-25" || got.ServerTasks["requests"] == nil || got.ServerTasks["cancel"] == nil || got.ServerTasks["list"] == nil {
		t.Fatalf("the session: %s", out)
	}
	if s := got.TaskSupport; s["confirm"] == nil || *s["confirm"] != "required" || s["slow"] == nil || *s["slow"] != "optional" {
		t.Fatalf("taskSupport: %s", out)
	}
	c := got.Confirm
	if len(c) < 3 || c[0].Type != "taskCreated" || !strings.HasPrefix(c[0].TaskID, "tk_") || c[0].Status != "working" {
		t.Fatalf("the confirm task: %s", out)
	}
	last := c[len(c)-1]
	if last.Type != "result" || last.Text != `confirmed with {'action':'accept','content':{'confirm':true}}` || last.TaskID != c[0].TaskID {
		t.Fatalf("the confirm task's end: %s", out)
	}
	if len(got.Asked) != 1 || got.Asked[0].Message != "Go ahead with the export?" || got.Asked[0].TaskID == nil || *got.Asked[0].TaskID != c[0].TaskID {
		t.Fatalf("what the client was asked: %s", out)
	}
	if got.Slow.Created.Status != "working" || got.Slow.Cancelled != "cancelled" || got.Slow.After != "cancelled" {
		t.Fatalf("the cancelled task: %s", out)
	}
	if len(got.Listed) != 2 || got.Listed[0].TaskID != got.Slow.Created.TaskID || got.Listed[1].TaskID != c[0].TaskID || got.Listed[1].Status != "completed" {
		t.Fatalf("tasks/list: %s", out)
	}
	testwait.Until(t, "the cancel reaches the backend", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.cancelled) == 1 && b.cancelled[0] == got.Slow.Created.TaskID
	})
}

// TestTheInspectorCLICompletesATaskInBothEras: the MCP Inspector's CLI
// (2.12.0) calls a tool that must run as a task and prints the task's
// result: in its legacy era (2025-11-25, its default for a URL) it sees
// execution.taskSupport required and runs the call as a task; in its
// modern era (2026-07-28) it declares the Tasks extension and follows the
// task the platform makes of the call.
func TestTheInspectorCLICompletesATaskInBothEras(t *testing.T) {
	for _, era := range []string{"legacy", "modern"} {
		t.Run(era, func(t *testing.T) { inspectorTask(t, era) })
	}
}

func inspectorTask(t *testing.T, era string) {
	p, _ := platformWithTasks(t)
	dir := nodeclient.Packages(t, "OPSMCP_INSPECTOR", "inspector")
	cli := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	// The Inspector keeps a catalog and client settings in the home
	// folder: a fresh one per run.
	out := nodeclient.Run(t, dir, []string{"HOME=" + t.TempDir()}, cli, "--cli", p.URL+"/t/acme/mcp", "--protocol-era", era,
		"--method", "tools/call", "--tool-name", "report", "--format", "json")
	if !strings.Contains(string(out), "1,204 orders") || strings.Contains(string(out), `"isError":true`) {
		t.Fatalf("the Inspector's result: %s", out)
	}
	want := map[string]string{"legacy": "completed 2025-11-25", "modern": "completed 2026-07-28"}[era]
	tasks := platformtest.SQL(t, p.DatabaseURL).Strings(t, "SELECT status || ' ' || era FROM tasks")
	if len(tasks) != 1 || tasks[0] != want {
		t.Fatalf("the platform's tasks: %v", tasks)
	}
}
