package endpoint

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/webhook"
)

// What a task is due for, swept from the store's due-time index by every
// replica (each due task is claimed by one, with a check-and-set write):
// a delivery to retry (the client's answers, a cancel), or a backend
// silent past its deadline. A task costs a replica nothing between its
// due times: no goroutine, no timer, no memory.

// Sweep bounds.
const (
	// taskSweepEvery is how often a replica looks for due tasks; a
	// deadline is kept to within it.
	taskSweepEvery = time.Second
	// taskSweepBatch is the most due tasks one sweep takes.
	taskSweepBatch = 100
	// taskExpireEvery is how often expired tasks are deleted.
	taskExpireEvery = time.Minute
	// taskDeliveryAttempts is how often a delivery is tried before the
	// platform gives up: the answers' task fails, a cancel is dropped.
	taskDeliveryAttempts = 8
	// taskDeliveryTimeout bounds one delivery of answers or a cancel.
	taskDeliveryTimeout = 10 * time.Second
)

// taskRetryAfter is the wait after the attempt'th failed delivery (0:
// the first try, still running): 2 s doubling to a minute.
func taskRetryAfter(attempt int) time.Duration {
	d := 2 * time.Second << min(attempt, 5)
	return min(d, time.Minute)
}

// claim takes tk's due work for this replica, moving its due time to the
// next retry, if tk is still the version read: ok is false when another
// replica (or a report) changed it first.
func (te *taskEngine) claim(ctx context.Context, tk *store.Task, attempt int) (*store.Task, bool) {
	retry := te.now().UTC().Add(taskRetryAfter(attempt))
	won := false
	cur, err := te.store.UpdateFrom(ctx, tk, func(t *store.Task) error {
		won = false
		if t.Version != tk.Version {
			return store.ErrUnchanged
		}
		t.DueAt, t.Attempts = &retry, attempt+1
		won = true
		return nil
	})
	if err != nil || !won {
		return nil, false
	}
	return cur, true
}

// send delivers tk's pending answers, or its cancel, to the backend (tk
// claimed for the attempt'th time). Success clears what was sent; a
// failure leaves it for the next sweep, until the last attempt: then
// answers that cannot reach the backend fail the task, and a cancel is
// given up.
func (te *taskEngine) send(ctx context.Context, tk *store.Task, attempt int) {
	kind := webhook.KindTaskInput
	if tk.CancelPending {
		kind = webhook.KindTaskCancel
	}
	req := &webhook.Request{Version: webhook.Version, Kind: kind, Name: tk.Tool, Task: &webhook.Task{ID: tk.ID},
		Flow: webhook.Flow{ID: tk.FlowID, Round: tk.Events}}
	if kind == webhook.KindTaskCancel {
		req.Task.CancelledBy = tk.CancelledBy
	} else {
		_ = json.Unmarshal([]byte(tk.PendingAnswers), &req.InputResponses)
	}
	if tk.PrincipalIssuer != "" || tk.PrincipalSubject != "" || tk.PrincipalClient != "" {
		req.Principal = &webhook.Principal{Issuer: tk.PrincipalIssuer, Subject: tk.PrincipalSubject, Client: tk.PrincipalClient}
	}
	ctx = te.taskContext(ctx, tk)
	start := te.now()
	status, we := 0, (*WebhookError)(nil)
	if h, ok := te.handler(ctx, tk); ok {
		status, we = te.webhooks.notify(ctx, h.url, h.secret, taskDeliveryTimeout, req)
	} else {
		we = &WebhookError{Class: "contract", Detail: "the task's tool is no longer in the tenant's catalogue"}
	}
	call := &WebhookCall{Kind: kind, Status: status, Duration: te.now().Sub(start), Outcome: "delivered"}
	if we != nil {
		call.Outcome, call.Failed = we.Class, true
		te.log.WarnContext(ctx, "task delivery failed", "tenant", tk.TenantSlug, "tool", tk.Tool, "kind", kind,
			"class", we.Class, "detail", we.Detail, "attempt", attempt+1)
	}
	now := te.now().UTC()
	var kindOut string
	cur, err := te.store.UpdateFrom(ctx, tk, func(t *store.Task) error {
		kindOut = ""
		if t.Version != tk.Version {
			return store.ErrUnchanged // changed meanwhile: the next sweep looks again
		}
		switch {
		case we == nil && kind == webhook.KindTaskCancel:
			t.CancelPending = false
		case we == nil:
			t.PendingAnswers = ""
		case attempt+1 < taskDeliveryAttempts:
			return nil // claimed already: due again at the retry time
		case kind == webhook.KindTaskCancel:
			t.CancelPending = false
			kindOut = TaskDelivered
		default:
			t.PendingAnswers = ""
			failTask(t, now, "delivery", fmt.Sprintf("The client's answers could not be delivered to the tool's backend (%s: %s).", we.Class, we.Detail))
			kindOut = TaskFailedEvent
		}
		t.Attempts = 0
		t.DueAt = nil
		if t.Status == store.TaskWorking && t.PendingAnswers == "" {
			due := now.Add(time.Duration(t.DeadlineMs) * time.Millisecond)
			t.DueAt = &due
		}
		if kindOut == "" && we == nil && attempt > 0 {
			kindOut = TaskDelivered
		}
		if kindOut != "" {
			t.Events++
		}
		return nil
	})
	if err != nil {
		te.log.ErrorContext(ctx, "task delivery not recorded", "err", err)
		return
	}
	if kindOut != "" {
		ev := te.event(cur, kindOut, "platform")
		ev.Delivery = call
		if kindOut == TaskFailedEvent {
			ev.Cause, ev.ErrorCode = "delivery", mcp.CodeInternalError
		}
		te.emit(ctx, ev)
	}
}

