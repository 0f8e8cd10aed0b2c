package telemetry

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BatchOptions are the settings of the batch span processor, the
// OTEL_BSP_* variables of the OpenTelemetry specification.
type BatchOptions struct {
	MaxQueue      int           // OTEL_BSP_MAX_QUEUE_SIZE: spans held before new ones are dropped
	MaxBatch      int           // OTEL_BSP_MAX_EXPORT_BATCH_SIZE: spans in one export
	Delay         time.Duration // OTEL_BSP_SCHEDULE_DELAY: longest a span waits for its export
	ExportTimeout time.Duration // OTEL_BSP_EXPORT_TIMEOUT: longest one export may take
}

// batchOptions reads OTEL_BSP_* as the specification defines them
// (milliseconds for the durations), with its defaults. A value that is
// not a positive integer is an error naming the variable: a typo must
// not silently leave spans queued for the default five seconds.
func batchOptions(getenv func(string) string) (BatchOptions, error) {
	o := BatchOptions{MaxQueue: 2048, MaxBatch: 512, Delay: 5 * time.Second, ExportTimeout: 30 * time.Second}
	for _, v := range []struct {
		name string
		n    *int
		d    *time.Duration
	}{
		{"OTEL_BSP_MAX_QUEUE_SIZE", &o.MaxQueue, nil},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", &o.MaxBatch, nil},
		{"OTEL_BSP_SCHEDULE_DELAY", nil, &o.Delay},
		{"OTEL_BSP_EXPORT_TIMEOUT", nil, &o.ExportTimeout},
	} {
		var err error
		if v.n != nil {
			err = positiveEnv(getenv, v.name, v.n)
		} else {
			err = millisEnv(getenv, v.name, v.d)
		}
		if err != nil {
			return o, err
		}
	}
	// As the specification says: a batch is never larger than the queue.
	o.MaxBatch = min(o.MaxBatch, o.MaxQueue)
	return o, nil
}

// positiveEnv sets *n from the variable name when it is set: a positive
// integer, or an error naming the variable.
func positiveEnv(getenv func(string) string, name string, n *int) error {
	s := strings.TrimSpace(getenv(name))
	if s == "" {
		return nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		return fmt.Errorf("telemetry: %s=%q: want a positive integer", name, s)
	}
	*n = v
	return nil
}

// millisEnv is positiveEnv for a duration given in milliseconds.
func millisEnv(getenv func(string) string, name string, d *time.Duration) error {
	ms := -1
	if err := positiveEnv(getenv, name, &ms); err != nil || ms < 0 {
		return err
	}
	*d = time.Duration(ms) * time.Millisecond
	return nil
}

// batcher is the platform's batch span processor. Ended spans join a
// queue under one short lock; a single goroutine exports them in batches
// when a batch is full or at the latest Delay after the last export, so
// serving pays for a span's end with an append, and the export goroutine
// wakes once a batch rather than once a span (the SDK's processor hands
// every span over a channel, waking its goroutine span by span). When
// the queue is full, spans are dropped and counted, never waited for.
type batcher struct {
	exp  spanExporter
	opts BatchOptions

	mu      sync.Mutex
	queue   []*span
	spare   []*span // the previous export's, reused; nil while exporting
	dropped int
	closed  bool

	shut    chan struct{} // closed when the exporter has shut down
	shutErr error         // its error, once shut is closed

	ready chan struct{}      // a full batch waits (capacity one)
	flush chan chan struct{} // ForceFlush asks; the reply is closed when done
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

func newBatcher(exp spanExporter, opts BatchOptions) *batcher {
	b := &batcher{exp: exp, opts: opts,
		queue: make([]*span, 0, opts.MaxBatch), spare: make([]*span, 0, opts.MaxBatch),
		shut: make(chan struct{}), ready: make(chan struct{}, 1), flush: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go b.loop()
	return b
}

func (b *batcher) loop() {
	defer close(b.done)
	t := time.NewTimer(b.opts.Delay)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			b.export(true)
			return
		case reply := <-b.flush:
			b.export(true)
			close(reply)
		case <-b.ready:
			b.export(false)
			continue // the timer runs on: a partial batch still leaves on time
		case <-t.C:
			b.export(true)
		}
		t.Reset(b.opts.Delay)
	}
}

