package telemetry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/opsmcp/platform/testkit/testwait"
)

// leanProvider is the platform's span path into exp.
func leanProvider(t *testing.T, exp sdktrace.SpanExporter, sampler sdktrace.Sampler, limits sdktrace.SpanLimits, o BatchOptions) *provider {
	t.Helper()
	p := newProvider(resource.NewSchemaless(attribute.String("service.name", "t")), sampler, limits, newBatcher(sdkExporter{exp}, o))
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p
}

var remoteParent = trace.NewSpanContext(trace.SpanContextConfig{
	TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, Remote: true,
})

// TestTheLeanTracerRecordsWhatTheSDKRecords runs the same span
// operations through the SDK's tracer provider and through the
// platform's own, and compares what each exports, field by field (all
// but the random ids and the clock): parents, kinds, attribute
// de-duplication and limits, events and their limit, errors, status
// precedence, renames, links, writes after the end, a panic through a
// deferred End, sampling.
func TestTheLeanTracerRecordsWhatTheSDKRecords(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	limits := sdktrace.NewSpanLimits()
	limits.AttributeCountLimit, limits.EventCountLimit, limits.LinkCountLimit = 4, 2, 2
	limits.AttributeValueLengthLimit, limits.AttributePerEventCountLimit = 5, 3
	cases := []struct {
		name string
		run  func(tr trace.Tracer)
	}{
		{"attributes set again keep their place and their last value, past the limit are dropped", func(tr trace.Tracer) {
			_, s := tr.Start(context.Background(), "a", trace.WithTimestamp(at(0)), trace.WithAttributes(attribute.String("k1", "v1")))
			s.SetAttributes(attribute.Int("k2", 2), attribute.String("k1", "again"), attribute.Bool("k3", true))
			s.SetAttributes(attribute.String("k4", "long value"), attribute.Int("k5", 5), attribute.Int("k2", 22), attribute.StringSlice("k3", []string{"abcdefgh", "x"}))
			s.SetAttributes(attribute.KeyValue{}) // invalid: dropped
			s.End(trace.WithTimestamp(at(1)))
			_, s = tr.Start(context.Background(), "a2", trace.WithTimestamp(at(0)))
			s.SetAttributes(attribute.String("utf8", "héllo wörld"), attribute.String("bad", "ab\xffcdefg"), attribute.String("bad2", "ab\xffc"),
				attribute.String("fffd", "\uFFFDxyzzy"), attribute.ByteSlice("bytes", []byte("0123456789")))
			s.End(trace.WithTimestamp(at(1)))
		}},
		{"an unknown kind is internal; a tracer without a name gets the default one", func(tr trace.Tracer) {
			_, s := tr.Start(context.Background(), "k", trace.WithSpanKind(trace.SpanKind(99)), trace.WithTimestamp(at(0)))
			s.End(trace.WithTimestamp(at(1)))
			_, s = s.TracerProvider().Tracer("").Start(context.Background(), "unnamed", trace.WithTimestamp(at(0)))
			s.End(trace.WithTimestamp(at(1)))
		}},
		{"the sampler decides: record only, its attributes, its trace state", func(tr trace.Tracer) {
			for _, name := range []string{"record-only", "sampled"} {
				_, s := tr.Start(context.Background(), name, trace.WithTimestamp(at(0)))
				if !s.IsRecording() || s.SpanContext().IsSampled() != (name == "sampled") || s.SpanContext().TraceState().Get("fixed") != "yes" {
					panic(fmt.Sprintf("%s: recording %v, sampled %v, state %q", name, s.IsRecording(), s.SpanContext().IsSampled(), s.SpanContext().TraceState()))
				}
				s.End(trace.WithTimestamp(at(1)))
			}
		}},
		{"a child of a remote parent, a server kind, a rename", func(tr trace.Tracer) {
			ctx := trace.ContextWithRemoteSpanContext(context.Background(), remoteParent)
			_, s := tr.Start(ctx, "b", trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(at(0)))
			s.SetName("b renamed")
			s.End(trace.WithTimestamp(at(2)))
		}},
		{"a new root ignores its parent; a child of a local span", func(tr trace.Tracer) {
			ctx := trace.ContextWithRemoteSpanContext(context.Background(), remoteParent)
			ctx, root := tr.Start(ctx, "root", trace.WithNewRoot(), trace.WithTimestamp(at(0)))
			_, child := tr.Start(ctx, "child", trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(at(1)))
			child.End(trace.WithTimestamp(at(2)))
			root.End(trace.WithTimestamp(at(3)))
		}},
		{"events: the newest within the limit, their attributes limited; errors", func(tr trace.Tracer) {
			_, s := tr.Start(context.Background(), "c", trace.WithTimestamp(at(0)))
			s.AddEvent("e1", trace.WithTimestamp(at(1)))
			s.AddEvent("e2", trace.WithTimestamp(at(2)), trace.WithAttributes(attribute.String("x", "1"), attribute.String("y", "2")))
			s.RecordError(errors.New("boom"), trace.WithTimestamp(at(3)))
			s.RecordError(nil)
			_, s2 := tr.Start(context.Background(), "c2", trace.WithTimestamp(at(0)))
			s2.RecordError(errors.New("with more"), trace.WithTimestamp(at(1)), trace.WithStackTrace(true), trace.WithAttributes(attribute.String("mine", "1")))
			s2.End(trace.WithTimestamp(at(2)))
			s.End(trace.WithTimestamp(at(4)))
		}},
		{"status: error replaces unset, ok is final, unset is ignored", func(tr trace.Tracer) {
			_, s := tr.Start(context.Background(), "d", trace.WithTimestamp(at(0)))
			s.SetStatus(codes.Error, "first")
			s.SetStatus(codes.Unset, "ignored")
			s.SetStatus(codes.Ok, "no description on ok")
			s.SetStatus(codes.Error, "too late")
			s.End(trace.WithTimestamp(at(1)))
			_, s = tr.Start(context.Background(), "d2", trace.WithTimestamp(at(0)))
			s.SetStatus(codes.Error, "kept")
			s.End(trace.WithTimestamp(at(1)))
		}},
		{"links: at start and later, the newest within the limit, empty ones ignored", func(tr trace.Tracer) {
			l := func(b byte) trace.Link {
				return trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{b}, SpanID: trace.SpanID{b}, TraceFlags: trace.FlagsSampled}),
					Attributes: []attribute.KeyValue{attribute.Int("n", int(b))}}
			}
			_, s := tr.Start(context.Background(), "e", trace.WithTimestamp(at(0)), trace.WithLinks(l(1), trace.Link{}))
			s.AddLink(l(2))
			s.AddLink(l(3))
			s.End(trace.WithTimestamp(at(1)))
		}},
		{"nothing changes after the end, and a second end is ignored", func(tr trace.Tracer) {
			_, s := tr.Start(context.Background(), "f", trace.WithTimestamp(at(0)))
			s.End(trace.WithTimestamp(at(1)))
			s.SetAttributes(attribute.String("late", "x"))
			s.AddEvent("late")
			s.SetStatus(codes.Error, "late")
			s.SetName("late")
			s.End(trace.WithTimestamp(at(9)))
		}},
		{"a panic through a deferred End is an exception event", func(tr trace.Tracer) {
			defer func() { _ = recover() }()
			_, s := tr.Start(context.Background(), "g", trace.WithTimestamp(at(0)))
			defer s.End(trace.WithTimestamp(at(1)))
			panic(fmt.Errorf("kaput"))
		}},
		{"a child of an unsampled remote parent is not sampled", func(tr trace.Tracer) {
			unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{9}, Remote: true})
			ctx, s := tr.Start(trace.ContextWithRemoteSpanContext(context.Background(), unsampled), "h")
			if s.IsRecording() || s.SpanContext().TraceID() != unsampled.TraceID() || s.SpanContext().IsSampled() {
				panic("an unsampled child records or lost its trace")
			}
			if !trace.SpanContextFromContext(ctx).Equal(s.SpanContext()) {
				panic("the unsampled span is not in its context")
			}
			s.SetAttributes(attribute.String("x", "y"))
			s.End()
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sdkExp, leanExp := tracetest.NewInMemoryExporter(), tracetest.NewInMemoryExporter()
			sampler := sdktrace.ParentBased(fixedStateSampler{})
			sdk := sdktrace.NewTracerProvider(sdktrace.WithSyncer(sdkExp), sdktrace.WithRawSpanLimits(limits), sdktrace.WithSampler(sampler),
				sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "t"))))
			lean := leanProvider(t, leanExp, sampler, limits, BatchOptions{MaxQueue: 100, MaxBatch: 100, Delay: time.Hour, ExportTimeout: time.Second})
			c.run(sdk.Tracer("scope", trace.WithInstrumentationVersion("1")))
			c.run(lean.Tracer("scope", trace.WithInstrumentationVersion("1")))
			if err := lean.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			want, got := describe(sdkExp.GetSpans()), describe(leanExp.GetSpans())
			if want != got {
				t.Fatalf("the SDK exported\n%s\nthe platform's tracer\n%s", want, got)
			}
		})
	}
}

