package endpoint

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/catalogue"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/telemetry"
	"github.com/opsmcp/platform/webhook"
	"go.opentelemetry.io/otel/trace"
)

// Tasks (the Tasks extension, 2026-07-28): a tools/call whose backend
// needs longer than one delivery. The platform offers a call as a task
// when the tool's mode allows it and the request declares the extension;
// the backend accepts (or answers at once, as ever). The task is a row in
// the store before the client hears of it (tasks.go, here); from then on
// any replica answers tasks/get, tasks/update and tasks/cancel (the
// methods below), takes the backend's signed reports (taskreport.go),
// and fails tasks whose backend went silent or retries deliveries that
// failed (tasksweep.go). Nothing of an open task lives in memory.

// taskEngine creates tasks and changes them as their client, their
// backend or the platform acts.
type taskEngine struct {
	store     TaskStore
	webhooks  *webhookClient
	log       *slog.Logger
	publicURL string
	// emit hands a lifecycle event to the sinks (the record, telemetry).
	emit func(ctx context.Context, ev *TaskEvent)
	now  func() time.Time
	// catalogue is a tenant's snapshot (its tools' webhooks).
	catalogue func(ctx context.Context, slug string) (*snapshot, error)
	tel       *telemetry.Telemetry
	// changes follows the record across replicas, for streams that
	// follow tasks; nil without one.
	changes FlowChanges
	counts  taskCounts
}

