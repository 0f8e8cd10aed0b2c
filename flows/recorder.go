package flows

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opsmcp/platform/endpoint"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/store/record"
	"github.com/opsmcp/platform/telemetry"
)

// Options configures a Recorder.
type Options struct {
	Store  Store
	Logger *slog.Logger
	// Replica names this replica in the record.
	Replica string
	// Retention is how long a flow that no longer changes is kept
	// (default 7 days), unless its tenant set its own (Retentions).
	Retention time.Duration
	// Retentions reads the tenants that set their own retention, by
	// tenant id; nil, none did.
	Retentions func(ctx context.Context) (map[string]time.Duration, error)
	// CallSample is the share of successful one-round calls recorded for
	// tenants that did not set their own (tenant.Settings.CallSample);
	// nil, every one. Failures and refusals are never sampled out.
	CallSample *float64
	// RefusalsPerMinute bounds the refused requests recorded per tenant
	// per minute on this replica, bad tokens and bad states each (default
	// 120; negative: none); the rest are counted (Unrecorded), not
	// written, so a flood of bad tokens is not a flood of writes.
	RefusalsPerMinute int
	// QueueSize bounds the rounds waiting to be written (default 10000);
	// a full queue drops rounds rather than hold up serving.
	QueueSize int
	// BatchSize and BatchDelay bound a write: at most BatchSize rounds,
	// and a round waits at most BatchDelay, about half of it on average
	// (defaults 2048, 100 ms). Larger batches merge more rounds of one
	// flow into one change.
	BatchSize  int
	BatchDelay time.Duration
	// RetryFor bounds how long a batch whose write failed while the
	// database was unreachable (down, restarting, a failover) is retried
	// before its rounds are dropped (default 30 s). Meanwhile new rounds
	// wait in the queue, so an outage shorter than this, and than the
	// queue takes to fill, loses no round. A write that fails while the
	// database answers (a batch it refuses) is retried at most
	// reachableRetries times, then dropped, so it never holds up the
	// rounds behind it for long.
	RetryFor time.Duration
	// Written is told after every committed write (this replica's
	// watcher reads it at once).
	Written func()
	// Dropped is told of rounds dropped (a full queue, a failed write),
	// as they are dropped: a metric.
	Dropped func(n int64)
	// Ledger consumes request states and marks their flows running in one
	// write (store.Store); nil, the recorder is no endpoint.Ledger's
	// equal (Consume fails).
	Ledger interface {
		ConsumeRunning(ctx context.Context, tenantID, flowID string, round int, expires time.Time, rec []byte) error
	}
	// Unrecorded is told of each call left out on purpose, by tenant and
	// why (telemetry.UnrecordedSampled, UnrecordedRefusals): a metric.
	Unrecorded func(tenant, reason string)
}

// DefaultRefusalsPerMinute is how many refused requests of one tenant
// the record keeps a minute, unless the operator says otherwise.
const DefaultRefusalsPerMinute = 120

// DefaultRetention is how long the record keeps a flow that no longer
// changes.
const DefaultRetention = 7 * 24 * time.Hour

// Recorder writes every round of every flow into the record. It is a
// endpoint.RoundSink: Round hands it a finished round without waiting, a
// goroutine writes rounds in batches, and a full queue drops (counting
// and logging the drops) rather than block a request. It also marks
// flows whose state expired while they waited, prunes the record past
// its retention, and wakes this replica's watchers after each write.
type Recorder struct {
	opts    Options
	log     *slog.Logger
	queue   chan *encoded
	free    chan *encoded // written records, for reuse (a batch's worth at most)
	full    chan struct{} // fullAt rounds are queued
	fullAt  int           // a batch's worth, or half the queue if less
	dropped atomic.Int64
	sample  float64
	refused refusalBudget

	stop context.CancelFunc
	done chan struct{}
	once sync.Once
}

// NewRecorder starts a recorder; Close flushes and stops it.
func NewRecorder(ctx context.Context, opts Options) *Recorder {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 10_000
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 2048
	}
	if opts.BatchDelay <= 0 {
		opts.BatchDelay = 100 * time.Millisecond
	}
	if opts.RetryFor <= 0 {
		opts.RetryFor = 30 * time.Second
	}
	if opts.RefusalsPerMinute == 0 {
		opts.RefusalsPerMinute = DefaultRefusalsPerMinute
	}
	r := &Recorder{
		opts:   opts,
		log:    opts.Logger,
		queue:  make(chan *encoded, opts.QueueSize),
		free:   make(chan *encoded, opts.BatchSize),
		full:   make(chan struct{}, 1),
		fullAt: max(min(opts.BatchSize, opts.QueueSize/2), 1),
		done:   make(chan struct{}),
		sample: 1,
	}
	if opts.CallSample != nil {
		r.sample = *opts.CallSample
	}
	r.refused.limit = opts.RefusalsPerMinute
	ctx, r.stop = context.WithCancel(context.WithoutCancel(ctx))
	go r.run(ctx)
	return r
}

