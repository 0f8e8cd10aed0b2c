package endpoint_test

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/server"
	"github.com/opsmcp/platform/telemetry"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// BenchmarkRecordingThroughput is BenchmarkTelemetryThroughput's
// round=flow (eight clients at once, both cores busy, two-round flows)
// with the flow record off and on, on SQLite and PostgreSQL: every
// round then also goes to the recorder's queue and into the database in
// batches, on the same two cores. round=call runs one-round calls (each
// a row of its own since every call is recorded), round=flow two-round
// flows, round=destructive two-round flows of a destructive tool, whose
// confirmed round consumes its state either way and, with the record
// on, writes its running mark with it and its outcome before its answer. Compare record=off and record=on from
// interleaved runs (./scripts/bench-record); the cost must stay under
// 3%. BENCH_DB narrows to one database.
func BenchmarkRecordingThroughput(b *testing.B) {
	dbs := []string{"sqlite", "postgres"}
	if d := os.Getenv("BENCH_DB"); d != "" {
		dbs = strings.Split(d, ",")
	}
	for _, db := range dbs {
		for _, round := range []string{"call", "flow", "destructive"} {
			for _, rec := range []string{"off", "on"} {
				b.Run("db="+db+"/round="+round+"/record="+rec, func(b *testing.B) {
					url := platformtest.SQLiteURL(b)
					if db == "postgres" {
						url = platformtest.PostgresSchemaURL(b)
					}
					hook := benchHook(b).URL
					p := platformtest.Start(b, url, platformtest.WithConfig(func(c *config.Config) { c.Flows.Record = rec == "on" }),
						platformtestServerTelemetryOff())
					p.Tenant(b, "acme")
					p.Tool(b, "acme", confirmTool(hook))
					p.Tool(b, "acme", obj{"name": "ping", "inputSchema": obj{"type": "object"}, "handler": obj{"url": hook}})
					drop := confirmTool(hook)
					drop["name"], drop["annotations"] = "drop", obj{"destructiveHint": true}
					p.Tool(b, "acme", drop)
					endpoint := p.URL + "/t/acme/mcp"
					client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
					op, rounds := func() error { return tryFlow(client, endpoint) }, 2
					switch round {
					case "call":
						op, rounds = func() error { _, err := tryPost(client, endpoint, "ping", pingBody); return err }, 1
					case "destructive":
						op = func() error { return tryFlowOf(client, endpoint, "drop") }
					}
					underLoad(b, op, rounds)
				})
			}
		}
	}
}

// pingBody is a one-round call of the ping tool.
var pingBody = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping","arguments":{},` + flowMeta + `}}`)

// platformtestServerTelemetryOff runs the platform without telemetry, as
// the telemetry benchmarks' off side does.
func platformtestServerTelemetryOff() platformtest.Option {
	return platformtest.WithServer(server.WithTelemetry(telemetry.Disabled()))
}
