// Package telemetry sets up OpenTelemetry for the platform: traces and
// metrics exported over OTLP (HTTP or gRPC) as the standard OTEL_*
// environment variables say, metrics on a Prometheus endpoint, a slog
// handler that stamps every line written inside a request with its trace
// and span ids, and helpers the other packages use for their outbound
// calls (database, webhooks, Vault, JWKS).
//
// Telemetry never blocks serving: spans leave through a batch processor
// that drops rather than waits when its queue is full, metrics are read
// on a timer or on scrape, and gauges are computed only when collected.
//
// The attribute names of our own namespace are the Attr* constants of
// this package; README.md ("Observability") lists them with the metrics.
package telemetry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of every span and metric the
// platform itself emits.
const ScopeName = "github.com/opsmcp/platform"

// DefaultServiceName is service.name unless OTEL_SERVICE_NAME says
// otherwise.
const DefaultServiceName = "opsmcp-platform"

// CardinalityLimit is the most series one metric instrument keeps per
// collection. Series beyond it are folded into one series carrying
// otel.metric.overflow=true, so a burst of tenants can never exhaust
// memory or a Prometheus server.
const CardinalityLimit = 4000

// Config says how to build a Telemetry.
type Config struct {
	// ServiceName, Version and InstanceID become service.name,
	// service.version and service.instance.id. OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES override them. An empty InstanceID is a
	// random one, fresh per process.
	ServiceName string
	Version     string
	InstanceID  string
	// Getenv reads the OTEL_* selection variables (exporters, protocol,
	// endpoints, OTEL_SDK_DISABLED); nil means os.Getenv. The exporters
	// still read their other settings (headers, timeouts, TLS) from the
	// process environment.
	Getenv func(string) string
	// TracerProvider, when set, is used as is instead of one built from
	// the environment (tests inject an in-memory recorder). Its owner
	// shuts it down.
	TracerProvider trace.TracerProvider
	// SpanExporter, when set, receives the spans instead of the exporter
	// the environment selects, through the platform's own span path
	// (tests give an in-memory exporter).
	SpanExporter sdktrace.SpanExporter
	// MeterProvider, when set, is used as is; no Prometheus handler is
	// built then.
	MeterProvider metric.MeterProvider
	// Prometheus builds a Prometheus exposition handler (Handler).
	Prometheus bool
	// Logger receives exporter errors, rate-limited.
	Logger *slog.Logger
	// SetGlobal installs the providers and propagator as the OTel
	// globals, for code that has no request span to hang its spans on.
	SetGlobal bool
}

// Telemetry holds the providers, the platform's tracer and instruments,
// and what must be flushed at shutdown. A nil *Telemetry is valid and
// does nothing.
type Telemetry struct {
	tp      trace.TracerProvider
	mp      metric.MeterProvider
	tracer  trace.Tracer
	meter   metric.Meter
	prop    propagation.TextMapPropagator
	metrics *Metrics
	tracing bool
	handler http.Handler

	mu       sync.Mutex
	shutdown []func(context.Context) error
}

// Disabled is a Telemetry that records nothing.
func Disabled() *Telemetry {
	t, _ := Setup(context.Background(), Config{Getenv: func(k string) string {
		if k == "OTEL_SDK_DISABLED" {
			return "true"
		}
		return ""
	}})
	return t
}