// encoded is a round encoded for the record (record.EncodeRound) as the
// serving path hands it over: bytes with no pointer into the request, so
// the round and its exchange go as soon as the request is done, and the
// garbage collector does not read what waits in the queue. Records are
// reused once written, with the space their round's documents were
// written in on the way (docs).
type encoded struct{ b, docs []byte }

// maxKeptRecord is the largest record kept for reuse (a usual round's
// is under a kilobyte): the free list holds up to a batch of them, and a
// round with a large question should not pin its space there.
const maxKeptRecord = 4 << 10

// take returns a written record to reuse, or a new one sized for a
// usual round.
func (r *Recorder) take() *encoded {
	select {
	case rec := <-r.free:
		return rec
	default:
		return &encoded{b: make([]byte, 0, 1024), docs: make([]byte, 0, 512)}
	}
}

// release keeps rec for reuse. The free list is a channel, not a
// sync.Pool: a pool is emptied by every collection, several between two
// batches under load, so records were allocated and grown afresh for
// almost every round.
func (r *Recorder) release(rec *encoded) {
	if cap(rec.b) > maxKeptRecord || cap(rec.docs) > maxKeptRecord {
		return
	}
	rec.b = rec.b[:0]
	select {
	case r.free <- rec:
	default:
	}
}

// Round implements endpoint.RoundSink: the round is encoded and queued,
// on the serving goroutine, which never waits for the queue.
func (r *Recorder) Round(_ context.Context, rd *endpoint.Round) {
	r.enqueue(rd, false)
}

// Running implements endpoint.RunningSink: a mark that the flow is
// calling its webhook.
func (r *Recorder) Running(_ context.Context, rd *endpoint.Round) {
	r.enqueue(rd, true)
}

func (r *Recorder) enqueue(rd *endpoint.Round, running bool) {
	// Lists, pings and polls cost a check, and a full queue is no drop
	// of theirs.
	kind := recordKind(rd, running)
	switch {
	case kind == "", rd.Settled:
		return
	case refused(rd):
		// Bad tokens and bad states have budgets of their own: a flood of
		// garbage tokens, which anyone can send, must not hide a forged or
		// replayed state.
		key := "state:" + rd.TenantID
		if rd.TokenRefused != "" {
			key = "token:" + rd.TenantID
		}
		if !r.refused.take(key) {
			r.unrecorded(rd.Tenant, telemetry.UnrecordedRefusals)
			return
		}
	case kind == record.KindCall && !failed(rd) && r.sampledOut(rd):
		r.unrecorded(rd.Tenant, telemetry.UnrecordedSampled)
		return
	}
	if len(r.queue) == cap(r.queue) {
		r.drop(1) // not worth encoding
		return
	}
	rec := r.take()
	var w record.RoundWrite
	write(&w, rd, r.opts.Replica, running, &rec.docs)
	w.Flow.Kind = kind
	if w.Flow.ID == "" {
		w.Flow.ID = mrtr.NewFlowID() // a refusal that names no flow is a call of its own
	}
	rec.b = record.EncodeRound(rec.b, &w)
	r.push(rec)
}

// sampledOut reports whether a successful one-round call of rd's tenant
// is left out of the record, by the tenant's sampling (or the
// operator's).
func (r *Recorder) sampledOut(rd *endpoint.Round) bool {
	p := r.sample
	if rd.Settings != nil {
		p = rd.Settings.CallSample(p)
	}
	return p < 1 && rand.Float64() >= p
}

func (r *Recorder) unrecorded(tenant, reason string) {
	if r.opts.Unrecorded != nil {
		r.opts.Unrecorded(tenant, reason)
	}
}

// refusalBudget counts each tenant's refused requests recorded this
// minute. The run loop starts a new minute (reset); only refusals take
// the lock.
type refusalBudget struct {
	limit int
	mu    sync.Mutex
	used  map[string]int
}

// take reports whether another refusal of key (a tenant's tokens or
// states) may be recorded this minute, and counts it.
func (b *refusalBudget) take(key string) bool {
	if b.limit < 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used == nil {
		b.used = map[string]int{}
	}
	if b.used[key] >= b.limit {
		return false
	}
	b.used[key]++
	return true
}

