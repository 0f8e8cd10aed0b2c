package flows_test

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsmcp/platform/flows"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// BenchmarkRecorder is the whole of recording as this process pays for
// it: two-round flows handed to a Recorder as the serving path hands
// them (the first round; the second's running mark as it calls the
// webhook, then the second round), converted, batched and written to
// the database. It
// reports this process's CPU per round, which on PostgreSQL leaves out
// the database server's own work (another process; another machine in a
// fleet). Compare with a round's whole cost (BenchmarkRecordingThroughput
// in tenants, record=off) for what recording adds.
func BenchmarkRecorder(b *testing.B) {
	ctx := context.Background()
	for _, d := range platformtest.Dialects() {
		b.Run(d.Name, func(b *testing.B) {
			st := platformtest.Store(b, d.New(b))
			var dropped atomic.Int64
			var written atomic.Int64
			rec := flows.NewRecorder(ctx, flows.Options{Store: st.Record(), Replica: "platform-0", Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), Written: func() { written.Add(1) },
				Dropped: func(n int64) { dropped.Add(n) }})
			ask, done := flows.BenchRounds()
			cpu0 := platformtest.CPUTime()
			n := 0
			for b.Loop() {
				// Fresh rounds each time, as the serving path hands the
				// recorder a new round every request.
				a, d := *ask, *done
				a.FlowID = "fl_" + strconv.Itoa(n)
				d.FlowID = a.FlowID
				rec.Round(ctx, &a)
				rec.Running(ctx, &d)
				rec.Round(ctx, &d)
				n++
				if n%500 == 0 {
					// Keep within the queue, as a replica serving at this
					// rate does when the database keeps up.
					for rec.Queued() > 5000 {
						time.Sleep(time.Millisecond)
					}
				}
			}
			rec.Close()
			b.StopTimer()
			if dropped.Load() > 0 {
				b.Fatalf("%d rounds dropped", dropped.Load())
			}
			b.ReportMetric(float64((platformtest.CPUTime()-cpu0).Nanoseconds())/1e3/float64(2*n), "cpu-µs/round")
		})
	}
}