// fixedStateSampler records every root span with an attribute and a
// trace state of its own, sampling all but those named record-only.
type fixedStateSampler struct{}

func (fixedStateSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	d := sdktrace.RecordAndSample
	if p.Name == "record-only" {
		d = sdktrace.RecordOnly
	}
	ts, _ := trace.SpanContextFromContext(p.ParentContext).TraceState().Insert("fixed", "yes")
	return sdktrace.SamplingResult{Decision: d, Attributes: []attribute.KeyValue{attribute.String("sampler", "fixed")}, Tracestate: ts}
}

func (fixedStateSampler) Description() string { return "fixed" }

// describe prints what a span exports, with its ids replaced by their
// relation to the other spans (same trace, parent) so two runs compare.
func describe(spans tracetest.SpanStubs) string {
	var b strings.Builder
	ids := map[trace.SpanID]string{remoteParent.SpanID(): "remote"}
	for i, s := range spans {
		ids[s.SpanContext.SpanID()] = fmt.Sprint("span", i)
	}
	for _, s := range spans {
		parent := ids[s.Parent.SpanID()]
		if s.Parent.IsValid() && parent == "" {
			parent = "?"
		}
		fmt.Fprintf(&b, "%s kind=%v parent=%s remoteParent=%v sameTraceAsRemote=%v flags=%v state=%q start=%s end=%s status=%v/%q scope=%s/%s res=%v\n",
			s.Name, s.SpanKind, parent, s.Parent.IsRemote(), s.SpanContext.TraceID() == remoteParent.TraceID(), s.SpanContext.TraceFlags(), s.SpanContext.TraceState(),
			s.StartTime.Format(time.TimeOnly), s.EndTime.Format(time.TimeOnly), s.Status.Code, s.Status.Description,
			s.InstrumentationScope.Name, s.InstrumentationScope.Version, s.Resource.Attributes())
		fmt.Fprintf(&b, "  attrs %v dropped %d\n", s.Attributes, s.DroppedAttributes)
		for _, e := range s.Events {
			var attrs []string
			for _, kv := range e.Attributes {
				v := kv.Value.String()
				if kv.Key == "exception.stacktrace" { // the two stacks differ; their presence and size limit do not
					v = fmt.Sprintf("<%v bytes up to 2048>", len(v) > 0 && len(v) <= 2048)
				}
				attrs = append(attrs, string(kv.Key)+"="+v)
			}
			fmt.Fprintf(&b, "  event %s at %s %v dropped %d\n", e.Name, e.Time.Format(time.TimeOnly), attrs, e.DroppedAttributeCount)
		}
		fmt.Fprintf(&b, "  events dropped %d\n", s.DroppedEvents)
		for _, l := range s.Links {
			fmt.Fprintf(&b, "  link %s/%s %v dropped %d\n", l.SpanContext.TraceID(), l.SpanContext.SpanID(), l.Attributes, l.DroppedAttributeCount)
		}
		fmt.Fprintf(&b, "  links dropped %d\n", s.DroppedLinks)
	}
	return b.String()
}

