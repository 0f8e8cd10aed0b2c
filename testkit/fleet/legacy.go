package fleet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opsmcp/platform/client"
	"github.com/opsmcp/platform/mrtr"
)

// legacyVersion is the initialization-era protocol the legacy driver
// speaks.
const legacyVersion = "2025-11-25"

// legacyEra drives 2025-11-25 flows, as an initialization-era client
// does: a session opened with initialize (its Mcp-Session-Id sent with
// every later request, through HAProxy, so each lands on any replica), a
// tools/call whose answer is an event stream on which the replica
// serving the call sends the flow's questions as elicitation/create
// requests, each answered by a new POST (which HAProxy may send to
// another replica: the platform relays it to the one holding the call),
// and the result at the end of the stream. The platform runs the same
// rounds as for a 2026-07-28 client (the bridge); every one of them is
// served by the replica holding the stream.
//
// It speaks the wire itself (the project's client is 2026-07-28 only).
// A session is kept for many flows, one flow at a time, as a client
// keeps its session; a 404 ends it and the next flow initializes again,
// as the protocol says.
type legacyEra struct {
	url          string
	http         *http.Client
	roundTimeout time.Duration
	think        time.Duration

	mu       sync.Mutex
	sessions []string // idle sessions
	ids      atomic.Int64
	// answers counts the answers posted, and relayed those HAProxy sent
	// to a replica other than the one holding the call.
	answers, relayed atomic.Int64
	// initialized counts the sessions opened.
	initialized atomic.Int64
}

func newLegacyEra(url string, conns int, roundTimeout, think time.Duration) *legacyEra {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = conns * 2
	return &legacyEra{url: url, http: &http.Client{Transport: tr}, roundTimeout: roundTimeout, think: think}
}

func (e *legacyEra) Name() string { return legacyVersion }

// exchange is one POST and its answer's headers.
type legacyPost struct {
	resp    *http.Response
	replica string
	start   time.Time
}

func (e *legacyEra) post(ctx context.Context, session string, msg any) (*legacyPost, error) {
	b, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", legacyVersion)
	}
	p := &legacyPost{start: time.Now()}
	p.resp, err = e.http.Do(req)
	if err != nil {
		return nil, err
	}
	p.replica = p.resp.Header.Get(ReplicaHeader)
	return p, nil
}

// statusError is an HTTP answer the legacy driver did not expect, shaped
// as the project's client reports one, so classify reads it alike.
func statusError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var m struct {
		Error *struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &m) == nil && m.Error != nil {
		return &client.RPCError{Code: m.Error.Code, Message: m.Error.Message, Data: m.Error.Data, HTTPStatus: resp.StatusCode}
	}
	return &client.HTTPError{StatusCode: resp.StatusCode, Header: resp.Header, Body: string(b)}
}

