package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/opsmcp/platform/client"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/webhook"
)

// Tasks through the fleet. Beside the flows, a few workers run tasks of
// taskTool from start to end through HAProxy: the task is created on one
// replica, polled, answered and (one in four) cancelled through whichever
// replicas HAProxy picks, and its backend (the fleet's webhook) reports
// to the task's URL, HAProxy's, so its reports land on any replica too.
// Every task must end as driven (completed with its own result, or
// cancelled) through the replica kill and the PostgreSQL outage: a task
// the fleet forgot, or whose id stopped resolving, fails the run.

const (
	// taskTool runs as a task: it reports progress, asks one question,
	// and completes with the answer.
	taskTool = "fleet_task"
	// taskWorkers run tasks at once.
	taskWorkers = 2
	// taskTimeout bounds one task from its creation to its end.
	taskTimeout = 90 * time.Second
	// taskPoll is the tool's poll interval.
	taskPoll = 200 * time.Millisecond
)

// taskDefinition is taskTool for the admin API: it must run as a task,
// its backend reporting within 30 s while it works.
func taskDefinition(hookURL string) map[string]any {
	def := toolDefinition(taskTool, hookURL)
	def["task"] = map[string]any{"mode": "must", "pollIntervalMs": taskPoll.Milliseconds(), "deadlineMs": 30_000}
	return def
}

// taskRun is one task as the driver saw it.
type taskRun struct {
	Ref, Nonce string
	Cancel     bool // the driver cancels it after its creation
	ID         string
	CreatedOn  string
	Start, End time.Time
	// Requests counts its requests answered, by replica.
	Requests map[string]int
	// Retried counts requests sent again after a clean failure.
	Retried int
	Status  string
	Failure string
	last    string // the replica of the latest answer
}

// taskDriver runs tasks through the load balancer.
type taskDriver struct {
	c  *client.Client
	mu sync.Mutex
	rn []*taskRun
}

func newTaskDriver(url string) (*taskDriver, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	c, err := client.New(url, client.Options{
		HTTPClient: &http.Client{Transport: replicaTransport{base: tr}},
		ClientInfo: client.Implementation{Name: "opsmcp-fleet-tasks", Version: "1"},
		ElicitForm: func(context.Context, *client.ElicitRequest) (*client.ElicitResult, error) {
			return nil, fmt.Errorf("fleet: the task driver answers itself")
		},
	})
	if err != nil {
		return nil, err
	}
	return &taskDriver{c: c}, nil
}

// replicaTransport counts, for the task a request is about, the replica
// HAProxy names in its answer.
type replicaTransport struct{ base http.RoundTripper }

type taskRunKey struct{}

func (t replicaTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if run, ok := req.Context().Value(taskRunKey{}).(*taskRun); ok && err == nil && req.Header.Get("Mcp-Method") != "server/discover" {
		if r := resp.Header.Get(ReplicaHeader); r != "" {
			run.Requests[r]++
			run.last = r
		}
	}
	return resp, err
}

// worker runs tasks one after another until stop.
func (d *taskDriver) worker(ctx context.Context, w int, stop <-chan struct{}) {
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		run := &taskRun{Ref: "task-" + randomHex(6), Nonce: randomHex(8), Cancel: (w+n)%4 == 3, Requests: map[string]int{}, Start: time.Now()}
		d.run(context.WithoutCancel(ctx), run)
		run.End = time.Now()
		d.mu.Lock()
		d.rn = append(d.rn, run)
		d.mu.Unlock()
	}
}

// retry sends op again after each clean failure (a 502, 503, 504 or 429,
// a connection closed without an answer) until the task's time is up.
func (d *taskDriver) retry(ctx context.Context, run *taskRun, op func(ctx context.Context) error) error {
	wait := retryPause
	for {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := op(rctx)
		if err == nil {
			cancel()
			return nil
		}
		class, _ := classify(rctx, err)
		cancel()
		if (!actionable(class) && class != ClassTransport) || ctx.Err() != nil {
			return err
		}
		run.Retried++
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, retryMaxPause)
	}
}

