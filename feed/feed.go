package feed

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/opsmcp/platform/store"
)

// Source is where the feed is read (store.Store's Changes part).
type Source interface {
	Last(ctx context.Context) (int64, error)
	After(ctx context.Context, seq int64, limit int) ([]store.Change, error)
	Listen(ctx context.Context) (<-chan struct{}, error)
}

// A Consumer is told of changes, in commit order.
type Consumer interface {
	// Changed is given each batch of changes read. It runs on the
	// follower's goroutine: the next batch waits for it.
	Changed(ctx context.Context, cs []store.Change)
	// Lost says changes may have been missed (the follower fell further
	// behind than the feed keeps, or started without knowing where it
	// stood): the consumer checks everything it caches.
	Lost(ctx context.Context)
}

// batch is how many changes one read takes.
const batch = 500

// Keep is how long the feed keeps a change: a replica cut off for longer
// checks everything it caches when it is back (Consumer.Lost).
const Keep = time.Hour

// DefaultFullCheck is how often, by default, a consumer compares
// everything it caches with the source of truth: the feed's safety net.
const DefaultFullCheck = 5 * time.Minute

// pruneEvery is how often a follower deletes the changes older than Keep.
const pruneEvery = 10 * time.Minute

// A Pruner deletes changes committed before a time, never the newest
// (store.Store's Changes part).
type Pruner interface {
	Prune(ctx context.Context, before time.Time) (int64, error)
}

// Follower reads the feed and hands it to its consumers.
type Follower struct {
	src       Source
	log       *slog.Logger
	poll      time.Duration
	consumers []Consumer
	wake      chan struct{}

	last    int64        // the last change delivered; -1 until known (run's goroutine only)
	pruned  time.Time    // when this follower last pruned the feed (run's goroutine only)
	current atomic.Int64 // unix nanos: every change committed before it is delivered
	lost    atomic.Int64 // times the consumers were told changes were lost
	changes atomic.Int64 // changes delivered
}

// New makes a follower of src that reads at least every poll interval.
// It finds where the feed stands now, if the database answers, so a
// consumer that loads from the database after New returns misses no
// change; otherwise it starts from where it first can, and tells the
// consumers then that changes may have been lost.
func New(ctx context.Context, src Source, log *slog.Logger, poll time.Duration) *Follower {
	if log == nil {
		log = slog.Default()
	}
	if poll <= 0 {
		poll = time.Second
	}
	f := &Follower{src: src, log: log, poll: poll, wake: make(chan struct{}, 1), last: -1}
	if last, err := src.Last(ctx); err == nil {
		f.last = last
	} else {
		log.Warn("change feed unavailable at start; following it once the database answers", "err", err)
	}
	return f
}

// Add makes c a consumer of the feed; call it before Run.
func (f *Follower) Add(c Consumer) { f.consumers = append(f.consumers, c) }

// Wake makes the follower read now.
func (f *Follower) Wake() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// CurrentAt is the time before which every committed change has been
// delivered (zero until the first read reached the end of the feed).
func (f *Follower) CurrentAt() time.Time {
	if n := f.current.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Stats says how many changes were delivered, and how many times the
// consumers were told some may have been lost.
func (f *Follower) Stats() (changes, lost int64) { return f.changes.Load(), f.lost.Load() }

// Run follows the feed until ctx ends.
func (f *Follower) Run(ctx context.Context) {
	notes := make(chan struct{}, 1)
	go f.listen(ctx, notes)
	Loop(ctx, f.poll, f.wake, notes, f.read, func(err error) {
		f.log.Warn("reading the change feed failed; retrying", "err", err)
	})
}

// listen forwards the feed's notifications to notes until ctx ends. A
// listener that cannot start (the database away when the replica
// starts) is tried again, with backoff: changes arrive by polling
// meanwhile. Each time it starts, the follower reads at once what was
// committed before it listened, notified to no one.
func (f *Follower) listen(ctx context.Context, notes chan<- struct{}) {
	backoff := f.poll
	for ctx.Err() == nil {
		ch, err := f.src.Listen(ctx)
		if err != nil {
			f.log.Warn("change notifications unavailable; polling every interval meanwhile", "interval", f.poll, "retry_in", backoff, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		f.Wake()
		for range ch {
			select {
			case notes <- struct{}{}:
			default:
			}
		}
		return // ch closes when ctx ends
	}
}

// read delivers every change after the last one delivered.
func (f *Follower) read(ctx context.Context) error {
	started := time.Now()
	if f.last < 0 {
		last, err := f.src.Last(ctx)
		if err != nil {
			return err
		}
		f.last = last
		f.tellLost(ctx)
	}
	for {
		cs, err := f.src.After(ctx, f.last, batch)
		if err != nil {
			return err
		}
		prev := f.last
		for _, c := range cs {
			if c.Seq != prev+1 {
				// Numbers have no gaps but those pruning leaves: what was
				// between is gone.
				f.log.Warn("the change feed was pruned past this replica's place; checking every cached tenant", "last_seen", prev, "next", c.Seq)
				f.tellLost(ctx)
				break
			}
			prev = c.Seq
		}
		if len(cs) > 0 {
			for _, c := range f.consumers {
				c.Changed(ctx, cs)
			}
			f.last = cs[len(cs)-1].Seq
			f.changes.Add(int64(len(cs)))
		}
		if len(cs) < batch {
			f.current.Store(started.UnixNano())
			f.prune(ctx, started)
			return nil
		}
	}
}

// prune deletes changes older than Keep, every pruneEvery, when the
// source can.
func (f *Follower) prune(ctx context.Context, now time.Time) {
	p, ok := f.src.(Pruner)
	if !ok || now.Sub(f.pruned) < pruneEvery {
		return
	}
	f.pruned = now
	if _, err := p.Prune(ctx, now.Add(-Keep)); err != nil && ctx.Err() == nil {
		f.log.Warn("pruning the change feed failed", "err", err)
	}
}

func (f *Follower) tellLost(ctx context.Context) {
	f.lost.Add(1)
	for _, c := range f.consumers {
		c.Lost(ctx)
	}
}

// Loop calls read when woken (wake: this process wrote; notes: another
// did), and at least every poll interval, until ctx ends; failures go to
// onErr and are retried on the next turn. The flow stream's watcher and
// the change feed's follower both run on it.
func Loop(ctx context.Context, poll time.Duration, wake, notes <-chan struct{}, read func(context.Context) error, onErr func(error)) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case _, ok := <-notes:
			if !ok {
				notes = nil // the listener stopped: polling still runs
				continue
			}
		case <-t.C:
		}
		if err := read(ctx); err != nil && ctx.Err() == nil {
			onErr(err)
		}
	}
}
