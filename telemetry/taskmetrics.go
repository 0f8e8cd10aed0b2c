package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/metric"
)

// Metric names of tasks (the Tasks extension).
const (
	MetricTasks             = "opsmcp.tasks"
	MetricTaskOldestWorking = "opsmcp.tasks.oldest_working"
	MetricTaskEvents        = "opsmcp.tasks.events"
)

// taskInstruments are the tasks' instruments.
type taskInstruments struct {
	tasks  metric.Int64ObservableGauge
	oldest metric.Float64ObservableGauge
	events metric.Int64Counter
}

func newTaskInstruments(m metric.Meter) (taskInstruments, error) {
	var t taskInstruments
	var err error
	if t.tasks, err = m.Int64ObservableGauge(MetricTasks, metric.WithUnit("{task}"),
		metric.WithDescription("Tasks kept now, by tenant and status, fleet-wide (every replica reports the same count).")); err != nil {
		return t, err
	}
	if t.oldest, err = m.Float64ObservableGauge(MetricTaskOldestWorking, metric.WithUnit("s"),
		metric.WithDescription("Age of each tenant's oldest working task, fleet-wide.")); err != nil {
		return t, err
	}
	t.events, err = m.Int64Counter(MetricTaskEvents, metric.WithUnit("{event}"),
		metric.WithDescription("Lifecycle events of tasks (progress, questions, answers, the end, cancels, deliveries made again), by tenant and kind. tasks/get polls are not events: they are counted with every request, in mcp.server.operation.duration."))
	return t, err
}

// TaskEvent counts a task's lifecycle event (kind, a fixed set) for an
// existing tenant.
func (m *Metrics) TaskEvent(ctx context.Context, tenant, kind string) {
	if m == nil {
		return
	}
	m.tasks.events.Add(ctx, 1, m.attrs(setKey{inst: instTaskEvent, a: tenant, b: kind}))
}

// TasksReporter is called at every metric collection with functions to
// report one tenant's tasks of a status and the age, in seconds, of its
// oldest working task; it should read a cache, not query on every scrape.
type TasksReporter func(ctx context.Context, count func(tenant, status string, n int64), oldest func(tenant string, seconds float64))

// ReportTasks registers fn as the source of the opsmcp.tasks and
// opsmcp.tasks.oldest_working gauges. The returned function unregisters
// it.
func (t *Telemetry) ReportTasks(fn TasksReporter) (unregister func(), err error) {
	m := t.Metrics()
	if m == nil || fn == nil {
		return func() {}, nil
	}
	reg, err := m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		fn(ctx, func(tenant, status string, n int64) {
			o.ObserveInt64(m.tasks.tasks, n, metric.WithAttributes(AttrTenant.String(tenant), AttrTaskStatus.String(status)))
		}, func(tenant string, seconds float64) {
			o.ObserveFloat64(m.tasks.oldest, seconds, metric.WithAttributes(AttrTenant.String(tenant)))
		})
		return nil
	}, m.tasks.tasks, m.tasks.oldest)
	if err != nil {
		return func() {}, err
	}
	return func() { _ = reg.Unregister() }, nil
}