// session returns an idle session, or opens one.
func (e *legacyEra) session(ctx context.Context) (string, error) {
	e.mu.Lock()
	if n := len(e.sessions); n > 0 {
		s := e.sessions[n-1]
		e.sessions = e.sessions[:n-1]
		e.mu.Unlock()
		return s, nil
	}
	e.mu.Unlock()
	p, err := e.post(ctx, "", map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": legacyVersion,
		"capabilities":    map[string]any{"elicitation": map[string]any{"form": map[string]any{}}},
		"clientInfo":      map[string]any{"name": "opsmcp-fleet-legacy", "version": "1"},
	}})
	if err != nil {
		return "", err
	}
	defer p.resp.Body.Close()
	var m struct {
		Result *struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if p.resp.StatusCode != http.StatusOK {
		return "", statusError(p.resp)
	}
	b, _ := io.ReadAll(io.LimitReader(p.resp.Body, 1<<20))
	if json.Unmarshal(b, &m) != nil || m.Result == nil || m.Result.ProtocolVersion != legacyVersion {
		return "", &client.ProtocolError{Msg: "initialize: unexpected answer " + trim(string(b), 200)}
	}
	id := p.resp.Header.Get("Mcp-Session-Id")
	if id == "" {
		return "", &client.ProtocolError{Msg: "initialize: no Mcp-Session-Id"}
	}
	n, err := e.post(ctx, id, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	if err != nil {
		return "", err
	}
	defer n.resp.Body.Close()
	_, _ = io.Copy(io.Discard, n.resp.Body)
	if n.resp.StatusCode != http.StatusAccepted {
		return "", statusError(n.resp)
	}
	e.initialized.Add(1)
	return id, nil
}

func (e *legacyEra) release(session string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sessions = append(e.sessions, session)
}

// Run drives one flow over the session's event stream. A clean failure
// before the call's stream opened (initialize refused, the call answered
// with a retryable status) is acted on: the call is sent again, as the
// retrier allows. A failure
// once rounds were answered ends the flow: its state lives in the call
// on the replica that held it, so the client's recourse is a new call
// (the next flow).
func (e *legacyEra) Run(ctx context.Context, f *Flow) {
	clientSpan := randomHex(8)
	gone := 0
	var retry retrier
	for {
		rd := Round{N: 1, ClientSpan: clientSpan, Start: time.Now()}
		rctx, cancel := context.WithTimeout(ctx, e.roundTimeout)
		session, err := e.session(rctx)
		if err == nil {
			var started bool
			started, err = e.call(ctx, f, session, clientSpan)
			cancel()
			if started || err == nil {
				return
			}
		} else {
			cancel()
		}
		// Nothing of the call was answered: record the attempt.
		rd.End = time.Now()
		rd.Err = err
		rd.Class, rd.Detail = classify(rctx, err)
		var he *client.HTTPError
		var re *client.RPCError
		if (errors.As(err, &he) && he.StatusCode == http.StatusNotFound) || (errors.As(err, &re) && re.HTTPStatus == http.StatusNotFound) {
			// The session is gone (404): open another one, as the
			// protocol says, and call again. Not a failure, unless the
			// fresh sessions are refused too.
			if gone++; gone <= 2 {
				continue
			}
		}
		f.add(rd)
		if retry.again(rd, e.roundTimeout) {
			clientSpan = randomHex(8)
			continue
		}
		f.fail(rd.Class, rd.Detail)
		return
	}
}

// call sends tools/call on session and follows its stream to the end,
// recording its rounds in f. started says whether the call got as far as
// an answered round (or an answer of its own), after which it is not
// sent again; a nil error with started means f ended (completed or
// failed).
func (e *legacyEra) call(ctx context.Context, f *Flow, session, clientSpan string) (started bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A watchdog: no event within the round timeout is a hang.
	var hung atomic.Bool
	watchdog := time.AfterFunc(e.roundTimeout, func() { hung.Store(true); cancel() })
	defer watchdog.Stop()
	id := e.ids.Add(1)
	rd := Round{N: 1, ClientSpan: clientSpan, Start: time.Now()}
	p, err := e.post(ctx, session, map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{
		"name": f.Tool, "arguments": map[string]any{"ref": f.Ref},
		"_meta": map[string]any{"traceparent": traceparent(f.TraceID, clientSpan)},
	}})
	if err != nil {
		return false, err
	}
	defer p.resp.Body.Close()
	holder := p.replica
	rd.Replica, rd.Status = holder, p.resp.StatusCode
	if p.resp.StatusCode != http.StatusNotFound {
		defer e.release(session) // a session the platform no longer knows is dropped
	}
	if p.resp.StatusCode != http.StatusOK {
		return false, statusError(p.resp)
	}
	failRound := func(err error, class, detail string) {
		rd.End, rd.Err = time.Now(), err
		if hung.Load() {
			class, detail = ClassHang, "no event within the round timeout"
		}
		rd.Class, rd.Detail = class, detail
		f.add(rd)
		f.fail(class, detail)
	}
	if !strings.HasPrefix(p.resp.Header.Get("Content-Type"), "text/event-stream") {
		// Answered at once, as JSON: for these tools, only an error.
		b, _ := io.ReadAll(io.LimitReader(p.resp.Body, 1<<20))
		return e.final(f, &rd, b)
	}
	events := bufio.NewScanner(p.resp.Body)
	events.Buffer(make([]byte, 1<<20), 4<<20)
	for events.Scan() {
		data, ok := strings.CutPrefix(events.Text(), "data: ")
		if !ok || data == "" {
			continue // not data, or a priming event's empty data
		}
		watchdog.Reset(e.roundTimeout)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			failRound(err, ClassWrong, "an event that is not JSON-RPC: "+trim(data, 200))
			return true, nil
		}
		switch {
		case m.Method == "" && len(m.ID) > 0: // the call's answer
			return e.final(f, &rd, []byte(data))
		case m.Method != "" && len(m.ID) > 0: // a question: this round asked
			rd.End, rd.Result = time.Now(), "input_required"
			f.add(rd)
			started = true
			if m.Method != "elicitation/create" {
				f.fail(ClassWrong, "the server asked "+m.Method)
				return true, nil
			}
			responses, err := answers(&mrtr.Pending{InputRequests: map[string]mrtr.InputRequest{"q": {Method: m.Method, Params: m.Params}}}, f)
			if err != nil {
				f.fail(ClassWrong, err.Error())
				return true, nil
			}
			think(e.think)
			rd = Round{N: rd.N + 1, ClientSpan: clientSpan, Start: time.Now(), Replica: holder, Status: http.StatusOK}
			relayed, err := e.answer(ctx, session, m.ID, responses["q"], holder)
			if err != nil {
				class, detail := classify(ctx, err)
				failRound(err, class, "posting an answer: "+detail)
				return true, nil
			}
			rd.Relayed = relayed
		}
		// Notifications (progress, logs) need nothing.
	}
	err = events.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF // the stream ended without the call's answer
	}
	class, detail := classify(ctx, err)
	failRound(err, class, "the call's stream: "+detail)
	return true, nil
}

