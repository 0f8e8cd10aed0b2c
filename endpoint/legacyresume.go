package endpoint

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/store"
)

// Legacy streams are resumable. Every event of a bridged call's stream
// has an id, c.<call>.<seq>, and is stored (legacy_events) before it is
// written, so a client whose stream dropped resumes it with a GET
// carrying Last-Event-ID at any replica: the events after that id are
// replayed from the store, then followed as the call goes on, until the
// call's response, its last event. The call itself does not depend on
// the client's connection: the replica that took the POST goes on
// serving it when the stream drops (its questions wait for answers up
// to the round timeout, as before). It holds the call under a lease it
// renews; when it dies, a replica to which the client resumes takes the
// call over from what the call's row keeps (the request, the state its
// pending questions were asked under, the questions, the answers so
// far) and serves the rest of it on the resumed stream.
//
// The standalone GET stream's events (list changes, resource updates,
// task status) are signals, not stored: its ids are g.<stream>.<n>, the
// stream naming the catalogue version it followed, and a client
// resuming it after the catalogue changed is told that every list, and
// every resource it subscribed to, may have changed.
//
// A 2025-11-25 session's streams begin with a priming event (an id, no
// data) and a reconnection delay; earlier revisions' clients take an
// event without data for a broken message, so theirs begin with their
// first message.

const (
	// callLease is how long a call's holder may go without renewing its
	// lease before another replica may take the call over; it renews
	// every callRenew.
	callLease = 5 * time.Second
	callRenew = 1500 * time.Millisecond
	// callDoneKeep is how long a call's events stay after its response,
	// for a client that resumes late.
	callDoneKeep = 10 * time.Minute
	// followPoll is how often a resumed stream whose call is held by
	// another replica looks for new events.
	followPoll = 250 * time.Millisecond
	// reconnectDelay is the delay, in milliseconds, a 2025-11-25 client is
	// asked to wait before reconnecting.
	reconnectDelay = "1000"
)

// callKeptEvents bounds the events a call keeps: a resumption from
// before them is told of the gap.
var callKeptEvents int64 = 500

// newStreamID returns a stream's id: 96 random bits, in hex.
func newStreamID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// standaloneID is a standalone stream's id: 32 random bits, then the
// catalogue version it follows (64 bits), in hex.
func standaloneID(version int64) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + fmt.Sprintf("%016x", uint64(version))
}

// standaloneVersion is the catalogue version a standalone stream's id
// names.
func standaloneVersion(stream string) (int64, bool) {
	if len(stream) != 24 {
		return 0, false
	}
	v, err := strconv.ParseUint(stream[8:], 16, 64)
	return int64(v), err == nil
}

// eventID is the id of a stream's event: kind 'c' (a call's stream) or
// 'g' (the standalone stream).
func eventID(kind byte, stream string, seq int64) string {
	return string(kind) + "." + stream + "." + strconv.FormatInt(seq, 10)
}

// parseEventID reads a Last-Event-ID. Only the exact form this server
// writes is accepted: a kind, a 24-digit lowercase hex stream id, and a
// sequence in canonical decimal (no sign, no leading zero, no exponent).
func parseEventID(id string) (kind byte, stream string, seq int64, ok bool) {
	k, rest, ok1 := strings.Cut(id, ".")
	stream, n, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || (k != "c" && k != "g") || len(stream) != 24 || len(n) == 0 || len(n) > 12 {
		return 0, "", 0, false
	}
	for _, r := range stream {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return 0, "", 0, false
		}
	}
	v, err := strconv.ParseInt(n, 10, 64)
	if err != nil || v < 0 || strconv.FormatInt(v, 10) != n {
		return 0, "", 0, false
	}
	return k[0], stream, v, true
}

// callLog is the stored event log of a call this replica holds. Only
// the call's goroutine writes; followers on this replica wait on
// changed.
type callLog struct {
	l    *legacy
	id   string
	next int64 // the next event's sequence
	// open is the call's row until its first write inserts it; written
	// says it did (read by the lease's renewal).
	open    *store.LegacyCall
	written atomic.Bool
	// broken says an event could not be stored: nothing more is, and a
	// resumption past it is told of the gap.
	broken bool
	// lost says another replica took the call over: nothing more is
	// stored, and the call stops at its next step. done says its
	// response was stored; left that it was released for another
	// replica to take over.
	lost, done, left bool

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every stored event
}

