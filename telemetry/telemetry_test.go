package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func recorder(t *testing.T) (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return rec, tp
}

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestLogLinesInsideASpanCarryItsTraceAndSpanIDs(t *testing.T) {
	_, tp := recorder(t)
	var buf bytes.Buffer
	log := Logger(slog.New(slog.NewJSONHandler(&buf, nil))).With("component", "x")
	if Logger(log) != log {
		t.Fatal("wrapping twice made a new logger")
	}
	ctx, span := tp.Tracer("t").Start(context.Background(), "request")
	log.InfoContext(ctx, "inside")
	log.Info("outside")
	span.End()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var in, out map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &in)
	_ = json.Unmarshal([]byte(lines[1]), &out)
	sc := span.SpanContext()
	if in[LogTraceID] != sc.TraceID().String() || in[LogSpanID] != sc.SpanID().String() || in["component"] != "x" {
		t.Fatalf("line inside the span: %v", in)
	}
	if _, ok := out[LogTraceID]; ok {
		t.Fatalf("line outside any span: %v", out)
	}
}

func TestExportersFollowTheStandardEnvironment(t *testing.T) {
	cases := []struct {
		env      []string
		otlp     bool
		protocol string
		url      string
		err      bool
	}{
		{env: nil, otlp: false},
		{env: []string{"OTEL_TRACES_EXPORTER", "none", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"}, otlp: false},
		{env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"}, otlp: true, protocol: "http/protobuf", url: "http://c:4318/v1/traces"},
		{env: []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/custom"}, otlp: true, protocol: "http/protobuf", url: "http://c:4318/custom"},
		{env: []string{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, otlp: true, protocol: "grpc"},
		{env: []string{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"}, otlp: true, protocol: "http/protobuf"},
		{env: []string{"OTEL_TRACES_EXPORTER", "zipkin"}, err: true},
		{env: []string{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"}, err: true},
	}
	for _, c := range cases {
		tgt, err := selectOTLP(env(c.env...), "TRACES")
		if (err != nil) != c.err {
			t.Fatalf("%v: err %v", c.env, err)
		}
		if c.err {
			continue
		}
		if (tgt != nil) != c.otlp {
			t.Fatalf("%v: otlp %v", c.env, tgt != nil)
		}
		if tgt == nil {
			continue
		}
		if tgt.protocol != c.protocol {
			t.Fatalf("%v: protocol %s", c.env, tgt.protocol)
		}
		if u, _ := tgt.httpURL("/v1/traces"); u != c.url {
			t.Fatalf("%v: url %q", c.env, u)
		}
	}
	if tgt, _ := selectOTLP(env("OTEL_METRICS_EXPORTER", "prometheus"), "METRICS"); tgt != nil {
		t.Fatal("prometheus alone is served at /metrics, not exported")
	}
	// Both protocols build (gRPC dials lazily); a bad value fails at start.
	for _, proto := range []string{"grpc", "http/protobuf"} {
		tel, err := Setup(context.Background(), Config{Getenv: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL", proto)})
		if err != nil || !tel.Tracing() || tel.Metrics() == nil {
			t.Fatalf("%s: %v", proto, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_ = tel.Shutdown(ctx)
		cancel()
	}
	if _, err := Setup(context.Background(), Config{Getenv: env("OTEL_TRACES_EXPORTER", "jaeger")}); err == nil {
		t.Fatal("an unsupported exporter was accepted")
	}
}

func TestDisabledTelemetryRecordsNothing(t *testing.T) {
	tel := Disabled()
	if tel.Tracing() {
		t.Fatal("disabled telemetry traces")
	}
	_, span := tel.Tracer().Start(context.Background(), "x")
	if span.IsRecording() {
		t.Fatal("span recording")
	}
	var nilTel *Telemetry
	nilTel.Metrics().Round(context.Background(), "a", "tools/call", "complete")
	if err := nilTel.Shutdown(context.Background()); err != nil || nilTel.Tracing() {
		t.Fatal("nil telemetry is not inert")
	}
	if un, err := nilTel.ReportKeyRings(func(context.Context, func(KeyRing)) {}); err != nil {
		t.Fatal(err)
	} else {
		un()
	}
}

func TestTraceparentRoundTrips(t *testing.T) {
	_, tp := recorder(t)
	_, span := tp.Tracer("t").Start(context.Background(), "x")
	defer span.End()
	tp1 := Traceparent(span.SpanContext())
	if len(tp1) != 55 || !strings.HasPrefix(tp1, "00-"+span.SpanContext().TraceID().String()+"-") || !strings.HasSuffix(tp1, "-01") {
		t.Fatalf("traceparent %q", tp1)
	}
	sc, ok := ParseTraceparent(tp1, "")
	if !ok || sc.TraceID() != span.SpanContext().TraceID() || sc.SpanID() != span.SpanContext().SpanID() || !sc.IsRemote() {
		t.Fatalf("parsed %v", sc)
	}
	if Traceparent(trace.SpanContext{}) != "" {
		t.Fatal("invalid context formatted")
	}
	if _, ok := ParseTraceparent("00-zz", ""); ok {
		t.Fatal("garbage parsed")
	}
}

// TestParseTraceparentAgreesWithThePropagator: the in-place reading of
// version-00 headers gives exactly what the W3C propagator gives, for
// good headers and for each way one can be bad.
func TestParseTraceparentAgreesWithThePropagator(t *testing.T) {
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, h := range []string{
		"00-" + tid + "-" + sid + "-01",
		"00-" + tid + "-" + sid + "-00",
		"00-" + tid + "-" + sid + "-03", // sampled and random
		"00-" + tid + "-" + sid + "-ff", // reserved flags on version 00
		"00-" + tid + "-" + sid + "-04",
		"00-" + strings.ToUpper(tid) + "-" + sid + "-01",    // uppercase hex
		"00-" + tid + "-" + strings.ToUpper(sid) + "-01",    // uppercase hex
		"00-" + strings.Repeat("0", 32) + "-" + sid + "-01", // zero trace id
		"00-" + tid + "-" + strings.Repeat("0", 16) + "-01", // zero span id
		"00-" + tid + "-" + sid + "-0g",                     // bad flags
		"00-" + tid[:31] + "x-" + sid + "-01",               // bad trace id
		"00-" + tid + "-" + sid + "-01-extra",               // trailing data on 00
		"01-" + tid + "-" + sid + "-01-extra",               // a future version
		"ff-" + tid + "-" + sid + "-01",                     // forbidden version
		"00_" + tid + "-" + sid + "-01",                     // bad separator
		"00-" + tid + "-" + sid + "-1",                      // short
		"",
	} {
		want := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": h}))
		got, ok := ParseTraceparent(h, "")
		if ok != want.IsValid() || !got.Equal(want) {
			t.Errorf("%q: got %v (ok %v), the propagator %v", h, got, ok, want)
		}
	}
}

func TestWorkBeforeTheRequestSpanIsReplayedUnderIt(t *testing.T) {
	rec, tp := recorder(t)
	ctx, pend := WithPending(context.Background())
	t0 := time.Now()
	_, early := StartClient(ctx, "jwks fetch", AttrServerAddress.String("id.example"))
	early.SetAttributes(AttrHTTPStatus.Int(200))
	early.AddEvent("cache miss")
	End(early, errors.New("secret detail"), "timeout")
	rctx, req := tp.Tracer("t").Start(context.Background(), "tools/call x")
	pend.Replay(rctx)
	req.End()
	var got sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "jwks fetch" {
			got = s
		}
	}
	if got == nil {
		t.Fatal("early span not replayed")
	}
	if got.Parent().SpanID() != req.SpanContext().SpanID() || got.SpanKind() != trace.SpanKindClient {
		t.Fatalf("parent %v kind %v", got.Parent(), got.SpanKind())
	}
	if got.StartTime().Before(t0) || got.EndTime().After(time.Now()) || got.Status().Code != codes.Error {
		t.Fatalf("times %v %v status %v", got.StartTime(), got.EndTime(), got.Status())
	}
	attrs := attribute.NewSet(got.Attributes()...)
	if v, _ := attrs.Value(AttrErrorType); v.AsString() != "timeout" {
		t.Fatalf("attrs %v", got.Attributes())
	}
	for _, kv := range got.Attributes() {
		if strings.Contains(kv.Value.String(), "secret detail") {
			t.Fatal("an error's text was recorded")
		}
	}
	if len(got.Events()) != 1 {
		t.Fatalf("events %v", got.Events())
	}
	// Outside any request and without a Pending, database spans are not made.
	if _, s := start(context.Background(), "poll", trace.SpanKindClient, nil, false); s.IsRecording() {
		t.Fatal("background database call traced")
	}
}

func TestTransportTracesAndPropagates(t *testing.T) {
	rec, tp := recorder(t)
	var seen string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Get("traceparent")
		w.WriteHeader(http.StatusNotFound)
	}))
	defer srv.Close()
	ctx, parent := tp.Tracer("t").Start(context.Background(), "request")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/secret/data/tenants/acme?token=abc", nil)
	resp, err := (&http.Client{Transport: Transport(nil)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	parent.End()
	var client sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindClient {
			client = s
		}
	}
	if client == nil || client.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatal("no client span under the request")
	}
	if seen != Traceparent(client.SpanContext()) {
		t.Fatalf("server saw traceparent %q, span is %s", seen, Traceparent(client.SpanContext()))
	}
	for _, kv := range client.Attributes() {
		if strings.Contains(kv.Value.String(), "token") || strings.Contains(kv.Value.String(), "/v1/") {
			t.Fatalf("URL path or query recorded: %v", kv)
		}
	}
	if client.Status().Code != codes.Error {
		t.Fatal("a 404 is not an error")
	}

	// Outside any request (a background refresh) nothing is traced and
	// no trace context is sent, even with a recording global provider.
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	defer otel.SetTracerProvider(prev)
	n := len(rec.Ended())
	seen = "unset"
	req, _ = http.NewRequest(http.MethodGet, srv.URL, nil)
	if resp, err = (&http.Client{Transport: Transport(nil)}).Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(rec.Ended()) != n || seen != "" {
		t.Fatalf("a background call was traced: %d spans, traceparent %q", len(rec.Ended())-n, seen)
	}
}

func TestKeyRingsAreReportedThroughTheRegisteredCallback(t *testing.T) {
	tel, err := Setup(context.Background(), Config{Getenv: env(), Prometheus: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	un, err := tel.ReportKeyRings(func(_ context.Context, report func(KeyRing)) {
		report(KeyRing{Tenant: "acme", MinterAge: 90 * time.Minute, Phase: PhasePromoted, Keys: 2})
	})
	if err != nil {
		t.Fatal(err)
	}
	scrape := func() string {
		w := httptest.NewRecorder()
		tel.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		return w.Body.String()
	}
	body := scrape()
	for _, want := range []string{
		`opsmcp_keys_ring_age_seconds{opsmcp_tenant="acme",otel_scope_name="github.com/opsmcp/platform",otel_scope_schema_url="",otel_scope_version=""} 5400`,
		`opsmcp_keys_rotation_phase{opsmcp_tenant="acme",otel_scope_name="github.com/opsmcp/platform",otel_scope_schema_url="",otel_scope_version=""} 2`,
		`opsmcp_keys_ring_keys{opsmcp_tenant="acme",otel_scope_name="github.com/opsmcp/platform",otel_scope_schema_url="",otel_scope_version=""} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("missing %s in\n%s", want, body)
		}
	}
	un()
	if strings.Contains(scrape(), "opsmcp_keys_ring_age_seconds{") {
		t.Fatal("unregistered reporter still reported")
	}
}

// keepExporter keeps what it exported, through shutdown.
type keepExporter struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

func (k *keepExporter) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.spans = append(k.spans, s...)
	return nil
}

func (k *keepExporter) Shutdown(context.Context) error { return nil }

func (k *keepExporter) GetSpans() []sdktrace.ReadOnlySpan {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.spans
}
