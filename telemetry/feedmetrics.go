package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// Metric names of a replica's change feed.
const (
	MetricFeedChanges = "opsmcp.feed.changes"
	MetricFeedLost    = "opsmcp.feed.lost"
	MetricFeedMissed  = "opsmcp.feed.missed"
	MetricFeedBehind  = "opsmcp.feed.behind"
)

// FeedStats is what a replica's change feed reports.
type FeedStats struct {
	// Changes delivered, and times changes may have been lost (the
	// replica fell further behind than the feed keeps).
	Changes, Lost int64
	// Missed counts catalogues and key rings a full check found changed
	// though the feed had not named them: zero while the feed works.
	Missed int64
	// CurrentAt is the time before which every change was delivered.
	CurrentAt time.Time
}

// ReportChangeFeed registers fn as the source of the change feed's
// metrics. It is called at every metric collection and reads counters
// only. The returned function unregisters it.
func (t *Telemetry) ReportChangeFeed(fn func() FeedStats) (unregister func(), err error) {
	m := t.Metrics()
	if m == nil || fn == nil {
		return func() {}, nil
	}
	changes, err := m.meter.Int64ObservableCounter(MetricFeedChanges, metric.WithUnit("{change}"),
		metric.WithDescription("Changes of catalogues, settings, issuers and key rings this replica read from the change feed."))
	if err != nil {
		return func() {}, err
	}
	lost, err := m.meter.Int64ObservableCounter(MetricFeedLost, metric.WithUnit("{event}"),
		metric.WithDescription("Times this replica fell further behind than the change feed keeps, and checked everything it caches."))
	if err != nil {
		return func() {}, err
	}
	missed, err := m.meter.Int64ObservableCounter(MetricFeedMissed, metric.WithUnit("{item}"),
		metric.WithDescription("Catalogues and key rings a full check found changed though the feed had not said so; it should stay zero."))
	if err != nil {
		return func() {}, err
	}
	behind, err := m.meter.Float64ObservableGauge(MetricFeedBehind, metric.WithUnit("s"),
		metric.WithDescription("How long ago the change feed was last read to its end: about --catalogue-refresh at most while it works."))
	if err != nil {
		return func() {}, err
	}
	reg, err := m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := fn()
		o.ObserveInt64(changes, s.Changes)
		o.ObserveInt64(lost, s.Lost)
		o.ObserveInt64(missed, s.Missed)
		if !s.CurrentAt.IsZero() {
			o.ObserveFloat64(behind, time.Since(s.CurrentAt).Seconds())
		}
		return nil
	}, changes, lost, missed, behind)
	if err != nil {
		return func() {}, err
	}
	return func() { _ = reg.Unregister() }, nil
}
