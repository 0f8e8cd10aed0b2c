package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/metric"
)

// Metric names of a replica's catalogue cache.
const (
	MetricCatalogueCacheTenants   = "opsmcp.catalogue.cache.tenants"
	MetricCatalogueCacheBytes     = "opsmcp.catalogue.cache.bytes"
	MetricCatalogueCacheEvictions = "opsmcp.catalogue.cache.evictions"
)

// CacheReporter says what a replica's catalogue cache holds: the tenants,
// their estimated bytes, and the tenants evicted since the start. It is
// called at every metric collection, and reads counters only.
type CacheReporter func() (tenants, bytes, evictions int64)

// ReportCatalogueCache registers fn as the source of the catalogue
// cache's gauges and eviction counter. The returned function unregisters
// it.
func (t *Telemetry) ReportCatalogueCache(fn CacheReporter) (unregister func(), err error) {
	m := t.Metrics()
	if m == nil || fn == nil {
		return func() {}, nil
	}
	tenants, err := m.meter.Int64ObservableGauge(MetricCatalogueCacheTenants, metric.WithUnit("{tenant}"),
		metric.WithDescription("Tenants whose catalogue this replica holds now."))
	if err != nil {
		return func() {}, err
	}
	bytes, err := m.meter.Int64ObservableGauge(MetricCatalogueCacheBytes, metric.WithUnit("By"),
		metric.WithDescription("The held catalogues' estimated heap, bounded by --catalogue-cache-bytes."))
	if err != nil {
		return func() {}, err
	}
	evictions, err := m.meter.Int64ObservableCounter(MetricCatalogueCacheEvictions, metric.WithUnit("{tenant}"),
		metric.WithDescription("Catalogues evicted as the least recently used, past the budget; each loads again on its tenant's next request."))
	if err != nil {
		return func() {}, err
	}
	reg, err := m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		n, b, e := fn()
		o.ObserveInt64(tenants, n)
		o.ObserveInt64(bytes, b)
		o.ObserveInt64(evictions, e)
		return nil
	}, tenants, bytes, evictions)
	if err != nil {
		return func() {}, err
	}
	return func() { _ = reg.Unregister() }, nil
}