// run drives one task to its end.
func (d *taskDriver) run(ctx context.Context, run *taskRun) {
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, taskRunKey{}, run), taskTimeout)
	defer cancel()
	var created *client.CallToolResult
	err := d.retry(ctx, run, func(ctx context.Context) (err error) {
		created, err = d.c.CallTool(ctx, taskTool, map[string]any{"ref": run.Ref}, client.NoWait())
		return err
	})
	if err != nil || created.Task == nil {
		run.Failure = fmt.Sprintf("creation: %v", err)
		return
	}
	run.ID, run.CreatedOn = created.Task.ID, run.last
	if run.Cancel {
		time.Sleep(300 * time.Millisecond)
		if err := d.retry(ctx, run, func(ctx context.Context) error { return d.c.CancelTask(ctx, run.ID) }); err != nil {
			run.Failure = fmt.Sprintf("cancel: %v", err)
			return
		}
	}
	answered := false
	for {
		var t *client.Task
		err := d.retry(ctx, run, func(ctx context.Context) (err error) {
			t, err = d.c.GetTask(ctx, run.ID)
			return err
		})
		if err != nil {
			run.Failure = fmt.Sprintf("tasks/get: %v", err)
			if client.IsCode(err, mcp.CodeInvalidParams) {
				run.Failure = "lost: its id no longer resolves"
			}
			return
		}
		run.Status = t.Status
		switch t.Status {
		case client.TaskCompleted:
			d.checkResult(run, t)
			return
		case client.TaskCancelled:
			if !run.Cancel {
				run.Failure = "cancelled, though the driver never cancelled it"
			}
			return
		case client.TaskFailed:
			run.Failure = fmt.Sprintf("failed: %d %s", t.Error.Code, t.Error.Message)
			return
		case client.TaskInputRequired:
			if !answered {
				answer, _ := json.Marshal(map[string]any{"action": "accept", "content": map[string]string{"nonce": run.Nonce}})
				if err := d.retry(ctx, run, func(ctx context.Context) error {
					return d.c.UpdateTask(ctx, run.ID, map[string]json.RawMessage{"confirm": answer})
				}); err != nil {
					run.Failure = fmt.Sprintf("tasks/update: %v", err)
					return
				}
				answered = true
				continue
			}
		}
		time.Sleep(taskPoll)
	}
}

// checkResult asserts a completed task's result is its own: its task,
// reference and answer.
func (d *taskDriver) checkResult(run *taskRun, t *client.Task) {
	if run.Cancel {
		// Cancellation is cooperative: a task that finished first stands.
		return
	}
	var res struct {
		Content []struct{ Text string } `json:"content"`
	}
	_ = json.Unmarshal(t.Result, &res)
	var r flowResult
	if len(res.Content) == 0 || json.Unmarshal([]byte(res.Content[0].Text), &r) != nil ||
		r.Tool != taskTool || r.Flow != run.ID || r.Ref != run.Ref || r.Nonce != run.Nonce {
		run.Failure = fmt.Sprintf("completed with a result not its own: %s", t.Result)
	}
}

// runs are the tasks driven so far.
func (d *taskDriver) runs() []*taskRun {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*taskRun(nil), d.rn...)
}

// checkTasks asserts every task ended as driven, that tasks crossed
// replicas (most had their requests answered by two replicas or more),
// and that the faults met tasks in flight: some were live across the
// SIGKILL, and some across the PostgreSQL outage.
func (fl *fleet) checkTasks(a *assertion, tl timeline) string {
	runs := fl.tasks.runs()
	completed, cancelled, crossed, retried := 0, 0, 0, 0
	acrossKill, acrossPG := 0, 0
	live := func(r *taskRun, from, to time.Time) bool { return r.Start.Before(to) && r.End.After(from) }
	for _, r := range runs {
		a.checked++
		retried += r.Retried
		for _, k := range tl.kills {
			if live(r, k.at, k.at) {
				acrossKill++
			}
		}
		for _, w := range tl.pgOutages {
			if live(r, w.from, w.to) {
				acrossPG++
			}
		}
		if len(r.Requests) > 1 {
			crossed++
		}
		switch {
		case r.Failure != "":
			a.fail("task %s (%s, created on %s): %s", r.ID, r.Ref, r.CreatedOn, r.Failure)
		case r.Status == "completed":
			completed++
		case r.Status == "cancelled":
			cancelled++
		}
	}
	a.checked++
	if len(runs) == 0 || crossed*2 < len(runs) {
		a.fail("only %d of %d tasks had requests answered by more than one replica", crossed, len(runs))
	}
	a.checked++
	if (len(tl.kills) > 0 && acrossKill == 0) || (len(tl.pgOutages) > 0 && acrossPG == 0) {
		a.fail("the faults met no task in flight: %d live across a SIGKILL, %d across a PostgreSQL outage", acrossKill, acrossPG)
	}
	b := fl.hook
	b.tmu.Lock()
	cancels := b.cancels
	b.tmu.Unlock()
	return fmt.Sprintf("tasks: %d (%d completed, %d cancelled, %d failed; %d on more than one replica; %d live across the SIGKILL, %d across the PostgreSQL outage; %d requests sent again after a clean failure; %d cancels delivered, %d reports sent again)",
		len(runs), completed, cancelled, len(runs)-completed-cancelled, crossed, acrossKill, acrossPG, retried, cancels, b.reportRetries.Load())
}