// Setup builds the providers. The trace exporter is chosen by
// OTEL_TRACES_EXPORTER (otlp or none) and the metric exporter by
// OTEL_METRICS_EXPORTER (otlp, prometheus or none); when unset, each is
// otlp if an OTLP endpoint is configured and none otherwise, so a
// platform started without any OTEL_* variable never tries to reach a
// collector that is not there. The protocol is
// OTEL_EXPORTER_OTLP[_TRACES|_METRICS]_PROTOCOL: http/protobuf (the
// default) or grpc. OTEL_SDK_DISABLED=true turns everything off.
func Setup(ctx context.Context, cfg Config) (*Telemetry, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	t := &Telemetry{prop: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})}
	disabled := strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true")

	var res *resource.Resource
	getRes := func() (*resource.Resource, error) {
		if res != nil {
			return res, nil
		}
		var err error
		res, err = newResource(ctx, cfg)
		return res, err
	}
	fail := func(err error) (*Telemetry, error) {
		_ = t.Shutdown(context.Background())
		return nil, err
	}

	switch {
	case cfg.TracerProvider != nil:
		t.tp, t.tracing = cfg.TracerProvider, true
		if _, off := cfg.TracerProvider.(tracenoop.TracerProvider); off {
			t.tracing = false
		}
	case disabled:
		t.tp = tracenoop.NewTracerProvider()
	default:
		// The settings first, so a bad one leaves no exporter behind.
		sampler, err := samplerFromEnv(getenv)
		if err != nil {
			return fail(err)
		}
		bo, err := batchOptions(getenv)
		if err != nil {
			return fail(err)
		}
		var exp spanExporter
		if cfg.SpanExporter != nil {
			exp = sdkExporter{cfg.SpanExporter}
		} else if exp, err = traceExporter(ctx, getenv); err != nil {
			return fail(err)
		}
		if exp == nil {
			t.tp = tracenoop.NewTracerProvider()
			break
		}
		r, err := getRes()
		if err != nil {
			_ = exp.shutdown(ctx)
			return fail(err)
		}
		tp := newProvider(r, sampler, sdktrace.NewSpanLimits(), newBatcher(exp, bo))
		t.tp, t.tracing = tp, true
		t.onShutdown(tp.Shutdown)
	}

	switch {
	case cfg.MeterProvider != nil:
		t.mp = cfg.MeterProvider
	case disabled:
		t.mp = metricnoop.NewMeterProvider()
		if cfg.Prometheus {
			t.handler = http.NotFoundHandler()
		}
	default:
		var readers []sdkmetric.Option
		var prom *otelprom.Exporter
		if cfg.Prometheus {
			reg := promclient.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			var err error
			if prom, err = otelprom.New(otelprom.WithRegisterer(reg)); err != nil {
				return fail(fmt.Errorf("telemetry: prometheus exporter: %w", err))
			}
			readers = append(readers, sdkmetric.WithReader(prom))
			t.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
		}
		exp, err := metricExporter(ctx, getenv)
		if err != nil {
			return fail(err)
		}
		var shared *sharedExport
		var periodic sdkmetric.Reader
		if exp != nil {
			interval, timeout, err := exportIntervals(getenv)
			if err != nil {
				_ = exp.Shutdown(ctx)
				return fail(err)
			}
			if prom != nil && shareable(exp) {
				shared = newSharedExport(prom, exp, interval, timeout)
			} else {
				periodic = sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(interval), sdkmetric.WithTimeout(timeout))
				readers = append(readers, sdkmetric.WithReader(periodic))
			}
		}
		if len(readers) == 0 {
			t.mp = metricnoop.NewMeterProvider()
			break
		}
		r, err := getRes()
		if err != nil {
			if shared != nil {
				_ = shared.Shutdown(ctx)
			}
			if periodic != nil {
				_ = periodic.Shutdown(ctx)
			}
			return fail(err)
		}
		opts := append(readers, sdkmetric.WithResource(r))
		if getenv("OTEL_GO_X_CARDINALITY_LIMIT") == "" {
			opts = append(opts, sdkmetric.WithCardinalityLimit(CardinalityLimit))
		}
		if getenv("OTEL_METRICS_EXEMPLAR_FILTER") == "" {
			// Exemplars cost a reservoir offer per measurement and the
			// Prometheus text format does not carry them: off unless asked.
			opts = append(opts, sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))
		}
		mp := sdkmetric.NewMeterProvider(opts...)
		t.mp = mp
		t.onShutdown(mp.Shutdown)
		if shared != nil {
			t.onShutdown(shared.Shutdown) // runs first: its last export reads the Prometheus reader
		}
	}

	t.tracer = t.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(cfg.Version))
	t.meter = t.mp.Meter(ScopeName, metric.WithInstrumentationVersion(cfg.Version))
	m, err := newMetrics(t.meter)
	if err != nil {
		return fail(err)
	}
	t.metrics = m
	if cfg.SetGlobal {
		otel.SetTracerProvider(t.tp)
		otel.SetMeterProvider(t.mp)
		otel.SetTextMapPropagator(t.prop)
		if cfg.Logger != nil {
			otel.SetErrorHandler(rateLimitedHandler(cfg.Logger))
		}
	}
	return t, nil
}

