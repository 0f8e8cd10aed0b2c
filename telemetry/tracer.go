package telemetry

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// provider is the platform's trace provider when spans are exported. It
// implements the OpenTelemetry trace API, so every instrumented package
// (ours, the database and HTTP helpers) is unchanged, and it takes its
// sampler, span limits and resource from the SDK; what it leaves out is
// the SDK's span lifecycle. The SDK records a span in one object and, at
// its end, copies it into a snapshot and de-duplicates its attributes
// through a fresh map, then hands it over a channel span by span. Here a
// span is one object: attributes are de-duplicated as they are set, the
// ended span itself is queued for export (nothing writes to it after its
// end), and the export goroutine wakes once a batch. On a tools/call round
// that halves what tracing costs (README.md, "Observability").
type provider struct {
	embedded.TracerProvider

	res     *resource.Resource
	sampler sdktrace.Sampler
	limits  sdktrace.SpanLimits
	queue   *batcher

	mu      sync.Mutex
	tracers map[instrumentation.Scope]*tracer
	stopped atomic.Bool // shut down: tracers are no-ops from then on
}

func newProvider(res *resource.Resource, sampler sdktrace.Sampler, limits sdktrace.SpanLimits, queue *batcher) *provider {
	return &provider{res: res, sampler: sampler, limits: limits, queue: queue, tracers: map[instrumentation.Scope]*tracer{}}
}

// Tracer returns the tracer of one instrumentation scope.
func (p *provider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	if p.stopped.Load() {
		return tracenoop.Tracer{}
	}
	if name == "" {
		name = defaultTracerName
	}
	c := trace.NewTracerConfig(opts...)
	scope := instrumentation.Scope{Name: name, Version: c.InstrumentationVersion(), SchemaURL: c.SchemaURL(), Attributes: c.InstrumentationAttributes()}
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.tracers[scope]
	if !ok {
		t = &tracer{p: p, scope: scope}
		p.tracers[scope] = t
	}
	return t
}

// defaultTracerName names the scope of a tracer asked for without a
// name, as the SDK does.
const defaultTracerName = "go.opentelemetry.io/otel/sdk/tracer"

// ForceFlush exports every span ended so far.
func (p *provider) ForceFlush(ctx context.Context) error { return p.queue.ForceFlush(ctx) }

// Shutdown exports what is queued and stops the exporter; spans ended
// afterwards are dropped.
func (p *provider) Shutdown(ctx context.Context) error {
	p.stopped.Store(true)
	return p.queue.Shutdown(ctx)
}

type tracer struct {
	embedded.Tracer
	p     *provider
	scope instrumentation.Scope
}

// Start starts a span as the SDK would: a child of the span context in
// ctx (none with WithNewRoot), sampled by the provider's sampler, its
// kind internal unless given.
func (t *tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if ctx == nil {
		ctx = context.Background()
	}
	cfg := trace.NewSpanStartConfig(opts...)
	parentCtx := ctx
	if cfg.NewRoot() {
		parentCtx = trace.ContextWithSpanContext(ctx, trace.SpanContext{})
	}
	parent := trace.SpanContextFromContext(parentCtx)
	var scc trace.SpanContextConfig
	if parent.IsValid() {
		scc.TraceID = parent.TraceID()
	} else {
		scc.TraceID = newTraceID()
	}
	scc.SpanID = newSpanID()
	sr := t.p.sampler.ShouldSample(sdktrace.SamplingParameters{
		ParentContext: parentCtx, TraceID: scc.TraceID, Name: name, Kind: cfg.SpanKind(), Attributes: cfg.Attributes(), Links: cfg.Links(),
	})
	scc.TraceFlags = parent.TraceFlags() &^ trace.FlagsSampled
	if sr.Decision == sdktrace.RecordAndSample {
		scc.TraceFlags |= trace.FlagsSampled
	}
	scc.TraceState = sr.Tracestate
	sc := trace.NewSpanContext(scc)
	if sr.Decision == sdktrace.Drop {
		u := &unrecorded{sc: sc, p: t.p}
		return trace.ContextWithSpan(ctx, u), u
	}
	start := cfg.Timestamp()
	if start.IsZero() {
		start = time.Now()
	}
	kind := trace.ValidateSpanKind(cfg.SpanKind()) // unspecified or unknown: internal
	s := &span{t: t, sc: sc, parent: parent, kind: kind, name: name, start: start}
	s.setAttributes(sr.Attributes)
	s.setAttributes(cfg.Attributes())
	for _, l := range cfg.Links() {
		s.addLink(l)
	}
	return trace.ContextWithSpan(ctx, s), s
}

