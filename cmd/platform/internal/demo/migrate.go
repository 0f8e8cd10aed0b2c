package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/opsmcp/platform/webhook"
)

// migrate accepts the call as a task and runs the migration apart: ten
// steps of about two seconds, the fifth a question (confirm the
// cut-over), each reported to the platform as it goes.
func (b *Backend) migrate(req *webhook.Request) *webhook.Response {
	if req.Task == nil {
		// The tool's mode is must: the platform never calls it otherwise.
		return toolError("migrate runs only as a task")
	}
	var args struct{ Service, To string }
	_ = json.Unmarshal(req.Arguments, &args)
	if args.To == "" {
		args.To = "v2"
	}
	m := b.migrations.add(req.Task)
	go b.runMigration(m, args.Service, args.To)
	return &webhook.Response{Type: webhook.TypeAccepted, Message: fmt.Sprintf("Migration of %s to %s queued", args.Service, args.To)}
}

// migrationStep is how long each of the migration's steps takes.
var migrationStep = 2 * time.Second

// runMigration is one migration's work, reported as it goes; a cancel
// stops it between steps.
func (b *Backend) runMigration(m *migration, service, to string) {
	defer b.migrations.remove(m.task.ID)
	report := func(r webhook.Report) bool {
		m.seq++
		r.Seq = m.seq
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := webhook.SendReport(ctx, b.client, &m.task, &r); err != nil {
			b.log.Warn("demo backend: a migration report was refused", "task", m.task.ID, "err", err)
			return false
		}
		return true
	}
	const steps = 10
	for step := 1; step <= steps; step++ {
		select {
		case <-time.After(migrationStep):
		case <-m.cancel:
			return
		}
		if step == steps/2 {
			schema, _ := json.Marshal(obj{"mode": "form", "message": fmt.Sprintf("The copy of %s is done. Cut over to %s now? Writes pause for about a second.", service, to),
				"requestedSchema": obj{"type": "object", "required": []string{"cutover"}, "properties": obj{
					"cutover": obj{"type": "boolean", "title": "Cut over now", "default": true}}}})
			if !report(webhook.Report{Type: webhook.ReportInputRequired, Message: "Waiting for the cut-over confirmation",
				InputRequests: map[string]json.RawMessage{"cutover": json.RawMessage(`{"method":"elicitation/create","params":` + string(schema) + `}`)}}) {
				return
			}
			answer, ok := m.wait("cutover")
			if !ok {
				return
			}
			var a struct {
				Action  string `json:"action"`
				Content struct {
					Cutover bool `json:"cutover"`
				} `json:"content"`
			}
			_ = json.Unmarshal(answer, &a)
			if a.Action != "accept" || !a.Content.Cutover {
				raw, _ := json.Marshal(obj{"content": []obj{{"type": "text", "text": fmt.Sprintf("The migration of %s to %s stopped before the cut-over: the copy is discarded, %s keeps its current schema.", service, to, service)}}})
				report(webhook.Report{Type: webhook.ReportComplete, Result: raw})
				return
			}
			continue
		}
		progress, total := float64(step), float64(steps)
		if !report(webhook.Report{Type: webhook.ReportProgress, Progress: &progress, Total: &total,
			Message: fmt.Sprintf("Step %d of %d: %s", step, steps, migrationStepNames[step-1])}) {
			return
		}
	}
	raw, _ := json.Marshal(obj{"content": []obj{{"type": "text", "text": fmt.Sprintf("Migrated %s to schema %s: 1,284,503 rows copied and verified, cut over with 0.8 s of paused writes.", service, to)}},
		"structuredContent": obj{"service": service, "schema": to, "rows": 1284503, "pausedMs": 800}})
	report(webhook.Report{Type: webhook.ReportComplete, Result: raw})
}

var migrationStepNames = []string{"snapshot taken", "schema created", "tables copied", "indexes built", "cut-over confirmed",
	"changes replayed", "rows verified", "reads switched", "writes switched", "old schema archived"}

// migration is one migration the backend runs.
type migration struct {
	task    webhook.Task
	seq     int64
	mu      sync.Mutex // guards answers
	answers map[string]json.RawMessage
	news    chan struct{}
	cancel  chan struct{}
	once    sync.Once
}

// wait waits for the answer to key; false when the task was cancelled
// (or nobody answered within the hour the task lives).
func (m *migration) wait(key string) (json.RawMessage, bool) {
	for {
		m.mu.Lock()
		a, ok := m.answers[key]
		m.mu.Unlock()
		if ok {
			return a, true
		}
		select {
		case <-m.news:
		case <-m.cancel:
			return nil, false
		case <-time.After(time.Hour):
			return nil, false
		}
	}
}

// migrations are the migrations running, by task id.
type migrations struct {
	lock sync.Mutex
	byID map[string]*migration
}

func (ms *migrations) add(t *webhook.Task) *migration {
	m := &migration{task: *t, answers: map[string]json.RawMessage{}, news: make(chan struct{}, 1), cancel: make(chan struct{})}
	ms.lock.Lock()
	defer ms.lock.Unlock()
	if ms.byID == nil {
		ms.byID = map[string]*migration{}
	}
	ms.byID[t.ID] = m
	return m
}

func (ms *migrations) remove(id string) {
	ms.lock.Lock()
	defer ms.lock.Unlock()
	delete(ms.byID, id)
}

// news takes the platform's delivery about a migration: the client's
// answers, or a cancel.
func (ms *migrations) news(req *webhook.Request) {
	ms.lock.Lock()
	m := ms.byID[req.Task.ID]
	ms.lock.Unlock()
	if m == nil {
		return
	}
	if req.Kind == webhook.KindTaskCancel {
		m.once.Do(func() { close(m.cancel) })
		return
	}
	m.mu.Lock()
	for k, v := range req.InputResponses {
		m.answers[k] = v
	}
	m.mu.Unlock()
	select {
	case m.news <- struct{}{}:
	default:
	}
}
