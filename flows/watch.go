package flows

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/opsmcp/platform/feed"
	"github.com/opsmcp/platform/store/record"
)

// Watcher follows the flow changes of the whole fleet, in order, and
// hands them to this replica's subscribers (the live flow stream). It
// reads new events when this replica's recorder wrote some, when
// another replica's write is announced (PostgreSQL LISTEN/NOTIFY), and
// at least every poll interval, so a lost notification delays a change
// by at most that.
type Watcher struct {
	store Store
	log   *slog.Logger
	poll  time.Duration
	wake  chan struct{}

	mu   sync.Mutex
	last int64
	subs map[*subscription]struct{}

	done chan struct{}
}

// subscription is one subscriber's queue.
type subscription struct {
	visible func(tenantID string) bool
	ch      chan record.Change
	closed  bool
}

// subscriberBuffer is how many changes a slow subscriber may fall behind
// before it is reset.
const subscriberBuffer = 512

// NewWatcher starts following the record from its newest event, until
// ctx ends. It returns once it knows where the record stands, or, if the
// database does not answer (or is not migrated yet), at once: it then
// starts from the first event it can read.
func NewWatcher(ctx context.Context, st Store, log *slog.Logger, poll time.Duration) *Watcher {
	if log == nil {
		log = slog.Default()
	}
	if poll <= 0 {
		poll = time.Second
	}
	w := &Watcher{store: st, log: log, poll: poll, wake: make(chan struct{}, 1), last: -1,
		subs: map[*subscription]struct{}{}, done: make(chan struct{})}
	if last, err := st.LastChange(ctx); err == nil {
		w.last = last
	}
	notes, err := st.Listen(ctx)
	if err != nil {
		// Still correct without it: other replicas' changes arrive by
		// polling.
		log.Warn("flow change notifications unavailable; polling every interval", "interval", poll, "err", err)
	}
	go w.run(ctx, notes)
	return w
}

// Wake makes the watcher read new events now (the recorder calls it
// after each write on this replica).
func (w *Watcher) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Done is closed when the watcher stopped.
func (w *Watcher) Done() <-chan struct{} { return w.done }

func (w *Watcher) run(ctx context.Context, notes <-chan struct{}) {
	defer close(w.done)
	defer w.closeAll()
	feed.Loop(ctx, w.poll, w.wake, notes, w.read, func(err error) {
		w.log.Warn("reading flow changes failed; retrying", "err", err)
	})
}

// read dispatches every event after the last one seen.
func (w *Watcher) read(ctx context.Context) error {
	w.mu.Lock()
	unknown, idle := w.last < 0, len(w.subs) == 0
	if idle {
		// Nobody watches: reading would cost the database and this
		// replica for nothing. A subscriber starts from the record itself.
		w.last = -1
	}
	w.mu.Unlock()
	if idle {
		return nil
	}
	if unknown {
		last, err := w.store.LastChange(ctx)
		if err != nil {
			return err
		}
		w.mu.Lock()
		w.last = last
		w.mu.Unlock()
	}
	for {
		w.mu.Lock()
		after := w.last
		w.mu.Unlock()
		changes, err := w.changesAfter(ctx, after, 500)
		if err != nil || len(changes) == 0 {
			return err
		}
		w.mu.Lock()
		for _, c := range changes {
			for s := range w.subs {
				s.send(c, w)
			}
		}
		w.last = changes[len(changes)-1].ID
		w.mu.Unlock()
		if len(changes) < 500 {
			return nil
		}
	}
}

// changesAfter reads up to limit changes after seq: the flows changed
// since, each as it is now, in the order of their latest changes.
func (w *Watcher) changesAfter(ctx context.Context, seq int64, limit int) ([]record.Change, error) {
	flows, err := w.store.ChangedAfter(ctx, seq, limit)
	if err != nil || len(flows) == 0 {
		return nil, err
	}
	out := make([]record.Change, len(flows))
	for i := range flows {
		f := &flows[i]
		out[i] = record.Change{ID: f.Seq, TenantID: f.TenantID, Flow: f}
	}
	return out, nil
}

// send queues c for s if s may see it; a subscriber whose queue is full
// gets a reset and is closed (it resumes from its last change).
// Called with w.mu held.
func (s *subscription) send(c record.Change, w *Watcher) {
	if s.closed || !s.visible(c.TenantID) {
		return
	}
	select {
	case s.ch <- c:
	default:
		w.closeLocked(s, true)
	}
}

// Subscribe returns the changes a subscriber may see (visible says which
// tenants' flows), starting after change after: every flow changed since
// is replayed first, as it is now (a flow's latest change stands for its
// earlier ones; a Reset when more changed than a buffer holds), then new
// changes follow live. The channel closes when ctx ends, when the subscriber
// falls too far behind (after a Reset), or when the watcher stops.
func (w *Watcher) Subscribe(ctx context.Context, after int64, visible func(tenantID string) bool) (<-chan record.Change, error) {
	s := &subscription{visible: visible, ch: make(chan record.Change, subscriberBuffer)}
	w.mu.Lock()
	if w.last < 0 {
		// Idle until now: where the record stands is where live changes
		// start.
		last, err := w.store.LastChange(ctx)
		if err != nil {
			w.mu.Unlock()
			return nil, err
		}
		w.last = last
	}
	live := w.last
	if after < 0 || after > live {
		after = live
	}
	// Replay under the lock, so no live change slips between the replay
	// and the live queue; replays are bounded by the buffer.
	var replay []record.Change
	var err error
	if after < live {
		replay, err = w.changesAfter(ctx, after, subscriberBuffer)
	}
	if err != nil {
		w.mu.Unlock()
		return nil, err
	}
	if len(replay) == subscriberBuffer && replay[len(replay)-1].ID < live {
		// More changed than a buffer holds: reload rather than replay.
		s.ch <- record.Change{ID: live, Reset: true}
	} else {
		for _, c := range replay {
			if c.ID <= live && visible(c.TenantID) {
				s.ch <- c
			}
		}
	}
	w.subs[s] = struct{}{}
	w.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-w.done:
		}
		w.mu.Lock()
		w.closeLocked(s, false)
		w.mu.Unlock()
	}()
	return s.ch, nil
}

// closeLocked ends a subscription, with a reset first if it fell behind.
func (w *Watcher) closeLocked(s *subscription, reset bool) {
	if s.closed {
		return
	}
	s.closed = true
	delete(w.subs, s)
	if reset {
		// The buffer is full: replace its oldest change with the reset,
		// so the reader learns to reload.
		select {
		case <-s.ch:
		default:
		}
		s.ch <- record.Change{ID: w.last, Reset: true}
	}
	close(s.ch)
}

func (w *Watcher) closeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for s := range w.subs {
		w.closeLocked(s, false)
	}
}