// newTraceID and newSpanID draw from the runtime's per-thread ChaCha8
// generator: random as the W3C recommends, with no lock shared between
// requests. Neither is ever all zeros (invalid).
func newTraceID() trace.TraceID {
	var id trace.TraceID
	for !id.IsValid() {
		hi, lo := rand.Uint64(), rand.Uint64()
		for i := range 8 {
			id[i], id[8+i] = byte(hi>>(56-8*i)), byte(lo>>(56-8*i))
		}
	}
	return id
}

func newSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		v := rand.Uint64()
		for i := range 8 {
			id[i] = byte(v >> (56 - 8*i))
		}
	}
	return id
}

// span is a recording span. Until End it is written under mu; after End
// nothing writes to it, so the exporter reads it without the lock (the
// queue's lock orders End before the read).
type span struct {
	embedded.Span
	t      *tracer
	sc     trace.SpanContext
	parent trace.SpanContext
	kind   trace.SpanKind

	mu     sync.Mutex
	ended  bool
	name   string
	start  time.Time
	end    time.Time
	status sdktrace.Status
	attrs  []attribute.KeyValue
	events []sdktrace.Event
	links  []sdktrace.Link

	droppedAttrs, droppedEvents, droppedLinks int
}

func (s *span) SpanContext() trace.SpanContext       { return s.sc }
func (s *span) TracerProvider() trace.TracerProvider { return s.t.p }

// IsRecording is true until End.
func (s *span) IsRecording() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.ended
}

// End ends the span and queues it for export when sampled. A panic
// passing through a deferred End is recorded as an exception event, as
// the SDK does, and goes on.
func (s *span) End(opts ...trace.SpanEndOption) {
	// From the start's monotonic reading when it has one, so a clock step
	// cannot make a span end before it began.
	now := s.start.Add(time.Since(s.start))
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	cfg := trace.NewSpanEndConfig(opts...)
	if r := recover(); r != nil {
		defer panic(r)
		attrs := []attribute.KeyValue{attribute.String("exception.type", typeName(r)), attribute.String("exception.message", fmt.Sprint(r))}
		if cfg.StackTrace() {
			attrs = append(attrs, attribute.String("exception.stacktrace", stackTrace()))
		}
		s.addEvent("exception", time.Now(), attrs)
	}
	s.end = now
	if ts := cfg.Timestamp(); !ts.IsZero() {
		s.end = ts
	}
	s.ended = true
	s.mu.Unlock()
	if s.sc.IsSampled() {
		s.t.p.queue.add(s)
	}
}

// SetAttributes sets attributes, a key set again keeping its first place
// and its last value.
func (s *span) SetAttributes(kv ...attribute.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.setAttributes(kv)
	}
}

func (s *span) setAttributes(kv []attribute.KeyValue) {
	if len(kv) == 0 {
		return
	}
	lim := s.t.p.limits
	if s.attrs == nil {
		s.attrs = make([]attribute.KeyValue, 0, len(kv))
	}
	s.attrs, s.droppedAttrs = setAttrs(s.attrs, kv, lim.AttributeCountLimit, lim.AttributeValueLengthLimit, s.droppedAttrs)
}

// setAttrs adds kv to attrs within the count limit (negative: none),
// replacing the value of a key already there, truncating strings past
// the length limit, dropping invalid attributes; it returns attrs and the
// count of dropped ones. Keys are found by a linear scan: spans carry a
// few dozen attributes at most, where a scan beats any map.
func setAttrs(attrs, kv []attribute.KeyValue, countLimit, lengthLimit, dropped int) ([]attribute.KeyValue, int) {
next:
	for _, a := range kv {
		if !a.Valid() {
			dropped++
			continue
		}
		a = truncate(a, lengthLimit)
		for i := range attrs {
			if attrs[i].Key == a.Key {
				attrs[i] = a
				continue next
			}
		}
		if countLimit >= 0 && len(attrs) >= countLimit {
			dropped++
			continue
		}
		attrs = append(attrs, a)
	}
	return attrs, dropped
}

