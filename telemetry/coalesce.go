package telemetry

import (
	"context"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// coalescer sits in front of the SDK's batch span processor and hands it
// ended spans in groups, so the processor's goroutine is woken once per
// group instead of once per span (each wake-up is a hand-off to another
// thread, dearer than recording the span). A group goes on, from the
// coalescer's own goroutine, when it is full or at most every flushEvery. Nothing here blocks a request: the
// batch processor drops rather than waits when its queue is full.
type coalescer struct {
	next       sdktrace.SpanProcessor
	size       int
	flushEvery time.Duration

	mu  sync.Mutex
	buf []sdktrace.ReadOnlySpan

	kick     chan struct{} // a full group is waiting
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func newCoalescer(next sdktrace.SpanProcessor, size int, flushEvery time.Duration) *coalescer {
	c := &coalescer{next: next, size: size, flushEvery: flushEvery,
		buf: make([]sdktrace.ReadOnlySpan, 0, size), kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	return c
}

func (c *coalescer) loop() {
	defer close(c.done)
	t := time.NewTicker(c.flushEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.flush()
		case <-c.kick:
			c.flush()
		}
	}
}

// take returns the buffered spans and starts a new group.
func (c *coalescer) take() []sdktrace.ReadOnlySpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.buf) == 0 {
		return nil
	}
	out := c.buf
	c.buf = make([]sdktrace.ReadOnlySpan, 0, c.size)
	return out
}

func (c *coalescer) flush() {
	for _, s := range c.take() {
		c.next.OnEnd(s)
	}
}

// OnStart is not forwarded: the batch processor does nothing on start.
func (c *coalescer) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (c *coalescer) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	c.mu.Lock()
	c.buf = append(c.buf, s)
	full := len(c.buf) == c.size
	c.mu.Unlock()
	if full {
		// Hand the group over off the request's path.
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

func (c *coalescer) ForceFlush(ctx context.Context) error {
	c.flush()
	return c.next.ForceFlush(ctx)
}

func (c *coalescer) Shutdown(ctx context.Context) error {
	c.stopOnce.Do(func() { close(c.stop) })
	<-c.done
	c.flush()
	return c.next.Shutdown(ctx)
}