// export sends the queued spans, a batch at a time: all of them when all
// is set (the timer, a flush, the stop), else only while a full batch
// waits, so steady traffic leaves in full batches rather than in what
// arrived during the last export. Only the loop calls it, so exports
// never overlap.
func (b *batcher) export(all bool) {
	for {
		b.mu.Lock()
		spans, dropped := b.queue, b.dropped
		take := len(spans)
		if !all {
			take -= take % b.opts.MaxBatch // full batches only
		}
		if take == 0 {
			spans = nil
		} else {
			// The rest (less than a batch) stays queued, in the spare slice.
			b.queue, b.spare = append(b.spare[:0], spans[take:]...), nil
			spans = spans[:take]
		}
		b.dropped = 0
		b.mu.Unlock()
		if dropped > 0 {
			otel.Handle(fmt.Errorf("telemetry: span queue full (%d spans): %d spans dropped", b.opts.MaxQueue, dropped))
		}
		if spans == nil {
			return
		}
		for rest := spans; len(rest) > 0; {
			n := min(len(rest), b.opts.MaxBatch)
			ctx, cancel := context.WithTimeout(context.Background(), b.opts.ExportTimeout)
			if err := b.exp.export(ctx, rest[:n]); err != nil {
				otel.Handle(err)
			}
			cancel()
			rest = rest[n:]
		}
		spans = spans[:cap(spans)]
		clear(spans) // let the spans go before the slice is reused
		b.mu.Lock()
		b.spare = spans[:0]
		b.mu.Unlock()
		all = false // what arrived meanwhile waits for a full batch or the timer
	}
}

// add queues an ended span for export.
func (b *batcher) add(s *span) {
	b.mu.Lock()
	if b.closed { // shut down: nothing will export it
		b.mu.Unlock()
		return
	}
	if len(b.queue) >= b.opts.MaxQueue {
		b.dropped++ // reported with the next export
		b.mu.Unlock()
		return
	}
	b.queue = append(b.queue, s)
	full := len(b.queue) == b.opts.MaxBatch
	b.mu.Unlock()
	if full {
		select {
		case b.ready <- struct{}{}:
		default: // already signalled
		}
	}
}

// ForceFlush exports every span ended so far, waiting at most until ctx
// is done.
func (b *batcher) ForceFlush(ctx context.Context) error {
	reply := make(chan struct{})
	select {
	case b.flush <- reply:
	case <-b.done:
		return nil // shut down: everything was exported then
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-reply:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued, refuses spans from then on and shuts
// the exporter down, waiting at most until ctx is done; when ctx ends
// first, the export and the exporter's shutdown still finish behind it.
func (b *batcher) Shutdown(ctx context.Context) error {
	b.once.Do(func() {
		b.mu.Lock()
		b.closed = true
		b.mu.Unlock()
		close(b.stop)
		go func() {
			<-b.done
			sctx, cancel := context.WithTimeout(context.Background(), b.opts.ExportTimeout)
			defer cancel()
			b.shutErr = b.exp.shutdown(sctx)
			close(b.shut)
		}()
	})
	select {
	case <-b.shut:
		return b.shutErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// spanExporter is where the batcher sends spans: the lean OTLP/HTTP
// exporter encodes them directly, any other goes through sdkExporter.
type spanExporter interface {
	export(ctx context.Context, spans []*span) error
	shutdown(ctx context.Context) error
}

// sdkExporter feeds the platform's spans to an SDK exporter (OTLP/gRPC,
// the SDK's OTLP/HTTP when TLS client settings need it, a test's
// in-memory one), each copied into the SDK's read-only form first.
type sdkExporter struct{ exp sdktrace.SpanExporter }

func (e sdkExporter) export(ctx context.Context, spans []*span) error {
	ro := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		ro[i] = readOnly(s)
	}
	return e.exp.ExportSpans(ctx, ro)
}

func (e sdkExporter) shutdown(ctx context.Context) error { return e.exp.Shutdown(ctx) }

// readOnly is an ended span in the SDK's read-only form.
func readOnly(s *span) sdktrace.ReadOnlySpan {
	return tracetest.SpanStub{
		Name: s.name, SpanContext: s.sc, Parent: s.parent, SpanKind: s.kind, StartTime: s.start, EndTime: s.end,
		Attributes: s.attrs, Events: s.events, Links: s.links, Status: s.status,
		DroppedAttributes: s.droppedAttrs, DroppedEvents: s.droppedEvents, DroppedLinks: s.droppedLinks,
		Resource: s.t.p.res, InstrumentationScope: s.t.scope,
	}.Snapshot()
}