// newCallLog starts the log of a bridged call's stream. Nothing is
// written until its first events, which insert its row with them.
func (l *legacy) newCallLog(tenantID string, s *session, body []byte) *callLog {
	cl := &callLog{l: l, id: newStreamID(), next: 1, changed: make(chan struct{})}
	now := time.Now()
	cl.open = &store.LegacyCall{ID: cl.id, TenantID: tenantID, SessionID: s.id, Request: string(body), Holder: l.holder,
		HeldUntil: now.Add(callLease), NextSeq: 1, CreatedAt: now, ExpiresAt: s.expires}
	l.calls.add(cl)
	return cl
}

// stored says the log's events are stored so far, so its ids can be
// given out.
func (cl *callLog) stored() bool { return !cl.broken && !cl.lost }

// write stores events (and what changes with them, cp) in one write,
// and returns the sequence of the first. Events that cannot be stored
// are still sent (the client on the stream gets them), the log marked
// broken or lost.
func (cl *callLog) write(bodies [][]byte, cp *store.Checkpoint, final bool) int64 {
	first := cl.next
	cl.next += int64(len(bodies))
	if !cl.stored() {
		return first
	}
	w := store.CallWrite{Open: cl.open, First: first, Bodies: make([]string, len(bodies)), Keep: callKeptEvents,
		Checkpoint: cp, Final: final, Expires: time.Now().Add(callDoneKeep)}
	for i, b := range bodies {
		w.Bodies[i] = string(b)
	}
	err := cl.l.write(func(ctx context.Context) error { return cl.l.e.opts.Sessions.WriteCall(ctx, cl.id, cl.l.holder, w) })
	switch {
	case err == nil:
		cl.open = nil
		cl.written.Store(true)
		cl.done = final
	case errors.Is(err, store.ErrNotHeld):
		cl.lost = true
	default:
		cl.broken = true
		cl.l.e.log.Warn("cannot store a legacy call's events; its stream can no longer be resumed", "err", err)
	}
	if len(bodies) > 0 {
		cl.mu.Lock()
		close(cl.changed)
		cl.changed = make(chan struct{})
		cl.mu.Unlock()
	}
	return first
}

// close forgets a call whose goroutine ends. One that ended without a
// stored response (the client cancelled it, or went away before it
// could resume, or the response could not be stored) is marked done, so
// that no replica takes it over.
func (cl *callLog) close() {
	cl.l.calls.remove(cl)
	if !cl.written.Load() || cl.done || cl.lost || cl.left {
		return // never stored, or finished
	}
	err := cl.l.write(func(ctx context.Context) error {
		return cl.l.e.opts.Sessions.EndCall(ctx, cl.id, cl.l.holder, time.Now().Add(callDoneKeep))
	})
	if err != nil && !errors.Is(err, store.ErrNotHeld) {
		cl.l.e.log.Warn("cannot mark a legacy call ended; it stays until its session expires", "err", err)
	}
}

// wait returns a channel closed at the log's next stored event.
func (cl *callLog) wait() <-chan struct{} {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.changed
}

// storeWrite bounds one write of a call's log.
const storeWrite = 5 * time.Second

// write runs one write of a call's log. It is not cancelled with the
// request, nor at shutdown, when the calls left for other replicas
// must still be written: it is bounded instead.
func (l *legacy) write(f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.ctx), storeWrite)
	defer cancel()
	return f(ctx)
}

// heldCalls are the calls this replica holds, by id.
type heldCalls struct {
	mu sync.Mutex
	m  map[string]*callLog
}

func (h *heldCalls) add(cl *callLog) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.m[cl.id] = cl
}

func (h *heldCalls) remove(cl *callLog) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m[cl.id] == cl {
		delete(h.m, cl.id)
	}
}

func (h *heldCalls) get(id string) *callLog {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[id]
}

// ids lists the calls held here whose rows are written.
func (h *heldCalls) ids() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.m))
	for id, cl := range h.m {
		if cl.written.Load() {
			out = append(out, id)
		}
	}
	return out
}

// renew extends the lease of the calls held here, every callRenew,
// until ctx ends: on its own goroutine, so that nothing else a replica
// does (a long sweep) delays it, each renewal bounded.
func (l *legacy) renew(ctx context.Context) {
	t := time.NewTicker(callRenew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ids := l.calls.ids()
		if len(ids) == 0 {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, callRenew)
		_, err := l.e.opts.Sessions.RenewCalls(rctx, l.holder, ids, time.Now().Add(callLease))
		cancel()
		if err != nil && ctx.Err() == nil {
			l.e.log.Warn("renewing the lease of legacy calls failed; another replica may take them over", "calls", len(ids), "err", err)
		}
	}
}

