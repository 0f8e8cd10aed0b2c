package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/opsmcp/platform/client"
)

// TestClassifyTellsActionableFailuresFromRejections: the fleet's verdict
// on a round rests on this. Statuses a client retries on, and a
// connection closed with no answer, are actionable; a JSON-RPC error on
// any other status (a refused state, an unknown tool) is a rejection;
// the round's deadline passing is a hang whatever the error says; a
// refused connection to the balancer is a transport failure.
func TestClassifyTellsActionableFailuresFromRejections(t *testing.T) {
	live := context.Background()
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	wrap := func(err error) error {
		return fmt.Errorf("mcp: tools/call: %w", &url.Error{Op: "Post", URL: "http://127.0.0.1/t/fleet/mcp", Err: err})
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want string
	}{
		{"HAProxy's 502", live, &client.HTTPError{StatusCode: 502}, ClassRetryable},
		{"HAProxy's 503 with no replica", live, &client.HTTPError{StatusCode: 503}, ClassRetryable},
		{"a 504", live, &client.HTTPError{StatusCode: 504}, ClassRetryable},
		{"a 429", live, &client.HTTPError{StatusCode: 429}, ClassRetryable},
		{"a replica's 503 with a JSON-RPC error", live, &client.RPCError{Code: -32603, HTTPStatus: 503}, ClassRetryable},
		{"a refused state", live, &client.RPCError{Code: -32602, Message: "Invalid or expired requestState", HTTPStatus: 200}, ClassRejected},
		{"an unknown tool", live, &client.RPCError{Code: -32602, HTTPStatus: 200}, ClassRejected},
		{"a 401", live, &client.HTTPError{StatusCode: 401}, ClassRejected},
		{"a 500", live, &client.RPCError{Code: -32603, HTTPStatus: 500}, ClassRejected},
		{"a connection closed with no answer", live, wrap(io.EOF), ClassClosed},
		{"a connection reset", live, wrap(syscall.ECONNRESET), ClassClosed},
		{"the balancer refusing connections", live, wrap(syscall.ECONNREFUSED), ClassTransport},
		{"the round's deadline", expired, wrap(context.DeadlineExceeded), ClassHang},
		{"the deadline even with a 503 on the way", expired, &client.HTTPError{StatusCode: 503}, ClassHang},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := classify(tc.ctx, tc.err); got != tc.want {
				t.Fatalf("classify(%v) = %s, want %s", tc.err, got, tc.want)
			}
		})
	}
	if !actionable(ClassRetryable) || !actionable(ClassClosed) || actionable(ClassRejected) || actionable(ClassHang) || actionable(ClassTransport) || actionable(ClassWrong) {
		t.Fatal("actionable classes are retryable and closed only")
	}
	if _, d := classify(live, errors.New("x")); d != "x" {
		t.Fatalf("detail %q", d)
	}
}

// TestOnlyTheFaultsExplainAFailure: a clean failure is accepted only
// when a fault explains it: a round on the killed replica (or answered
// by none) between its SIGKILL and its return, or a round overlapping
// the PostgreSQL outage. The same failure elsewhere, or on another
// replica, is unexplained.
func TestOnlyTheFaultsExplainAFailure(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tl := &timeline{
		kills:     []kill{{replica: "r2", at: at(10), back: at(12)}},
		pgOutages: []window{{from: at(30), to: at(34)}},
	}
	for _, tc := range []struct {
		name       string
		start, end float64
		replica    string
		want       string
	}{
		{"in flight on the killed replica", 9.99, 10.01, "r2", CauseKill},
		{"closed with no answer at the kill", 9.99, 10.01, "", CauseKill},
		{"sent to it before HAProxy saw it gone", 10.002, 10.005, "", CauseKill},
		{"on another replica at the kill", 9.99, 10.01, "r1", ""},
		{"on the killed replica before the kill", 9, 9.5, "r2", ""},
		{"on the killed replica once it is back", 12.5, 12.6, "r2", ""},
		{"during the PostgreSQL outage", 31, 31.1, "r3", CausePG},
		{"just after PostgreSQL is back", 34.5, 34.6, "r1", CausePG},
		{"long after it", 40, 40.1, "r1", ""},
		{"HAProxy with no replica up, PostgreSQL back", 38, 38.1, noServer, CausePG},
		{"HAProxy with no replica up, long after", 46, 46.1, noServer, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Round{Start: at(tc.start), End: at(tc.end), Replica: tc.replica}
			if got := tl.cause(r); got != tc.want {
				t.Fatalf("cause = %q, want %q", got, tc.want)
			}
		})
	}
	lostAt := func(end float64, replica string) bool {
		return tl.lost(&Flow{Rounds: []Round{{Start: at(end - 0.01), End: at(end), Replica: replica, Result: "complete"}}})
	}
	if !lostAt(9.5, "r2") || !lostAt(10.05, "r2") || lostAt(8, "r2") || lostAt(9.5, "r1") || lostAt(10.5, "r2") {
		t.Fatal("only rounds the killed replica answered in the second before its kill may be lost with it")
	}
}

func TestARefusedDestructiveRoundIsExpectedOnlyAfterALostAttemptOfIt(t *testing.T) {
	lost := Round{N: 2, Err: errors.New("closed"), Class: ClassClosed}
	busy := Round{N: 2, Err: errors.New("503"), Class: ClassRetryable}
	refused := Round{N: 2, Err: errors.New("-32602"), Class: ClassRejected}
	other := Round{N: 1, Err: errors.New("closed"), Class: ClassClosed}
	answered := Round{N: 1, Result: "input_required"}
	for _, tc := range []struct {
		name   string
		rounds []Round
		want   bool
	}{
		{"after the same round was lost", []Round{answered, lost, refused}, true},
		{"after the same round was refused by a busy replica", []Round{answered, busy, refused}, true},
		{"with no attempt before", []Round{answered, refused}, false},
		{"after another round was lost", []Round{other, answered, refused}, false},
		{"after a refusal only", []Round{answered, refused, refused}, false},
	} {
		f := &Flow{Tool: deployTool, Rounds: tc.rounds}
		if got := consumedBefore(f, len(tc.rounds)-1); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
