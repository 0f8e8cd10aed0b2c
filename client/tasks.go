package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
)

// Tasks (the Tasks extension): a server may answer a tools/call with a
// task instead of its result, when the work takes longer than one
// request. The client declares the extension in every request (unless
// Options.NoTasks), and CallTool then follows a task to its end: it
// polls tasks/get at the task's interval, answers the questions the task
// asks with the same handlers as any round's, and returns the result. A
// call made with NoWait returns the task at once instead; GetTask,
// WaitTask and CancelTask act on a task by its id.

// Task is a task as the server shows it (tasks/get, or the result that
// created it).
type Task struct {
	ID             string `json:"taskId"`
	Status         string `json:"status"`
	StatusMessage  string `json:"statusMessage,omitempty"`
	CreatedAt      string `json:"createdAt"`
	LastUpdatedAt  string `json:"lastUpdatedAt"`
	TTLMs          *int64 `json:"ttlMs"`
	PollIntervalMs int64  `json:"pollIntervalMs,omitempty"`
	// InputRequests are what the task asks now (status input_required).
	InputRequests map[string]mrtr.InputRequest `json:"inputRequests,omitempty"`
	// Result is the tool's result (completed); Error the JSON-RPC error
	// it failed with (failed).
	Result json.RawMessage `json:"result,omitempty"`
	Error  *RPCError       `json:"error,omitempty"`
	Raw    json.RawMessage `json:"-"`
}

// Task statuses.
const (
	TaskWorking       = "working"
	TaskInputRequired = "input_required"
	TaskCompleted     = "completed"
	TaskFailed        = "failed"
	TaskCancelled     = "cancelled"
)

// Done reports whether the task has ended.
func (t *Task) Done() bool {
	return t.Status == TaskCompleted || t.Status == TaskFailed || t.Status == TaskCancelled
}

// ErrTaskCancelled is WaitTask's error for a task that ended cancelled.
var ErrTaskCancelled = errors.New("mcp: the task was cancelled")

// NoWait makes CallTool return a task the server created at once, in
// the result's Task field, instead of following it to its end.
func NoWait() CallOption { return func(c *callConfig) { c.noWait = true } }

// taskHeader is the headers of a tasks/* request about id.
func taskHeader(id string) http.Header {
	return http.Header{"Mcp-Name": {mcp.EncodeHeaderValue(id)}}
}

// GetTask reads a task (tasks/get).
func (c *Client) GetTask(ctx context.Context, id string) (*Task, error) {
	raw, err := c.request(ctx, mcp.MethodTasksGet, map[string]any{"taskId": id}, taskHeader(id), nil)
	if err != nil {
		return nil, err
	}
	var t Task
	if err := decodeResult(mcp.MethodTasksGet, raw, &t); err != nil {
		return nil, err
	}
	if t.ID != id {
		return nil, &ProtocolError{Msg: fmt.Sprintf("tasks/get for %s answered task %q", id, t.ID)}
	}
	t.Raw = raw
	return &t, nil
}

// CancelTask asks the server to cancel a task (tasks/cancel).
// Cancellation is cooperative: the task may still end otherwise.
func (c *Client) CancelTask(ctx context.Context, id string) error {
	_, err := c.request(ctx, mcp.MethodTasksCancel, map[string]any{"taskId": id}, taskHeader(id), nil)
	return err
}

// UpdateTask answers some of a task's input requests (tasks/update).
func (c *Client) UpdateTask(ctx context.Context, id string, responses map[string]json.RawMessage) error {
	_, err := c.request(ctx, mcp.MethodTasksUpdate, map[string]any{"taskId": id, "inputResponses": responses}, taskHeader(id), nil)
	return err
}

// pollFloor and pollDefault bound how often WaitTask polls.
const (
	pollFloor   = 50 * time.Millisecond
	pollDefault = time.Second
)

// WaitTask follows a task to its end: it polls at the task's interval,
// hands each change to Options.OnTask, answers each question once with
// the client's handlers, and returns the result of a completed task
// (isError results included). A failed task is its *RPCError; a
// cancelled one ErrTaskCancelled.
func (c *Client) WaitTask(ctx context.Context, id string) (*CallToolResult, error) {
	return c.waitTask(ctx, id, "")
}

// seen is what makes a task's state news to OnTask.
func (t *Task) seen() string { return t.Status + "\x00" + t.StatusMessage + "\x00" + t.LastUpdatedAt }

// waitTask is WaitTask, the task's state last told to OnTask being last.
func (c *Client) waitTask(ctx context.Context, id, last string) (*CallToolResult, error) {
	answered := map[string]bool{}
	for {
		t, err := c.GetTask(ctx, id)
		if err != nil {
			return nil, err
		}
		if seen := t.seen(); seen != last {
			last = seen
			if c.opts.OnTask != nil {
				c.opts.OnTask(t)
			}
		}
		switch t.Status {
		case TaskCompleted:
			var res CallToolResult
			if err := decodeResult(mcp.MethodTasksGet, t.Result, &res); err != nil {
				return nil, err
			}
			res.Raw, res.Task = t.Result, t
			return &res, nil
		case TaskFailed:
			if t.Error == nil {
				return nil, &ProtocolError{Msg: "a failed task without its error"}
			}
			return nil, t.Error
		case TaskCancelled:
			return nil, ErrTaskCancelled
		case TaskInputRequired:
			responses := map[string]json.RawMessage{}
			for key, req := range t.InputRequests {
				if answered[key] {
					continue // keys are never reused: a repeat is the same request
				}
				a, err := c.dispatch(ctx, key, req)
				if err != nil {
					return nil, fmt.Errorf("mcp: task %s: %s: %w", id, key, err)
				}
				responses[key], answered[key] = a, true
			}
			if len(responses) > 0 {
				if err := c.UpdateTask(ctx, id, responses); err != nil {
					return nil, err
				}
				continue
			}
		}
		wait := time.Duration(t.PollIntervalMs) * time.Millisecond
		if wait == 0 {
			wait = pollDefault
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(max(wait, pollFloor)):
		}
	}
}

// followTask is CallTool's end for a result that is a task: the task at
// once (NoWait), else its result.
func (c *Client) followTask(ctx context.Context, raw json.RawMessage, noWait bool) (*CallToolResult, error) {
	var t Task
	if err := json.Unmarshal(raw, &t); err != nil || t.ID == "" {
		return nil, &ProtocolError{Msg: "a task result without a taskId"}
	}
	t.Raw = raw
	if noWait {
		return &CallToolResult{Raw: raw, Task: &t}, nil
	}
	if c.opts.OnTask != nil {
		c.opts.OnTask(&t)
	}
	return c.waitTask(ctx, t.ID, t.seen())
}

// resultType is a result's resultType ("" when it has none).
func resultType(raw json.RawMessage) string {
	var r struct {
		ResultType string `json:"resultType"`
	}
	_ = json.Unmarshal(raw, &r)
	return r.ResultType
}
