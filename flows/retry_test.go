package flows_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsmcp/platform/flows"
	"github.com/opsmcp/platform/internal/platformtest"
	"github.com/opsmcp/platform/internal/testwait"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/tenants"
)

// relay forwards TCP connections to the test PostgreSQL server and can
// cut them all and refuse new ones: the database seen unreachable by one
// replica, as when it is stopped or fails over. (The shared server itself
// cannot be stopped under the other tests; the fleet test stops a server
// of its own.)
type relay struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
}

func newRelay(t *testing.T, target string) *relay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); r.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			if r.down {
				r.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				r.mu.Unlock()
				c.Close()
				continue
			}
			r.conns = append(r.conns, c, up)
			r.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return r
}

// cut closes every connection and refuses new ones until restore.
func (r *relay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = true
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

func (r *relay) restore() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = false
}

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
	url := platformtest.PostgresSchemaURL(t)
	const server = "127.0.0.1:5432"
	if !strings.Contains(url, server) {
		t.Fatalf("the test PostgreSQL is not at %s: %s", server, url)
	}
	rl := newRelay(t, server)
	st, err := store.Open(ctx, strings.Replace(url, server, rl.ln.Addr().String(), 1))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	var dropped int64
	var mu sync.Mutex
	rec := flows.NewRecorder(ctx, flows.Options{Store: st, Replica: "r1", BatchDelay: 10 * time.Millisecond,
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
		Dropped: func(n int64) { mu.Lock(); dropped += n; mu.Unlock() }})
	defer rec.Close()
	round := func(flow string, n int, result string) *tenants.Round {
		now := time.Now()
		rd := &tenants.Round{FlowID: flow, TenantID: "tn_1", Tenant: "acme", Method: mcp.MethodToolsCall, Target: "order",
			Number: n, ResultType: result, Arrived: now.Add(-time.Millisecond), Ended: now}
		if n > 1 {
			rd.StateIn.Outcome = tenants.StateVerified
		}
		return rd
	}
	recorded := func(flow string, rounds int, state string) func() bool {
		return func() bool {
			f, rs, err := st.GetFlow(ctx, flow)
			return err == nil && f.State == state && len(rs) == rounds
		}
	}
	rec.Round(ctx, round("fl_before", 1, mcp.ResultTypeInputRequired))
	testwait.Until(t, "the first flow recorded", recorded("fl_before", 1, store.FlowAwaitingInput))

	rl.cut()
	rec.Round(ctx, round("fl_during", 1, mcp.ResultTypeInputRequired))
	rec.Round(ctx, round("fl_during", 2, mcp.ResultTypeComplete))
	lost := func() int64 { mu.Lock(); defer mu.Unlock(); return dropped }
	testwait.Until(t, "a write failing while the database is unreachable", func() bool {
		return strings.Contains(logs.String(), "retrying while the database is unreachable") || lost() > 0
	})
	if n := lost(); n > 0 {
		t.Fatalf("%d rounds dropped when the write failed", n)
	}
	rl.restore()
	testwait.Until(t, "the outage's rounds recorded once the database is back", recorded("fl_during", 2, store.FlowCompleted))
	if n := lost(); n > 0 {
		t.Fatalf("%d rounds counted as dropped", n)
	}
}
