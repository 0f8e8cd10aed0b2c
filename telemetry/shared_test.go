package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/opsmcp/platform/testkit/testwait"
)

// metricsReceiver is an OTLP/HTTP metrics endpoint that decodes what it
// receives and keeps, per export, each histogram's count by name.
type metricsReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	exports []map[string]uint64
	delta   bool // some histogram came with delta temporality
}

func newMetricsReceiver(t *testing.T) *metricsReceiver {
	rc := &metricsReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req colmetricpb.ExportMetricsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		counts := map[string]uint64{}
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if h := m.GetHistogram(); h != nil {
						for _, dp := range h.DataPoints {
							counts[m.Name] += dp.Count
						}
						if h.AggregationTemporality == metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA {
							rc.mu.Lock()
							rc.delta = true
							rc.mu.Unlock()
						}
					}
				}
			}
		}
		rc.mu.Lock()
		rc.exports = append(rc.exports, counts)
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	return rc
}

// TestPrometheusAndOTLPShareOneAggregation: with both on, a measurement
// is counted once and reaches both the scrape and every OTLP export
// (cumulative, on the export interval and at shutdown); an exporter that
// asks for delta temporality gets a reader of its own and its deltas.
func TestPrometheusAndOTLPShareOneAggregation(t *testing.T) {
	for _, temporality := range []string{"", "delta"} {
		t.Run("temporality="+temporality, func(t *testing.T) {
			rc := newMetricsReceiver(t)
			// The SDK's exporter reads its own settings from the process.
			t.Setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", temporality)
			tel, err := Setup(context.Background(), Config{Prometheus: true, Getenv: env(
				"OTEL_EXPORTER_OTLP_ENDPOINT", rc.URL, "OTEL_TRACES_EXPORTER", "none", "OTEL_METRIC_EXPORT_INTERVAL", "20")})
			if err != nil {
				t.Fatal(err)
			}
			exp, err := metricExporter(context.Background(), env("OTEL_EXPORTER_OTLP_ENDPOINT", rc.URL))
			if err != nil {
				t.Fatal(err)
			}
			if shareable(exp) != (temporality == "") {
				t.Fatalf("an exporter with temporality %q is shareable: %v", temporality, shareable(exp))
			}
			for range 3 {
				tel.Metrics().Operation(context.Background(), time.Millisecond, "acme", "tools/call", "", "")
			}
			w := httptest.NewRecorder()
			tel.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
			if !strings.Contains(w.Body.String(), `mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",opsmcp_tenant="acme"`) ||
				!strings.Contains(w.Body.String(), `} 3`) {
				t.Fatalf("the scrape does not count 3 operations:\n%s", w.Body.String())
			}
			// The timer exports while serving.
			testwait.Until(t, "an export on the interval", func() bool {
				rc.mu.Lock()
				defer rc.mu.Unlock()
				return len(rc.exports) > 0
			})
			tel.Metrics().Operation(context.Background(), time.Millisecond, "acme", "tools/call", "", "")
			if err := tel.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			rc.mu.Lock()
			defer rc.mu.Unlock()
			var total, last uint64
			for _, e := range rc.exports {
				total += e[MetricOperationDuration]
				last = e[MetricOperationDuration]
			}
			switch temporality {
			case "": // cumulative: the last export, at shutdown, holds all four
				if last != 4 || rc.delta {
					t.Fatalf("cumulative exports %v (delta %v): want the last to count 4", rc.exports, rc.delta)
				}
			case "delta": // the exports add up to four
				if total != 4 || !rc.delta {
					t.Fatalf("delta exports %v (delta %v): want them to add up to 4", rc.exports, rc.delta)
				}
			}
		})
	}
}

// TestMetricExportIntervalsAreChecked: with OTLP metrics on, a bad
// interval or timeout stops the start, naming the variable.
func TestMetricExportIntervalsAreChecked(t *testing.T) {
	for _, name := range []string{"OTEL_METRIC_EXPORT_INTERVAL", "OTEL_METRIC_EXPORT_TIMEOUT"} {
		_, err := Setup(context.Background(), Config{Prometheus: true, Getenv: env(name, "soon",
			"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER", "none")})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=soon: %v", name, err)
		}
	}
}

// TestAStuckMetricsExportDoesNotHoldUpShutdown: with the collector
// hanging, shutdown abandons the export in flight when its context ends,
// leaving time for the spans behind it. The export's own timeout is an
// hour and the collector answers only once the test is over, so only
// the context ending can let Shutdown return.
func TestAStuckMetricsExportDoesNotHoldUpShutdown(t *testing.T) {
	release := make(chan struct{})
	inFlight := make(chan struct{}, 1)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case inFlight <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release)
	tel, err := Setup(context.Background(), Config{Prometheus: true, Getenv: env(
		"OTEL_EXPORTER_OTLP_ENDPOINT", hang.URL, "OTEL_TRACES_EXPORTER", "none",
		"OTEL_METRIC_EXPORT_INTERVAL", "10", "OTEL_METRIC_EXPORT_TIMEOUT", "3600000")})
	if err != nil {
		t.Fatal(err)
	}
	tel.Metrics().Operation(context.Background(), time.Millisecond, "acme", "tools/call", "", "")
	testwait.Recv(t, inFlight, "an export to reach the hanging collector")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tel.Shutdown(ctx) }()
	cancel()
	// The last export cannot succeed; Shutdown returns once ctx ends.
	testwait.Recv(t, done, "Shutdown to return after its context ended")
}