func (b *refusalBudget) reset() {
	b.mu.Lock()
	b.used = nil
	b.mu.Unlock()
}

// Consume implements endpoint.Ledger: the round's state is consumed and
// its flow marked running in one write, before the webhook is called.
func (r *Recorder) Consume(ctx context.Context, rd *endpoint.Round, expires time.Time) error {
	if r.opts.Ledger == nil {
		return errNoLedger
	}
	if err := r.opts.Ledger.ConsumeRunning(ctx, rd.TenantID, rd.FlowID, rd.Number, expires, r.encodeNow(rd, true)); err != nil {
		return err
	}
	r.committed(ctx)
	return nil
}

// Settle implements endpoint.Ledger: the round's outcome is written now,
// before its answer; Round then skips it.
func (r *Recorder) Settle(ctx context.Context, rd *endpoint.Round) error {
	if _, err := r.opts.Store.WriteEncoded(ctx, [][]byte{r.encodeNow(rd, false)}); err != nil {
		return err
	}
	r.committed(ctx)
	return nil
}

// encodeNow is rd's record, for a write of its own (the queue's records
// are encoded in reused space instead). A running mark's change is now:
// the round has not ended.
func (r *Recorder) encodeNow(rd *endpoint.Round, running bool) []byte {
	var w record.RoundWrite
	var docs []byte
	write(&w, rd, r.opts.Replica, running, &docs)
	w.Flow.Kind = recordKind(rd, running)
	if running {
		w.Flow.UpdatedAt = time.Now()
	}
	return record.EncodeRound(nil, &w)
}

// errNoLedger is Consume without Options.Ledger.
var errNoLedger = errors.New("flow record: no ledger to consume request states in")

// TaskEvent implements endpoint.TaskSink: the event is a round of the
// task's flow, encoded and queued like any round.
func (r *Recorder) TaskEvent(_ context.Context, ev *endpoint.TaskEvent) {
	if ev.FlowID == "" || ev.Tenant == "" {
		return
	}
	if len(r.queue) == cap(r.queue) {
		r.drop(1)
		return
	}
	rec := r.take()
	var w record.RoundWrite
	writeEvent(&w, ev, r.opts.Replica, &rec.docs)
	rec.b = record.EncodeRound(rec.b, &w)
	r.push(rec)
}

// push queues an encoded round without waiting, waking the writer once a
// batch's worth is queued; a full queue drops it.
func (r *Recorder) push(rec *encoded) {
	select {
	case r.queue <- rec:
		if len(r.queue) >= r.fullAt {
			select {
			case r.full <- struct{}{}:
			default:
			}
		}
	default:
		r.release(rec)
		r.drop(1)
	}
}

// drop counts rounds that will not reach the record.
func (r *Recorder) drop(n int64) {
	r.dropped.Add(n)
	if r.opts.Dropped != nil {
		r.opts.Dropped(n)
	}
}

// drainFor bounds how long a stopping recorder goes on writing.
const drainFor = 5 * time.Second

// Close writes what is queued (for at most drainFor) and stops.
func (r *Recorder) Close() {
	r.once.Do(func() {
		r.stop()
		<-r.done
	})
}

// run writes batches until stopped, then drains the queue once.
func (r *Recorder) run(ctx context.Context) {
	defer close(r.done)
	expire := time.NewTicker(5 * time.Second)
	defer expire.Stop()
	prune := time.NewTicker(time.Hour)
	defer prune.Stop()
	report := time.NewTicker(time.Minute)
	defer report.Stop()
	batch := make([]*encoded, 0, r.opts.BatchSize)
	recs := make([][]byte, 0, r.opts.BatchSize)
	flush := func(ctx context.Context) {
		if len(batch) == 0 {
			return
		}
		for _, rec := range batch {
			recs = append(recs, rec.b)
		}
		r.writeBatch(ctx, recs)
		for _, rec := range batch {
			r.release(rec)
		}
		clear(batch)
		batch = batch[:0]
		clear(recs)
		recs = recs[:0]
	}
	// drain writes what was queued when it began, in batches.
	drain := func(ctx context.Context) {
		for range len(r.queue) {
			batch = append(batch, <-r.queue)
			if len(batch) >= r.opts.BatchSize {
				flush(ctx)
			}
		}
		flush(ctx)
	}
	// Writes outlive a stop by drainFor: a batch being written when Close
	// is called is finished, not cut off and dropped, and what is queued
	// is drained after it, within the same bound.
	wctx, wcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer wcancel()
	context.AfterFunc(ctx, func() { time.AfterFunc(drainFor, wcancel) })
	// The queue is read on a tick (or when a batch's worth waits), not
	// as rounds arrive: a receiver waiting on it would be woken by every
	// round, two switches of goroutine a round on the serving cores.
	tick := time.NewTicker(r.opts.BatchDelay)
	defer tick.Stop()
	r.pruneOnce(ctx)
	for {
		select {
		case <-ctx.Done():
			// A stopping replica's last rounds should reach the record:
			// drained until none is left or the drain's time is up, and
			// what is left then is counted as dropped.
			for len(r.queue) > 0 && wctx.Err() == nil {
				drain(wctx)
			}
			if n := len(r.queue); n > 0 {
				r.drop(int64(n))
			}
			return
		case <-tick.C:
			drain(wctx)
		case <-r.full:
			drain(wctx)
		case <-expire.C:
			r.expireOnce(ctx)
		case <-prune.C:
			r.pruneOnce(ctx)
		case <-report.C:
			r.reportDrops()
			r.refused.reset()
		}
	}
}

