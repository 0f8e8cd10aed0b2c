package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/flows"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/telemetry"
	"github.com/opsmcp/platform/tenant"
)

// flowRecord is the replica's part of the fleet-wide flow record: the
// recorder every round is handed to, the watcher that follows changes for
// live streams, and the service the admin API acts through.
type flowRecord struct {
	recorder *flows.Recorder
	watcher  *flows.Watcher
	service  *flows.Service
	stop     context.CancelFunc
	unreport func()
}

// startFlows starts the recorder and the watcher. The service's revoker
// (the MCP endpoint) is set once the endpoint exists.
func startFlows(ctx context.Context, cfg *config.Config, st *store.Store, log *slog.Logger, tel *telemetry.Telemetry) *flowRecord {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	watcher := flows.NewWatcher(ctx, st.Record(), log, 0)
	refusals := cfg.Flows.RefusalsPerMinute
	if refusals == 0 {
		refusals = -1 // none recorded (the recorder's zero is its default)
	}
	recorder := flows.NewRecorder(ctx, flows.Options{
		Store:     st.Record(),
		Logger:    log,
		Replica:   cfg.Flows.Replica,
		Retention: cfg.Flows.Retention,
		Written:   watcher.Wake,
		Dropped:   tel.Metrics().FlowRecordDropped,

		Ledger:            st,
		Retentions:        retentions(st, log),
		CallSample:        &cfg.Flows.CallSample,
		RefusalsPerMinute: refusals,
		Unrecorded:        tel.Metrics().CallUnrecorded,
	})
	f := &flowRecord{recorder: recorder, watcher: watcher, stop: cancel,
		service: &flows.Service{Store: st.Record(), Watcher: watcher}}
	unreport, err := tel.ReportFlowsAwaiting(f.service.ReportAwaiting)
	if err != nil {
		log.Warn("flows-awaiting gauge unavailable", "err", err)
	}
	f.unreport = unreport
	return f
}

// close writes what the recorder still holds and stops both.
func (f *flowRecord) close() {
	f.recorder.Close()
	f.unreport()
	f.stop()
	<-f.watcher.Done()
}

// retentions reads the record retention of the tenants that set their
// own.
func retentions(st *store.Store, log *slog.Logger) func(context.Context) (map[string]time.Duration, error) {
	return func(ctx context.Context) (map[string]time.Duration, error) {
		docs, err := st.Tenants().SettingsMentioning(ctx, "recordRetentionHours")
		if err != nil {
			return nil, err
		}
		out := make(map[string]time.Duration, len(docs))
		for id, doc := range docs {
			s, err := tenant.ParseSettings(doc)
			if err != nil {
				// Kept by the operator's retention rather than cut short.
				log.Warn("a tenant's settings do not parse; its record retention is the default", "tenant_id", id, "err", err)
				continue
			}
			if s.RecordRetentionHours > 0 {
				out[id] = s.RecordRetention(0)
			}
		}
		return out, nil
	}
}
