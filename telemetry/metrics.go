package telemetry

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// DurationBuckets are the bucket boundaries the MCP semantic conventions
// give mcp.server.operation.duration, in seconds.
var DurationBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// FlowDurationBuckets cover a flow's whole life, user think time
// included: up to an hour (a round's state lives at most a day, but a
// flow that long is an outlier either way).
var FlowDurationBuckets = []float64{0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// FlowRoundBuckets count the rounds of a completed flow.
var FlowRoundBuckets = []float64{2, 3, 4, 5, 6, 8, 10, 15, 20, 50, 100}

// Metric names.
const (
	MetricOperationDuration = "mcp.server.operation.duration"
	MetricRounds            = "opsmcp.mrtr.rounds"
	MetricFlowDuration      = "opsmcp.flow.duration"
	MetricFlowRounds        = "opsmcp.flow.rounds"
	MetricStateRejections   = "opsmcp.state.rejections"
	MetricWebhookDuration   = "opsmcp.webhook.duration"
	MetricWebhookFailures   = "opsmcp.webhook.failures"
	MetricKeyRingAge        = "opsmcp.keys.ring.age"
	MetricKeyRotationPhase  = "opsmcp.keys.rotation.phase"
	MetricKeyRingKeys       = "opsmcp.keys.ring.keys"
)

// Metrics are the platform's instruments. A nil *Metrics records
// nothing, so callers need no checks.
type Metrics struct {
	mu                sync.RWMutex
	sets              map[setKey]metric.MeasurementOption
	meter             metric.Meter
	operationDuration metric.Float64Histogram
	rounds            metric.Int64Counter
	flowDuration      metric.Float64Histogram
	flowRounds        metric.Int64Histogram
	stateRejections   metric.Int64Counter
	webhookDuration   metric.Float64Histogram
	webhookFailures   metric.Int64Counter
	keyRingAge        metric.Float64ObservableGauge
	keyPhase          metric.Int64ObservableGauge
	keyCount          metric.Int64ObservableGauge
	flows             flowInstruments
	tasks             taskInstruments
}

func newMetrics(m metric.Meter) (*Metrics, error) {
	out := &Metrics{meter: m, sets: map[setKey]metric.MeasurementOption{}}
	var err error
	h := func(name, desc, unit string, buckets []float64) metric.Float64Histogram {
		if err != nil {
			return nil
		}
		var inst metric.Float64Histogram
		inst, err = m.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit(unit), metric.WithExplicitBucketBoundaries(buckets...))
		return inst
	}
	c := func(name, desc, unit string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var inst metric.Int64Counter
		inst, err = m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		return inst
	}
	out.operationDuration = h(MetricOperationDuration, "Duration of MCP requests as the server saw them.", "s", DurationBuckets)
	out.rounds = c(MetricRounds, "MCP carrier requests (tools/call, prompts/get, resources/read) by result type: complete, input_required or error.", "{round}")
	out.flowDuration = h(MetricFlowDuration, "Time from a multi-round flow's first round to its last, client think time included.", "s", FlowDurationBuckets)
	out.stateRejections = c(MetricStateRejections, "Inbound requestState rejected, by reason.", "{rejection}")
	out.webhookDuration = h(MetricWebhookDuration, "Duration of webhook deliveries to tenant backends.", "s", DurationBuckets)
	out.webhookFailures = c(MetricWebhookFailures, "Failed webhook deliveries, by failure class.", "{failure}")
	if err != nil {
		return nil, err
	}
	if out.flowRounds, err = m.Int64Histogram(MetricFlowRounds, metric.WithDescription("Rounds per completed multi-round flow."),
		metric.WithUnit("{round}"), metric.WithExplicitBucketBoundaries(FlowRoundBuckets...)); err != nil {
		return nil, err
	}
	if out.keyRingAge, err = m.Float64ObservableGauge(MetricKeyRingAge, metric.WithUnit("s"),
		metric.WithDescription("How long the tenant's current minting key has been minting.")); err != nil {
		return nil, err
	}
	if out.keyPhase, err = m.Int64ObservableGauge(MetricKeyRotationPhase,
		metric.WithDescription("Rotation phase of the tenant's key ring: 0 stable, 1 new key added (verify only), 2 new key minting, old key still verifying.")); err != nil {
		return nil, err
	}
	if out.keyCount, err = m.Int64ObservableGauge(MetricKeyRingKeys, metric.WithUnit("{key}"),
		metric.WithDescription("Keys in the tenant's key ring (one minting, the rest verify only).")); err != nil {
		return nil, err
	}
	if out.flows, err = newFlowInstruments(m); err != nil {
		return nil, err
	}
	if out.tasks, err = newTaskInstruments(m); err != nil {
		return nil, err
	}
	return out, nil
}