// The backend's side of taskTool: accept the offer, report progress,
// ask for the nonce, complete with it; a cancel stops it. Reports go to
// HAProxy and are sent again, with the same seq, until one is taken (a
// replica may be down, or PostgreSQL).

// backendTask is a task the fleet's backend accepted.
type backendTask struct {
	offer   webhook.Task
	ref     string
	answers chan json.RawMessage
	cancel  chan struct{}
	once    sync.Once
}

// takeTask answers a delivery of taskTool: accepted, the work run apart.
func (b *backend) takeTask(req *webhook.Request) (*webhook.Response, bool) {
	if req.Task == nil {
		return toolError("fleet_task was not offered as a task"), false
	}
	var args struct {
		Ref string `json:"ref"`
	}
	_ = json.Unmarshal(req.Arguments, &args)
	t := &backendTask{offer: *req.Task, ref: args.Ref, answers: make(chan json.RawMessage, 1), cancel: make(chan struct{})}
	b.tmu.Lock()
	b.tasks[t.offer.ID] = t
	b.tmu.Unlock()
	go b.work(t)
	return &webhook.Response{Type: webhook.TypeAccepted, Message: "queued " + args.Ref}, true
}

// taskNews takes a delivery about a task: the client's answer, a cancel.
func (b *backend) taskNews(req *webhook.Request) bool {
	b.tmu.Lock()
	t := b.tasks[req.Task.ID]
	if req.Kind == webhook.KindTaskCancel {
		b.cancels++
	}
	b.tmu.Unlock()
	if t == nil {
		return true // the task ended here already
	}
	if req.Kind == webhook.KindTaskCancel {
		t.once.Do(func() { close(t.cancel) })
		return true
	}
	select {
	case t.answers <- req.InputResponses["confirm"]:
	default:
	}
	return true
}

func (b *backend) work(t *backendTask) {
	defer func() {
		b.tmu.Lock()
		delete(b.tasks, t.offer.ID)
		b.tmu.Unlock()
	}()
	seq := int64(0)
	report := func(r webhook.Report) bool {
		seq++
		r.Seq = seq
		wait := retryPause
		deadline := time.Now().Add(taskTimeout)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := webhook.SendReport(ctx, b.reportClient, &t.offer, &r)
			cancel()
			if err == nil {
				return true
			}
			if refused, ok := errors.AsType[*webhook.ReportRefused](err); (ok && refused.Final()) || time.Now().After(deadline) {
				return false // the task is over (cancelled), or the fleet is
			}
			b.reportRetries.Add(1)
			select {
			case <-t.cancel:
				return false
			case <-time.After(wait):
			}
			wait = min(2*wait, retryMaxPause)
		}
	}
	select {
	case <-time.After(300 * time.Millisecond):
	case <-t.cancel:
		return
	}
	if !report(webhook.Report{Type: webhook.ReportProgress, Message: "working on " + t.ref}) {
		return
	}
	q, _ := json.Marshal(map[string]any{"method": "elicitation/create", "params": map[string]any{
		"message": "Confirm " + t.ref + "?",
		"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{
			"nonce": map[string]any{"type": "string"}}, "required": []string{"nonce"}},
	}})
	if !report(webhook.Report{Type: webhook.ReportInputRequired, InputRequests: map[string]json.RawMessage{"confirm": q}}) {
		return
	}
	var answer struct {
		Content struct {
			Nonce string `json:"nonce"`
		} `json:"content"`
	}
	select {
	case raw := <-t.answers:
		_ = json.Unmarshal(raw, &answer)
	case <-t.cancel:
		return
	case <-time.After(taskTimeout):
		return
	}
	res, _ := json.Marshal(flowResult{Tool: taskTool, Flow: t.offer.ID, Ref: t.ref, Nonce: answer.Content.Nonce})
	raw, _ := json.Marshal(map[string]any{"content": []map[string]any{{"type": "text", "text": string(res)}}})
	report(webhook.Report{Type: webhook.ReportComplete, Result: raw})
}