// TestTheSamplerFollowsTheEnvironment: OTEL_TRACES_SAMPLER and its
// argument choose the sampler; anything else is refused, naming the
// variable.
func TestTheSamplerFollowsTheEnvironment(t *testing.T) {
	for _, c := range []struct{ sampler, arg, want string }{
		{"", "", "ParentBased{root:AlwaysOnSampler"},
		{"always_on", "", "AlwaysOnSampler"},
		{"always_off", "", "AlwaysOffSampler"},
		{"traceidratio", "0.25", "TraceIDRatioBased{0.25}"},
		{"parentbased_traceidratio", "0.5", "ParentBased{root:TraceIDRatioBased{0.5}"},
		{"parentbased_always_off", "", "ParentBased{root:AlwaysOffSampler"},
		{"traceidratio", "2", "error: OTEL_TRACES_SAMPLER_ARG"},
		{"traceidratio", "lots", "error: OTEL_TRACES_SAMPLER_ARG"},
		{"jaeger_remote", "", "error: OTEL_TRACES_SAMPLER"},
	} {
		env := map[string]string{"OTEL_TRACES_SAMPLER": c.sampler, "OTEL_TRACES_SAMPLER_ARG": c.arg}
		s, err := samplerFromEnv(func(k string) string { return env[k] })
		got := ""
		if err != nil {
			got = "error: " + err.Error()
		} else {
			got = s.Description()
		}
		if c.want[0] == 'e' { // Setup refuses to start with it
			if _, err := Setup(context.Background(), Config{Getenv: func(k string) string { return env[k] }}); err == nil || !strings.Contains(err.Error(), "OTEL_TRACES_SAMPLER") {
				t.Errorf("Setup with %s %s: %v", c.sampler, c.arg, err)
			}
		}
		if !strings.HasPrefix(got, c.want) && !(strings.HasPrefix(c.want, "error: ") && strings.HasPrefix(got, "error: telemetry: "+c.want[len("error: "):])) {
			t.Errorf("%s %s: got %s, want %s…", c.sampler, c.arg, got, c.want)
		}
	}
}

