package endpoint

import (
	"context"
	"encoding/json"
	"time"

	"github.com/opsmcp/platform/mrtr"
)

// TaskEvent is one thing that happened to a task after its creation
// (which is the round of the tools/call that created it): a report of
// its backend, the client's answers or cancel, an admin's cancel, the
// platform failing it. Like a Round, it is gathered once and handed to
// every sink that takes task events (TaskSink): the record, where it is
// a round of the task's flow, and telemetry, where it is a span in the
// task's trace. It holds no secret (answers' content only for tenants
// that record answers).
type TaskEvent struct {
	// At is when it happened; Kind what (the Task* constants); By who
	// ("backend", "client", "platform", "admin:NAME").
	At   time.Time
	Kind string
	By   string
	// N is the event's round in the task's flow.
	N int

	TaskID, FlowID   string
	TenantID, Tenant string
	Tool, Era        string
	// Status and Message are the task's status and status message after
	// the event.
	Status, Message string
	// Created is when the task was created; Traceparent the span of the
	// round that created it.
	Created     time.Time
	Traceparent string
	Principal   TaskPrincipal
	Client      ClientInfo

	// Asked are the input requests a report asked (TaskInputRequired).
	Asked map[string]mrtr.InputRequest
	// Answered are the keys the client answered (TaskAnswered); Answers
	// their content, only for tenants that record answers.
	Answered []string
	Answers  map[string]json.RawMessage
	// Progress and Total are a progress report's numbers, if it had them.
	Progress, Total *float64
	// ToolError marks a completed task whose result has isError set;
	// ErrorCode a failed task's JSON-RPC error code, and Cause why the
	// platform failed it (deadline, delivery, contract).
	ToolError bool
	ErrorCode int
	Cause     string
	// Delivery is the delivery the event made to the backend (answers, a
	// cancel), if any.
	Delivery *WebhookCall
}

// Task event kinds.
const (
	TaskProgress       = "progress"
	TaskInputRequired  = "input_required"
	TaskAnswered       = "answered"
	TaskCompleted      = "completed"
	TaskFailedEvent    = "failed"
	TaskCancelledEvent = "cancelled"
	// TaskDelivered is a delivery made again after it failed.
	TaskDelivered = "delivered"
)

// TaskPrincipal is who created a task.
type TaskPrincipal struct{ Issuer, Subject, Client string }

// A TaskSink consumes task events. TaskEvent is called once per event,
// after the event is durable, and must not block.
type TaskSink interface {
	TaskEvent(ctx context.Context, ev *TaskEvent)
}
