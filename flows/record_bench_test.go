package flows

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/endpoint"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/store/record"
)

// benchRounds are a two-round flow's rounds as the serving path hands
// them to the recorder: the first asks a form question, the second
// completes.
func benchRounds() (ask, done *endpoint.Round) {
	now := time.Now()
	p := &auth.Principal{Issuer: "https://id.example.com", Subject: "user-4711", Client: "desktop-app"}
	ask = &endpoint.Round{FlowID: "fl_AAAAAAAAAAAAAAAA", TenantID: "tn_1", Tenant: "acme", Method: mcp.MethodToolsCall,
		Target: "deploy", Era: "2026-07-28", Client: endpoint.ClientInfo{Name: "claude-desktop", Version: "1.4.2"},
		Principal: p, Number: 1, Arrived: now, Ended: now.Add(300 * time.Microsecond), FlowStart: now,
		ResultType: mcp.ResultTypeInputRequired,
		StateOut:   endpoint.StateSeal{KeyID: "acme-3", Expires: now.Add(10 * time.Minute)},
		Asked: map[string]mrtr.InputRequest{"environment": {Method: "elicitation/create",
			Params: json.RawMessage(`{"mode":"form","message":"Which environment should the deployment go to?","requestedSchema":{"type":"object","properties":{"environment":{"type":"string","enum":["staging","production"]}},"required":["environment"]}}`)}},
		Webhook: &endpoint.WebhookCall{Kind: "tool", Outcome: "input_required", Status: 200, Duration: 900 * time.Microsecond}}
	d := *ask
	done = &d
	done.Number, done.ResultType, done.Asked = 2, mcp.ResultTypeComplete, nil
	done.StateIn = endpoint.StateCheck{Outcome: endpoint.StateVerified, KeyID: "acme-3"}
	done.StateOut = endpoint.StateSeal{}
	done.PreviousEnded, done.Arrived = ask.Ended, ask.Ended.Add(40*time.Millisecond)
	done.Ended = done.Arrived.Add(250 * time.Microsecond)
	done.Webhook = &endpoint.WebhookCall{Kind: "tool", Outcome: "complete", Status: 200, Duration: 800 * time.Microsecond}
	return ask, done
}

// BenchmarkWrite is what the serving path pays to hand one two-round
// flow to the recorder (its two rounds and the running mark of the
// second): each converted and encoded into its record, in space reused
// from record to record as the recorder's is.
func BenchmarkWrite(b *testing.B) {
	ask, done := benchRounds()
	var docs, rec []byte
	var w record.RoundWrite
	b.ReportAllocs()
	for b.Loop() {
		for _, h := range [...]struct {
			rd      *endpoint.Round
			running bool
		}{{ask, false}, {done, true}, {done, false}} {
			if recordKind(h.rd, h.running) == "" {
				b.Fatal("not recorded")
			}
			w = record.RoundWrite{}
			write(&w, h.rd, "platform-0", h.running, &docs)
			rec = record.EncodeRound(rec[:0], &w)
		}
	}
}