// TestBatchOptionsFollowTheEnvironment: OTEL_BSP_* in milliseconds and
// counts, the specification's defaults, a batch never larger than the
// queue, and a bad value refused by name.
func TestBatchOptionsFollowTheEnvironment(t *testing.T) {
	o, err := batchOptions(func(string) string { return "" })
	if err != nil || o != (BatchOptions{MaxQueue: 2048, MaxBatch: 512, Delay: 5 * time.Second, ExportTimeout: 30 * time.Second}) {
		t.Fatalf("defaults: %+v %v", o, err)
	}
	env := map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "500", "OTEL_BSP_SCHEDULE_DELAY": "250", "OTEL_BSP_EXPORT_TIMEOUT": "1000"}
	o, err = batchOptions(func(k string) string { return env[k] })
	if err != nil || o != (BatchOptions{MaxQueue: 100, MaxBatch: 100, Delay: 250 * time.Millisecond, ExportTimeout: time.Second}) {
		t.Fatalf("set: %+v %v", o, err)
	}
	for _, bad := range []string{"0", "-5", "1s", "many"} {
		if _, err := batchOptions(func(k string) string {
			if k == "OTEL_BSP_SCHEDULE_DELAY" {
				return bad
			}
			return ""
		}); err == nil || !strings.Contains(err.Error(), "OTEL_BSP_SCHEDULE_DELAY") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestEndedSpansAreExportedInBatchesAndNeverWaitedFor: spans leave when a
// batch is full, on the timer, on a flush and at shutdown; while the
// exporter is stuck, spans beyond the queue are dropped and End returns
// at once.
func TestEndedSpansAreExportedInBatchesAndNeverWaitedFor(t *testing.T) {
	gate, entered := make(chan struct{}), make(chan struct{}, 1)
	var blocked atomic.Bool
	exp := &keepExporter{}
	slow := exporterFunc(func(ctx context.Context, s []sdktrace.ReadOnlySpan) error {
		if blocked.Load() {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-gate
		}
		return exp.ExportSpans(ctx, s)
	})
	var reported atomic.Value // what the batcher told the error handler
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { reported.Store(err.Error()) }))
	t.Cleanup(func() { otel.SetErrorHandler(prev) })
	p := leanProvider(t, slow, sdktrace.AlwaysSample(), sdktrace.NewSpanLimits(), BatchOptions{MaxQueue: 4, MaxBatch: 3, Delay: time.Hour, ExportTimeout: time.Second})
	tr := p.Tracer("t")
	end := func(n int) {
		for range n {
			_, s := tr.Start(context.Background(), "x")
			s.End()
		}
	}
	waitFor := func(n int) {
		t.Helper()
		testwait.Until(t, fmt.Sprintf("%d spans are exported", n), func() bool { return len(exp.GetSpans()) >= n })
		if got := len(exp.GetSpans()); got != n {
			t.Fatalf("%d spans exported, want %d", got, n)
		}
	}
	end(2)
	time.Sleep(20 * time.Millisecond)
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("%d spans left before a batch was full", n)
	}
	end(1)
	waitFor(3)
	end(1)
	if err := p.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(4)

	// The exporter hangs: the first batch is taken, four more fill the
	// queue, the rest are dropped, and ending them does not wait.
	blocked.Store(true)
	end(3)
	// The loop took the full batch and hangs in export.
	testwait.Recv(t, entered, "a full batch to reach the exporter")
	// The exporter stays stuck until these ten have ended: End waiting
	// for it would never return.
	done := make(chan struct{})
	go func() { end(10); close(done) }()
	testwait.Recv(t, done, "ten spans to end while the exporter is stuck")
	close(gate)
	if err := p.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(4 + 3 + 4)
	if got := reported.Load(); got == nil || !strings.Contains(got.(string), "6 spans dropped") {
		t.Fatalf("the drops were reported as %v", got)
	}

	// Shutdown exports what is left and refuses what comes after.
	end(1)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	end(1)
	waitFor(12)

	// A partial batch leaves on the timer.
	exp2 := tracetest.NewInMemoryExporter()
	p2 := leanProvider(t, exp2, sdktrace.AlwaysSample(), sdktrace.NewSpanLimits(), BatchOptions{MaxQueue: 100, MaxBatch: 100, Delay: 10 * time.Millisecond, ExportTimeout: time.Second})
	_, s := p2.Tracer("t").Start(context.Background(), "x")
	s.End()
	// The batch of 100 is never full and nothing flushes: only the timer
	// can send it.
	testwait.Until(t, "the timer exports a partial batch", func() bool { return len(exp2.GetSpans()) > 0 })
	if n := len(exp2.GetSpans()); n != 1 {
		t.Fatalf("the timer exported %d spans, want 1", n)
	}
}

