package flows_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsmcp/platform/endpoint"
	"github.com/opsmcp/platform/flows"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/store/record"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
)

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRoundsServedWhileTheDatabaseIsDownReachTheRecordWhenItIsBack: the
// rounds of a flow served while the database is unreachable are written
// once it answers again, so a short outage loses none of the record
// (the fleet test found every flow of a four-second PostgreSQL outage
// with rounds missing). Nothing is counted as dropped.
func TestRoundsServedWhileTheDatabaseIsDownReachTheRecordWhenItIsBack(t *testing.T) {
	ctx := context.Background()
	url, rl := platformtest.PostgresThroughRelay(t, platformtest.PostgresSchemaURL(t))
	st := platformtest.Store(t, url)
	var logs syncBuffer
	var dropped int64
	var mu sync.Mutex
	rec := flows.NewRecorder(ctx, flows.Options{Store: st.Record(), Replica: "r1", BatchDelay: 10 * time.Millisecond,
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
		Dropped: func(n int64) { mu.Lock(); dropped += n; mu.Unlock() }})
	defer rec.Close()
	round := func(flow string, n int, result string) *endpoint.Round {
		now := time.Now()
		rd := &endpoint.Round{FlowID: flow, TenantID: "tn_1", Tenant: "acme", Method: mcp.MethodToolsCall, Target: "order",
			Number: n, ResultType: result, Arrived: now.Add(-time.Millisecond), Ended: now}
		if n > 1 {
			rd.StateIn.Outcome = endpoint.StateVerified
		}
		return rd
	}
	recorded := func(flow string, rounds int, state string) func() bool {
		return func() bool {
			f, rs, err := st.Record().Get(ctx, flow)
			return err == nil && f.State == state && len(rs) == rounds
		}
	}
	rec.Round(ctx, round("fl_before", 1, mcp.ResultTypeInputRequired))
	testwait.Until(t, "the first flow recorded", recorded("fl_before", 1, record.AwaitingInput))

	rl.Cut()
	rec.Round(ctx, round("fl_during", 1, mcp.ResultTypeInputRequired))
	rec.Round(ctx, round("fl_during", 2, mcp.ResultTypeComplete))
	lost := func() int64 { mu.Lock(); defer mu.Unlock(); return dropped }
	testwait.Until(t, "a write failing while the database is unreachable", func() bool {
		return strings.Contains(logs.String(), "retrying while the database is unreachable") || lost() > 0
	})
	if n := lost(); n > 0 {
		t.Fatalf("%d rounds dropped when the write failed", n)
	}
	rl.Restore()
	testwait.Until(t, "the outage's rounds recorded once the database is back", recorded("fl_during", 2, record.Completed))
	if n := lost(); n > 0 {
		t.Fatalf("%d rounds counted as dropped", n)
	}
}

// TestCloseFinishesTheBatchBeingWritten: a replica stopping while a
// batch is being written (here, retried while the database is briefly
// unreachable) finishes that write, within the drain's bound, instead of
// cutting it off and dropping its rounds.
func TestCloseFinishesTheBatchBeingWritten(t *testing.T) {
	ctx := context.Background()
	url, rl := platformtest.PostgresThroughRelay(t, platformtest.PostgresSchemaURL(t))
	st := platformtest.Store(t, url)
	var logs syncBuffer
	var dropped atomic.Int64
	rec := flows.NewRecorder(ctx, flows.Options{Store: st.Record(), Replica: "r1", BatchDelay: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Dropped: func(n int64) { dropped.Add(n) }})
	rl.Cut()
	now := time.Now()
	rec.Round(ctx, &endpoint.Round{FlowID: "fl_last", TenantID: "tn_1", Tenant: "acme", Method: mcp.MethodToolsCall,
		Target: "order", Number: 1, ResultType: mcp.ResultTypeInputRequired, Arrived: now, Ended: now})
	testwait.Until(t, "the write retried while the database is unreachable", func() bool {
		return strings.Contains(logs.String(), "retrying while the database is unreachable")
	})
	// The write now waits out its backoff (100 ms at least) before it
	// tries again, so Close comes while the batch is still being written,
	// whichever of Close and Restore runs first: a Close that cut the
	// write off would drop the round here.
	closed := make(chan struct{})
	go func() { rec.Close(); close(closed) }()
	rl.Restore()
	<-closed
	if n := dropped.Load(); n > 0 {
		t.Fatalf("%d rounds dropped by Close", n)
	}
	f, rounds, err := st.Record().Get(ctx, "fl_last")
	if err != nil || f.State != record.AwaitingInput || len(rounds) != 1 {
		t.Fatalf("the last batch was not written: %v, %+v, %d rounds", err, f, len(rounds))
	}
}
