package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/opsmcp/platform/client"
)

// Era is one protocol era's client. The fleet drives flows of every era
// it is given side by side; each era runs whole flows through the
// fleet's one address and records every round it sends.
type Era interface {
	// Name labels the era's flows ("2026-07-28", "2025-11-25").
	Name() string
	// Run drives f (its Tool, Ref and answers already chosen) from its
	// first round to its end, recording each round with f.add and the
	// end with f.complete or f.fail. It returns when the flow has ended;
	// no round may outlive the round timeout.
	Run(ctx context.Context, f *Flow)
}

// Flow is one logical call as the client saw it.
type Flow struct {
	Era  string
	Tool string
	Ref  string
	// Who and Nonce are the answers the client gives; the result must
	// carry them back.
	Who, Nonce string
	// TraceID is the client's trace for the whole flow: every round is
	// sent under a span of it (a traceparent with a fresh span id).
	TraceID string

	Start, End time.Time
	Rounds     []Round
	Completed  bool
	Failure    *Failure
	// FlowID is the platform's id of the flow, from the result.
	FlowID string
}

// Round is one request of a flow: an answered round, or an attempt that
// failed (Err set).
type Round struct {
	N          int
	Start, End time.Time
	// Replica is the server HAProxy names in ReplicaHeader ("" when the
	// answer carried none, "<NOSRV>" when HAProxy had none to choose).
	Replica string
	// Status is the HTTP status (0 when no answer arrived).
	Status int
	// ClientSpan is the span id of the traceparent the round was sent
	// under: the platform's SERVER span of the round is its child.
	ClientSpan string
	// Result is "input_required" or "complete" for an answered round.
	Result string
	// Relayed says, for a legacy round after the first, that its answer
	// was posted to a replica other than the one holding the call.
	Relayed bool
	// Err, Class and Detail describe a failed attempt.
	Err           error
	Class, Detail string
}

// answered reports whether the round got a result.
func (r *Round) answered() bool { return r.Err == nil && r.Result != "" }

// Failure is why a flow did not complete.
type Failure struct {
	// Class is one of the failure classes below.
	Class  string
	Detail string
}

// Failure classes. ClassRetryable and ClassClosed are clean: an answer a
// client can act on (send the round again: its state stays valid until
// it expires, and a single-use state already consumed is refused
// fleet-wide), and that came back promptly.
const (
	// ClassRetryable: HTTP 502, 503, 504 or 429 (from HAProxy or a
	// replica), with or without a JSON-RPC error body.
	ClassRetryable = "retryable"
	// ClassClosed: the connection closed before any answer. HAProxy does
	// this, instead of answering 502, when the replica dies under a
	// request that was not the first on a kept-alive client connection:
	// HTTP's signal that the client may send the request again.
	ClassClosed = "closed"
	// ClassRejected: a JSON-RPC error (a refused state, an unknown tool,
	// …) or a tool error: the platform said no to a valid round.
	ClassRejected = "rejected"
	// ClassWrong: an answer the protocol allows but that is not this
	// flow's (wrong content, an unexpected question, too many rounds).
	ClassWrong = "wrong"
	// ClassHang: no answer within the round timeout.
	ClassHang = "hang"
	// ClassTransport: any other failure to reach the load balancer.
	ClassTransport = "transport"
)

// actionable reports whether a failure class is one a client can act on.
func actionable(class string) bool { return class == ClassRetryable || class == ClassClosed }

// retryPause is how long the driver waits before acting on a clean
// failure by sending the round again; each further attempt waits twice
// as long, up to retryMaxPause.
const (
	retryPause    = 250 * time.Millisecond
	retryMaxPause = 2 * time.Second
)

// retrier acts on a round's clean failures as a client would: it sends
// the round again after a pause that grows, for as long as the round
// timeout allows from the first failure.
type retrier struct {
	first time.Time
	wait  time.Duration
}

// again reports whether the failed attempt rd is to be sent again, and
// waits before it is.
func (r *retrier) again(rd Round, timeout time.Duration) bool {
	if !actionable(rd.Class) {
		return false
	}
	if r.first.IsZero() {
		r.first, r.wait = rd.Start, retryPause
	}
	if time.Since(r.first)+r.wait > timeout {
		return false
	}
	time.Sleep(r.wait)
	r.wait = min(2*r.wait, retryMaxPause)
	return true
}

func (f *Flow) add(r Round) { f.Rounds = append(f.Rounds, r) }

func (f *Flow) complete(flowID string) {
	f.Completed, f.FlowID, f.End = true, flowID, time.Now()
}

func (f *Flow) fail(class, detail string) {
	f.Failure, f.End = &Failure{Class: class, Detail: detail}, time.Now()
}

// classify names the class of a round's error. roundCtx is the round's
// own context: its deadline passing is a hang.
func classify(roundCtx context.Context, err error) (class, detail string) {
	var he *client.HTTPError
	var re *client.RPCError
	switch {
	case errors.Is(roundCtx.Err(), context.DeadlineExceeded):
		return ClassHang, "no answer within the round timeout"
	case errors.As(err, &re):
		if retryableStatus(re.HTTPStatus) {
			return ClassRetryable, fmt.Sprintf("HTTP %d, JSON-RPC %d %s", re.HTTPStatus, re.Code, re.Message)
		}
		return ClassRejected, fmt.Sprintf("HTTP %d, JSON-RPC %d %s %s", re.HTTPStatus, re.Code, re.Message, re.Data)
	case errors.As(err, &he):
		if retryableStatus(he.StatusCode) {
			return ClassRetryable, fmt.Sprintf("HTTP %d", he.StatusCode)
		}
		return ClassRejected, he.Error()
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
		return ClassClosed, "connection closed without an answer"
	}
	return ClassTransport, err.Error()
}

func retryableStatus(s int) bool {
	switch s {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusTooManyRequests:
		return true
	}
	return false
}

// probe carries a round's HTTP facts from the transport back to the era.
type probe struct {
	mu      sync.Mutex
	status  int
	replica string
}

type probeKey struct{}

func withProbe(ctx context.Context, p *probe) context.Context {
	return context.WithValue(ctx, probeKey{}, p)
}

func (p *probe) get() (int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status, p.replica
}

// probeTransport records, for the request that carries a round (the
// method given), the status and the replica HAProxy names. The client's
// own discovery and listing requests share the context and are skipped.
type probeTransport struct {
	base   http.RoundTripper
	method string
}

func (t probeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if p, ok := req.Context().Value(probeKey{}).(*probe); ok && req.Header.Get("Mcp-Method") == t.method && err == nil {
		p.mu.Lock()
		p.status, p.replica = resp.StatusCode, resp.Header.Get(ReplicaHeader)
		p.mu.Unlock()
	}
	return resp, err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func traceparent(traceID, spanID string) string { return "00-" + traceID + "-" + spanID + "-01" }

// think pauses between rounds for a random time from zero to twice mean.
func think(mean time.Duration) {
	if mean > 0 {
		time.Sleep(time.Duration(pick(int(2*mean/time.Microsecond)+1)) * time.Microsecond)
	}
}

// pick returns a uniformly random index below n.
func pick(n int) int {
	v, _ := rand.Int(rand.Reader, big.NewInt(int64(n)))
	return int(v.Int64())
}
