package server

import (
	"context"
	"log/slog"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/flows"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/telemetry"
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
	recorder := flows.NewRecorder(ctx, flows.Options{
		Store:     st.Record(),
		Logger:    log,
		Replica:   cfg.Flows.Replica,
		Retention: cfg.Flows.Retention,
		Written:   watcher.Wake,
		Dropped:   tel.Metrics().FlowRecordDropped,
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
