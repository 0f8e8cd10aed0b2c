package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Work that takes longer than one delivery's deadline runs as a task
// (the MCP Tasks extension). When a tool may run as one and the client
// can follow a task, its delivery carries Task: the offer. The backend
// then either answers as usual (the client gets the result at once), or
// accepts the work by answering {"type":"accepted"} and reports on it
// later, as often as it likes, by POSTing Reports to Task.ReportURL,
// signed with Task.Secret like a delivery (Opsmcp-Signature). The
// platform delivers what happens on the client's side to the same
// webhook, signed as ever: the client's answers to the task's questions
// (KindTaskInput) and a cancel (KindTaskCancel).
//
// Reports go from the backend out, so a backend behind a firewall that
// admits the platform's deliveries needs nothing more, and a worker that
// is not the webhook (a CI job, a queue consumer) can report with the
// URL and secret alone. The platform holds nothing for a task between
// reports.

// Kinds of delivery about a task the backend accepted.
const (
	// KindTaskInput carries the client's answers to the task's questions
	// in InputResponses, keyed by the backend's own names.
	KindTaskInput = "task_input"
	// KindTaskCancel says the task was cancelled (by its client or an
	// admin, Task.CancelledBy): stop the work; reports after it are
	// refused.
	KindTaskCancel = "task_cancel"
)

// TypeAccepted is a backend's answer that accepts the work of a call
// offered as a task.
const TypeAccepted = "accepted"

// Task is the task a delivery offers or is about.
type Task struct {
	// ID is the task's id.
	ID string `json:"id"`
	// ReportURL is where the backend POSTs its Reports, and Secret what
	// signs them; both only in the delivery that offers the task.
	ReportURL string `json:"reportUrl,omitempty"`
	Secret    string `json:"secret,omitempty"`
	// DeadlineMs is the longest the backend may go without a report while
	// the task is working: past it the task fails. Waiting on the client
	// does not count.
	DeadlineMs int64 `json:"deadlineMs,omitempty"`
	// ExpiresAt is when the task is deleted, finished or not (RFC 3339).
	ExpiresAt string `json:"expiresAt,omitempty"`
	// CancelledBy says who cancelled it (KindTaskCancel): "client", or
	// "admin:" and the admin's name.
	CancelledBy string `json:"cancelledBy,omitempty"`
}

// Report types.
const (
	// ReportProgress says how far the work is: Message becomes the
	// task's status message; Progress and Total are optional.
	ReportProgress = "progress"
	// ReportInputRequired asks the client InputRequests (as a Response's
	// input_required does, keyed by names of the backend's choosing, each
	// key used once in a task's life); the answers come as a
	// KindTaskInput delivery.
	ReportInputRequired = TypeInputRequired
	// ReportComplete ends the task with Result, a CallToolResult
	// (isError true for the tool's own error; the task still completes).
	ReportComplete = TypeComplete
	// ReportError ends the task failed, with Error.
	ReportError = "error"
)

// Report is what a backend POSTs to a task's ReportURL. Reports are
// applied in Seq order once each: a report whose Seq is not above the
// last applied one is acknowledged and ignored, so a backend may send one
// again when unsure it arrived.
type Report struct {
	// Seq numbers the task's reports from 1, increasing.
	Seq  int64  `json:"seq"`
	Type string `json:"type"`
	// Message is the task's status message from now on.
	Message  string   `json:"message,omitempty"`
	Progress *float64 `json:"progress,omitempty"`
	Total    *float64 `json:"total,omitempty"`
	// InputRequests are what to ask the client (ReportInputRequired).
	InputRequests map[string]json.RawMessage `json:"inputRequests,omitempty"`
	// Result is the complete tool result (ReportComplete).
	Result json.RawMessage `json:"result,omitempty"`
	// Error is why the task failed (ReportError).
	Error *ReportedError `json:"error,omitempty"`
}

// ReportedError is a failed task's error, as the client gets it.
type ReportedError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// ReportAnswer is the platform's answer to a report: the task's status
// after it, and whether the report was a duplicate (its seq applied
// already).
type ReportAnswer struct {
	Status    string `json:"status"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// ReportRefused is the platform's refusal of a report. Final says the
// task is over (finished or cancelled: HTTP 409) or the report can never
// be taken (4xx); a backend stops reporting then. A refusal that is not
// Final (5xx, 429: a replica or its database briefly unavailable) is
// worth sending again with the same Seq.
type ReportRefused struct {
	StatusCode int
	Reason     string
}

func (e *ReportRefused) Error() string {
	return fmt.Sprintf("task report refused: HTTP %d: %s", e.StatusCode, e.Reason)
}

// Final reports whether sending the report again is pointless.
func (e *ReportRefused) Final() bool {
	return e.StatusCode < 500 && e.StatusCode != http.StatusTooManyRequests
}

// SendReport signs r with t's secret and POSTs it to t's report URL. A
// refusal is a *ReportRefused naming the platform's reason.
func SendReport(ctx context.Context, client *http.Client, t *Task, r *Report) (*ReportAnswer, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.ReportURL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign(t.Secret, time.Now(), body))
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return nil, &ReportRefused{StatusCode: resp.StatusCode, Reason: string(bytes.TrimSpace(out))}
	}
	var a ReportAnswer
	if err := json.Unmarshal(out, &a); err != nil {
		return nil, fmt.Errorf("task report: the answer is not JSON: %w", err)
	}
	return &a, nil
}
