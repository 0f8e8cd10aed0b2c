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
	r := &Recorder{opts: Options{Replica: "r1", Dropped: func(n int64) { dropped.Add(n) }}, queue: make(chan *encoded, 2)}
	rd := &endpoint.Round{FlowID: "fl_AAAAAAAAAAAAAAAA", TenantID: "t1", Tenant: "acme", Number: 1,
		ResultType: mcp.ResultTypeInputRequired, Arrived: time.Now(), Ended: time.Now()}
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
	// A request of no flow (a list, a call answered at once) is no round
	// of the record: a full queue does not count it as dropped.
	for _, rd := range []*endpoint.Round{
		{TenantID: "t1", Tenant: "acme", Method: mcp.MethodToolsList, Arrived: time.Now(), Ended: time.Now()},
		{FlowID: "fl_BBBBBBBBBBBBBBBB", TenantID: "t1", Tenant: "acme", Number: 1, ResultType: mcp.ResultTypeComplete},
	} {
		r.Round(context.Background(), rd)
	}
	if dropped.Load() != 998 {
		t.Fatalf("requests of no flow counted as dropped: %d", dropped.Load()-998)
	}
}

func TestOnlyRoundsOfFlowsAreRecorded(t *testing.T) {
	now := time.Now()
	base := endpoint.Round{TenantID: "t1", Tenant: "acme", Arrived: now, Ended: now, Number: 1}
	for _, tc := range []struct {
		name  string
		edit  func(*endpoint.Round)
		want  bool
		state string
	}{
		{"a call answered at once", func(r *endpoint.Round) { r.FlowID, r.ResultType = "fl_x", mcp.ResultTypeComplete }, false, ""},
		{"a first round that asks", func(r *endpoint.Round) { r.FlowID, r.ResultType = "fl_x", mcp.ResultTypeInputRequired }, true, record.AwaitingInput},
		{"a retry that completes", func(r *endpoint.Round) {
			r.FlowID, r.Number, r.ResultType, r.StateIn.Outcome = "fl_x", 2, mcp.ResultTypeComplete, endpoint.StateVerified
		}, true, record.Completed},
		{"a retry with a tool error", func(r *endpoint.Round) {
			r.FlowID, r.Number, r.ResultType, r.ToolError = "fl_x", 2, mcp.ResultTypeComplete, true
		}, true, record.Failed},
		{"a refused state naming its flow", func(r *endpoint.Round) {
			r.FlowID, r.Number, r.StateIn = "fl_x", 3, endpoint.StateCheck{Outcome: endpoint.StateRejected, Reason: "expired"}
		}, true, record.Rejected},
		{"a refused state naming none", func(r *endpoint.Round) { r.StateIn = endpoint.StateCheck{Outcome: endpoint.StateRejected} }, false, ""},
		{"an unknown tenant", func(r *endpoint.Round) { r.FlowID, r.Tenant, r.ResultType = "fl_x", "", mcp.ResultTypeInputRequired }, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd := base
			tc.edit(&rd)
			var w record.RoundWrite
			ok := recorded(&rd, false)
			if ok {
				write(&w, &rd, "r1", false, new([]byte))
			}
			if ok != tc.want || (ok && w.Flow.State != tc.state) {
				t.Fatalf("recorded %v in state %q; want %v, %q", ok, w.Flow.State, tc.want, tc.state)
			}
		})
	}
}
