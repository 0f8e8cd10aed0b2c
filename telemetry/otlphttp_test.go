package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// sampleSpans are spans with every kind of attribute value, events,
// links, a status, trace state and a remote parent, under two scopes and
// two resources.
func sampleSpans(t *testing.T) []sdktrace.ReadOnlySpan {
	t.Helper()
	tid := trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	ts, _ := trace.ParseTraceState("vendor=a,other=b")
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{9, 9, 9, 9, 9, 9, 9, 9}, TraceFlags: trace.FlagsSampled, Remote: true})
	link := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7}, SpanID: trace.SpanID{7}, TraceState: ts, TraceFlags: trace.FlagsSampled})
	long := string(bytes.Repeat([]byte("x"), 300)) // a length that needs a two-byte varint
	res1 := resource.NewSchemaless(attribute.String("service.name", "svc"), attribute.String("service.instance.id", "i-1"))
	res2 := resource.NewSchemaless(attribute.String("service.name", "other"))
	start := time.Unix(1_700_000_000, 123456789)
	stubs := tracetest.SpanStubs{
		{
			Name: "tools/call order", SpanKind: trace.SpanKindServer, Parent: parent,
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled, TraceState: ts}),
			StartTime:   start, EndTime: start.Add(3 * time.Millisecond),
			Attributes: []attribute.KeyValue{
				attribute.String("s", "v"), attribute.String("empty", ""), attribute.String("long", long),
				attribute.Bool("t", true), attribute.Bool("f", false), attribute.Int("zero", 0), attribute.Int64("neg", -42),
				attribute.Float64("pi", math.Pi), attribute.StringSlice("keys", []string{"who", "wh.x"}),
				attribute.IntSlice("ints", []int{1, 2}), attribute.BoolSlice("bools", []bool{true, false}),
				attribute.Float64Slice("floats", []float64{0.5}),
			},
			DroppedAttributes: 2,
			Events: []sdktrace.Event{{Name: EventStateRejected, Time: start.Add(time.Millisecond),
				Attributes: []attribute.KeyValue{AttrRejectReason.String("expired")}, DroppedAttributeCount: 1}},
			Links:  []sdktrace.Link{{SpanContext: link, Attributes: []attribute.KeyValue{attribute.String("l", "1")}}},
			Status: sdktrace.Status{Code: codes.Error, Description: "boom"},
			InstrumentationScope: instrumentation.Scope{Name: ScopeName, Version: "v1",
				Attributes: attribute.NewSet(attribute.String("scope.attr", "x"))},
			Resource: res1,
		},
		{
			Name: "webhook tool order", SpanKind: trace.SpanKindClient,
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled}),
			Parent:      trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled}),
			StartTime:   start, EndTime: start.Add(time.Millisecond),
			Status:               sdktrace.Status{Code: codes.Ok},
			InstrumentationScope: instrumentation.Scope{Name: "db"},
			Resource:             res1,
		},
		{
			Name: "root", SpanKind: trace.SpanKindInternal,
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{3}, SpanID: trace.SpanID{3}}),
			StartTime:   start, EndTime: start,
			InstrumentationScope: instrumentation.Scope{Name: ScopeName, Version: "v1", Attributes: attribute.NewSet(attribute.String("scope.attr", "x"))},
			Resource:             res2,
		},
	}
	return stubs.Snapshots()
}