// maxCachedSets bounds the cache of attribute sets: past it, sets are
// built per measurement (slower, never wrong).
const maxCachedSets = 8192

// setKey names one cached attribute set: the instrument and up to four
// attribute values, in the instrument's fixed order.
type setKey struct {
	inst       uint8
	a, b, c, d string
}

// attrs returns the measurement option for k, building its attribute
// set once: a measurement then costs no allocation for its labels.
func (m *Metrics) attrs(k setKey) metric.MeasurementOption {
	m.mu.RLock()
	opt, ok := m.sets[k]
	m.mu.RUnlock()
	if ok {
		return opt
	}
	opt = metric.WithAttributeSet(attribute.NewSet(k.build()...))
	m.mu.Lock()
	if len(m.sets) < maxCachedSets {
		m.sets[k] = opt
	}
	m.mu.Unlock()
	return opt
}

// build is the attribute list of k (on a cache miss only).
func (k setKey) build() []attribute.KeyValue {
	switch k.inst {
	case instOperation: // tenant, method, error type, status code
		kv := []attribute.KeyValue{AttrMCPMethod.String(k.b)}
		if k.a != "" {
			kv = append(kv, AttrTenant.String(k.a))
		}
		if k.c != "" {
			kv = append(kv, AttrErrorType.String(k.c))
		}
		if k.d != "" {
			kv = append(kv, AttrRPCStatusCode.String(k.d))
		}
		return kv
	case instRound: // tenant, method, result type
		return []attribute.KeyValue{AttrTenant.String(k.a), AttrMCPMethod.String(k.b), AttrResultType.String(k.c)}
	case instFlow: // tenant, method, outcome
		return []attribute.KeyValue{AttrTenant.String(k.a), AttrMCPMethod.String(k.b), AttrFlowOutcome.String(k.c)}
	case instRejection: // tenant, reason
		return []attribute.KeyValue{AttrTenant.String(k.a), AttrRejectReason.String(k.b)}
	case instWebhook: // tenant, kind, outcome
		return []attribute.KeyValue{AttrTenant.String(k.a), AttrWebhookKind.String(k.b), AttrWebhookOutcome.String(k.c)}
	case instWebhookFailure: // tenant, kind, class
		return []attribute.KeyValue{AttrTenant.String(k.a), AttrWebhookKind.String(k.b), AttrWebhookClass.String(k.c)}
	case instTaskEvent: // tenant, kind
		return []attribute.KeyValue{AttrTenant.String(k.a), AttrTaskEvent.String(k.b)}
	case instUnrecorded: // tenant, reason
		return []attribute.KeyValue{AttrTenant.String(k.a), AttrUnrecordedReason.String(k.b)}
	}
	return nil
}

const (
	instOperation uint8 = iota
	instRound
	instFlow
	instRejection
	instWebhook
	instWebhookFailure
	instTaskEvent
	instUnrecorded
)

// Operation records one MCP request's duration with the span's bounded
// attributes: the method (a known one or _OTHER), error.type and
// rpc.response.status_code when it failed, and the tenant when it exists
// ("" otherwise: an unknown slug is never a label).
func (m *Metrics) Operation(ctx context.Context, d time.Duration, tenant, method, errType, statusCode string) {
	if m == nil {
		return
	}
	opt := m.attrs(setKey{instOperation, tenant, method, errType, statusCode})
	m.operationDuration.Record(ctx, d.Seconds(), opt)
}