// limitAttrs keeps the first limit attributes of an event or a link
// (negative: all) and counts the rest; as in the SDK, these are neither
// de-duplicated nor truncated.
func limitAttrs(attrs []attribute.KeyValue, limit int) ([]attribute.KeyValue, int) {
	if limit >= 0 && len(attrs) > limit {
		return attrs[:limit:limit], len(attrs) - limit
	}
	return attrs, 0
}

// truncate applies the value length limit (negative: none) as the SDK
// does: strings, and the strings of string slices, to limit characters,
// dropping invalid UTF-8 bytes from a string it cuts; byte slices to
// limit bytes. Slice and map values (which the platform never records)
// are kept as given: the SDK would also limit their depth and
// de-duplicate map keys.
func truncate(a attribute.KeyValue, limit int) attribute.KeyValue {
	if limit < 0 {
		return a
	}
	switch a.Value.Type() {
	case attribute.STRING:
		if s := a.Value.AsString(); len(s) > limit {
			return a.Key.String(truncateString(s, limit))
		}
	case attribute.BYTESLICE:
		if b := a.Value.AsByteSlice(); len(b) > limit {
			return attribute.KeyValue{Key: a.Key, Value: attribute.ByteSliceValue(b[:limit])}
		}
	case attribute.STRINGSLICE:
		ss := a.Value.AsStringSlice()
		cut := false
		for i, s := range ss {
			if len(s) > limit {
				ss[i], cut = truncateString(s, limit), true
			}
		}
		if cut {
			return a.Key.StringSlice(ss)
		}
	}
	return a
}

// truncateString keeps the first limit characters of s; when s is not
// valid UTF-8, its invalid bytes are dropped and do not count.
func truncateString(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	if utf8.ValidString(s) {
		n := 0
		for i := range s {
			if n == limit {
				return s[:i]
			}
			n++
		}
		return s
	}
	var b strings.Builder
	for i, n := 0, 0; i < len(s) && n < limit; {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || size > 1 {
			b.WriteString(s[i : i+size])
			n++
		}
		i += size
	}
	return b.String()
}

func (s *span) AddEvent(name string, opts ...trace.EventOption) {
	cfg := trace.NewEventConfig(opts...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.addEvent(name, cfg.Timestamp(), cfg.Attributes())
	}
}

// addEvent keeps the newest events within the limit, as the SDK does.
func (s *span) addEvent(name string, at time.Time, attrs []attribute.KeyValue) {
	lim := s.t.p.limits
	if lim.EventCountLimit == 0 {
		s.droppedEvents++
		return
	}
	ev := sdktrace.Event{Name: name, Time: at}
	if len(attrs) > 0 {
		ev.Attributes, ev.DroppedAttributeCount = limitAttrs(attrs, lim.AttributePerEventCountLimit)
	}
	if lim.EventCountLimit > 0 && len(s.events) >= lim.EventCountLimit {
		copy(s.events, s.events[1:])
		s.events = s.events[:len(s.events)-1]
		s.droppedEvents++
	}
	s.events = append(s.events, ev)
}

// RecordError records err as an exception event.
func (s *span) RecordError(err error, opts ...trace.EventOption) {
	if err == nil {
		return
	}
	cfg := trace.NewEventConfig(opts...)
	// The caller's attributes first, then the exception's, as the SDK
	// orders them (it matters when the per-event limit cuts).
	attrs := make([]attribute.KeyValue, 0, len(cfg.Attributes())+3)
	attrs = append(attrs, cfg.Attributes()...)
	attrs = append(attrs, attribute.String("exception.type", typeName(err)), attribute.String("exception.message", err.Error()))
	if cfg.StackTrace() {
		attrs = append(attrs, attribute.String("exception.stacktrace", stackTrace()))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.addEvent("exception", cfg.Timestamp(), attrs)
	}
}

// stackTrace is the calling goroutine's stack, its first 2 KiB, as the
// SDK records it.
func stackTrace() string {
	b := make([]byte, 2048)
	return string(b[:runtime.Stack(b, false)])
}

// typeName is the package-qualified name of v's type.
func typeName(v any) string {
	t := reflect.TypeOf(v)
	if t.PkgPath() == "" && t.Name() == "" {
		return t.String() // pointers, slices, maps: their spelling
	}
	return t.PkgPath() + "." + t.Name()
}

