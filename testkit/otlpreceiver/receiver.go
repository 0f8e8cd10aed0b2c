// Package otlpreceiver is an OTLP/HTTP collector for tests and the fleet
// test: it decodes every protobuf export it receives with the official
// OTLP types, so what it holds is what crossed the wire.
package otlpreceiver

import (
	"compress/gzip"
	"io"
	"net/http"
	"sync"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// maxBody bounds one export (the platform's batches are far smaller).
const maxBody = 64 << 20

// Receiver serves /v1/traces and /v1/metrics. The zero value keeps every
// span, the resource attributes of every export and every metric name;
// set OnSpans to handle spans as they arrive instead of keeping them (a
// long run would otherwise hold them all).
type Receiver struct {
	// OnSpans, if set, is given each decoded trace export's spans, with
	// the resource they came from, instead of the Receiver keeping them.
	// It is called from the request's goroutine, possibly concurrently.
	OnSpans func(res *resourcepb.Resource, spans []*tracepb.Span)

	mu          sync.Mutex
	spans       []*tracepb.Span
	res         []*commonpb.KeyValue
	metricNames []string
	exports     int
}

// ServeHTTP decodes one export (gzip-compressed or not) and answers as
// an OTLP collector does: 200 with an empty protobuf response, 400 for a
// body that does not decode, 404 elsewhere.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = zr
	}
	b, err := io.ReadAll(io.LimitReader(body, maxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var out proto.Message
	switch r.URL.Path {
	case "/v1/traces":
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.traces(&req)
		out = &coltracepb.ExportTraceServiceResponse{}
	case "/v1/metrics":
		var req colmetricpb.ExportMetricsServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.metrics(&req)
		out = &colmetricpb.ExportMetricsServiceResponse{}
	default:
		http.NotFound(w, r)
		return
	}
	resp, _ := proto.Marshal(out)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

func (rc *Receiver) traces(req *coltracepb.ExportTraceServiceRequest) {
	rc.mu.Lock()
	rc.exports++
	for _, rs := range req.ResourceSpans {
		rc.res = append(rc.res, rs.GetResource().GetAttributes()...)
	}
	rc.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			if rc.OnSpans != nil {
				rc.OnSpans(rs.GetResource(), ss.Spans)
				continue
			}
			rc.mu.Lock()
			rc.spans = append(rc.spans, ss.Spans...)
			rc.mu.Unlock()
		}
	}
}

func (rc *Receiver) metrics(req *colmetricpb.ExportMetricsServiceRequest) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.exports++
	for _, rm := range req.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				rc.metricNames = append(rc.metricNames, m.Name)
			}
		}
	}
}

// Spans returns the spans kept so far (none when OnSpans is set).
func (rc *Receiver) Spans() []*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*tracepb.Span(nil), rc.spans...)
}

// Resource returns the resource attributes of every trace export so far.
func (rc *Receiver) Resource() []*commonpb.KeyValue {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*commonpb.KeyValue(nil), rc.res...)
}

// MetricNames returns the name of every metric of every export so far.
func (rc *Receiver) MetricNames() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.metricNames...)
}

// Exports counts the exports decoded so far, traces and metrics.
func (rc *Receiver) Exports() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.exports
}

// StringAttr returns the string value of key among kvs ("" when absent).
func StringAttr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

// IntAttr returns the integer value of key among kvs and whether it is
// there.
func IntAttr(kvs []*commonpb.KeyValue, key string) (int64, bool) {
	for _, kv := range kvs {
		if kv.Key == key {
			if v, ok := kv.Value.GetValue().(*commonpb.AnyValue_IntValue); ok {
				return v.IntValue, true
			}
		}
	}
	return 0, false
}
