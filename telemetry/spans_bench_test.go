package telemetry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// BenchmarkRoundSpans is the tracing a tools/call round asks for,
// alone: a SERVER span with the MCP attributes and a CLIENT webhook span
// under it, started, attributed, ended and exported over OTLP/HTTP to a
// local sink. "platform" is the platform's span path (its own spans and
// batch processor); "sdk" is the SDK's tracer provider and batch
// processor feeding the same exporter, the path it replaced. Both queues
// are large enough that nothing is dropped, so both export every span.
// cpu-ns/op counts the export goroutines too; README.md
// ("Observability") sets these against a whole round.
func BenchmarkRoundSpans(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer sink.Close()
	server := []attribute.KeyValue{AttrMCPMethod.String("tools/call"), AttrNetworkProtoVer.String("1.1"),
		AttrClientAddress.String("127.0.0.1"), AttrClientPort.Int(51234), AttrTenant.String("acme"), AttrJSONRPCRequestID.String("1"),
		AttrMCPProtocolVersion.String("2026-07-28"), AttrGenAIOperation.String(OperationExecuteTool), AttrGenAIToolName.String("tool0007")}
	client := []attribute.KeyValue{AttrHTTPMethod.String("POST"), AttrServerAddress.String("127.0.0.1"),
		AttrServerPort.Int(8080), AttrHTTPStatus.Int(200)}
	const queue = 1 << 20
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": sink.URL, "OTEL_METRICS_EXPORTER": "none", "OTEL_BSP_MAX_QUEUE_SIZE": fmt.Sprint(queue)}
	getenv := func(k string) string { return env[k] }
	for _, mode := range []string{"sdk", "platform"} {
		b.Run("spans="+mode, func(b *testing.B) {
			var tracer trace.Tracer
			var flush func(context.Context) error
			if mode == "sdk" {
				tgt, err := selectOTLP(getenv, "TRACES")
				if err != nil {
					b.Fatal(err)
				}
				exp, err := leanOTLP(getenv, tgt)
				if err != nil {
					b.Fatal(err)
				}
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(queue)))
				defer tp.Shutdown(context.Background())
				tracer, flush = tp.Tracer(ScopeName), tp.ForceFlush
			} else {
				tel, err := Setup(context.Background(), Config{Version: "bench", Getenv: getenv})
				if err != nil {
					b.Fatal(err)
				}
				defer tel.Shutdown(context.Background())
				tracer, flush = tel.Tracer(), tel.ForceFlush
			}
			serverKind, clientKind := trace.WithSpanKind(trace.SpanKindServer), trace.WithSpanKind(trace.SpanKindClient)
			b.ReportAllocs()
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				ctx, s := tracer.Start(context.Background(), "tools/call tool0007", serverKind, trace.WithTimestamp(time.Now()))
				_, wh := tracer.Start(ctx, "webhook tool tool0007", clientKind)
				wh.SetAttributes(client...)
				wh.End()
				s.SetAttributes(server...)
				s.End()
			}
			if err := flush(context.Background()); err != nil { // every span exported, on the clock
				b.Fatal(err)
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