// taskContext is ctx carrying the span of the round that created tk, so
// what is traced for the task (deliveries, lifecycle spans) joins its
// trace, whichever replica does it.
func (te *taskEngine) taskContext(ctx context.Context, tk *store.Task) context.Context {
	if sc, ok := telemetry.ParseTraceparent(tk.Traceparent, ""); ok {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

// newTaskID is an unguessable task id: 144 random bits.
func newTaskID() string {
	var b [18]byte
	_, _ = rand.Read(b[:])
	return "tk_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// principalHash binds a task to its creator, as sealed state is bound:
// the principal's binding (issuer, subject, client; client only for a
// machine). A public tenant's tasks bind nobody ("").
func principalHash(p *auth.Principal) string {
	b := p.Binding()
	if b == "" {
		return ""
	}
	h := sha256.Sum256([]byte("opsmcp/task-principal\x00" + b))
	return hex.EncodeToString(h[:])
}

// declaresTasks reports whether a request may become a task: at
// 2026-07-28, it declared the Tasks extension; on a legacy session, whose
// revision knows no extensions (a session's claim of one enables
// nothing), it asked for a task in params.task.
func (q *request) declaresTasks() bool {
	if mcp.IsLegacyVersion(q.version) {
		return q.v1Task
	}
	return q.caps.Supports(mcp.ExtensionTasks)
}

// errTasksCapability is -32021 for a request that needs the Tasks
// extension and did not declare it.
func errTasksCapability() *rpcError {
	return errMissingCapability(mrtr.ClientCapabilities{Extensions: map[string]json.RawMessage{mcp.ExtensionTasks: json.RawMessage("{}")}})
}

// errUnknownTask answers a task id that does not exist for the caller:
// never issued, swept, another tenant's or another principal's, alike.
func errUnknownTask() *rpcError {
	return errInvalidParams("Invalid params: no such task")
}

// errTasksUnavailable answers a task request the store could not serve
// (the database away): 503, for the client to send it again.
func errTasksUnavailable() *rpcError {
	return newError(http.StatusServiceUnavailable, mcp.CodeInternalError, "Tasks are unavailable right now; try again", nil)
}

// errTaskNotCancelled answers a cancel the store could not take.
func errTaskNotCancelled() *rpcError {
	return newError(http.StatusServiceUnavailable, mcp.CodeInternalError, "The task could not be cancelled; try again", nil)
}

// offersTask reports whether a tools/call of t is offered to its backend
// as a task.
func offersTask(c *call, t *target) bool {
	return t.task != nil && t.task.Mode != catalogue.TaskNever && t.task.Mode != "" && c.declaresTasks()
}

// create stores the task a round offers its backend, before the backend
// hears of it: a report may arrive before the delivery's answer. The
// task is deleted again if the backend answers at once.
func (te *taskEngine) create(ctx context.Context, c *call, t *target, fl *flow, rd *Round) (*store.Task, *rpcError) {
	now := te.now().UTC()
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	s := t.task
	ttl, deadline := s.TTL(), s.Deadline()
	if c.v1TTL > 0 {
		// A legacy client may ask for a shorter life, not a longer one
		// (nor one under minV1TTL); the deadline stays below it, so a
		// silent backend's task fails, and the backend is told, before
		// the task is swept.
		ttl = min(max(c.v1TTL, minV1TTL), ttl)
		deadline = min(deadline, ttl-catalogue.MinTaskDeadlineMs)
	}
	tk := &store.Task{
		ID: newTaskID(), TenantID: c.snap.tenantID, TenantSlug: c.snap.slug, FlowID: fl.id, Tool: t.name,
		Era: rd.Era, SessionID: rd.SessionID, PrincipalHash: principalHash(c.principal), Capabilities: string(c.rawCaps),
		ClientName: c.client.Name, ClientVersion: c.client.Version,
		Status: store.TaskWorking, Secret: base64.RawURLEncoding.EncodeToString(secret),
		Events: fl.number, TTLMs: ttl, PollIntervalMs: s.PollInterval(), DeadlineMs: deadline,
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Duration(ttl) * time.Millisecond), Version: 1,
	}
	if p := c.principal; p != nil {
		tk.PrincipalIssuer, tk.PrincipalSubject, tk.PrincipalClient = p.Issuer, p.Subject, p.Client
	}
	if sc := rd.SpanContext(); sc.IsValid() {
		tk.Traceparent = telemetry.Traceparent(sc)
	}
	due := now.Add(time.Duration(tk.DeadlineMs) * time.Millisecond)
	tk.DueAt = &due
	perTenant, perPrincipal := c.snap.settings.LiveTasks()
	if err := te.store.Create(ctx, tk, store.TaskLimits{PerTenant: perTenant, PerPrincipal: perPrincipal}); err != nil {
		if qe, ok := errors.AsType[*store.TaskQuotaError](err); ok {
			who := "the tenant holds as many as it may"
			if qe.Caller {
				who = "the caller holds as many as it may"
			}
			return nil, newError(http.StatusTooManyRequests, mcp.CodeInvalidRequest, "Too many live tasks: "+who+"; wait for one to finish or cancel one", nil)
		}
		te.log.ErrorContext(ctx, "task not created", "tenant", c.snap.slug, "tool", t.name, "err", err)
		return nil, newError(http.StatusServiceUnavailable, mcp.CodeInternalError, "The task could not be created; try again shortly", nil)
	}
	return tk, nil
}

// offer is the task offer a delivery carries.
func (te *taskEngine) offer(tk *store.Task) *webhook.Task {
	return &webhook.Task{
		ID: tk.ID, ReportURL: strings.TrimSuffix(te.publicURL, "/") + "/t/" + tk.TenantSlug + "/tasks/" + tk.ID,
		Secret: tk.Secret, DeadlineMs: tk.DeadlineMs, ExpiresAt: tk.ExpiresAt.Format(time.RFC3339Nano),
	}
}

// accepted answers the round whose backend accepted the task: the task as
// it stands now (a report may have moved it already), which is durable.
func (te *taskEngine) accepted(ctx context.Context, c *call, tk *store.Task, message string, rd *Round) answer {
	if message != "" {
		if cur, err := te.store.UpdateFrom(ctx, tk, func(t *store.Task) error {
			if t.LastSeq > 0 || t.StatusMessage != "" {
				return store.ErrUnchanged // a report spoke first
			}
			t.StatusMessage = message
			return nil
		}); err == nil {
			tk = cur
		}
	} else if cur, err := te.store.Get(ctx, tk.ID); err == nil {
		tk = cur
	}
	rd.TaskID = tk.ID
	if mcp.IsLegacyVersion(c.version) {
		return taskAnswer(map[string]any{"task": v1Task(tk)})
	}
	return taskAnswer(createTaskResult(tk, c.snap))
}

// dropped deletes a task whose backend answered at once (or failed): the
// client never hears of it.
func (te *taskEngine) dropped(ctx context.Context, tk *store.Task) {
	if err := te.store.Delete(context.WithoutCancel(ctx), tk.ID); err != nil {
		te.log.WarnContext(ctx, "an unused task was not deleted; it expires with its TTL", "err", err)
	}
}

// createTaskResult is the CreateTaskResult of a task: its base fields,
// flat, resultType "task".
func createTaskResult(tk *store.Task, snap *snapshot) map[string]any {
	m := taskFields(tk)
	m["resultType"] = mcp.ResultTypeTask
	m["_meta"] = snap.info
	return m
}

// taskFields are a task's base fields (the Task of the extension).
func taskFields(tk *store.Task) map[string]any {
	m := map[string]any{
		"taskId":         tk.ID,
		"status":         tk.Status,
		"createdAt":      tk.CreatedAt.UTC().Format(taskTime),
		"lastUpdatedAt":  tk.UpdatedAt.UTC().Format(taskTime),
		"ttlMs":          tk.TTLMs,
		"pollIntervalMs": tk.PollIntervalMs,
	}
	if tk.StatusMessage != "" {
		m["statusMessage"] = tk.StatusMessage
	}
	return m
}

// taskTime is how tasks' times are written: RFC 3339 in UTC, to the
// millisecond.
const taskTime = "2006-01-02T15:04:05.000Z07:00"

// detailedTask is a task as tasks/get (and notifications/tasks) show it:
// its base fields, and what its status carries: the outstanding input
// requests, the result, or the error.
func detailedTask(tk *store.Task) map[string]any {
	m := taskFields(tk)
	switch tk.Status {
	case store.TaskInputRequired:
		if tk.InputRequests != "" {
			m["inputRequests"] = json.RawMessage(tk.InputRequests)
		}
	case store.TaskCompleted:
		m["result"] = json.RawMessage(tk.Result)
	case store.TaskFailed:
		m["error"] = json.RawMessage(tk.Error)
	}
	return m
}

// visibleTask reads a task for the caller of c: ErrNotFound unless it is
// the caller's tenant's and was created by the caller, so another's task
// is answered as one that never existed.
func (te *taskEngine) visibleTask(ctx context.Context, c *call, id string) (*store.Task, error) {
	return te.visible(ctx, c.snap.tenantID, c.principal, id)
}

// visible reads a task for principal p of a tenant: ErrNotFound unless
// the task is the tenant's and p created it.
func (te *taskEngine) visible(ctx context.Context, tenantID string, p *auth.Principal, id string) (*store.Task, error) {
	tk, err := te.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if tk.TenantID != tenantID || tk.PrincipalHash != principalHash(p) || !time.Now().Before(tk.ExpiresAt) {
		return nil, store.ErrNotFound
	}
	return tk, nil
}

// taskRequest reads a tasks/* request's task: -32021 when the request
// did not declare the extension (before anything is looked up), -32602
// for a task that does not exist for the caller.
func (te *taskEngine) taskRequest(ctx context.Context, c *call) (*store.Task, answer, bool) {
	if !c.declaresTasks() {
		return nil, failed(errTasksCapability()), false
	}
	tk, err := te.visibleTask(ctx, c, c.taskID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, failed(errUnknownTask()), false
	}
	if err != nil {
		te.log.ErrorContext(ctx, "task read failed", "tenant", c.snap.slug, "err", err)
		return nil, failed(errTasksUnavailable()), false
	}
	return tk, answer{}, true
}

// get answers tasks/get: the task as it stands.
func (te *taskEngine) get(ctx context.Context, c *call) answer {
	tk, a, ok := te.taskRequest(ctx, c)
	if !ok {
		return a
	}
	m := detailedTask(tk)
	m["resultType"] = mcp.ResultTypeComplete
	return completed(m)
}

// ack is the empty acknowledgement of tasks/update and tasks/cancel.
var ack = map[string]any{"resultType": mcp.ResultTypeComplete}

// update answers tasks/update: answers to outstanding input requests are
// taken (others are ignored, as the extension asks), stored, and
// delivered to the backend; the task works again once none is
// outstanding. The acknowledgement comes once the answers are durable,
// so the next tasks/get shows them taken.
func (te *taskEngine) update(ctx context.Context, c *call, rd *Round) answer {
	tk, a, ok := te.taskRequest(ctx, c)
	if !ok {
		return a
	}
	responses, e := parseResponses(c.p.InputResponses)
	if e != nil {
		return failed(e)
	}
	cur, taken, err := te.take(ctx, tk, responses, c.snap.settings.RecordAnswers)
	if errors.Is(err, store.ErrNotFound) {
		return failed(errUnknownTask())
	}
	if err != nil {
		te.log.ErrorContext(ctx, "task update failed", "tenant", c.snap.slug, "err", err)
		return failed(newError(http.StatusServiceUnavailable, mcp.CodeInternalError, "The answers could not be taken; send them again", nil))
	}
	if len(taken) > 0 {
		rd.TaskID = cur.ID
	}
	return completed(ack)
}

// take stores the answers of responses to the task's (tk, read whole)
// outstanding input
// requests (others are ignored) and delivers them to the backend; the
// task works again once none is outstanding. It returns the keys taken.
func (te *taskEngine) take(ctx context.Context, tk *store.Task, responses map[string]json.RawMessage, recordAnswers bool) (*store.Task, []string, error) {
	var taken []string
	now := te.now().UTC()
	cur, err := te.store.UpdateFrom(ctx, tk, func(t *store.Task) error {
		taken = taken[:0]
		if t.Status != store.TaskInputRequired {
			return store.ErrUnchanged
		}
		var open map[string]json.RawMessage
		_ = json.Unmarshal([]byte(t.InputRequests), &open)
		var pending map[string]json.RawMessage
		_ = json.Unmarshal([]byte(t.PendingAnswers), &pending)
		for k, v := range responses {
			if _, asked := open[k]; !asked || len(v) == 0 || v[0] != '{' {
				continue
			}
			delete(open, k)
			if pending == nil {
				pending = map[string]json.RawMessage{}
			}
			pending[k] = v
			taken = append(taken, k)
		}
		if len(taken) == 0 {
			return store.ErrUnchanged
		}
		t.InputRequests = ""
		if len(open) > 0 {
			t.InputRequests = string(mustJSON(open))
		} else {
			t.Status = store.TaskWorking
		}
		t.PendingAnswers = string(mustJSON(pending))
		t.UpdatedAt, t.DueAt = now, &now
		t.Events++
		return nil
	})
	if err != nil || len(taken) == 0 {
		return cur, nil, err
	}
	slices.Sort(taken)
	ev := te.event(cur, TaskAnswered, "client")
	ev.Answered = taken
	if recordAnswers {
		ev.Answers = make(map[string]json.RawMessage, len(taken))
		for _, k := range taken {
			ev.Answers[k] = responses[k]
		}
	}
	te.emit(ctx, ev)
	te.deliver(ctx, cur)
	return cur, taken, nil
}

// cancel answers tasks/cancel: a live task is cancelled at once and the
// backend told; a finished one is left as it is. Either way the client
// gets the empty acknowledgement.
func (te *taskEngine) cancel(ctx context.Context, c *call, rd *Round) answer {
	tk, a, ok := te.taskRequest(ctx, c)
	if !ok {
		return a
	}
	if cur, changed, err := te.cancelTask(ctx, tk.ID, "client"); err != nil {
		te.log.ErrorContext(ctx, "task cancel failed", "tenant", c.snap.slug, "err", err)
		return failed(errTaskNotCancelled())
	} else if changed {
		rd.TaskID = cur.ID
	}
	return completed(ack)
}

// cancelTask cancels a live task on behalf of by ("client", or "admin:"
// and a name), tells the backend, and says whether it changed anything.
func (te *taskEngine) cancelTask(ctx context.Context, id, by string) (*store.Task, bool, error) {
	now := te.now().UTC()
	changed := false
	cur, err := te.store.Update(ctx, id, func(t *store.Task) error {
		changed = false
		if !store.TaskLive(t.Status) {
			return store.ErrUnchanged
		}
		t.Status, t.CancelledBy, t.CancelPending = store.TaskCancelled, by, true
		t.InputRequests, t.UpdatedAt, t.DueAt = "", now, &now
		t.Events++
		changed = true
		return nil
	})
	if err != nil || !changed {
		return cur, false, err
	}
	ev := te.event(cur, TaskCancelledEvent, by)
	te.emit(ctx, ev)
	te.deliver(ctx, cur)
	return cur, true, nil
}

// event is a lifecycle event of tk, as tk now stands.
func (te *taskEngine) event(tk *store.Task, kind, by string) *TaskEvent {
	return &TaskEvent{
		At: tk.UpdatedAt, Kind: kind, By: by, N: tk.Events,
		TaskID: tk.ID, FlowID: tk.FlowID, TenantID: tk.TenantID, Tenant: tk.TenantSlug, Tool: tk.Tool, Era: tk.Era,
		Status: tk.Status, Message: tk.StatusMessage, Created: tk.CreatedAt, Traceparent: tk.Traceparent,
		Principal: TaskPrincipal{Issuer: tk.PrincipalIssuer, Subject: tk.PrincipalSubject, Client: tk.PrincipalClient},
		Client:    ClientInfo{Name: tk.ClientName, Version: tk.ClientVersion},
	}
}

// deliver sends the backend what it has not been told yet (the answers
// taken, a cancel), now; what fails is retried by the sweep, from due_at.
func (te *taskEngine) deliver(ctx context.Context, tk *store.Task) {
	if tk.PendingAnswers == "" && !tk.CancelPending {
		return
	}
	if claimed, ok := te.claim(context.WithoutCancel(ctx), tk, 0); ok {
		te.send(context.WithoutCancel(ctx), claimed, 0)
	}
}

// taskCounts keeps the fleet's task counts for the gauges, read at most
// every taskCountsTTL.
type taskCounts struct {
	mu     sync.Mutex
	at     time.Time
	counts map[string]*store.TaskCounts
}

const taskCountsTTL = 5 * time.Second

// ReportTasks reports, per tenant, its tasks by status and the age of
// its oldest working task (the opsmcp.tasks gauges), from counts at most
// a few seconds old; a failed count reports the last one.
func (e *Handler) ReportTasks(ctx context.Context, count func(tenant, status string, n int64), oldest func(tenant string, seconds float64)) {
	c := &e.tasks.counts
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) > taskCountsTTL {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		counts, err := e.tasks.store.Counts(qctx)
		cancel()
		if err == nil {
			c.counts, c.at = counts, time.Now()
		}
	}
	for slug, tc := range c.counts {
		for status, n := range tc.ByStatus {
			count(slug, status, n)
		}
		if tc.OldestWorking != nil {
			oldest(slug, time.Since(*tc.OldestWorking).Seconds())
		}
	}
}
