package record_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/store/record"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// BenchmarkWriteRounds is the flow recorder's write of one batch as the
// serving path produces it under load: 512 writes, the three of each
// two-round flow (round 1 asking for input, the "running" mark of
// round 2, round 2 completing) with the documents a real round carries
// (the question asked, the principal, the client, the webhook's
// outcome). It reports the cost per flow; the record grows as it runs,
// as it does in service.
//
// In the "answered later" runs each flow's answer comes a batch after its
// question, as it does when a person answers (seconds, not the
// benchmark's milliseconds): a batch carries the new flows' first rounds
// and the rounds of flows recorded by the batch before.
func BenchmarkWriteRounds(b *testing.B) {
	ctx := context.Background()
	for _, d := range platformtest.Dialects() {
		for _, run := range []struct {
			size  int
			later bool
		}{{512, false}, {2048, false}, {512, true}} {
			name := fmt.Sprintf("%s/batch=%d", d.Name, run.size)
			if run.later {
				name += "/answered-later"
			}
			size := run.size
			b.Run(name, func(b *testing.B) {
				st := platformtest.Store(b, d.New(b)).Record()
				var answers []record.RoundWrite // the last batch's flows' later rounds
				batch := func() []record.RoundWrite {
					ws := make([]record.RoundWrite, 0, size)
					if !run.later {
						for len(ws)+3 <= size {
							ws = append(ws, twoRoundFlow(mrtr.NewFlowID(), time.Now())...)
						}
						return ws
					}
					ws = append(ws, answers...)
					answers = answers[:0]
					for range size / 3 {
						f := twoRoundFlow(mrtr.NewFlowID(), time.Now())
						ws = append(ws, f[0])
						answers = append(answers, f[1:]...)
					}
					return ws
				}
				if run.later {
					// Outside the timing: the first batch has questions and
					// no answers, so every timed batch is a steady one,
					// len(ws)/3 flows' writes.
					if _, err := st.WriteRounds(ctx, batch()); err != nil {
						b.Fatal(err)
					}
				}
				var flows int
				cpu0 := platformtest.CPUTime()
				for b.Loop() {
					ws := batch()
					if _, err := st.WriteRounds(ctx, ws); err != nil {
						b.Fatal(err)
					}
					flows += len(ws) / 3
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(flows), "µs/flow")
				// CPU of this process only: PostgreSQL's own work is not in it.
				b.ReportMetric(float64((platformtest.CPUTime()-cpu0).Microseconds())/float64(flows), "cpu-µs/flow")
			})
		}
	}
}

// twoRoundFlow is what the recorder writes for one two-round flow.
func twoRoundFlow(id string, at time.Time) []record.RoundWrite {
	exp := at.Add(10 * time.Minute)
	principal := json.RawMessage(`{"issuer":"https://id.example.com","subject":"user-4711","client":"desktop-app"}`)
	client := json.RawMessage(`{"name":"claude-desktop","version":"1.4.2","era":"2026-07-28"}`)
	asked := json.RawMessage(`[{"kind":"form","key":"environment","message":"Which environment should the deployment go to?","schema":{"type":"object","properties":{"environment":{"type":"string","enum":["staging","production"]}},"required":["environment"]}}]`)
	webhook := json.RawMessage(`{"class":"ok","status":200,"durationUs":1830}`)
	flow := record.Flow{ID: id, TenantID: "t1", TenantSlug: "acme", Method: "tools/call", Target: "deploy",
		PrincipalIssuer: "https://id.example.com", PrincipalSubject: "user-4711", PrincipalClient: "desktop-app",
		ClientName: "claude-desktop", ClientVersion: "1.4.2", Era: "2026-07-28", Replica: "platform-0",
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", StartedAt: at, UpdatedAt: at}
	r1 := record.RoundWrite{Flow: flow, Round: record.Round{N: 1, ArrivedAt: at, EndedAt: at, ServerUS: 120,
		ResultType: "input_required", KeyOut: "acme-3", StateExpiresAt: &exp, Asked: asked, Principal: principal,
		Client: client, Replica: "platform-0", TraceID: flow.TraceID, SpanID: "00f067aa0ba902b7"}}
	r1.Flow.State, r1.Flow.PendingKinds, r1.Flow.KeyID = record.AwaitingInput, "form", "acme-3"
	r1.Flow.WaitingSince, r1.Flow.StateExpiresAt = &at, &exp
	at2 := at.Add(40 * time.Millisecond)
	running := record.RoundWrite{Flow: flow, Running: true, Round: record.Round{N: 2}}
	running.Flow.State, running.Flow.UpdatedAt = record.Running, at2
	r2 := record.RoundWrite{Flow: flow, Round: record.Round{N: 2, ArrivedAt: at2, EndedAt: at2, ServerUS: 310,
		ClientWaitUS: 40_000, ResultType: "complete", StateIn: "valid", KeyIn: "acme-3", Webhook: webhook,
		Principal: principal, Client: client, Replica: "platform-0", TraceID: flow.TraceID, SpanID: "b7ad6b7169203331"}}
	r2.Flow.State, r2.Flow.KeyID, r2.Flow.UpdatedAt = record.Completed, "acme-3", at2
	return []record.RoundWrite{r1, running, r2}
}
