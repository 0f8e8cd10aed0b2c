package mrtr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsmcp/platform/mcp"
)

// driverClock records every wait and advances time by it, so backoff is
// observed without sleeping.
type driverClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newDriverClock() *driverClock { return &driverClock{now: time.Unix(1_800_000_000, 0)} }

func (c *driverClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *driverClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return nil
}

func (c *driverClock) waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

const completeResult = `{"resultType":"complete","content":[{"type":"text","text":"done"}]}`

func elicit(msg string) string {
	return fmt.Sprintf(`{"method":"elicitation/create","params":{"message":%q,"requestedSchema":{"type":"object","properties":{}}}}`, msg)
}

// irr builds an InputRequiredResult with the given requests (key → JSON)
// and state token (raw JSON, "" for none).
func irr(state string, requests ...string) json.RawMessage {
	var parts []string
	if len(requests) > 0 {
		var reqs []string
		for i := 0; i+1 < len(requests); i += 2 {
			reqs = append(reqs, fmt.Sprintf("%q:%s", requests[i], requests[i+1]))
		}
		parts = append(parts, `"inputRequests":{`+strings.Join(reqs, ",")+`}`)
	}
	if state != "" {
		parts = append(parts, `"requestState":`+state)
	}
	return json.RawMessage(`{"resultType":"input_required",` + strings.Join(parts, ",") + `}`)
}

func accept(context.Context, string, InputRequest) (json.RawMessage, error) {
	return json.RawMessage(`{"action":"accept","content":{}}`), nil
}

// script is a RetryFunc that answers retries from a list of results and
// records every retry it was given.
type script struct {
	mu      sync.Mutex
	results []json.RawMessage
	retries []Retry
}

func (s *script) retry(_ context.Context, r Retry) (json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retries = append(s.retries, r)
	if len(s.results) == 0 {
		return nil, errors.New("script: no more results")
	}
	next := s.results[0]
	s.results = s.results[1:]
	return next, nil
}

