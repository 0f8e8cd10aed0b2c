package flows

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsmcp/platform/endpoint"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/store/record"
)

func TestAFullQueueDropsAndCountsWithoutEverBlocking(t *testing.T) {
	var dropped atomic.Int64
	// No writer drains this queue: every round beyond its two slots must
	// be dropped at once, never waited for.
	r := &Recorder{opts: Options{Replica: "r1", Dropped: func(n int64) { dropped.Add(n) }}, queue: make(chan *encoded, 2), sample: 1}
	rd := &endpoint.Round{FlowID: "fl_AAAAAAAAAAAAAAAA", TenantID: "t1", Tenant: "acme", Number: 1, Method: mcp.MethodToolsCall,
		ResultType: mcp.ResultTypeInputRequired, Answered: true, Arrived: time.Now(), Ended: time.Now()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			r.Round(context.Background(), rd)
		}
	}()
	<-done // would hang here if Round waited for the queue
	if len(r.queue) != 2 || dropped.Load() != 998 || r.dropped.Load() != 998 {
		t.Fatalf("queued %d, dropped %d (metric %d); want 2 and 998", len(r.queue), r.dropped.Load(), dropped.Load())
	}
	// A request the record does not keep (a list, a poll) is no round of
	// the record: a full queue does not count it as dropped.
	for _, rd := range []*endpoint.Round{
		{TenantID: "t1", Tenant: "acme", Method: mcp.MethodToolsList, Answered: true, Arrived: time.Now(), Ended: time.Now()},
		{TenantID: "t1", Tenant: "acme", Method: mcp.MethodTasksGet, Answered: true, Arrived: time.Now(), Ended: time.Now()},
	} {
		r.Round(context.Background(), rd)
	}
	if dropped.Load() != 998 {
		t.Fatalf("requests of no flow counted as dropped: %d", dropped.Load()-998)
	}
}

func TestEveryCallIsRecordedWithItsKindButNotListsOrPolls(t *testing.T) {
	now := time.Now()
	base := endpoint.Round{TenantID: "t1", Tenant: "acme", Arrived: now, Ended: now, Number: 1, Method: mcp.MethodToolsCall,
		Era: endpoint.EraStateless, Answered: true}
	for _, tc := range []struct {
		name, kind, state, detail string
		edit                      func(*endpoint.Round)
	}{
		{"a call answered at once", record.KindCall, record.Completed, "",
			func(r *endpoint.Round) { r.FlowID, r.ResultType = "fl_x", mcp.ResultTypeComplete }},
		{"a prompt answered at once", record.KindCall, record.Completed, "",
			func(r *endpoint.Round) {
				r.FlowID, r.Method, r.ResultType = "fl_x", mcp.MethodPromptsGet, mcp.ResultTypeComplete
			}},
		{"a read that failed", record.KindCall, record.Failed, "-32602", func(r *endpoint.Round) {
			r.FlowID, r.Method, r.ErrorCode, r.ErrorMessage = "fl_x", mcp.MethodResourcesRead, -32602, "Invalid params"
		}},
		{"a call whose webhook was down", record.KindCall, record.Failed, "webhook_connect", func(r *endpoint.Round) {
			r.FlowID, r.ResultType, r.ToolError = "fl_x", mcp.ResultTypeComplete, true
			r.Webhook = &endpoint.WebhookCall{Kind: "tool", Outcome: "connect", Failed: true, Detail: "connect: connection refused"}
		}},
		{"a first round that asks", record.KindFlow, record.AwaitingInput, "",
			func(r *endpoint.Round) { r.FlowID, r.ResultType = "fl_x", mcp.ResultTypeInputRequired }},
		{"a bridged legacy round that asks", record.KindLegacy, record.AwaitingInput, "", func(r *endpoint.Round) {
			r.FlowID, r.ResultType, r.Era, r.SessionID = "fl_x", mcp.ResultTypeInputRequired, "2025-11-25", "s4Fq9"
		}},
		{"a retry that completes", record.KindFlow, record.Completed, "", func(r *endpoint.Round) {
			r.FlowID, r.Number, r.ResultType, r.StateIn.Outcome = "fl_x", 2, mcp.ResultTypeComplete, endpoint.StateVerified
		}},
		{"a retry with a tool error", record.KindFlow, record.Failed, "tool_error", func(r *endpoint.Round) {
			r.FlowID, r.Number, r.ResultType, r.ToolError = "fl_x", 2, mcp.ResultTypeComplete, true
		}},
		{"a call that became a task", record.KindTask, record.Running, "",
			func(r *endpoint.Round) { r.FlowID, r.ResultType = "fl_x", mcp.ResultTypeTask }},
		{"a refused state naming its flow", record.KindFlow, record.Rejected, "expired", func(r *endpoint.Round) {
			r.FlowID, r.Number, r.StateIn = "fl_x", 3, endpoint.StateCheck{Outcome: endpoint.StateRejected, Reason: "expired"}
		}},
		{"a refused state naming none", record.KindFlow, record.Rejected, "malformed",
			func(r *endpoint.Round) {
				r.StateIn = endpoint.StateCheck{Outcome: endpoint.StateRejected, Reason: "malformed"}
			}},
		{"a refused token", record.KindCall, record.Rejected, "token_expired",
			func(r *endpoint.Round) { r.Method, r.TokenRefused = "", "expired" }},
		{"a client that went away", record.KindCall, record.Failed, "no_answer",
			func(r *endpoint.Round) { r.FlowID, r.Answered = "fl_x", false }},
		{"a list", "", "", "", func(r *endpoint.Round) { r.Method = mcp.MethodToolsList }},
		{"a task poll", "", "", "", func(r *endpoint.Round) { r.Method = mcp.MethodTasksGet }},
		{"a ping of a legacy session", "", "", "", func(r *endpoint.Round) { r.Method, r.Era = mcp.MethodPing, "2025-11-25" }},
		{"an unknown tenant", "", "", "",
			func(r *endpoint.Round) { r.FlowID, r.Tenant, r.ResultType = "fl_x", "", mcp.ResultTypeInputRequired }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd := base
			tc.edit(&rd)
			kind := recordKind(&rd, false)
			if kind != tc.kind {
				t.Fatalf("kind %q; want %q", kind, tc.kind)
			}
			if kind == "" {
				return
			}
			var w record.RoundWrite
			write(&w, &rd, "r1", false, new([]byte))
			if w.Flow.State != tc.state || w.Flow.Detail != tc.detail {
				t.Fatalf("state %q (%q); want %q (%q)", w.Flow.State, w.Flow.Detail, tc.state, tc.detail)
			}
			if (tc.state == record.Failed || tc.state == record.Rejected) && w.Flow.Message == "" {
				t.Fatal("a failure recorded without its cause in words")
			}
			if w.Flow.SessionID != rd.SessionID {
				t.Fatalf("session %q recorded; the round's is %q", w.Flow.SessionID, rd.SessionID)
			}
		})
	}
}