func kvMap(kvs []*commonpb.KeyValue) map[string]*commonpb.AnyValue {
	m := map[string]*commonpb.AnyValue{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestTheLeanEncoderWritesWhatTheOfficialTypesRead(t *testing.T) {
	spans := sampleSpans(t)
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(appendExportRequest(nil, spans), &req); err != nil {
		t.Fatalf("not valid OTLP: %v", err)
	}
	if len(req.ResourceSpans) != 2 {
		t.Fatalf("resource groups: %d", len(req.ResourceSpans))
	}
	rs := req.ResourceSpans[0]
	if kvMap(rs.Resource.Attributes)["service.instance.id"].GetStringValue() != "i-1" || len(rs.ScopeSpans) != 2 {
		t.Fatalf("resource 1: %v", rs)
	}
	if sc := rs.ScopeSpans[0].Scope; sc.Name != ScopeName || sc.Version != "v1" || kvMap(sc.Attributes)["scope.attr"].GetStringValue() != "x" {
		t.Fatalf("scope %v", sc)
	}
	s := rs.ScopeSpans[0].Spans[0]
	want := spans[0]
	tid, sid, psid := want.SpanContext().TraceID(), want.SpanContext().SpanID(), want.Parent().SpanID()
	if !bytes.Equal(s.TraceId, tid[:]) || !bytes.Equal(s.SpanId, sid[:]) || !bytes.Equal(s.ParentSpanId, psid[:]) ||
		s.TraceState != "vendor=a,other=b" || s.Name != "tools/call order" || s.Kind != tracepb.Span_SPAN_KIND_SERVER ||
		s.StartTimeUnixNano != uint64(want.StartTime().UnixNano()) || s.EndTimeUnixNano != uint64(want.EndTime().UnixNano()) ||
		s.DroppedAttributesCount != 2 || s.Flags != 0x301 {
		t.Fatalf("span fields %v", s)
	}
	a := kvMap(s.Attributes)
	if len(a) != 12 {
		t.Fatalf("attributes %v", s.Attributes)
	}
	if a["s"].GetStringValue() != "v" || a["long"].GetStringValue() != want.Attributes()[2].Value.AsString() ||
		!a["t"].GetBoolValue() || a["neg"].GetIntValue() != -42 || a["pi"].GetDoubleValue() != math.Pi {
		t.Fatalf("scalar attributes %v", a)
	}
	// Zero values are present, with their type.
	if _, ok := a["empty"].Value.(*commonpb.AnyValue_StringValue); !ok {
		t.Fatal("empty string lost its type")
	}
	if _, ok := a["f"].Value.(*commonpb.AnyValue_BoolValue); !ok {
		t.Fatal("false lost its type")
	}
	if _, ok := a["zero"].Value.(*commonpb.AnyValue_IntValue); !ok {
		t.Fatal("zero lost its type")
	}
	if v := a["keys"].GetArrayValue().GetValues(); len(v) != 2 || v[1].GetStringValue() != "wh.x" {
		t.Fatalf("string slice %v", v)
	}
	if v := a["ints"].GetArrayValue().GetValues(); len(v) != 2 || v[1].GetIntValue() != 2 {
		t.Fatalf("int slice %v", v)
	}
	if v := a["bools"].GetArrayValue().GetValues(); len(v) != 2 || !v[0].GetBoolValue() {
		t.Fatalf("bool slice %v", v)
	}
	if len(s.Events) != 1 || s.Events[0].Name != EventStateRejected || s.Events[0].DroppedAttributesCount != 1 ||
		kvMap(s.Events[0].Attributes)[string(AttrRejectReason)].GetStringValue() != "expired" {
		t.Fatalf("events %v", s.Events)
	}
	l := s.Links[0]
	ltid := want.Links()[0].SpanContext.TraceID()
	if !bytes.Equal(l.TraceId, ltid[:]) || l.TraceState != "vendor=a,other=b" || kvMap(l.Attributes)["l"].GetStringValue() != "1" || l.Flags != 0x101 {
		t.Fatalf("link %v", l)
	}
	if s.Status.Code != tracepb.Status_STATUS_CODE_ERROR || s.Status.Message != "boom" {
		t.Fatalf("status %v", s.Status)
	}
	if c := rs.ScopeSpans[1].Spans[0]; c.Kind != tracepb.Span_SPAN_KIND_CLIENT || c.Status.Code != tracepb.Status_STATUS_CODE_OK || rs.ScopeSpans[1].Scope.Name != "db" {
		t.Fatalf("second span %v", c)
	}
	if r := req.ResourceSpans[1]; kvMap(r.Resource.Attributes)["service.name"].GetStringValue() != "other" || r.ScopeSpans[0].Spans[0].Name != "root" {
		t.Fatalf("resource 2 %v", r)
	}
	// The buffer is reused: encoding again into it gives the same bytes.
	b1 := appendExportRequest(nil, spans)
	b2 := appendExportRequest(make([]byte, 0, 4), spans)
	if !bytes.Equal(b1, b2) {
		t.Fatal("encoding depends on the buffer")
	}
}

func TestTheLeanExporterPostsRetriesAndHonoursTheEnvironment(t *testing.T) {
	var mu sync.Mutex
	var calls int
	var got coltracepb.ExportTraceServiceRequest
	var header http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		header = r.Header.Clone()
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		body, _ := io.ReadAll(zr)
		if err := proto.Unmarshal(body, &got); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
	}))
	defer srv.Close()
	tgt, err := selectOTLP(env("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL), "TRACES")
	if err != nil {
		t.Fatal(err)
	}
	getenv := env("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL, "OTEL_EXPORTER_OTLP_COMPRESSION", "gzip",
		"OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20abc, x-tenant = ops ", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "5000")
	exp, err := leanOTLP(getenv, tgt)
	if err != nil || exp == nil {
		t.Fatalf("lean exporter: %v", err)
	}
	if exp.timeout != 5*time.Second || exp.url != srv.URL+"/v1/traces" {
		t.Fatalf("timeout %v url %s", exp.timeout, exp.url)
	}
	if err := exp.ExportSpans(context.Background(), sampleSpans(t)); err != nil {
		t.Fatal(err)
	}
	if calls != 2 || len(got.ResourceSpans) != 2 {
		t.Fatalf("calls %d, resource spans %d", calls, len(got.ResourceSpans))
	}
	if header.Get("Authorization") != "Bearer abc" || header.Get("X-Tenant") != "ops" || header.Get("Content-Type") != "application/x-protobuf" {
		t.Fatalf("headers %v", header)
	}
	_ = exp.Shutdown(context.Background())
	if err := exp.ExportSpans(context.Background(), sampleSpans(t)); err != nil || calls != 2 {
		t.Fatal("exported after shutdown")
	}
	// TLS client settings need the SDK's exporter; bad settings fail.
	if e, err := leanOTLP(env("OTEL_EXPORTER_OTLP_CERTIFICATE", "/ca.pem"), tgt); e != nil || err != nil {
		t.Fatal("lean exporter used with TLS client settings")
	}
	if _, err := leanOTLP(env("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd"), tgt); err == nil {
		t.Fatal("unknown compression accepted")
	}
	// A non-retryable status is an error, not a retry loop.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadRequest) }))
	defer bad.Close()
	tgt.endpoint, tgt.general = bad.URL, true
	exp, _ = leanOTLP(env(), tgt)
	if err := exp.ExportSpans(context.Background(), sampleSpans(t)); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("400 gave %v", err)
	}
}