func TestSingleRoundDispatchesThenRetriesToTheCompleteResult(t *testing.T) {
	s := &script{results: []json.RawMessage{json.RawMessage(completeResult)}}
	var asked []string
	dispatch := func(ctx context.Context, key string, req InputRequest) (json.RawMessage, error) {
		asked = append(asked, key+" "+req.Method)
		return json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`), nil
	}
	d := &Driver{Clock: newDriverClock()}
	got, err := d.Run(context.Background(), irr(`"s1"`, "name", elicit("Name?")), dispatch, s.retry)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != completeResult {
		t.Fatalf("result %s", got)
	}
	if !reflect.DeepEqual(asked, []string{"name elicitation/create"}) {
		t.Fatalf("dispatched %v", asked)
	}
	if len(s.retries) != 1 || string(s.retries[0].InputResponses["name"]) != `{"action":"accept","content":{"name":"Ada"}}` ||
		string(s.retries[0].RequestState) != `"s1"` || s.retries[0].Round != 1 {
		t.Fatalf("retries %+v", s.retries)
	}
}

func TestMultiRoundLoopsUntilTheRetryReturnsAResultThatIsNotInputRequired(t *testing.T) {
	s := &script{results: []json.RawMessage{
		irr(`"s2"`, "b", elicit("B?")),
		irr(`"s3"`, "c", elicit("C?")),
		json.RawMessage(completeResult),
	}}
	var keys []string
	var mu sync.Mutex
	dispatch := func(ctx context.Context, key string, req InputRequest) (json.RawMessage, error) {
		mu.Lock()
		keys = append(keys, key)
		mu.Unlock()
		return accept(ctx, key, req)
	}
	got, err := (&Driver{Clock: newDriverClock()}).Run(context.Background(), irr(`"s1"`, "a", elicit("A?")), dispatch, s.retry)
	if err != nil || string(got) != completeResult {
		t.Fatalf("got %s, %v", got, err)
	}
	if strings.Join(keys, ",") != "a,b,c" || len(s.retries) != 3 {
		t.Fatalf("keys %v, %d retries", keys, len(s.retries))
	}
	for i, want := range []string{`"s1"`, `"s2"`, `"s3"`} {
		if r := s.retries[i]; string(r.RequestState) != want || r.Round != i+1 || len(r.InputResponses) != 1 {
			t.Fatalf("retry %d: %+v", i, r)
		}
	}
}

func TestAFirstResultThatIsAlreadyCompleteIsReturnedWithoutDispatchOrRetry(t *testing.T) {
	for _, first := range []string{completeResult, `{"content":[]}`} {
		called := false
		dispatch := func(context.Context, string, InputRequest) (json.RawMessage, error) { called = true; return nil, nil }
		retry := func(context.Context, Retry) (json.RawMessage, error) { called = true; return nil, nil }
		got, err := (&Driver{}).Run(context.Background(), json.RawMessage(first), dispatch, retry)
		if err != nil || string(got) != first || called {
			t.Fatalf("%s: got %s, %v, called %v", first, got, err, called)
		}
	}
}

func TestAResultWithoutResultTypeCountsAsComplete(t *testing.T) {
	const noType = `{"content":[{"type":"text","text":"no-result-type-test-ok"}]}`
	s := &script{results: []json.RawMessage{json.RawMessage(noType)}}
	got, err := (&Driver{Clock: newDriverClock()}).Run(context.Background(), irr(`"x"`, "a", elicit("A?")), accept, s.retry)
	if err != nil || string(got) != noType || len(s.retries) != 1 {
		t.Fatalf("got %s, %v after %d retries", got, err, len(s.retries))
	}
}

func TestExceedingMaxRoundsFailsWithTheConfiguredBoundBeforeDispatching(t *testing.T) {
	var dispatched, retried atomic.Int32
	dispatch := func(ctx context.Context, key string, req InputRequest) (json.RawMessage, error) {
		dispatched.Add(1)
		return accept(ctx, key, req)
	}
	retry := func(context.Context, Retry) (json.RawMessage, error) {
		retried.Add(1)
		return irr(`"again"`, "q", elicit("Again?")), nil
	}
	d := &Driver{MaxRounds: 3, Clock: newDriverClock()}
	_, err := d.Run(context.Background(), irr(`"first"`, "q", elicit("Q?")), dispatch, retry)
	var rex *RoundsExceededError
	if !errors.As(err, &rex) || rex.MaxRounds != 3 || !strings.Contains(err.Error(), "3 rounds") {
		t.Fatalf("err %v", err)
	}
	// A bound of 3 allows exactly 3 retries: 4 legs in all, and round 4
	// fails before its questions are dispatched.
	if retried.Load() != 3 || dispatched.Load() != 3 {
		t.Fatalf("%d retries, %d dispatches; want 3 and 3", retried.Load(), dispatched.Load())
	}
}

func TestTheDefaultBoundIsTheSealersDefault(t *testing.T) {
	var retried atomic.Int32
	retry := func(context.Context, Retry) (json.RawMessage, error) {
		retried.Add(1)
		return irr(`"again"`, "q", elicit("Again?")), nil
	}
	_, err := (&Driver{Clock: newDriverClock()}).Run(context.Background(), irr(`"first"`, "q", elicit("Q?")), accept, retry)
	var rex *RoundsExceededError
	// A server with the default policy mints up to round DefaultMaxRounds;
	// the driver answers exactly that many before giving up.
	if !errors.As(err, &rex) || rex.MaxRounds != DefaultMaxRounds || retried.Load() != DefaultMaxRounds {
		t.Fatalf("err %v after %d retries, want %d", err, retried.Load(), DefaultMaxRounds)
	}
}

func TestAFailedDispatchEndsTheCallAndNothingIsSentToTheServer(t *testing.T) {
	boom := errors.New("user closed the dialog")
	dispatch := func(ctx context.Context, key string, req InputRequest) (json.RawMessage, error) {
		if key == "bad" {
			return nil, boom
		}
		return accept(ctx, key, req)
	}
	retried := false
	retry := func(context.Context, Retry) (json.RawMessage, error) {
		retried = true
		return json.RawMessage(completeResult), nil
	}
	_, err := (&Driver{Clock: newDriverClock()}).Run(context.Background(), irr(`"s"`, "bad", elicit("A?"), "good", elicit("B?")), dispatch, retry)
	var de *DispatchError
	if !errors.As(err, &de) || de.Key != "bad" || de.Method != mcp.MethodElicit || !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if retried {
		t.Fatal("the retry was sent after a failed dispatch")
	}
}

func TestTheFirstFailureCancelsItsSiblings(t *testing.T) {
	boom := errors.New("boom")
	siblingSawCancel := make(chan error, 1)
	dispatch := func(ctx context.Context, key string, req InputRequest) (json.RawMessage, error) {
		if key == "fails" {
			return nil, boom
		}
		// The sibling answers only when cancelled: had the driver waited
		// for it instead, Run would never return.
		<-ctx.Done()
		siblingSawCancel <- context.Cause(ctx)
		return nil, ctx.Err()
	}
	_, err := (&Driver{}).Run(context.Background(), irr("", "fails", elicit("A?"), "slow", elicit("B?")), dispatch,
		func(context.Context, Retry) (json.RawMessage, error) { t.Error("retry sent"); return nil, nil })
	if !errors.Is(err, boom) {
		t.Fatalf("err %v: the first failure must win over the cancelled sibling's", err)
	}
	cause := <-siblingSawCancel
	if cause == nil || !errors.Is(cause, boom) {
		t.Fatalf("sibling was not cancelled by the failure (cause %v)", cause)
	}
}

func TestAPanickingOrEmptyAnswerFailsTheCallInsteadOfCrashingOrSendingNull(t *testing.T) {
	for name, dispatch := range map[string]DispatchFunc{
		"panic": func(context.Context, string, InputRequest) (json.RawMessage, error) { panic("bug") },
		"nil":   func(context.Context, string, InputRequest) (json.RawMessage, error) { return nil, nil },
		"null": func(context.Context, string, InputRequest) (json.RawMessage, error) {
			return json.RawMessage("null"), nil
		},
	} {
		_, err := (&Driver{}).Run(context.Background(), irr("", "k", elicit("A?")), dispatch,
			func(context.Context, Retry) (json.RawMessage, error) {
				t.Errorf("%s: retry sent", name)
				return nil, nil
			})
		var de *DispatchError
		if !errors.As(err, &de) || de.Key != "k" {
			t.Fatalf("%s: err %v", name, err)
		}
	}
}

func TestRequestStateIsCarriedByteForByteAndNeverDecoded(t *testing.T) {
	// Escapes a decoder would normalise, HTML characters an encoder would
	// escape, and JSON-looking content: all must come back unchanged.
	tokens := []string{
		`"{\"nonce\":\"6c1f\",\"originalId\":3}"`,
		`"caf\u00e9 \/ <b>&amp;</b> \ud83d\ude00"`,
		`"v1.AAAA-_x"`,
	}
	for _, tok := range tokens {
		s := &script{results: []json.RawMessage{json.RawMessage(completeResult)}}
		if _, err := (&Driver{}).Run(context.Background(), irr(tok, "k", elicit("A?")), accept, s.retry); err != nil {
			t.Fatal(err)
		}
		if got := string(s.retries[0].RequestState); got != tok {
			t.Fatalf("state %s came back as %s", tok, got)
		}
	}
}

func TestARetryCarriesNoRequestStateWhenTheServerSentNoneOrNull(t *testing.T) {
	for _, first := range []json.RawMessage{
		irr("", "k", elicit("A?")),
		irr("null", "k", elicit("A?")),
	} {
		s := &script{results: []json.RawMessage{json.RawMessage(completeResult)}}
		if _, err := (&Driver{}).Run(context.Background(), first, accept, s.retry); err != nil {
			t.Fatal(err)
		}
		if s.retries[0].RequestState != nil {
			t.Fatalf("%s: retry carries state %s", first, s.retries[0].RequestState)
		}
	}
}

func TestStateOnlyRoundsBackOffExponentiallyToTheCap(t *testing.T) {
	clock := newDriverClock()
	s := &script{}
	for range 6 {
		s.results = append(s.results, irr(`"busy"`))
	}
	s.results[len(s.results)-1] = json.RawMessage(completeResult)
	dispatched := false
	dispatch := func(context.Context, string, InputRequest) (json.RawMessage, error) {
		dispatched = true
		return nil, nil
	}
	if _, err := (&Driver{Clock: clock}).Run(context.Background(), irr(`"busy"`), dispatch, s.retry); err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	want := []time.Duration{50 * ms, 100 * ms, 200 * ms, 250 * ms, 250 * ms, 250 * ms}
	if got := clock.waits(); !reflect.DeepEqual(got, want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
	if dispatched {
		t.Fatal("a state-only round dispatched something")
	}
	for _, r := range s.retries {
		if r.InputResponses != nil || string(r.RequestState) != `"busy"` {
			t.Fatalf("state-only retry %+v", r)
		}
	}
}

func TestARoundWithInputRequestsResetsTheBackoffAndDoesNotWait(t *testing.T) {
	clock := newDriverClock()
	var waits []time.Duration
	obs := func(r Round) {
		if r.Phase == PhaseAnswered {
			waits = append(waits, r.Wait)
		}
	}
	s := &script{results: []json.RawMessage{
		irr(`"busy"`),
		irr(`"ask"`, "q", elicit("Q?")),
		irr(`"busy"`),
		json.RawMessage(completeResult),
	}}
	if _, err := (&Driver{Clock: clock, Observer: obs}).Run(context.Background(), irr(`"busy"`), accept, s.retry); err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	if want := []time.Duration{50 * ms, 100 * ms, 0, 50 * ms}; !reflect.DeepEqual(waits, want) {
		t.Fatalf("round waits %v, want %v", waits, want)
	}
	if want := []time.Duration{50 * ms, 100 * ms, 50 * ms}; !reflect.DeepEqual(clock.waits(), want) {
		t.Fatalf("sleeps %v, want %v", clock.waits(), want)
	}
}

func TestInputRequestsOfARoundAreDispatchedConcurrently(t *testing.T) {
	const n = 4
	var inFlight, peak atomic.Int32
	barrier := make(chan struct{})
	var arrived atomic.Int32
	dispatch := func(ctx context.Context, key string, req InputRequest) (json.RawMessage, error) {
		cur := inFlight.Add(1)
		for {
			p := peak.Load()
			if cur <= p || peak.CompareAndSwap(p, cur) {
				break
			}
		}
		if arrived.Add(1) == n {
			close(barrier)
		}
		// Every request waits until all of them are in flight at once:
		// dispatched one at a time, the first would wait for ever.
		<-barrier
		inFlight.Add(-1)
		return accept(ctx, key, req)
	}
	var reqs []string
	for i := range n {
		reqs = append(reqs, fmt.Sprintf("k%d", i), elicit("Q?"))
	}
	s := &script{results: []json.RawMessage{json.RawMessage(completeResult)}}
	if _, err := (&Driver{}).Run(context.Background(), irr(`"s"`, reqs...), dispatch, s.retry); err != nil {
		t.Fatal(err)
	}
	if peak.Load() != n || len(s.retries[0].InputResponses) != n {
		t.Fatalf("peak concurrency %d, %d answers", peak.Load(), len(s.retries[0].InputResponses))
	}
}

// heldClock is the real clock, except that every backoff is an hour
// long and announced on sleeping first: only the caller's context ending
// can cut it short.
type heldClock struct {
	SystemClock
	sleeping chan time.Duration
}

func (c heldClock) Sleep(ctx context.Context, d time.Duration) error {
	c.sleeping <- d
	return c.SystemClock.Sleep(ctx, time.Hour)
}

func TestTheCallersContextEndsTheBackoffAndTheLoop(t *testing.T) {
	stop := errors.New("the caller gave up")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var retries atomic.Int32
	retry := func(context.Context, Retry) (json.RawMessage, error) {
		retries.Add(1)
		return irr(`"busy"`), nil
	}
	clock := heldClock{sleeping: make(chan time.Duration)}
	done := make(chan error, 1)
	go func() {
		_, err := (&Driver{MaxRounds: 1000, Clock: clock}).Run(ctx, irr(`"busy"`), accept, retry)
		done <- err
	}()
	if d := <-clock.sleeping; d != BackoffInitial {
		t.Fatalf("first backoff %v, want %v", d, BackoffInitial)
	}
	cancel(stop)
	if err := <-done; !errors.Is(err, stop) {
		t.Fatalf("err %v, want the caller's cause", err)
	}
	if n := retries.Load(); n != 0 {
		t.Fatalf("%d retries sent after the caller gave up during the first backoff", n)
	}

	// A context that ends while a retry is out stops the loop before the
	// next round's backoff.
	ctx, cancel = context.WithCancelCause(context.Background())
	defer cancel(nil)
	retries.Store(0)
	retry = func(context.Context, Retry) (json.RawMessage, error) {
		if retries.Add(1) == 3 {
			cancel(stop)
		}
		return irr(`"busy"`), nil
	}
	_, err := (&Driver{MaxRounds: 1000, Clock: newDriverClock()}).Run(ctx, irr(`"busy"`), accept, retry)
	if !errors.Is(err, stop) || retries.Load() != 3 {
		t.Fatalf("err %v after %d retries, want the caller's cause after 3", err, retries.Load())
	}
}

func TestTheObserverSeesEveryRound(t *testing.T) {
	clock := newDriverClock()
	var seen []string
	obs := func(r Round) {
		s := fmt.Sprintf("%s#%d", r.Phase, r.Number)
		if r.Phase == PhaseAsked {
			s += fmt.Sprintf("%v/%d", r.Keys, r.StateBytes)
		}
		if r.Phase == PhaseAnswered {
			s += fmt.Sprintf("[%d answers, wait %v]", len(r.Responses), r.Wait)
		}
		seen = append(seen, s)
	}
	s := &script{results: []json.RawMessage{irr(`"s2"`), json.RawMessage(completeResult)}}
	if _, err := (&Driver{Clock: clock, Observer: obs}).Run(context.Background(), irr(`"s1"`, "b", elicit("B?"), "a", elicit("A?")), accept, s.retry); err != nil {
		t.Fatal(err)
	}
	want := []string{"asked#1[a b]/4", "answered#1[2 answers, wait 0s]", "asked#2[]/4", "answered#2[0 answers, wait 50ms]", "complete#2"}
	if !reflect.DeepEqual(seen, want) {
		t.Fatalf("observed %v\nwant     %v", seen, want)
	}
	// Failures are observed too.
	seen = nil
	_, _ = (&Driver{Clock: clock, Observer: obs}).Run(context.Background(), irr("", "x", elicit("X?")),
		func(context.Context, string, InputRequest) (json.RawMessage, error) { return nil, errors.New("no") }, s.retry)
	if len(seen) != 2 || seen[1] != "failed#1" {
		t.Fatalf("observed %v", seen)
	}
}

func TestUnknownAndMalformedResultsAreErrors(t *testing.T) {
	cases := map[string]string{
		`{"resultType":"stream","taskId":"1"}`:                          "unknown resultType",
		`{"resultType":"input_required"}`:                               "neither",
		`{"resultType":"input_required","inputRequests":{}}`:            "neither",
		`{"resultType":"input_required","requestState":7}`:              "not a string",
		`{"resultType":"input_required","inputRequests":{"k":"x"}}`:     "not an input request",
		`{"resultType":"input_required","inputRequests":{"k":{"a":1}}}`: "not an input request",
		`[1,2]`: "not a JSON object",
		`{"resultType":"input_required","inputRequests":{"k":{"method":`: "malformed",
	}
	for raw, want := range cases {
		_, err := (&Driver{}).Run(context.Background(), json.RawMessage(raw), accept,
			func(context.Context, Retry) (json.RawMessage, error) { t.Errorf("%s: retried", raw); return nil, nil })
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", raw, err, want)
		}
	}
	var rte *ResultTypeError
	if _, err := ParseResult(json.RawMessage(`{"resultType":"stream"}`)); !errors.As(err, &rte) || rte.ResultType != "stream" {
		t.Fatalf("err %v", err)
	}
	// A task (the Tasks extension) ends the rounds of input: the caller
	// follows the task.
	if p, err := ParseResult(json.RawMessage(`{"resultType":"task","taskId":"tk_1","status":"working"}`)); p != nil || err != nil {
		t.Fatalf("a task result: %v %v", p, err)
	}
}

func TestASeedIsExactlyTheRetryParamsAndRoundTripsThroughJSON(t *testing.T) {
	p, err := ParseResult(irr(`"tok\u00e9n"`, "k", elicit("A?")))
	if err != nil {
		t.Fatal(err)
	}
	seed := p.Seed(map[string]json.RawMessage{"k": json.RawMessage(`{"action":"decline"}`)})
	b, err := json.Marshal(seed)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"inputResponses":{"k":{"action":"decline"}},"requestState":"tok\u00e9n"}` {
		t.Fatalf("seed JSON %s", b)
	}
	var back Seed
	if err := json.Unmarshal(b, &back); err != nil || string(back.RequestState) != `"tok\u00e9n"` {
		t.Fatalf("seed back %s, %v", back.RequestState, err)
	}
}

func TestDescribeRequestRendersOneLine(t *testing.T) {
	cases := map[string]string{
		`{"method":"elicitation/create","params":{"message":"Your\nname?"}}`:                           `elicitation/create (form) "Your name?"`,
		`{"method":"elicitation/create","params":{"mode":"url","message":"Log in","url":"https://x"}}`: `elicitation/create (url) "Log in" https://x`,
		`{"method":"sampling/createMessage","params":{"messages":[{}],"maxTokens":9}}`:                 `sampling/createMessage (1 message(s), maxTokens 9)`,
		`{"method":"roots/list"}`: `roots/list`,
	}
	for raw, want := range cases {
		var ir InputRequest
		_ = json.Unmarshal([]byte(raw), &ir)
		if got := DescribeRequest(ir); got != want {
			t.Errorf("%s: %q, want %q", raw, got, want)
		}
	}
}
