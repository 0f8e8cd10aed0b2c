package endpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// relay routes what a legacy client posts for a bridged call (its
// answers to the requests sent on the call's stream, its cancellation of
// the call) to the goroutine serving that call. The answer may reach any
// replica: when the call is held here it is handed over in process;
// otherwise the message is stored in a row, announced on PostgreSQL with
// NOTIFY, and the replica holding the call takes the row (a sweep every
// relaySweep covers notifications lost while a listening connection was
// down, and, on SQLite's one node, messages posted while no goroutine
// held the call: a call being taken over after a restart).
//
// Every message carries the tenant and session it arrived on, verified
// by the replica that received it; the holder hands it over only if
// both match the call's, so one session can never answer or cancel
// another's call.
type relay struct {
	st  SessionStore
	log *slog.Logger

	mu sync.Mutex
	// held maps a target to the call it belongs to: "r:<leg id>" for an
	// answer to a request sent on the call's stream, "c:<session>:<id>"
	// for the call itself (its cancellation); "s:<id>" is a session's GET
	// stream, held only so that the session's end ends it.
	held map[string]*bridgeCall
	legs int // how many "r:" targets are held
}

// relaySweep is how often a replica holding calls that wait for answers
// looks for relayed answers whose notification it missed.
const relaySweep = 2 * time.Second

// relayMaxAge is how long a relayed message nobody took is kept.
const relayMaxAge = time.Hour

// stopReason says why a bridged call was stopped from outside.
type stopReason int

const (
	stopNone         stopReason = iota
	stopClientCancel            // notifications/cancelled from the client
	stopSessionEnded            // the session ended (DELETE, an admin, the tenant disabled)
	stopShutdown                // this replica is shutting down
)

// bridgeCall is a bridged call as the relay knows it.
type bridgeCall struct {
	tenantID, session string
	target            string // its "c:" target
	// inbox receives the client's answers to the call's requests, as
	// posted (JSON-RPC responses).
	inbox  chan json.RawMessage
	cancel context.CancelFunc
	reason atomic.Int32 // a stopReason, set once
}

// stop ends the call from outside; the first reason given is kept.
func (c *bridgeCall) stop(r stopReason) {
	if c.reason.CompareAndSwap(int32(stopNone), int32(r)) {
		c.cancel()
	}
}

// stopped says why the call was stopped from outside (stopNone if it
// was not).
func (c *bridgeCall) stopped() stopReason { return stopReason(c.reason.Load()) }

func newRelay(st SessionStore, log *slog.Logger) *relay {
	return &relay{st: st, log: log, held: map[string]*bridgeCall{}}
}

// callTarget is the target of the call a session made with request id.
func callTarget(sessionID string, id json.RawMessage) string {
	return "c:" + sessionID + ":" + string(bytes.TrimSpace(id))
}

// hold registers a call, so its cancellation finds it.
func (r *relay) hold(c *bridgeCall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held[c.target] = c
}

// release forgets a call and every leg it still held.
func (r *relay) release(c *bridgeCall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for t, held := range r.held {
		if held == c {
			delete(r.held, t)
			if strings.HasPrefix(t, "r:") {
				r.legs--
			}
		}
	}
}

// addLegs registers the ids of requests sent for c, before they are
// sent, so no answer can arrive first.
func (r *relay) addLegs(c *bridgeCall, ids []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		if _, ok := r.held["r:"+id]; !ok {
			r.legs++
		}
		r.held["r:"+id] = c
	}
}

// dropLegs forgets answered or abandoned legs.
func (r *relay) dropLegs(ids []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		if _, ok := r.held["r:"+id]; ok {
			delete(r.held, "r:"+id)
			r.legs--
		}
	}
}

// endSession stops every call of a session held here.
func (r *relay) endSession(sessionID string) {
	r.mu.Lock()
	var calls []*bridgeCall
	for t, c := range r.held {
		if !strings.HasPrefix(t, "r:") && c.session == sessionID {
			calls = append(calls, c)
		}
	}
	r.mu.Unlock()
	for _, c := range calls {
		c.stop(stopSessionEnded)
	}
}