func (t *Telemetry) onShutdown(f func(context.Context) error) {
	t.mu.Lock()
	t.shutdown = append(t.shutdown, f)
	t.mu.Unlock()
}

// Shutdown flushes what is buffered (spans, the last metric export) and
// stops the exporters, within ctx's deadline. Injected providers are left
// to their owners.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	fs := t.shutdown
	t.shutdown = nil
	t.mu.Unlock()
	var errs []error
	for i := len(fs) - 1; i >= 0; i-- {
		if err := fs[i](ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ForceFlush exports every span ended so far, when spans are exported
// by this Telemetry's own provider.
func (t *Telemetry) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	if f, ok := t.tp.(interface{ ForceFlush(context.Context) error }); ok {
		return f.ForceFlush(ctx)
	}
	return nil
}

// Tracer is the platform's tracer (a no-op one when tracing is off).
func (t *Telemetry) Tracer() trace.Tracer {
	if t == nil {
		return tracenoop.Tracer{}
	}
	return t.tracer
}

// TracerProvider is the provider spans come from.
func (t *Telemetry) TracerProvider() trace.TracerProvider {
	if t == nil {
		return tracenoop.NewTracerProvider()
	}
	return t.tp
}

// MeterProvider is the provider instruments come from.
func (t *Telemetry) MeterProvider() metric.MeterProvider {
	if t == nil {
		return metricnoop.NewMeterProvider()
	}
	return t.mp
}

// Tracing reports whether spans are recorded at all. When false the
// request path skips building span attributes.
func (t *Telemetry) Tracing() bool { return t != nil && t.tracing }

// Propagator is W3C trace context and baggage.
func (t *Telemetry) Propagator() propagation.TextMapPropagator {
	if t == nil {
		return propagation.TraceContext{}
	}
	return t.prop
}

// Metrics are the platform's instruments.
func (t *Telemetry) Metrics() *Metrics {
	if t == nil {
		return nil
	}
	return t.metrics
}

// Handler serves the metrics in the Prometheus text format; nil unless
// Config.Prometheus was set.
func (t *Telemetry) Handler() http.Handler {
	if t == nil {
		return nil
	}
	return t.handler
}

func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	name := cfg.ServiceName
	if name == "" {
		name = DefaultServiceName
	}
	id := cfg.InstanceID
	if id == "" {
		id = randomInstanceID()
	}
	attrs := []attribute.KeyValue{
		attribute.String("service.name", name),
		attribute.String("service.instance.id", id),
	}
	if cfg.Version != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.Version))
	}
	r, err := resource.New(ctx,
		resource.WithAttributes(attrs...),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithFromEnv(), // last, so OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return r, nil
}

// randomInstanceID is a random UUID (version 4), as the semantic
// conventions recommend for service.instance.id.
func randomInstanceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// otlpTarget reads the exporter selection for one signal ("TRACES" or
// "METRICS"): whether to export over OTLP, the protocol and the endpoint.
type otlpTarget struct {
	protocol string // http/protobuf or grpc
	endpoint string // as configured; "" means the exporter's default
	general  bool   // endpoint came from OTEL_EXPORTER_OTLP_ENDPOINT
}