// pendingLeg is a question a call waits on, as its row keeps it.
type pendingLeg struct {
	ID     string          `json:"id"`
	Key    string          `json:"key"`
	Method string          `json:"method"`
	EID    string          `json:"eid,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
}

// resume answers a GET carrying Last-Event-ID: the events of the stream
// it names, after it, then the stream followed live. A call's stream
// ends with the call's response; it may be taken over here.
func (l *legacy) resume(x *exchange, snap *snapshot, p *auth.Principal, s *session, lastID string) {
	kind, stream, after, ok := parseEventID(lastID)
	if !ok {
		x.fail(newError(http.StatusBadRequest, mcp.CodeInvalidRequest, "Bad Request: Last-Event-ID is not an event id of this server", nil))
		return
	}
	if kind == 'g' {
		l.standalone(x, snap, p, s, stream)
		return
	}
	row, err := l.e.opts.Sessions.Call(x.ctx, snap.tenantID, s.id, stream)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			// Another session's stream, or one long finished.
			x.fail(newError(http.StatusNotFound, mcp.CodeInvalidRequest, "Not Found: no stream of this session has that event id", nil))
			return
		}
		l.storeFailed(x, &call{snap: snap}, err)
		return
	}
	if after >= row.NextSeq {
		x.fail(newError(http.StatusBadRequest, mcp.CodeInvalidRequest, "Bad Request: Last-Event-ID names an event this stream has not sent", nil))
		return
	}
	hold, ok := l.e.holdStream(x, snap, p)
	if !ok {
		return
	}
	defer hold.release()
	defer l.streams.open(x.req.Context(), s.id)()
	sse := newSSE(x.w)
	sse.noIDs = true // the stored events' ids are written as they were
	x.sse, x.round.Answered = sse, true
	if sse.comment() != nil {
		return
	}
	keepAlive := time.NewTicker(streamKeepAlive)
	defer keepAlive.Stop()
	poll := time.NewTicker(followPoll)
	defer poll.Stop()
	for {
		// Held here, the call's own writes wake the stream; held
		// elsewhere, the store is read every followPoll.
		changed, polled := (<-chan struct{})(nil), poll.C
		if cl := l.calls.get(row.ID); cl != nil {
			changed, polled = cl.wait(), nil
		}
		next, n, err := l.replay(x.ctx, sse, row.ID, after)
		if errors.Is(err, errGap) || err == nil && n == 0 && row.NextSeq-1 > after {
			l.gap(x, snap, s, row, after)
			return
		}
		if err != nil {
			return // the client resumes again
		}
		if after = next; n == replayPage {
			continue
		}
		if row.Done && after >= row.NextSeq-1 {
			return // the response was sent
		}
		if !row.Done && row.Holder != l.holder && time.Now().After(row.HeldUntil) {
			err := l.e.opts.Sessions.TakeOver(x.ctx, row.ID, row.Holder, l.holder, time.Now(), time.Now().Add(callLease))
			if err == nil {
				l.takeOverAfter(x, snap, p, s, row.ID, after, sse)
				return
			}
			if !errors.Is(err, store.ErrNotHeld) {
				return
			}
		}
		select {
		case <-x.ctx.Done():
			return
		case <-hold.ending.C:
			return
		case ch, open := <-hold.changes:
			if !open || ch.tenant && !l.e.mayStay(x, snap, p) {
				return // shutting down, or the tenant no longer accepts the caller
			}
			continue
		case <-keepAlive.C:
			if l.ended.has(s.id) || sse.comment() != nil {
				return
			}
			l.seen.add(s.id)
			continue
		case <-changed:
		case <-polled:
		}
		if row, err = l.e.opts.Sessions.Call(x.ctx, snap.tenantID, s.id, row.ID); err != nil {
			return
		}
	}
}

// replayPage is how many stored events one read of a replay takes.
const replayPage = 64

// errGap says the stored events after the one asked for begin later:
// the ones between are no longer kept.
var errGap = errors.New("events no longer kept")

// replay writes, as they were sent, the call's stored events after
// after, at most replayPage; it returns the last one written and how
// many. errGap when they do not follow after.
func (l *legacy) replay(ctx context.Context, sse *sseWriter, id string, after int64) (int64, int, error) {
	evs, err := l.e.opts.Sessions.CallEvents(ctx, id, after, replayPage)
	if err != nil {
		return after, 0, err
	}
	if len(evs) > 0 && evs[0].Seq != after+1 {
		return after, 0, errGap
	}
	for i, ev := range evs {
		if err := sse.event(eventID('c', id, ev.Seq), "", []byte(ev.Body)); err != nil {
			return after, i, err
		}
		after = ev.Seq
	}
	return after, len(evs), nil
}

// gap ends a resumed stream whose events after after are no longer
// kept: the call's error response, naming the gap, and the call
// stopped, since its client has been told it ended.
func (l *legacy) gap(x *exchange, snap *snapshot, s *session, row *store.LegacyCall, after int64) {
	if row.Done {
		// It ended: its response, the last event, is what matters.
		if evs, err := l.e.opts.Sessions.CallEvents(x.ctx, row.ID, row.NextSeq-2, 1); err == nil && len(evs) == 1 {
			_ = x.sse.event(eventID('c', row.ID, evs[0].Seq), "", []byte(evs[0].Body))
			return
		}
	}
	q, _ := parseRequest([]byte(row.Request))
	msg := fmt.Sprintf("The stream's events after %s are no longer kept (this call's stream keeps its latest %d); the call was stopped.",
		eventID('c', row.ID, after), callKeptEvents)
	if !row.Done {
		_ = l.relay.post(x.ctx, snap.tenantID, s.id, callTarget(s.id, q.id), nil)
	}
	x.round.ErrorCode, x.round.ErrorMessage = mcp.CodeInternalError, msg
	_ = x.sse.send(response{JSONRPC: "2.0", ID: q.id, Error: newError(http.StatusOK, mcp.CodeInternalError, msg,
		map[string]any{"lastEventId": eventID('c', row.ID, after)})})
}

// takeOverAfter serves a call just taken over, on a stream that has
// sent its events up to after: the events its last holder stored since
// are sent first.
func (l *legacy) takeOverAfter(x *exchange, snap *snapshot, p *auth.Principal, s *session, id string, after int64, sse *sseWriter) {
	row, err := l.e.opts.Sessions.Call(x.ctx, snap.tenantID, s.id, id)
	if err != nil {
		return
	}
	// A client gone meanwhile resumes again; the call goes on regardless.
	for after < row.NextSeq-1 {
		next, n, err := l.replay(x.ctx, sse, id, after)
		if err != nil || n == 0 {
			break
		}
		after = next
	}
	l.takeOver(x, snap, p, s, row, sse)
}

// takeOver serves the rest of a call whose holder died, on the stream
// resumed here: the call's request, read back, with the session's
// version and capabilities, waits for the answers to its pending
// questions (those already given count) and goes on round after round,
// every event stored as before.
func (l *legacy) takeOver(x *exchange, snap *snapshot, p *auth.Principal, s *session, row *store.LegacyCall, sse *sseWriter) {
	e := l.e
	q, rerr := parseRequest([]byte(row.Request))
	if rerr == nil {
		_, rerr = q.readTarget(true)
	}
	cl := &callLog{l: l, id: row.ID, next: row.NextSeq, changed: make(chan struct{})}
	cl.written.Store(true)
	l.calls.add(cl)
	defer cl.close()
	sse.log = cl
	x.id, x.round.Method, x.round.RequestID = q.id, q.method, boundedID(q.id)
	x.round.SessionID, x.round.Era = s.id, s.version
	if rerr != nil {
		legacyFail(x, rerr)
		return
	}
	q.version, q.caps, q.rawCaps, q.client = s.version, s.caps, s.rawCaps, s.client
	q.progressToken = q.p.Meta.token()
	c := &call{request: q, snap: snap, principal: p, header: x.req.Header}
	e.begin(x, c)
	e.log.InfoContext(x.ctx, "legacy call taken over from a replica that stopped renewing it", "tenant", snap.slug)
	var legs []pendingLeg
	answers := map[string]json.RawMessage{}
	if row.Legs != "" {
		_ = json.Unmarshal([]byte(row.Legs), &legs)
	}
	if row.Answers != "" {
		_ = json.Unmarshal([]byte(row.Answers), &answers)
	}
	if row.State == "" || row.Running {
		// It died before it asked anything, or while a round with every
		// answer ran: whether that round reached the backend is unknown,
		// so it is not run again.
		msg := "The server that was serving this call stopped while the call ran; whether it completed is unknown. Call again if that is safe."
		if c.method == mcp.MethodToolsCall {
			legacyAnswer(x, toolFailed(toolError(snap, msg)))
		} else {
			legacyAnswer(x, failed(newError(http.StatusOK, mcp.CodeInternalError, msg, nil)))
		}
		return
	}
	l.serveBridged(x, c, s, []byte(row.Request), cl, &resumed{state: row.State, legs: legs, answers: answers})
}