// SetStatus sets the status: Ok is final, Error replaces Unset, Unset is
// ignored; only Error keeps a description.
func (s *span) SetStatus(code codes.Code, description string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || code == codes.Unset || s.status.Code == codes.Ok {
		return
	}
	s.status = sdktrace.Status{Code: code}
	if code == codes.Error {
		s.status.Description = description
	}
}

func (s *span) SetName(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.name = name
	}
}

func (s *span) AddLink(l trace.Link) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.addLink(l)
	}
}

// addLink keeps the newest links within the limit; a link to nothing
// (no valid span context, no attributes, no trace state) is ignored.
func (s *span) addLink(l trace.Link) {
	if !l.SpanContext.IsValid() && len(l.Attributes) == 0 && l.SpanContext.TraceState().Len() == 0 {
		return
	}
	lim := s.t.p.limits
	if lim.LinkCountLimit == 0 {
		s.droppedLinks++
		return
	}
	sl := sdktrace.Link{SpanContext: l.SpanContext}
	if len(l.Attributes) > 0 {
		sl.Attributes, sl.DroppedAttributeCount = limitAttrs(l.Attributes, lim.AttributePerLinkCountLimit)
	}
	if lim.LinkCountLimit > 0 && len(s.links) >= lim.LinkCountLimit {
		copy(s.links, s.links[1:])
		s.links = s.links[:len(s.links)-1]
		s.droppedLinks++
	}
	s.links = append(s.links, sl)
}

// What the exporters read of an ended span (the methods of the SDK's
// ReadOnlySpan they use). They take no lock: they are for the exporter,
// after End, when nothing writes to the span any more.

func (s *span) Name() string                                { return s.name }
func (s *span) Parent() trace.SpanContext                   { return s.parent }
func (s *span) SpanKind() trace.SpanKind                    { return s.kind }
func (s *span) StartTime() time.Time                        { return s.start }
func (s *span) EndTime() time.Time                          { return s.end }
func (s *span) Attributes() []attribute.KeyValue            { return s.attrs }
func (s *span) Links() []sdktrace.Link                      { return s.links }
func (s *span) Events() []sdktrace.Event                    { return s.events }
func (s *span) Status() sdktrace.Status                     { return s.status }
func (s *span) InstrumentationScope() instrumentation.Scope { return s.t.scope }
func (s *span) Resource() *resource.Resource                { return s.t.p.res }
func (s *span) DroppedAttributes() int                      { return s.droppedAttrs }
func (s *span) DroppedLinks() int                           { return s.droppedLinks }
func (s *span) DroppedEvents() int                          { return s.droppedEvents }

// unrecorded is a span the sampler dropped: it carries its context to
// children and outbound calls and records nothing.
type unrecorded struct {
	embedded.Span
	sc trace.SpanContext
	p  *provider
}

func (u *unrecorded) End(...trace.SpanEndOption)              {}
func (u *unrecorded) AddEvent(string, ...trace.EventOption)   {}
func (u *unrecorded) AddLink(trace.Link)                      {}
func (u *unrecorded) IsRecording() bool                       { return false }
func (u *unrecorded) RecordError(error, ...trace.EventOption) {}
func (u *unrecorded) SpanContext() trace.SpanContext          { return u.sc }
func (u *unrecorded) SetStatus(codes.Code, string)            {}
func (u *unrecorded) SetName(string)                          {}
func (u *unrecorded) SetAttributes(...attribute.KeyValue)     {}
func (u *unrecorded) TracerProvider() trace.TracerProvider    { return u.p }

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG name, parent-based always-on by default. An
// unknown sampler or a ratio outside [0, 1] is an error naming the
// variable, not a silent fallback.
func samplerFromEnv(getenv func(string) string) (sdktrace.Sampler, error) {
	name := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() (sdktrace.Sampler, error) {
		if arg == "" {
			return sdktrace.TraceIDRatioBased(1), nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("telemetry: OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", arg)
		}
		return sdktrace.TraceIDRatioBased(r), nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio":
		return ratio()
	case "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		return sdktrace.ParentBased(r), nil
	}
	return nil, fmt.Errorf("telemetry: OTEL_TRACES_SAMPLER=%q is not supported (always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio)", name)
}
