package endpoint

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/webhook"
)

// answer is what a method answers with: a complete result, an
// InputRequiredResult, or an error. A handler returns it; the exchange
// writes it and records it on the round.
type answer struct {
	complete      any
	inputRequired *mrtr.InputRequiredResult
	err           *rpcError
	// toolError marks a complete tools/call result with isError set.
	toolError bool
	// task marks a tools/call answered with a task (CreateTaskResult).
	task bool
}

func completed(result any) answer              { return answer{complete: result} }
func failed(e *rpcError) answer                { return answer{err: e} }
func toolFailed(result any) answer             { return answer{complete: result, toolError: true} }
func asked(r *mrtr.InputRequiredResult) answer { return answer{inputRequired: r} }
func taskAnswer(result any) answer             { return answer{complete: result, task: true} }

// exchange is one HTTP request and its answer: the writer, the context
// the work runs in (carrying the request's span once it started), the
// round being recorded, and, once the answer streams, the event stream.
type exchange struct {
	w     http.ResponseWriter
	req   *http.Request
	ctx   context.Context
	round *Round // &rd
	// id is the request's id as sent, which the answer echoes (the round
	// records a bounded copy).
	id json.RawMessage

	// rd and st are the round and its tracing state, allocated with the
	// exchange.
	rd Round
	st spanState
	// want says the client asked for progress or log events; the answer
	// then streams once the webhook is called.
	want          bool
	progressToken json.RawMessage
	logLevel      string
	sse           *sseWriter
}

// answer writes a and records it on the round.
func (x *exchange) answer(a answer) {
	switch {
	case a.complete == nil && a.inputRequired == nil && a.err == nil:
		return // nothing to answer: the client went away
	case a.err != nil:
		x.fail(a.err)
		return
	case a.inputRequired != nil:
		x.round.ResultType = mcp.ResultTypeInputRequired
		x.write(a.inputRequired)
	case a.task:
		x.round.ResultType = mcp.ResultTypeTask
		x.write(a.complete)
	default:
		x.round.ResultType = mcp.ResultTypeComplete
		x.round.ToolError = a.toolError
		if x.round.Content != nil {
			x.round.Content.Result = a.complete
		}
		x.write(a.complete)
	}
}

func (x *exchange) write(result any) {
	x.round.Answered = true
	msg := response{JSONRPC: "2.0", ID: x.id, Result: result}
	if x.sse != nil {
		_ = x.sse.send(msg)
		return
	}
	writeJSON(x.w, http.StatusOK, msg)
}

// fail answers with a JSON-RPC error and records it on the round.
func (x *exchange) fail(e *rpcError) {
	x.round.ErrorCode, x.round.ErrorMessage, x.round.Answered = e.Code, e.Message, true
	if x.sse != nil && x.sse.started {
		_ = x.sse.send(response{JSONRPC: "2.0", ID: x.id, Error: e})
		return
	}
	writeError(x.w, x.id, e)
}

// delivering is told that the webhook is about to be called: a client
// that asked for progress or log events gets its answer as a stream from
// here on.
func (x *exchange) delivering() bool {
	if x.want && x.sse == nil {
		x.sse = newSSE(x.w)
	}
	return x.sse != nil
}

// progress relays a webhook's progress event when the client sent a
// progressToken.
func (x *exchange) progress(ev *webhook.Event) {
	if x.sse == nil || x.progressToken == nil {
		return
	}
	_ = x.sse.send(progressNote(x.progressToken, ev))
}

// progressNote is a webhook's progress event as the client's
// notifications/progress for token.
func progressNote(token json.RawMessage, ev *webhook.Event) notification {
	p := map[string]any{"progressToken": token, "progress": ev.Progress}
	if ev.Total != nil {
		p["total"] = *ev.Total
	}
	if ev.Message != "" {
		p["message"] = ev.Message
	}
	return notification{JSONRPC: "2.0", Method: mcp.NotificationProgress, Params: p}
}

// logLevels orders the syslog levels MCP uses.
var logLevels = map[string]int{"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5, "alert": 6, "emergency": 7}

// log relays a webhook's log event when the request's _meta set a log
// level at or below the event's.
func (x *exchange) log(ev *webhook.Event) {
	if x.sse == nil {
		return
	}
	if n, ok := logNote(x.logLevel, ev); ok {
		_ = x.sse.send(n)
	}
}

// logNote is a webhook's log event as the client's notifications/message,
// if level (the client's; empty: none) lets it through.
func logNote(level string, ev *webhook.Event) (notification, bool) {
	if level == "" {
		return notification{}, false
	}
	lv, ok := logLevels[ev.Level]
	if !ok || lv < logLevels[level] {
		return notification{}, false
	}
	p := map[string]any{"level": ev.Level, "data": ev.Data}
	if ev.Data == nil {
		p["data"] = ev.Message
	}
	if ev.Logger != "" {
		p["logger"] = ev.Logger
	}
	return notification{JSONRPC: "2.0", Method: mcp.NotificationMessage, Params: p}, true
}
