package telemetry

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// sharedExport sends what one reader aggregates to an OTLP exporter on a
// timer: with both Prometheus and OTLP on, they share the Prometheus
// exporter's aggregation instead of each keeping its own (the SDK feeds
// every measurement to every reader, so two readers double the cost of
// each one on the request path). It does the periodic reader's job:
// every OTEL_METRIC_EXPORT_INTERVAL, collect and export within
// OTEL_METRIC_EXPORT_TIMEOUT, and once more at shutdown.
type sharedExport struct {
	reader   sdkmetric.Reader
	exp      sdkmetric.Exporter
	interval time.Duration
	timeout  time.Duration

	ctx    context.Context // the timer's exports; cancelled at shutdown
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// shareable reports whether exp takes what the Prometheus reader
// aggregates as is: cumulative temporality (the Prometheus model) and the
// default aggregation for every instrument kind, which an OTLP exporter
// uses unless configured otherwise (for instance by
// OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=delta).
func shareable(exp sdkmetric.Exporter) bool {
	for _, k := range []sdkmetric.InstrumentKind{
		sdkmetric.InstrumentKindCounter, sdkmetric.InstrumentKindUpDownCounter, sdkmetric.InstrumentKindHistogram,
		sdkmetric.InstrumentKindGauge, sdkmetric.InstrumentKindObservableCounter,
		sdkmetric.InstrumentKindObservableUpDownCounter, sdkmetric.InstrumentKindObservableGauge,
	} {
		if exp.Temporality(k) != metricdata.CumulativeTemporality || !reflect.DeepEqual(exp.Aggregation(k), sdkmetric.DefaultAggregationSelector(k)) {
			return false
		}
	}
	return true
}

// exportIntervals reads OTEL_METRIC_EXPORT_INTERVAL and
// OTEL_METRIC_EXPORT_TIMEOUT (milliseconds; 60000 and 30000 by default).
func exportIntervals(getenv func(string) string) (interval, timeout time.Duration, err error) {
	interval, timeout = time.Minute, 30*time.Second
	if err := millisEnv(getenv, "OTEL_METRIC_EXPORT_INTERVAL", &interval); err != nil {
		return 0, 0, err
	}
	if err := millisEnv(getenv, "OTEL_METRIC_EXPORT_TIMEOUT", &timeout); err != nil {
		return 0, 0, err
	}
	return interval, timeout, nil
}

func newSharedExport(reader sdkmetric.Reader, exp sdkmetric.Exporter, interval, timeout time.Duration) *sharedExport {
	s := &sharedExport{reader: reader, exp: exp, interval: interval, timeout: timeout, done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.loop()
	return s
}

func (s *sharedExport) loop() {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			if err := s.export(s.ctx); err != nil && s.ctx.Err() == nil {
				otel.Handle(err)
			}
		}
	}
}

// export collects once and sends it, within the export timeout.
func (s *sharedExport) export(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(ctx, &rm); err != nil {
		return fmt.Errorf("telemetry: metrics collection: %w", err)
	}
	return s.exp.Export(ctx, &rm)
}

// Shutdown stops the timer (abandoning an export in flight, as the SDK's
// periodic reader does), exports a last time and shuts the exporter down,
// all within ctx. It must run before the reader shuts down
// (Telemetry.Shutdown runs its steps in reverse order of registration).
func (s *sharedExport) Shutdown(ctx context.Context) error {
	err := errors.New("telemetry: metrics export already shut down")
	s.once.Do(func() {
		s.cancel()
		select {
		case <-s.done:
		case <-ctx.Done():
			err = ctx.Err()
			return
		}
		err = s.export(ctx)
		if serr := s.exp.Shutdown(ctx); err == nil {
			err = serr
		}
	})
	return err
}