// TestSteadyTrafficLeavesInFullBatches: spans ended one after another
// while exports run leave in batches of the full size, not in whatever
// arrived during the previous export; only a flush sends a partial one.
func TestSteadyTrafficLeavesInFullBatches(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	exp := exporterFunc(func(_ context.Context, s []sdktrace.ReadOnlySpan) error {
		time.Sleep(time.Millisecond) // an export takes a while; spans keep coming
		mu.Lock()
		sizes = append(sizes, len(s))
		mu.Unlock()
		return nil
	})
	p := leanProvider(t, exp, sdktrace.AlwaysSample(), sdktrace.NewSpanLimits(), BatchOptions{MaxQueue: 1000, MaxBatch: 10, Delay: time.Hour, ExportTimeout: time.Second})
	tr := p.Tracer("t")
	for range 205 {
		_, s := tr.Start(context.Background(), "x")
		s.End()
		time.Sleep(50 * time.Microsecond)
	}
	if err := p.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for i, n := range sizes {
		total += n
		if n != 10 && i != len(sizes)-1 {
			t.Fatalf("batch %d of %v has %d spans: want full batches of 10 until the flush", i, sizes, n)
		}
	}
	if total != 205 {
		t.Fatalf("%d spans exported, want 205 (%v)", total, sizes)
	}
}

