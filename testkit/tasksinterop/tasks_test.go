package tasksinterop

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
	"github.com/opsmcp/platform/webhook"
)

// tsSDKv2 returns the folder holding the SDK v2 client's and ext-tasks'
// node_modules: $OPSMCP_TS_SDK_V2, else what scripts/ts-sdk v2 installs.
func tsSDKv2(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("OPSMCP_TS_SDK_V2"); dir != "" {
		return dir
	}
	out, err := exec.Command("../../scripts/ts-sdk", "v2").Output()
	if err != nil {
		t.Fatalf("tasksinterop: no TypeScript SDK v2 (set OPSMCP_TS_SDK_V2 or run scripts/ts-sdk v2): %v", err)
	}
	return strings.TrimSpace(string(out))
}

// backend accepts every task offered: confirm asks one question and
// completes with the answer; slow works until it is cancelled.
type backend struct {
	*httptest.Server
	t         *testing.T
	mu        sync.Mutex
	secrets   []string
	offers    map[string]*webhook.Task
	answers   map[string]json.RawMessage
	cancelled []string
}

func newBackend(t *testing.T) *backend {
	b := &backend{t: t, offers: map[string]*webhook.Task{}, answers: map[string]json.RawMessage{}}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !b.verified(r.Header.Get(webhook.SignatureHeader), body) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var req webhook.Request
		_ = json.Unmarshal(body, &req)
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
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *backend) verified(header string, body []byte) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.secrets {
		if webhook.Verify(s, header, body, time.Now(), webhook.DefaultTolerance) == nil {
			return true
		}
	}
	return false
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

// TestTheTypeScriptTasksClientCompletesATaskThatAsksAndCancelsAnother:
// the official ext-tasks client, on the SDK v2 client, gets a task for a
// tool that must run as one, answers the question the task asks through
// its input handler (delivered as a tasks/update), and settles the
// task's result; it cancels a second task, whose backend is told.
func TestTheTypeScriptTasksClientCompletesATaskThatAsksAndCancelsAnother(t *testing.T) {
	sdk := tsSDKv2(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("tasksinterop: node (20 or newer) is needed to run the TypeScript client")
	}
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(sdk, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("ts/tasks.mjs")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tasks.mjs"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.Tenant(t, "acme")
	b := newBackend(t)
	for _, tool := range []map[string]any{
		{"name": "confirm", "description": "Asks before it exports", "inputSchema": map[string]any{"type": "object", "properties": map[string]any{"what": map[string]any{"type": "string"}}},
			"handler": map[string]any{"url": b.URL}, "task": map[string]any{"mode": "must", "pollIntervalMs": 100}},
		{"name": "slow", "description": "Works until cancelled", "inputSchema": map[string]any{"type": "object"},
			"handler": map[string]any{"url": b.URL}, "task": map[string]any{"mode": "may", "pollIntervalMs": 100}},
	} {
		secret := p.Tool(t, "acme", tool)
		b.mu.Lock()
		b.secrets = append(b.secrets, secret)
		b.mu.Unlock()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "tasks.mjs"), p.URL+"/t/acme/mcp")
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the client failed: %v\n%s\n%s", err, out, stderr.String())
	}
	t.Logf("the client saw: %s", out)
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
