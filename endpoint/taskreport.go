package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/webhook"
)

// A backend reports on a task it accepted by POSTing a webhook.Report to
// the task's own URL, /t/{slug}/tasks/{id}, signed with the task's own
// secret (given in the offer). Any replica takes it: the report is
// checked (the signature, within the tolerance of a delivery's; the task
// the tenant's and still live; the report well formed and new), applied
// to the task's row with a check-and-set write, and its event handed to
// the sinks. A report is applied once: one whose seq is not above the
// last applied is acknowledged as a duplicate and changes nothing.

// reportError answers a refused report, as JSON the backend can read.
func reportError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// ServeTaskReport takes a backend's report on a task: POST
// /t/{slug}/tasks/{id}, the slug and id the router's path values.
func (e *Handler) ServeTaskReport(w http.ResponseWriter, r *http.Request) {
	te := e.tasks
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		reportError(w, http.StatusMethodNotAllowed, "reports are POSTed")
		return
	}
	slug, id := r.PathValue("slug"), r.PathValue("task")
	body, err := io.ReadAll(io.LimitReader(r.Body, e.opts.WebhookMaxResponse+1))
	if err != nil {
		reportError(w, http.StatusBadRequest, "the report could not be read")
		return
	}
	if int64(len(body)) > e.opts.WebhookMaxResponse {
		reportError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("a report is at most %d bytes", e.opts.WebhookMaxResponse))
		return
	}
	ctx := r.Context()
	tk, err := te.store.GetWithSecret(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && tk.TenantSlug != slug):
		reportError(w, http.StatusNotFound, "no such task")
		return
	case err != nil:
		te.log.ErrorContext(ctx, "task read failed", "err", err)
		reportError(w, http.StatusServiceUnavailable, "tasks are unavailable right now; send the report again")
		return
	}
	if err := webhook.Verify(tk.Secret, r.Header.Get(webhook.SignatureHeader), body, te.now(), webhook.DefaultTolerance); err != nil {
		te.log.WarnContext(ctx, "task report refused", "tenant", slug, "reason", "signature", "err", err)
		reportError(w, http.StatusUnauthorized, "the signature does not verify with this task's secret")
		return
	}
	var rep webhook.Report
	if err := json.Unmarshal(body, &rep); err != nil {
		reportError(w, http.StatusBadRequest, "the report is not a JSON object of the webhook contract")
		return
	}
	status, ans, msg := te.apply(ctx, tk, &rep)
	if status != http.StatusOK {
		reportError(w, status, msg)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

// reportChange is what a report does to a task, checked before the
// write.
type reportChange struct {
	status, message string
	open            map[string]mrtr.InputRequest // input_required: what it asks
	result          map[string]json.RawMessage   // complete
	toolError       bool
	errDoc          []byte // error
	errCode         int
}

// check validates a report against the task and its tool: what it may
// ask (the creating request's capabilities), what a result must hold.
func (te *taskEngine) check(ctx context.Context, tk *store.Task, rep *webhook.Report) (*reportChange, string) {
	if rep.Seq < 1 {
		return nil, "seq must be 1 or more"
	}
	ch := &reportChange{message: rep.Message}
	switch rep.Type {
	case webhook.ReportProgress:
		ch.status = store.TaskWorking
	case webhook.ReportInputRequired:
		if len(rep.InputRequests) == 0 {
			return nil, "an input_required report needs inputRequests"
		}
		var caps mrtr.ClientCapabilities
		_ = json.Unmarshal([]byte(tk.Capabilities), &caps)
		open, _, missing, err := webhookInputs(rep.InputRequests, caps, "")
		if err != nil {
			return nil, err.Error()
		}
		if missing != nil {
			return nil, "the client did not declare what this asks: " + missing.Message + " " + string(mustJSON(missing.Data))
		}
		ch.status, ch.open = store.TaskInputRequired, open
	case webhook.ReportComplete:
		snap, err := te.catalogue(ctx, tk.TenantSlug)
		if err != nil || snap == nil {
			return nil, "the task's tenant is unavailable; send the report again"
		}
		result, isError, err := completeResult(webhook.KindTool, rep.Result, snap.resultMeta)
		if err != nil {
			return nil, err.Error()
		}
		ch.status, ch.result, ch.toolError = store.TaskCompleted, result, isError
	case webhook.ReportError:
		if rep.Error == nil || rep.Error.Message == "" {
			return nil, "an error report needs error.code and error.message"
		}
		code := rep.Error.Code
		if code == 0 {
			code = mcp.CodeInternalError
		}
		e := map[string]any{"code": code, "message": rep.Error.Message}
		if len(rep.Error.Data) > 0 {
			e["data"] = rep.Error.Data
		}
		ch.status, ch.errDoc, ch.errCode = store.TaskFailed, mustJSON(e), code
		if ch.message == "" {
			ch.message = rep.Error.Message
		}
	default:
		return nil, fmt.Sprintf("type must be progress, input_required, complete or error, not %q", rep.Type)
	}
	return ch, ""
}

// apply checks a verified report and applies it: the HTTP status to
// answer, the answer, or why it was refused.
func (te *taskEngine) apply(ctx context.Context, tk *store.Task, rep *webhook.Report) (int, *webhook.ReportAnswer, string) {
	if rep.Seq > 0 && rep.Seq <= tk.LastSeq {
		return http.StatusOK, &webhook.ReportAnswer{Status: tk.Status, Duplicate: true}, ""
	}
	if !store.TaskLive(tk.Status) {
		return http.StatusConflict, nil, "the task is " + tk.Status + "; it takes no more reports"
	}
	ch, why := te.check(ctx, tk, rep)
	if ch == nil {
		return http.StatusBadRequest, nil, why
	}
	now := te.now().UTC()
	var refused, duplicate string
	cur, err := te.store.UpdateFrom(ctx, tk, func(t *store.Task) error {
		refused, duplicate = "", ""
		switch {
		case rep.Seq <= t.LastSeq:
			duplicate = t.Status
			return store.ErrUnchanged
		case !store.TaskLive(t.Status):
			refused = "the task is " + t.Status + "; it takes no more reports"
			return store.ErrUnchanged
		}
		if ch.message != "" || ch.status != store.TaskWorking {
			t.StatusMessage = ch.message
		}
		switch ch.status {
		case store.TaskWorking:
			if t.Status == store.TaskInputRequired {
				// A progress report while questions wait leaves them waiting.
				break
			}
		case store.TaskInputRequired:
			var open map[string]json.RawMessage
			_ = json.Unmarshal([]byte(t.InputRequests), &open)
			var asked []string
			_ = json.Unmarshal([]byte(t.AskedKeys), &asked)
			if open == nil {
				open = map[string]json.RawMessage{}
			}
			for k, ir := range ch.open {
				for _, a := range asked {
					if a == k {
						refused = fmt.Sprintf("input request key %q was used before in this task; each key is used once", k)
						return store.ErrUnchanged
					}
				}
				open[k] = mustJSON(ir)
				asked = append(asked, k)
			}
			t.Status, t.InputRequests, t.AskedKeys = store.TaskInputRequired, string(mustJSON(open)), string(mustJSON(asked))
		case store.TaskCompleted:
			t.Status, t.Result, t.ToolError, t.InputRequests = store.TaskCompleted, string(mustJSON(ch.result)), ch.toolError, ""
		case store.TaskFailed:
			t.Status, t.Error, t.InputRequests = store.TaskFailed, string(ch.errDoc), ""
		}
		t.LastSeq, t.UpdatedAt = rep.Seq, now
		t.Events++
		t.DueAt = nil
		switch {
		case t.PendingAnswers != "":
			t.DueAt = &now // deliver what waits first
		case t.Status == store.TaskWorking:
			due := now.Add(time.Duration(t.DeadlineMs) * time.Millisecond)
			t.DueAt = &due
		}
		return nil
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, nil, "no such task"
	case err != nil:
		te.log.ErrorContext(ctx, "task report not applied", "err", err)
		return http.StatusServiceUnavailable, nil, "the report could not be applied; send it again"
	case duplicate != "":
		return http.StatusOK, &webhook.ReportAnswer{Status: duplicate, Duplicate: true}, ""
	case refused != "":
		if store.TaskLive(cur.Status) {
			return http.StatusBadRequest, nil, refused
		}
		return http.StatusConflict, nil, refused
	}
	kind := map[string]string{store.TaskWorking: TaskProgress, store.TaskInputRequired: TaskInputRequired,
		store.TaskCompleted: TaskCompleted, store.TaskFailed: TaskFailedEvent}[ch.status]
	ev := te.event(cur, kind, "backend")
	ev.Asked, ev.Progress, ev.Total = ch.open, rep.Progress, rep.Total
	ev.ToolError, ev.ErrorCode = ch.toolError, ch.errCode
	te.emit(te.taskContext(ctx, cur), ev)
	return http.StatusOK, &webhook.ReportAnswer{Status: cur.Status}, ""
}