// handlerRef is a task tool's webhook as the catalogue has it now.
type handlerRef struct{ url, secret string }

// handler finds the webhook of tk's tool in its tenant's catalogue.
func (te *taskEngine) handler(ctx context.Context, tk *store.Task) (handlerRef, bool) {
	snap, err := te.catalogue(ctx, tk.TenantSlug)
	if err != nil || snap == nil || snap.tenantID != tk.TenantID {
		return handlerRef{}, false
	}
	e, ok := snap.tools[tk.Tool]
	if !ok || e.def.Handler == nil {
		return handlerRef{}, false
	}
	return handlerRef{url: e.def.Handler.URL, secret: e.secret}, true
}

// failTask ends t failed with an internal error the client reads, cause
// saying why (for the record and the log; never a secret).
func failTask(t *store.Task, now time.Time, cause, message string) {
	t.Status, t.StatusMessage = store.TaskFailed, message
	t.Error = string(mustJSON(map[string]any{"code": mcp.CodeInternalError, "message": message, "data": map[string]string{"cause": cause}}))
	t.InputRequests, t.UpdatedAt = "", now
}

// sweep does what is due now: deliveries to retry, deadlines passed.
func (te *taskEngine) sweep(ctx context.Context) {
	now := te.now().UTC()
	due, err := te.store.Due(ctx, now, taskSweepBatch)
	if err != nil {
		if ctx.Err() == nil {
			te.log.Warn("task sweep failed; trying again", "err", err)
		}
		return
	}
	for i := range due {
		tk := &due[i]
		switch {
		case tk.PendingAnswers != "" || tk.CancelPending:
			if claimed, ok := te.claim(ctx, tk, tk.Attempts); ok {
				te.send(ctx, claimed, tk.Attempts)
			}
		case tk.Status == store.TaskWorking:
			te.deadline(ctx, tk)
		default:
			// Nothing is due any more (a status that stops the clock).
			_, _ = te.store.UpdateFrom(ctx, tk, func(t *store.Task) error {
				if t.Version != tk.Version {
					return store.ErrUnchanged
				}
				t.DueAt = nil
				return nil
			})
		}
	}
}

// deadline fails a working task whose backend sent no report within its
// deadline.
func (te *taskEngine) deadline(ctx context.Context, tk *store.Task) {
	now := te.now().UTC()
	failed := false
	cur, err := te.store.UpdateFrom(ctx, tk, func(t *store.Task) error {
		failed = false
		if t.Version != tk.Version || t.Status != store.TaskWorking || t.DueAt == nil || t.DueAt.After(now) {
			return store.ErrUnchanged
		}
		limit := time.Duration(t.DeadlineMs) * time.Millisecond
		failTask(t, now, "deadline", fmt.Sprintf("The tool's backend sent no report within %s.", limit))
		t.DueAt = nil
		t.Events++
		failed = true
		return nil
	})
	if err != nil || !failed {
		return
	}
	te.log.WarnContext(ctx, "task failed: its backend went silent past its deadline", "tenant", cur.TenantSlug, "tool", cur.Tool,
		"deadline_ms", cur.DeadlineMs)
	ev := te.event(cur, TaskFailedEvent, "platform")
	ev.Cause, ev.ErrorCode = "deadline", mcp.CodeInternalError
	te.emit(ctx, ev)
}

// expire deletes tasks past their TTL, a batch at a time.
func (te *taskEngine) expire(ctx context.Context) {
	for {
		n, err := te.store.DeleteExpired(ctx, te.now(), 1000)
		if err != nil {
			if ctx.Err() == nil {
				te.log.Warn("deleting expired tasks failed; trying again later", "err", err)
			}
			return
		}
		if n < 1000 {
			return
		}
	}
}

// run sweeps until ctx ends.
func (te *taskEngine) run(ctx context.Context) {
	sweep := time.NewTicker(taskSweepEvery)
	defer sweep.Stop()
	expire := time.NewTicker(taskExpireEvery)
	defer expire.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweep.C:
			te.sweep(ctx)
		case <-expire.C:
			te.expire(ctx)
		}
	}
}