type discard struct{}

func (discard) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	r.Body.Close()
	return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{"Content-Type": {"application/x-protobuf"}}, Request: r}, nil
}

// BenchmarkExportRoundSpans exports a batch of 512 spans shaped like a
// tools/call round's (a server span with the MCP attributes, a webhook
// client span) with the SDK's OTLP/HTTP exporter and with ours, both to
// a discarding transport: the encoding cost per span.
func BenchmarkExportRoundSpans(b *testing.B) {
	tid := trace.TraceID{1}
	var stubs tracetest.SpanStubs
	for i := 0; i < 256; i++ {
		stubs = append(stubs, tracetest.SpanStub{Name: "tools/call tool0007", SpanKind: trace.SpanKindServer,
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{byte(i), 1}, TraceFlags: trace.FlagsSampled}),
			StartTime:   time.Now(), EndTime: time.Now(),
			Attributes: []attribute.KeyValue{AttrMCPMethod.String("tools/call"), AttrNetworkProtoVer.String("1.1"),
				AttrClientAddress.String("127.0.0.1"), AttrClientPort.Int(51234), AttrTenant.String("acme"), AttrJSONRPCRequestID.String("1"),
				AttrMCPProtocolVersion.String("2026-07-28"), AttrGenAIOperation.String("execute_tool"), AttrGenAIToolName.String("tool0007")}},
			tracetest.SpanStub{Name: "webhook tool tool0007", SpanKind: trace.SpanKindClient,
				SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{byte(i), 2}, TraceFlags: trace.FlagsSampled}),
				StartTime:   time.Now(), EndTime: time.Now(),
				Attributes: []attribute.KeyValue{AttrHTTPMethod.String("POST"), AttrServerAddress.String("127.0.0.1"),
					AttrServerPort.Int(8080), AttrHTTPStatus.Int(200)}})
	}
	spans := stubs.Snapshots()
	b.Run("exporter=sdk", func(b *testing.B) {
		exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL("http://sink/v1/traces"),
			otlptracehttp.WithHTTPClient(&http.Client{Transport: discard{}}))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := exp.ExportSpans(context.Background(), spans); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
	})
	b.Run("exporter=lean", func(b *testing.B) {
		tgt := &otlpTarget{protocol: "http/protobuf", endpoint: "http://sink/v1/traces"}
		exp, err := leanOTLP(env(), tgt)
		if err != nil {
			b.Fatal(err)
		}
		exp.client = &http.Client{Transport: discard{}}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := exp.ExportSpans(context.Background(), spans); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
	})
}