// stopAll stops every call held here (shutdown).
func (r *relay) stopAll() {
	r.mu.Lock()
	var calls []*bridgeCall
	for t, c := range r.held {
		if !strings.HasPrefix(t, "r:") {
			calls = append(calls, c)
		}
	}
	r.mu.Unlock()
	for _, c := range calls {
		c.stop(stopShutdown)
	}
}

// post delivers a message a client sent on a verified session: here if
// the call is held here, else to whichever replica holds it. It fails
// only when the message could not be passed on (the database down).
func (r *relay) post(ctx context.Context, tenantID, sessionID, target string, body []byte) error {
	if r.deliver(tenantID, sessionID, target, body) {
		return nil
	}
	// Not held here: held by another replica, or by none while a
	// replica takes it over (even SQLite's one node, restarted).
	if err := r.st.Relay(ctx, tenantID, sessionID, target, body); err != nil {
		r.log.WarnContext(ctx, "relaying a legacy client's message failed", "target_kind", target[:1], "err", err)
		return err
	}
	return nil
}

// deliver hands a message to the call held here for target, if any and
// if it belongs to the same tenant and session.
func (r *relay) deliver(tenantID, sessionID, target string, body []byte) bool {
	r.mu.Lock()
	c, ok := r.held[target]
	r.mu.Unlock()
	if !ok || c.tenantID != tenantID || c.session != sessionID {
		return false
	}
	if strings.HasPrefix(target, "c:") {
		c.stop(stopClientCancel)
		return true
	}
	select {
	case c.inbox <- json.RawMessage(body):
	default:
		// The call has more unread answers than it asked questions: a
		// client answering the same request again and again.
	}
	return true
}

// run follows relayed messages on PostgreSQL until ctx ends: prompted by
// notifications, with a sweep while answers are awaited here.
func (r *relay) run(ctx context.Context) {
	var notes <-chan string
	connect := func() {
		if !r.st.Shared() {
			return // one node: the sweep alone finds what it holds
		}
		ch, err := r.st.ListenRelayed(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("legacy relay: listening failed; polling until it works", "err", err)
			}
			return
		}
		notes = ch
	}
	connect()
	sweep := time.NewTicker(relaySweep)
	defer sweep.Stop()
	for {
		var targets []string
		select {
		case <-ctx.Done():
			return
		case t, ok := <-notes:
			if !ok {
				notes = nil
				continue
			}
			if t == "" { // reconnected: anything may have been missed
				targets = r.waiting()
			} else if r.holds(t) {
				targets = []string{t}
			}
		case <-sweep.C:
			if notes == nil {
				connect()
			}
			targets = r.waiting()
		}
		r.take(ctx, targets)
	}
}

// takeNow takes and delivers the stored messages for the legs ids at
// once.
func (r *relay) takeNow(ctx context.Context, ids []string) {
	targets := make([]string, len(ids))
	for i, id := range ids {
		targets[i] = "r:" + id
	}
	r.take(ctx, targets)
}

// take takes the stored messages for targets and delivers them.
func (r *relay) take(ctx context.Context, targets []string) {
	if len(targets) == 0 {
		return
	}
	rows, err := r.st.TakeRelayed(ctx, targets)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("legacy relay: reading relayed messages failed", "err", err)
		}
		return
	}
	for _, m := range rows {
		r.deliver(m.TenantID, m.SessionID, m.Target, []byte(m.Body))
	}
}

func (r *relay) holds(target string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.held[target]
	return ok
}

// waiting lists every target held here (calls and their legs, not the
// standalone streams), or none when nothing is held.
func (r *relay) waiting() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.held) == 0 {
		return nil
	}
	out := make([]string, 0, len(r.held))
	for t := range r.held {
		if !strings.HasPrefix(t, "s:") {
			out = append(out, t)
		}
	}
	return out
}
