package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

func BenchmarkScratchRoundTelemetry(b *testing.B) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer s.Close()
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": s.URL, "OTEL_METRICS_EXPORTER": "otlp"}
	tel, err := Setup(context.Background(), Config{Version: "bench", Prometheus: true, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		b.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	srvAttrs := []attribute.KeyValue{AttrMCPMethod.String("tools/call"), AttrNetworkProtoVer.String("1.1"),
		AttrClientAddress.String("127.0.0.1"), AttrClientPort.Int(51234), AttrTenant.String("acme"), AttrJSONRPCRequestID.String("1"),
		AttrMCPProtocolVersion.String("2026-07-28"), AttrGenAIOperation.String("execute_tool"), AttrGenAIToolName.String("tool0007")}
	whAttrs := []attribute.KeyValue{AttrHTTPMethod.String("POST"), AttrServerAddress.String("127.0.0.1"),
		AttrServerPort.Int(8080), AttrHTTPStatus.Int(200)}
	mode := b.Name()
	_ = mode
	for _, part := range []string{"spans", "metrics"} {
		b.Run(part, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				ctx := context.Background()
				if part == "spans" {
					ctx, sp := tel.Tracer().Start(ctx, "tools/call tool0007", trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(time.Now()))
					_, wh := tel.Tracer().Start(ctx, "webhook tool tool0007", trace.WithSpanKind(trace.SpanKindClient))
					wh.SetAttributes(whAttrs...)
					wh.End()
					sp.SetAttributes(srvAttrs...)
					sp.End()
				} else {
					m := tel.Metrics()
					m.Operation(ctx, time.Millisecond, "acme", "tools/call", "", "")
					m.Round(ctx, "acme", "tools/call", "complete")
					m.Webhook(ctx, "acme", "tool", "complete", false, time.Millisecond)
				}
			}
		})
	}
}