// Round counts one carrier round of tenant for method, by result type
// (complete, input_required or error).
func (m *Metrics) Round(ctx context.Context, tenant, method, resultType string) {
	if m == nil {
		return
	}
	opt := m.attrs(setKey{inst: instRound, a: tenant, b: method, c: resultType})
	m.rounds.Add(ctx, 1, opt)
}

// FlowDone records a completed multi-round flow: its whole duration and
// its rounds. outcome is complete, tool_error or error.
func (m *Metrics) FlowDone(ctx context.Context, tenant, method, outcome string, d time.Duration, rounds int) {
	if m == nil {
		return
	}
	opt := m.attrs(setKey{inst: instFlow, a: tenant, b: method, c: outcome})
	m.flowDuration.Record(ctx, d.Seconds(), opt)
	m.flowRounds.Record(ctx, int64(rounds), opt)
}

// StateRejected counts a rejected requestState. reason is one of the
// fixed set mrtr.Rejection reasons and the platform's own (flow_state,
// no_key_ring).
func (m *Metrics) StateRejected(ctx context.Context, tenant, reason string) {
	if m == nil {
		return
	}
	opt := m.attrs(setKey{inst: instRejection, a: tenant, b: reason})
	m.stateRejections.Add(ctx, 1, opt)
}

// Webhook records one delivery: its duration by outcome (complete,
// input_required or the failure class) and, on failure, the failure.
func (m *Metrics) Webhook(ctx context.Context, tenant, kind, outcome string, failed bool, d time.Duration) {
	if m == nil {
		return
	}
	opt := m.attrs(setKey{inst: instWebhook, a: tenant, b: kind, c: outcome})
	m.webhookDuration.Record(ctx, d.Seconds(), opt)
	if failed {
		opt := m.attrs(setKey{inst: instWebhookFailure, a: tenant, b: kind, c: outcome})
		m.webhookFailures.Add(ctx, 1, opt)
	}
}

// RotationPhase is where a key ring stands in the three-phase rotation.
type RotationPhase int

// Rotation phases, as the keys package names them.
const (
	// PhaseSteady: one key mints, no rotation under way.
	PhaseSteady RotationPhase = 0
	// PhaseStaged: a new key is in the ring, verify only.
	PhaseStaged RotationPhase = 1
	// PhasePromoted: the new key mints; the old one still verifies until
	// it is retired.
	PhasePromoted RotationPhase = 2
)

// KeyRing is one tenant's key ring as the keys package reports it.
type KeyRing struct {
	// Tenant is the tenant's slug.
	Tenant string
	// MinterAge is how long the current minting key has been minting.
	MinterAge time.Duration
	// Phase is the rotation phase.
	Phase RotationPhase
	// Keys is the number of keys in the ring.
	Keys int
}

// KeyRingReporter is called at every metric collection (a Prometheus
// scrape or an OTLP export, never on a request); it calls report once per
// tenant ring it knows. It must not block for long: read cached state.
type KeyRingReporter func(ctx context.Context, report func(KeyRing))

// ReportKeyRings registers fn as the source of the key ring gauges
// (opsmcp.keys.ring.age, opsmcp.keys.rotation.phase,
// opsmcp.keys.ring.keys). The returned function unregisters it.
func (t *Telemetry) ReportKeyRings(fn KeyRingReporter) (unregister func(), err error) {
	m := t.Metrics()
	if m == nil || fn == nil {
		return func() {}, nil
	}
	reg, err := m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		fn(ctx, func(k KeyRing) {
			attrs := metric.WithAttributes(AttrTenant.String(k.Tenant))
			o.ObserveFloat64(m.keyRingAge, k.MinterAge.Seconds(), attrs)
			o.ObserveInt64(m.keyPhase, int64(k.Phase), attrs)
			o.ObserveInt64(m.keyCount, int64(k.Keys), attrs)
		})
		return nil
	}, m.keyRingAge, m.keyPhase, m.keyCount)
	if err != nil {
		return func() {}, err
	}
	return func() { _ = reg.Unregister() }, nil
}