func selectOTLP(getenv func(string) string, signal string) (*otlpTarget, error) {
	envName := "OTEL_" + signal + "_EXPORTER"
	tgt := &otlpTarget{
		protocol: firstNonEmpty(getenv("OTEL_EXPORTER_OTLP_"+signal+"_PROTOCOL"), getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "http/protobuf"),
		endpoint: strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + signal + "_ENDPOINT")),
	}
	if tgt.endpoint == "" {
		tgt.endpoint = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
		tgt.general = tgt.endpoint != ""
	}
	sel := strings.ToLower(strings.TrimSpace(getenv(envName)))
	if sel == "" {
		if tgt.endpoint == "" {
			return nil, nil
		}
		sel = "otlp"
	}
	otlp := false
	for _, v := range strings.Split(sel, ",") {
		switch strings.TrimSpace(v) {
		case "otlp":
			otlp = true
		case "none", "":
		case "prometheus":
			if signal != "METRICS" {
				return nil, fmt.Errorf("telemetry: %s=prometheus is not a trace exporter", envName)
			}
			// Served by the platform itself at /metrics.
		default:
			return nil, fmt.Errorf("telemetry: %s=%q is not supported (use otlp or none)", envName, v)
		}
	}
	if !otlp {
		return nil, nil
	}
	switch tgt.protocol {
	case "http/protobuf", "grpc":
	default:
		return nil, fmt.Errorf("telemetry: OTLP protocol %q is not supported (use http/protobuf or grpc)", tgt.protocol)
	}
	return tgt, nil
}

// httpURL is the full URL for an HTTP exporter: a signal-specific
// endpoint is used as is, the general one gets the signal's path.
func (o *otlpTarget) httpURL(path string) (string, bool) {
	if o.endpoint == "" {
		return "", false
	}
	if !o.general {
		return o.endpoint, true
	}
	return strings.TrimSuffix(o.endpoint, "/") + path, true
}

// traceExporter is the exporter OTEL_TRACES_EXPORTER and the OTLP
// variables select, or nil for none.
func traceExporter(ctx context.Context, getenv func(string) string) (spanExporter, error) {
	tgt, err := selectOTLP(getenv, "TRACES")
	if err != nil || tgt == nil {
		return nil, err
	}
	if tgt.protocol == "grpc" {
		var opts []otlptracegrpc.Option
		if tgt.endpoint != "" {
			if hasScheme(tgt.endpoint) {
				opts = append(opts, otlptracegrpc.WithEndpointURL(tgt.endpoint))
			} else {
				opts = append(opts, otlptracegrpc.WithEndpoint(tgt.endpoint))
			}
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP/gRPC trace exporter: %w", err)
		}
		return sdkExporter{exp}, nil
	}
	lean, err := leanOTLP(getenv, tgt)
	if err != nil {
		return nil, err
	}
	if lean != nil {
		return lean, nil
	}
	var opts []otlptracehttp.Option
	if u, ok := tgt.httpURL("/v1/traces"); ok {
		opts = append(opts, otlptracehttp.WithEndpointURL(u))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP/HTTP trace exporter: %w", err)
	}
	return sdkExporter{exp}, nil
}

func metricExporter(ctx context.Context, getenv func(string) string) (sdkmetric.Exporter, error) {
	tgt, err := selectOTLP(getenv, "METRICS")
	if err != nil || tgt == nil {
		return nil, err
	}
	if tgt.protocol == "grpc" {
		var opts []otlpmetricgrpc.Option
		if tgt.endpoint != "" {
			if hasScheme(tgt.endpoint) {
				opts = append(opts, otlpmetricgrpc.WithEndpointURL(tgt.endpoint))
			} else {
				opts = append(opts, otlpmetricgrpc.WithEndpoint(tgt.endpoint))
			}
		}
		exp, err := otlpmetricgrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP/gRPC metric exporter: %w", err)
		}
		return exp, nil
	}
	var opts []otlpmetrichttp.Option
	if u, ok := tgt.httpURL("/v1/metrics"); ok {
		opts = append(opts, otlpmetrichttp.WithEndpointURL(u))
	}
	exp, err := otlpmetrichttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP/HTTP metric exporter: %w", err)
	}
	return exp, nil
}

func hasScheme(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != "" && u.Host != ""
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

// rateLimitedHandler logs exporter errors at most once per 30 s, with a
// count of the ones it held back, so a collector outage cannot flood the
// log.
func rateLimitedHandler(log *slog.Logger) otel.ErrorHandler {
	var last atomic.Int64
	var dropped atomic.Int64
	return otel.ErrorHandlerFunc(func(err error) {
		now := time.Now().UnixNano()
		prev := last.Load()
		if now-prev < int64(30*time.Second) || !last.CompareAndSwap(prev, now) {
			dropped.Add(1)
			return
		}
		log.Warn("telemetry export failed", "err", err, "suppressed", dropped.Swap(0))
	})
}
