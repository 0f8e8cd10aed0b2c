package endpoint_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/opsmcp/platform/server"
	"github.com/opsmcp/platform/telemetry"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// otlpSink is a local OTLP/HTTP endpoint that accepts and discards every
// export, so the benchmark pays the real exporter's encoding and
// transport but no collector.
func otlpSink(b *testing.B) (*httptest.Server, *atomic.Int64) {
	var exports atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		exports.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(s.Close)
	return s, &exports
}

// roundBody is the tools/call every telemetry benchmark repeats.
var roundBody = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tool0007","arguments":{"msg":"hi"},` + validMeta + `}}`)

// roundPlatform starts a platform with tel, a tenant, the tool of
// roundBody and the two-round confirm tool of tryFlow, both answered by
// hook, and returns the tenant's MCP endpoint.
func roundPlatform(b *testing.B, tel *telemetry.Telemetry, hook string) string {
	p := platformtest.Start(b, platformtest.SQLiteURL(b), platformtest.WithServer(server.WithTelemetry(tel)))
	p.Tenant(b, "acme")
	p.Tool(b, "acme", echoTool("tool0007", hook))
	p.Tool(b, "acme", confirmTool(hook))
	return p.URL + "/t/acme/mcp"
}

// BenchmarkToolsCallRoundTelemetry is BenchmarkToolsCallRound with
// telemetry off and on: on is every span (server, webhook client) through
// the batch processor and the real OTLP/HTTP exporter to a local sink,
// metrics through both an OTLP reader and the Prometheus reader, and the
// trace-stamping log handler. The two figures are in README.md.
func BenchmarkToolsCallRoundTelemetry(b *testing.B) {
	modes := []string{"off", "on"}
	if m := os.Getenv("BENCH_TELEMETRY_MODES"); m != "" {
		modes = strings.Split(m, ",") // also: traces, metrics, unsampled (trace context made and propagated, nothing recorded)
	}
	for _, mode := range modes {
		b.Run("telemetry="+mode, func(b *testing.B) {
			tel := telemetry.Disabled()
			var exports *atomic.Int64
			if mode != "off" {
				var sink *httptest.Server
				sink, exports = otlpSink(b)
				env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": sink.URL, "OTEL_METRICS_EXPORTER": "otlp"}
				switch mode {
				case "traces":
					env["OTEL_METRICS_EXPORTER"] = "none"
				case "metrics":
					env["OTEL_TRACES_EXPORTER"] = "none"
				case "unsampled":
					env["OTEL_METRICS_EXPORTER"], env["OTEL_TRACES_SAMPLER"] = "none", "always_off"
				}
				var err error
				tel, err = telemetry.Setup(context.Background(), telemetry.Config{Version: "bench", Prometheus: mode != "traces",
					Getenv: func(k string) string { return env[k] }})
				if err != nil {
					b.Fatal(err)
				}
			}
			url, body := roundPlatform(b, tel, benchHook(b).URL), roundBody
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			post(b, client, url, "tool0007", body) // warm the catalogue cache
			b.ReportAllocs()
			cpu0 := platformtest.CPUTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				post(b, client, url, "tool0007", body)
			}
			b.StopTimer()
			// CPU time per round (the whole process: client, platform,
			// webhook, exporter): what bounds throughput on a busy
			// machine, and far less noisy than wall time when others
			// share the cores.
			b.ReportMetric(float64((platformtest.CPUTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			if err := tel.Shutdown(context.Background()); err != nil {
				b.Fatal(err)
			}
			if mode == "on" && exports.Load() == 0 {
				b.Fatal("nothing reached the OTLP sink")
			}
		})
	}
}

// BenchmarkTelemetryOverheadPaired runs the same round against two
// platforms in one process, one with telemetry off and one with it all
// on (as in BenchmarkToolsCallRoundTelemetry), alternating request by
// request so both see the same machine: on a shared, busy machine the
// separate sub-benchmarks drift by more than the overhead they measure.
// It reports each side's time per round and the overhead. (The two share
// one garbage collector, so a little of the on side's GC work lands on
// the off side; allocs/op of the separate benchmark show that cost.)
func BenchmarkTelemetryOverheadPaired(b *testing.B) {
	sink, exports := otlpSink(b)
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": sink.URL, "OTEL_METRICS_EXPORTER": "otlp"}
	prom := true
	// BENCH_TELEMETRY narrows the on side, to find where the cost is:
	// traces, metrics, prometheus, unsampled (trace context made and
	// propagated, no span recorded) or off (both sides off: the pairing's
	// own bias).
	switch os.Getenv("BENCH_TELEMETRY") {
	case "traces":
		env["OTEL_METRICS_EXPORTER"], prom = "none", false
	case "metrics":
		env["OTEL_TRACES_EXPORTER"] = "none"
	case "prometheus":
		env["OTEL_TRACES_EXPORTER"], env["OTEL_METRICS_EXPORTER"] = "none", "none"
	case "unsampled":
		env["OTEL_METRICS_EXPORTER"], env["OTEL_TRACES_SAMPLER"], prom = "none", "always_off", false
	case "off": // both sides off: what the pairing itself contributes
		env["OTEL_SDK_DISABLED"] = "true"
	}
	cfg := telemetry.Config{Version: "bench", Prometheus: prom, Getenv: func(k string) string { return env[k] }}
	on, err := telemetry.Setup(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	hook, body := benchHook(b).URL, roundBody
	urls := [2]string{roundPlatform(b, telemetry.Disabled(), hook), roundPlatform(b, on, hook)}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	for _, u := range urls {
		for i := 0; i < 200; i++ {
			post(b, client, u, "tool0007", body) // warm caches and connections
		}
	}
	var spent [2]time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := 0; k < 2; k++ {
			side := (i + k) % 2 // alternate which side goes first
			t0 := time.Now()
			post(b, client, urls[side], "tool0007", body)
			spent[side] += time.Since(t0)
		}
	}
	b.StopTimer()
	off, onNs := float64(spent[0].Nanoseconds())/float64(b.N), float64(spent[1].Nanoseconds())/float64(b.N)
	b.ReportMetric(off, "off-ns/round")
	b.ReportMetric(onNs, "on-ns/round")
	b.ReportMetric(100*(onNs-off)/off, "overhead-%")
	if err := on.Shutdown(context.Background()); err != nil {
		b.Fatal(err)
	}
	if exports.Load() == 0 && os.Getenv("BENCH_TELEMETRY") == "" {
		b.Fatal("nothing reached the OTLP sink")
	}
}

// BenchmarkTelemetryThroughput is the round of BenchmarkToolsCallRound-
// Telemetry under load: eight clients at once keep both cores busy, so
// background work (export, collection) competes with serving and the
// figure is what the machine can serve. It reports rounds per second;
// compare telemetry=off and telemetry=on from interleaved runs.
// round=call is the one-round tools/call of the other benchmarks;
// round=flow runs two-round flows (an InputRequiredResult with sealed
// state, then the verified retry that calls the webhook), whose rounds
// carry the MRTR attributes, state links and a flow span.
func BenchmarkTelemetryThroughput(b *testing.B) {
	for _, round := range []string{"call", "flow"} {
		for _, mode := range []string{"off", "on", "sdk"} {
			b.Run("round="+round+"/telemetry="+mode, func(b *testing.B) {
				tel := telemetry.Disabled()
				if mode != "off" {
					sink, _ := otlpSink(b)
					env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": sink.URL, "OTEL_METRICS_EXPORTER": "otlp"}
					prom := true
					switch os.Getenv("BENCH_TELEMETRY") { // narrows the on side, as in BenchmarkTelemetryOverheadPaired
					case "traces":
						env["OTEL_METRICS_EXPORTER"], prom = "none", false
					case "metrics":
						env["OTEL_TRACES_EXPORTER"] = "none"
					}
					cfg := telemetry.Config{Version: "bench", Prometheus: prom, Getenv: func(k string) string { return env[k] }}
					if mode == "sdk" {
						// The same spans through the OpenTelemetry SDK's own
						// path (its tracer, batch processor and OTLP/HTTP
						// exporter) instead of the platform's, metrics as on.
						cfg.TracerProvider = sdkTracerProvider(b, sink.URL)
					}
					var err error
					if tel, err = telemetry.Setup(context.Background(), cfg); err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
				}
				url := roundPlatform(b, tel, benchHook(b).URL)
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
				op, rounds := func() error { _, err := tryPost(client, url, "tool0007", roundBody); return err }, 1
				if round == "flow" {
					op, rounds = func() error { return tryFlow(client, url) }, 2
				}
				underLoad(b, op, rounds)
			})
		}
	}
}

// underLoad runs op (rounds rounds each) from eight clients at once,
// after one run to warm up, and reports rounds a second and the CPU a
// round: on a saturated machine throughput is its inverse, and unlike
// wall time it does not count time the shared machine's other tenants
// took.
func underLoad(b *testing.B, op func() error, rounds int) {
	if err := op(); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(4)
	cpu0 := platformtest.CPUTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		// Off the benchmark's goroutine a failure is reported, not fatal
		// (FailNow must run on the benchmark's own).
		for pb.Next() {
			if err := op(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(rounds*b.N)/b.Elapsed().Seconds(), "rounds/s")
	b.ReportMetric(float64((platformtest.CPUTime()-cpu0).Nanoseconds())/1e3/float64(rounds*b.N), "cpu-µs/round")
}

// sdkTracerProvider is the OpenTelemetry SDK's span path with the
// settings the platform's uses by default: parent-based always-on
// sampling, the batch processor's defaults, OTLP/HTTP protobuf to url.
func sdkTracerProvider(b *testing.B, url string) *sdktrace.TracerProvider {
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(url+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

// flowFirst starts the two-round flow of the confirm tool.
var flowFirst = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"confirm","arguments":{},` + flowMeta + `}}`)

const flowMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`

// tryFlow runs one two-round flow of the confirm tool: safe off the
// benchmark's goroutine.
func tryFlow(client *http.Client, url string) error { return tryFlowOf(client, url, "confirm") }

// tryFlowOf is tryFlow of another tool with the confirm tool's input.
func tryFlowOf(client *http.Client, url, tool string) error {
	first := flowFirst
	if tool != "confirm" {
		first = []byte(strings.Replace(string(flowFirst), `"name":"confirm"`, `"name":"`+tool+`"`, 1))
	}
	m, err := tryPost(client, url, tool, first)
	if err != nil {
		return err
	}
	res, _ := m["result"].(map[string]any)
	state, ok := res["requestState"].(string)
	if !ok {
		return fmt.Errorf("first round: no requestState in %v", m)
	}
	retry := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + tool + `","arguments":{},"inputResponses":{"ok":{"action":"accept","content":{"answer":"yes"}}},"requestState":"` + state + `",` + flowMeta + `}}`)
	if m, err = tryPost(client, url, tool, retry); err != nil {
		return err
	}
	if res, _ := m["result"].(map[string]any); res["resultType"] != "complete" {
		return fmt.Errorf("flow did not complete: %v", m)
	}
	return nil
}
