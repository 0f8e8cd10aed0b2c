package telemetry

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/grpc"
)

// grpcReceiver is an OTLP/gRPC collector for tests: the real gRPC
// services, decoding what the exporters send.
type grpcReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	addr string

	mu      sync.Mutex
	traces  []*coltracepb.ExportTraceServiceRequest
	metrics []*colmetricpb.ExportMetricsServiceRequest
}

func newGRPCReceiver(t *testing.T) *grpcReceiver {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &grpcReceiver{addr: l.Addr().String()}
	s := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(s, r)
	colmetricpb.RegisterMetricsServiceServer(s, metricsServer{grpcReceiver: r})
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return r
}

func (r *grpcReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	r.traces = append(r.traces, req)
	r.mu.Unlock()
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// metricsServer adapts the receiver to the metrics service, whose Export
// method has the same name as the trace service's.
type metricsServer struct {
	colmetricpb.UnimplementedMetricsServiceServer
	*grpcReceiver
}

func (m metricsServer) Export(_ context.Context, req *colmetricpb.ExportMetricsServiceRequest) (*colmetricpb.ExportMetricsServiceResponse, error) {
	m.mu.Lock()
	m.metrics = append(m.metrics, req)
	m.mu.Unlock()
	return &colmetricpb.ExportMetricsServiceResponse{}, nil
}

func resourceAttr(res *resourcepb.Resource, key string) string {
	for _, kv := range res.GetAttributes() {
		if kv.Key == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

func spanAttr(attrs []*commonpb.KeyValue, key string) *commonpb.AnyValue {
	for _, kv := range attrs {
		if kv.Key == key {
			return kv.GetValue()
		}
	}
	return nil
}

// TestTheGRPCExportersDeliverSpansAndMetrics: with
// OTEL_EXPORTER_OTLP_PROTOCOL=grpc, spans and metrics reach a real
// OTLP/gRPC collector with the resource attributes, the span's trace id,
// name, kind and attributes, and the operation duration histogram, all
// flushed by Shutdown.
func TestTheGRPCExportersDeliverSpansAndMetrics(t *testing.T) {
	r := newGRPCReceiver(t)
	tel, err := Setup(context.Background(), Config{Version: "test", InstanceID: "replica-g",
		Getenv: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+r.addr, "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_METRICS_EXPORTER", "otlp")})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tel.Tracer().Start(context.Background(), "tools/call get-weather", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(AttrMCPMethod.String("tools/call"), attribute.Int("opsmcp.flow.round", 2)))
	tid := span.SpanContext().TraceID()
	span.End()
	tel.Metrics().Operation(context.Background(), 30*time.Millisecond, "acme", "tools/call", "", "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	var got bool
	for _, req := range r.traces {
		for _, rs := range req.ResourceSpans {
			if v := resourceAttr(rs.Resource, "service.version"); v != "test" {
				t.Errorf("service.version %q", v)
			}
			if v := resourceAttr(rs.Resource, "service.instance.id"); v != "replica-g" {
				t.Errorf("service.instance.id %q", v)
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					if trace.TraceID(s.TraceId) != tid {
						continue
					}
					got = true
					if s.Name != "tools/call get-weather" || s.Kind.String() != "SPAN_KIND_SERVER" {
						t.Errorf("span %q kind %s", s.Name, s.Kind)
					}
					if v := spanAttr(s.Attributes, "mcp.method.name").GetStringValue(); v != "tools/call" {
						t.Errorf("mcp.method.name %q", v)
					}
					if v := spanAttr(s.Attributes, "opsmcp.flow.round").GetIntValue(); v != 2 {
						t.Errorf("opsmcp.flow.round %d", v)
					}
				}
			}
		}
	}
	if !got {
		t.Fatalf("the span of trace %s did not reach the gRPC collector (%d export requests)", tid, len(r.traces))
	}
	var sawDuration bool
	for _, req := range r.metrics {
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if m.Name != "mcp.server.operation.duration" {
						continue
					}
					for _, dp := range m.GetHistogram().GetDataPoints() {
						if dp.Count == 1 && spanAttr(dp.Attributes, "opsmcp.tenant").GetStringValue() == "acme" {
							sawDuration = true
						}
					}
				}
			}
		}
	}
	if !sawDuration {
		t.Fatalf("mcp.server.operation.duration for tenant acme did not reach the gRPC collector (%d export requests)", len(r.metrics))
	}
}
