package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metric names of the flow record.
const (
	MetricFlowsAwaiting      = "opsmcp.flows.awaiting_input"
	MetricFlowRecordsDropped = "opsmcp.flows.record.dropped"
	MetricCallsUnrecorded    = "opsmcp.flows.record.unrecorded"
)

// AttrUnrecordedReason says why a call was left out of the record on
// purpose: UnrecordedSampled or UnrecordedRefusals.
const AttrUnrecordedReason = attribute.Key("opsmcp.unrecorded.reason")

// Why a call was left out of the record.
const (
	// UnrecordedSampled is a successful one-round call the tenant's
	// sampling left out.
	UnrecordedSampled = "sampled"
	// UnrecordedRefusals is a refused request past the tenant's budget of
	// recorded refusals this minute.
	UnrecordedRefusals = "refusal_budget"
)

// flowInstruments are the flow record's instruments, made on first use.
type flowInstruments struct {
	awaiting   metric.Int64ObservableGauge
	dropped    metric.Int64Counter
	unrecorded metric.Int64Counter
}

func newFlowInstruments(m metric.Meter) (flowInstruments, error) {
	var f flowInstruments
	var err error
	if f.awaiting, err = m.Int64ObservableGauge(MetricFlowsAwaiting, metric.WithUnit("{flow}"),
		metric.WithDescription("Flows waiting on people right now (awaiting input, state not expired), fleet-wide: every replica reports the same count.")); err != nil {
		return f, err
	}
	if f.dropped, err = m.Int64Counter(MetricFlowRecordsDropped, metric.WithUnit("{round}"),
		metric.WithDescription("Rounds the flow record dropped (its write queue was full, or a write failed): the record misses them, serving did not wait.")); err != nil {
		return f, err
	}
	f.unrecorded, err = m.Int64Counter(MetricCallsUnrecorded, metric.WithUnit("{request}"),
		metric.WithDescription("Calls the flow record left out on purpose: successful one-round calls sampled out, refused requests past the tenant's budget a minute."))
	return f, err
}

// CallUnrecorded counts a call the record left out on purpose, by
// tenant and reason (UnrecordedSampled, UnrecordedRefusals).
func (m *Metrics) CallUnrecorded(tenant, reason string) {
	if m == nil {
		return
	}
	m.flows.unrecorded.Add(context.Background(), 1, m.attrs(setKey{inst: instUnrecorded, a: tenant, b: reason}))
}

// FlowRecordDropped counts rounds the flow record dropped.
func (m *Metrics) FlowRecordDropped(n int64) {
	if m == nil {
		return
	}
	m.flows.dropped.Add(context.Background(), n)
}

// FlowsAwaitingReporter is called at every metric collection with a
// function to report one tenant's count of flows awaiting input; it
// should read a cache, not query on every scrape.
type FlowsAwaitingReporter func(ctx context.Context, report func(tenant string, n int64))

// ReportFlowsAwaiting registers fn as the source of the
// opsmcp.flows.awaiting_input gauge. The returned function unregisters it.
func (t *Telemetry) ReportFlowsAwaiting(fn FlowsAwaitingReporter) (unregister func(), err error) {
	m := t.Metrics()
	if m == nil || fn == nil {
		return func() {}, nil
	}
	reg, err := m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		fn(ctx, func(tenant string, n int64) {
			o.ObserveInt64(m.flows.awaiting, n, metric.WithAttributes(AttrTenant.String(tenant)))
		})
		return nil
	}, m.flows.awaiting)
	if err != nil {
		return func() {}, err
	}
	return func() { _ = reg.Unregister() }, nil
}