// answer posts the answer to the server's request id: 202 expected. A
// retryable failure (the answer could not be taken or passed on) is
// retried until the round timeout, each time through HAProxy.
func (e *legacyEra) answer(ctx context.Context, session string, id json.RawMessage, result json.RawMessage, holder string) (relayed bool, err error) {
	deadline := time.Now().Add(e.roundTimeout)
	for wait := retryPause; ; wait = min(wait*2, retryMaxPause) {
		p, err := e.post(ctx, session, map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
		if err == nil {
			_, _ = io.Copy(io.Discard, p.resp.Body)
			p.resp.Body.Close()
			if p.resp.StatusCode == http.StatusAccepted {
				e.answers.Add(1)
				if p.replica != holder {
					e.relayed.Add(1)
				}
				return p.replica != holder, nil
			}
			err = statusError(p.resp)
		}
		class, _ := classify(ctx, err)
		if !actionable(class) || time.Now().Add(wait).After(deadline) {
			return false, err
		}
		time.Sleep(wait)
	}
}

// final reads the call's answer: a result that must be this flow's.
func (e *legacyEra) final(f *Flow, rd *Round, b []byte) (bool, error) {
	var m struct {
		Result *client.CallToolResult `json:"result"`
		Error  *struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	rd.End = time.Now()
	if err := json.Unmarshal(b, &m); err != nil || (m.Result == nil && m.Error == nil) {
		rd.Err = fmt.Errorf("not a JSON-RPC answer: %s", trim(string(b), 200))
		rd.Class, rd.Detail = ClassWrong, rd.Err.Error()
		f.add(*rd)
		f.fail(rd.Class, rd.Detail)
		return true, nil
	}
	if m.Error != nil {
		err := &client.RPCError{Code: m.Error.Code, Message: m.Error.Message, Data: m.Error.Data, HTTPStatus: http.StatusOK}
		if rd.N == 1 {
			return false, err // nothing answered yet: the caller decides
		}
		rd.Err = err
		rd.Class, rd.Detail = classify(context.Background(), err)
		f.add(*rd)
		f.fail(rd.Class, rd.Detail)
		return true, nil
	}
	rd.Result = "complete"
	f.add(*rd)
	text := ""
	if len(m.Result.Content) > 0 {
		text = m.Result.Content[0].Text
	}
	if m.Result.IsError {
		f.fail(ClassRejected, "tool error: "+text)
		return true, nil
	}
	if err := f.check(text, rd.N); err != nil {
		f.fail(ClassWrong, err.Error())
	}
	return true, nil
}

// figures are the era's own numbers for the summary line.
func (e *legacyEra) figures() string {
	a, r := e.answers.Load(), e.relayed.Load()
	pct := 0.0
	if a > 0 {
		pct = 100 * float64(r) / float64(a)
	}
	return fmt.Sprintf("%s: %d sessions, %d answers posted, %.0f%% of them to a replica other than the call's", legacyVersion, e.initialized.Load(), a, pct)
}