// TestThePlatformsSpansEncodeAsTheirSDKForm: the OTLP encoder reading
// the platform's spans directly (what serving does) writes the same
// bytes as for the same spans in the SDK's read-only form, whose encoding
// TestTheLeanEncoderWritesWhatTheOfficialTypesRead checks against the
// official OTLP types.
func TestThePlatformsSpansEncodeAsTheirSDKForm(t *testing.T) {
	var mu sync.Mutex
	var ended []*span
	capture := captureExporter(func(s []*span) {
		mu.Lock()
		ended = append(ended, s...)
		mu.Unlock()
	})
	res := resource.NewSchemaless(attribute.String("service.name", "t"))
	p := newProvider(res, sdktrace.ParentBased(sdktrace.AlwaysSample()), sdktrace.NewSpanLimits(),
		newBatcher(capture, BatchOptions{MaxQueue: 100, MaxBatch: 100, Delay: time.Hour, ExportTimeout: time.Second}))
	defer p.Shutdown(context.Background())
	ts, _ := trace.ParseTraceState("vendor=a")
	remote := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true}))
	ctx, server := p.Tracer(ScopeName, trace.WithInstrumentationVersion("v1")).Start(remote, "tools/call x", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithLinks(trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{3}, SpanID: trace.SpanID{4}}), Attributes: []attribute.KeyValue{attribute.Int("n", 1)}}))
	_, client := p.Tracer("db").Start(ctx, "SELECT t", trace.WithSpanKind(trace.SpanKindClient))
	client.SetAttributes(attribute.String("db.system.name", "sqlite"), attribute.Int("port", 5432), attribute.Float64("f", 0.5))
	client.SetStatus(codes.Ok, "")
	client.End()
	server.SetAttributes(attribute.StringSlice("keys", []string{"a", "wh.b"}), attribute.Bool("t", true), attribute.String("long", strings.Repeat("x", 300)))
	server.AddEvent(EventStateRejected, trace.WithAttributes(AttrRejectReason.String("expired")))
	server.SetStatus(codes.Error, "boom")
	server.End()
	if err := p.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ended) != 2 {
		t.Fatalf("%d spans exported", len(ended))
	}
	ro := make([]sdktrace.ReadOnlySpan, len(ended))
	for i, s := range ended {
		ro[i] = readOnly(s)
	}
	direct, viaSDK := appendExportRequest(nil, ended), appendExportRequest(nil, ro)
	if !bytes.Equal(direct, viaSDK) {
		t.Fatalf("the platform's spans encode differently from their SDK form:\n%x\n%x", direct, viaSDK)
	}
}

// captureExporter hands each batch to a function.
type captureExporter func([]*span)

func (c captureExporter) export(_ context.Context, s []*span) error { c(s); return nil }
func (captureExporter) shutdown(context.Context) error              { return nil }

type exporterFunc func(context.Context, []sdktrace.ReadOnlySpan) error

func (f exporterFunc) ExportSpans(ctx context.Context, s []sdktrace.ReadOnlySpan) error {
	return f(ctx, s)
}
func (exporterFunc) Shutdown(context.Context) error { return nil }