// Retries of a failed batch write: the first wait, the longest, and how
// many times a write that failed while the database answered is tried
// again (a pooled connection the database closed fails once, then the
// pool opens a fresh one).
const (
	retryFirst       = 100 * time.Millisecond
	retryMax         = 2 * time.Second
	reachableRetries = 2
)

// writeBatch writes a batch, retrying it while the database is
// unreachable (up to RetryFor). A batch is one transaction, so a failed
// write left nothing behind; only a commit whose answer was lost (the
// connection cut just then) can be written twice, and its rounds then
// appear twice in the flow's record.
func (r *Recorder) writeBatch(ctx context.Context, batch [][]byte) {
	deadline := time.Now().Add(r.opts.RetryFor)
	wait, reachable := retryFirst, 0
	for attempt := 0; ; attempt++ {
		_, err := r.opts.Store.WriteEncoded(ctx, batch)
		if err == nil {
			if attempt > 0 {
				r.log.Info("flow record write succeeded after retries", "rounds", len(batch), "attempts", attempt+1)
			}
			r.committed(ctx)
			return
		}
		if ctx.Err() != nil {
			r.drop(int64(len(batch)))
			return
		}
		up := r.opts.Store.Ping(ctx) == nil
		if up {
			reachable++
		}
		if (up && reachable > reachableRetries) || time.Now().Add(wait).After(deadline) {
			r.log.Warn("flow record write failed; rounds dropped", "rounds", len(batch), "attempts", attempt+1, "err", err)
			r.drop(int64(len(batch)))
			return
		}
		if attempt == 0 {
			r.log.Warn("flow record write failed; retrying while the database is unreachable", "rounds", len(batch), "err", err)
		}
		if up {
			continue
		}
		select {
		case <-ctx.Done():
			r.drop(int64(len(batch)))
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, retryMax)
	}
}

// committed tells this replica's watchers and, through the database,
// every other replica's, that events were written.
func (r *Recorder) committed(ctx context.Context) {
	if r.opts.Written != nil {
		r.opts.Written()
	}
	if err := r.opts.Store.Notify(ctx); err != nil && ctx.Err() == nil {
		r.log.Debug("flow event notification failed; other replicas find the events on their next poll", "err", err)
	}
}

func (r *Recorder) expireOnce(ctx context.Context) {
	changes, err := r.opts.Store.Expire(ctx, time.Now())
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("marking expired flows failed", "err", err)
		}
		return
	}
	if len(changes) > 0 {
		r.committed(ctx)
	}
}

func (r *Recorder) pruneOnce(ctx context.Context) {
	now := time.Now()
	var own map[string]time.Time
	if r.opts.Retentions != nil {
		kept, err := r.opts.Retentions(ctx)
		if err != nil {
			// Pruning by the default alone could delete what a tenant
			// keeps longer: wait for the next prune.
			if ctx.Err() == nil {
				r.log.Warn("reading tenants' record retention failed; the record is pruned later", "err", err)
			}
			return
		}
		own = make(map[string]time.Time, len(kept))
		for id, d := range kept {
			own[id] = now.Add(-d)
		}
	}
	n, err := r.opts.Store.Prune(ctx, now.Add(-r.opts.Retention), own)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("pruning the flow record failed", "err", err)
		}
		return
	}
	if n > 0 {
		r.log.Info("flow record pruned", "flows", n, "retention", r.opts.Retention)
	}
}

// reportDrops logs, once per interval, how many rounds were dropped.
func (r *Recorder) reportDrops() {
	n := r.dropped.Swap(0)
	if n == 0 {
		return
	}
	r.log.Warn("flow record dropped rounds: the write queue was full or the database failed", "rounds", n)
}
