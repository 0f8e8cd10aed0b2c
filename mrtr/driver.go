package mrtr

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/opsmcp/platform/mcp"
)

// The client side of multi round-trip requests: a Driver takes the first
// InputRequiredResult of a tools/call, prompts/get or resources/read,
// gathers every answer it asks for, retries the request with them and the
// echoed requestState, and repeats until the server answers with a
// complete result. The transport is the caller's: the driver only sees
// raw results, a function that answers one input request, and a function
// that sends a retry.

// Backoff of rounds that carry only requestState (the server asks the
// client to come back later, e.g. while shedding load): the first waits
// BackoffInitial, each next one twice as long, up to BackoffMax. A round
// with input requests resets the backoff and does not wait.
const (
	BackoffInitial = 50 * time.Millisecond
	BackoffMax     = 250 * time.Millisecond
)

// Clock is the driver's time source, injectable so that tests observe
// waits without sleeping.
type Clock interface {
	Now() time.Time
	// Sleep waits for d, or returns ctx's error when it ends first.
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits for d or for ctx to end.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// Pending is an InputRequiredResult as the client side carries it.
type Pending struct {
	// InputRequests are the questions of this round, by the server's keys.
	// Empty on a state-only round.
	InputRequests map[string]InputRequest
	// RequestState is the requestState exactly as it arrived: the raw JSON
	// string token, never decoded or re-encoded, so that it goes back to
	// the server byte for byte. Nil when the result carried none (an
	// explicit null counts as none).
	RequestState json.RawMessage
	// Raw is the whole result as received.
	Raw json.RawMessage
}

// Keys returns the input request keys in sorted order.
func (p *Pending) Keys() []string {
	keys := make([]string, 0, len(p.InputRequests))
	for k := range p.InputRequests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Seed returns what resumes this flow once responses are gathered: the
// answers and this round's requestState.
func (p *Pending) Seed(responses map[string]json.RawMessage) Seed {
	return Seed{InputResponses: responses, RequestState: p.RequestState}
}

// Seed resumes a flow, possibly in another process: the first request of
// a call carries these inputResponses and requestState. Its JSON form is
// exactly those two request params, so it can be saved and loaded as is.
type Seed struct {
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
	// RequestState is the raw JSON string token, as Pending carries it.
	RequestState json.RawMessage `json:"requestState,omitempty"`
}

// ResultTypeError reports a result whose resultType the client does not
// know (the spec asks clients to treat unknown values as invalid).
type ResultTypeError struct {
	ResultType string
}

func (e *ResultTypeError) Error() string {
	return fmt.Sprintf("mrtr: result has unknown resultType %q", e.ResultType)
}

// ErrMalformedResult reports a result that is not a JSON object, or an
// InputRequiredResult with neither input requests nor requestState (which
// could only be retried blindly), or one whose fields have the wrong type.
var ErrMalformedResult = errors.New("mrtr: malformed result")

// ParseResult classifies a carrier method's result: nil for a complete
// result (resultType "complete" or absent), a Pending for
// "input_required", and an error for anything else.
func ParseResult(raw json.RawMessage) (*Pending, error) {
	var r struct {
		ResultType    *string                    `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  json.RawMessage            `json:"requestState"`
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrMalformedResult)
	}
	if err := json.Unmarshal(trimmed, &r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedResult, err)
	}
	switch {
	case r.ResultType == nil || *r.ResultType == mcp.ResultTypeComplete:
		return nil, nil
	case *r.ResultType == mcp.ResultTypeTask:
		// The call became a task: its rounds of input are over (a task
		// asks through tasks/get and tasks/update), so the driver is done.
		return nil, nil
	case *r.ResultType != mcp.ResultTypeInputRequired:
		return nil, &ResultTypeError{ResultType: *r.ResultType}
	}
	p := &Pending{Raw: raw}
	if st := bytes.TrimSpace(r.RequestState); len(st) > 0 && string(st) != "null" {
		if st[0] != '"' {
			return nil, fmt.Errorf("%w: requestState is not a string", ErrMalformedResult)
		}
		p.RequestState = slices.Clone(st)
	}
	if len(r.InputRequests) > 0 {
		p.InputRequests = make(map[string]InputRequest, len(r.InputRequests))
		for k, v := range r.InputRequests {
			var ir InputRequest
			if err := json.Unmarshal(v, &ir); err != nil || ir.Method == "" {
				return nil, fmt.Errorf("%w: inputRequests[%q] is not an input request", ErrMalformedResult, k)
			}
			p.InputRequests[k] = ir
		}
	}
	if len(p.InputRequests) == 0 && p.RequestState == nil {
		return nil, fmt.Errorf("%w: an input_required result with neither inputRequests nor requestState", ErrMalformedResult)
	}
	return p, nil
}

// DispatchFunc answers one input request: an elicitation, a sampling
// request or a roots listing. key is the server's key for it. The answer
// is the bare ElicitResult, CreateMessageResult or ListRootsResult JSON.
// It must return promptly once ctx is done: the driver cancels it when a
// sibling fails.
type DispatchFunc func(ctx context.Context, key string, req InputRequest) (json.RawMessage, error)

// Retry is one retry of the original request.
type Retry struct {
	// Round is the round being answered: 1 for the answers to the first
	// InputRequiredResult.
	Round int
	// InputResponses are the round's answers; nil on a state-only round,
	// in which case the retry carries no inputResponses.
	InputResponses map[string]json.RawMessage
	// RequestState is the round's requestState token, to send back
	// verbatim; nil when the server sent none, in which case the retry
	// carries no requestState key at all.
	RequestState json.RawMessage
}

// RetryFunc sends a retry: a new JSON-RPC request (new id) with the same
// method, name, arguments or URI and _meta as the original, plus the
// Retry's inputResponses and requestState. It returns the raw result.
type RetryFunc func(ctx context.Context, r Retry) (json.RawMessage, error)

// Phase is the point of a round an Observer is told about.
type Phase string

// Phases of a round.
const (
	// PhaseAsked: an InputRequiredResult arrived; its answers are about
	// to be gathered.
	PhaseAsked Phase = "asked"
	// PhaseAnswered: every answer is in; the retry follows after Wait.
	PhaseAnswered Phase = "answered"
	// PhaseFailed: the call ends with Err (an answer failed, the round
	// bound was reached, the context ended or the retry failed).
	PhaseFailed Phase = "failed"
	// PhaseComplete: the complete result arrived.
	PhaseComplete Phase = "complete"
)

// Round is what an Observer sees.
type Round struct {
	Phase Phase
	// Number is the round: 1 for the first InputRequiredResult. On
	// PhaseComplete it is the number of rounds the call needed.
	Number int
	// Keys are the round's input request keys, sorted, and Requests the
	// requests themselves (empty on a state-only round).
	Keys     []string
	Requests map[string]InputRequest
	// StateBytes is the length of the round's requestState token.
	StateBytes int
	// Responses are the gathered answers (PhaseAnswered).
	Responses map[string]json.RawMessage
	// Wait is the backoff before the retry of a state-only round
	// (PhaseAnswered); zero for a round with input requests.
	Wait time.Duration
	// Server is how long the retry that produced this round's result took
	// (zero on round 1, whose request the driver did not send).
	Server time.Duration
	// Elapsed is the time spent gathering the round's answers
	// (PhaseAnswered, PhaseFailed) or, on PhaseComplete, the whole time
	// the driver ran.
	Elapsed time.Duration
	// Err is why the call failed (PhaseFailed).
	Err error
}

// Observer sees every round, for logs, audit and metrics. It is called
// synchronously from the driver's goroutine and must not block.
type Observer func(Round)

// RoundsExceededError is returned when a call asks for input in more
// rounds than the driver's bound allows.
type RoundsExceededError struct {
	MaxRounds int
}

func (e *RoundsExceededError) Error() string {
	return fmt.Sprintf("mrtr: the server still asks for input after %d rounds (the driver's bound is %d rounds)", e.MaxRounds, e.MaxRounds)
}

// DispatchError is the first failure to answer an input request of a
// round. It ends the call: nothing is sent to the server, and the error
// never becomes an answer.
type DispatchError struct {
	Key    string
	Method string
	Err    error
}

func (e *DispatchError) Error() string {
	return fmt.Sprintf("mrtr: input request %q (%s): %v", e.Key, e.Method, e.Err)
}

func (e *DispatchError) Unwrap() error { return e.Err }

// Driver runs multi round-trip requests from the client side. The zero
// value is ready to use: DefaultMaxRounds, the system clock, no observer.
// A Driver is safe for concurrent use by many calls.
type Driver struct {
	// MaxRounds bounds the rounds of one call (0 means DefaultMaxRounds: a client gives
	// up where a server with the default policy stops minting, not before).
	// The first InputRequiredResult is round 1; the call fails with a
	// RoundsExceededError, before gathering any answer, when round
	// MaxRounds+1 arrives. So a call makes at most MaxRounds retries. The
	// caller's context deadline bounds its wall-clock time.
	MaxRounds int
	// Clock is the time source (nil means SystemClock).
	Clock Clock
	// Observer, if set, sees every round.
	Observer Observer
}

func (d *Driver) maxRounds() int {
	if d == nil || d.MaxRounds <= 0 {
		return DefaultMaxRounds
	}
	return d.MaxRounds
}

func (d *Driver) clock() Clock {
	if d == nil || d.Clock == nil {
		return SystemClock{}
	}
	return d.Clock
}

func (d *Driver) observe(r Round) {
	if d != nil && d.Observer != nil {
		d.Observer(r)
	}
}

// NextBackoff returns the wait of a state-only round that follows one
// that waited prev (zero when the previous round waited nothing).
func NextBackoff(prev time.Duration) time.Duration {
	if prev <= 0 {
		return BackoffInitial
	}
	return min(prev*2, BackoffMax)
}

// Run drives a call from its first result to a complete one. first is
// the raw result of the original request; when it is already complete it
// is returned as is. Every input request of a round is dispatched
// concurrently; the first failure cancels the others and ends the call
// with a *DispatchError. Run returns the complete result's raw JSON.
func (d *Driver) Run(ctx context.Context, first json.RawMessage, dispatch DispatchFunc, retry RetryFunc) (json.RawMessage, error) {
	clock := d.clock()
	max := d.maxRounds()
	start := clock.Now()
	raw := first
	var wait, server time.Duration
	for round := 1; ; round++ {
		p, err := ParseResult(raw)
		if err != nil {
			d.observe(Round{Phase: PhaseFailed, Number: round, Server: server, Err: err})
			return nil, err
		}
		if p == nil {
			d.observe(Round{Phase: PhaseComplete, Number: round - 1, Server: server, Elapsed: clock.Now().Sub(start)})
			return raw, nil
		}
		info := Round{Number: round, Keys: p.Keys(), Requests: p.InputRequests, StateBytes: len(p.RequestState), Server: server}
		if round > max {
			info.Phase, info.Err = PhaseFailed, &RoundsExceededError{MaxRounds: max}
			d.observe(info)
			return nil, info.Err
		}
		info.Phase = PhaseAsked
		d.observe(info)

		t0 := clock.Now()
		var responses map[string]json.RawMessage
		if len(p.InputRequests) > 0 {
			responses, err = dispatchAll(ctx, p, dispatch)
			wait = 0
		} else {
			wait = NextBackoff(wait)
		}
		info.Elapsed = clock.Now().Sub(t0)
		if err == nil {
			err = context.Cause(ctx)
		}
		if err != nil {
			info.Phase, info.Err = PhaseFailed, err
			d.observe(info)
			return nil, err
		}
		info.Phase, info.Responses = PhaseAnswered, responses
		if len(p.InputRequests) == 0 {
			info.Wait = wait
		}
		d.observe(info)
		if info.Wait > 0 {
			if err := clock.Sleep(ctx, info.Wait); err != nil {
				info.Phase, info.Err = PhaseFailed, err
				d.observe(info)
				return nil, err
			}
		}
		t1 := clock.Now()
		raw, err = retry(ctx, Retry{Round: round, InputResponses: responses, RequestState: p.RequestState})
		server = clock.Now().Sub(t1)
		if err != nil {
			info.Phase, info.Err, info.Server = PhaseFailed, err, server
			d.observe(info)
			return nil, err
		}
	}
}

// dispatchAll answers every input request of a round concurrently. The
// first failure cancels the rest; Run waits for all of them to return.
func dispatchAll(ctx context.Context, p *Pending, dispatch DispatchFunc) (map[string]json.RawMessage, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	out := make(map[string]json.RawMessage, len(p.InputRequests))
	fail := func(err error) {
		if first == nil {
			first = err
			cancel(err)
		}
	}
	for _, key := range p.Keys() {
		req := p.InputRequests[key]
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := safeDispatch(ctx, dispatch, key, req)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				fail(&DispatchError{Key: key, Method: req.Method, Err: err})
			case len(bytes.TrimSpace(resp)) == 0 || string(bytes.TrimSpace(resp)) == "null":
				fail(&DispatchError{Key: key, Method: req.Method, Err: errors.New("no answer")})
			default:
				out[key] = resp
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return out, nil
}

// safeDispatch turns a panicking callback into an error.
func safeDispatch(ctx context.Context, dispatch DispatchFunc, key string, req InputRequest) (resp json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return dispatch(ctx, key, req)
}

// DescribeRequest renders an input request in one line, for logs and
// verbose output: its method and, for an elicitation, its mode and
// message.
func DescribeRequest(req InputRequest) string {
	switch req.Method {
	case mcp.MethodElicit:
		var p struct {
			Mode    string `json:"mode"`
			Message string `json:"message"`
			URL     string `json:"url"`
		}
		_ = json.Unmarshal(req.Params, &p)
		if p.Mode == "" {
			p.Mode = "form"
		}
		s := fmt.Sprintf("%s (%s) %q", req.Method, p.Mode, oneLine(p.Message))
		if p.URL != "" {
			s += " " + p.URL
		}
		return s
	case mcp.MethodCreateMessage:
		var p struct {
			Messages  []json.RawMessage `json:"messages"`
			MaxTokens int               `json:"maxTokens"`
		}
		_ = json.Unmarshal(req.Params, &p)
		return fmt.Sprintf("%s (%d message(s), maxTokens %d)", req.Method, len(p.Messages), p.MaxTokens)
	}
	return req.Method
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
