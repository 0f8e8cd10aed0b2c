package endpoint_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/server"
	"github.com/opsmcp/platform/telemetry"
	"github.com/opsmcp/platform/testkit/oidctest"
	"github.com/opsmcp/platform/testkit/otlpreceiver"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
	"github.com/opsmcp/platform/webhook"
)

// traced starts telemetry whose spans take the platform's own span path
// (the one serving uses) into an in-memory exporter.
func traced(t *testing.T) (*spanLog, platformtest.Option) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{SpanExporter: exp, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return &spanLog{exp: exp, tel: tel}, platformtest.WithServer(server.WithTelemetry(tel))
}

// spanLog reads the spans a traced platform exported.
type spanLog struct {
	exp *tracetest.InMemoryExporter
	tel *telemetry.Telemetry
}

// Ended is every span ended so far, in end order.
func (l *spanLog) Ended() []sdktrace.ReadOnlySpan {
	if err := l.tel.ForceFlush(context.Background()); err != nil {
		panic(err)
	}
	return l.exp.GetSpans().Snapshots()
}

// waitSpans waits until n ended spans match keep (spans end just after
// the answer is written) and returns them in end order.
func waitSpans(t *testing.T, rec *spanLog, n int, keep func(sdktrace.ReadOnlySpan) bool) []sdktrace.ReadOnlySpan {
	t.Helper()
	var out []sdktrace.ReadOnlySpan
	testwait.Until(t, fmt.Sprintf("%d spans have ended", n), func() bool {
		out = out[:0]
		for _, s := range rec.Ended() {
			if keep(s) {
				out = append(out, s)
			}
		}
		return len(out) >= n
	})
	if len(out) != n {
		t.Fatalf("want %d spans, have %d: %v", n, len(out), names(out))
	}
	return out
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

func serverSpans(s sdktrace.ReadOnlySpan) bool { return s.SpanKind() == trace.SpanKindServer }

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[attribute.Key]any) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: no %s (have %v)", s.Name(), k, s.Attributes())
			continue
		}
		if v == nil {
			continue // present, any value
		}
		if g.AsInterface() != v && fmt.Sprint(g.AsInterface()) != fmt.Sprint(v) {
			t.Errorf("%s: %s = %v, want %v", s.Name(), k, g.AsInterface(), v)
		}
	}
}

// twoQuestionTool needs three rounds: a name, then a colour, then the
// webhook answers.
func twoQuestionTool(name, url string) obj {
	return obj{"name": name, "description": "two questions in turn",
		"inputSchema": obj{"type": "object", "properties": obj{"order": obj{"type": "string"}}},
		"handler":     obj{"url": url},
		"inputs": []obj{
			formInput("who", "Your name?", "name"),
			func() obj { m := formInput("colour", "Colour?", "colour"); m["when"] = obj{"input": "who"}; return m }(),
		}}
}

// callTraced is call with a traceparent in _meta and, optionally, in the
// HTTP headers.
func callTraced(t *testing.T, p *platformtest.Platform, tool string, args, responses obj, state any, metaTP, headerTP string) *platformtest.Response {
	t.Helper()
	meta := platformtest.Meta(allCaps)
	if metaTP != "" {
		meta["traceparent"] = metaTP
	}
	params := obj{"name": tool, "arguments": args, "_meta": meta}
	if responses != nil {
		params["inputResponses"] = responses
	}
	if state != nil {
		params["requestState"] = state
	}
	body, _ := json.Marshal(obj{"jsonrpc": "2.0", "id": "r-" + tool, "method": "tools/call", "params": params})
	h := http.Header{"Content-Type": {"application/json"}, "Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {tool}}
	if headerTP != "" {
		h.Set("traceparent", headerTP)
	}
	return platformtest.Do(t, "POST", p.URL+"/t/acme/mcp", h, body)
}

func TestAFlowAcrossReplicasIsThreeLinkedRoundSpansAndOneFlowSpan(t *testing.T) {
	keys := key()
	db := platformtest.PostgresSchemaURL(t)
	recA, withA := traced(t)
	recB, withB := traced(t)
	a := platformtest.Start(t, db, platformtest.WithStateKeys(keys), withA)
	b := platformtest.Start(t, db, platformtest.WithStateKeys(keys), withB, platformtest.WithConfig(func(c *config.Config) { c.PublicURL = a.URL }))
	h := newHook(t, answersHook)
	a.Tenant(t, "acme")
	h.setSecret(a.Tool(t, "acme", twoQuestionTool("order", h.URL)))
	args := obj{"order": "o-1"}

	// Round 1 on a, with the client's trace context in _meta.
	const clientTrace = "0af7651916cd43dd8448eb211c80319c"
	metaTP := "00-" + clientTrace + "-b7ad6b7169203331-01"
	_, s1 := inputRequired(t, callTraced(t, a, "order", args, nil, nil, metaTP, ""))
	time.Sleep(30 * time.Millisecond) // the user thinks
	// Round 2 on b, without any trace context.
	_, s2 := inputRequired(t, callTraced(t, b, "order", args, obj{"who": accept("name", "Ada")}, s1, "", ""))
	time.Sleep(30 * time.Millisecond)
	// Round 3 on a, with trace context in the HTTP headers only.
	headerTP := "00-11111111111111111111111111111111-2222222222222222-01"
	res := platformtest.Result(t, callTraced(t, a, "order", args, obj{"colour": accept("colour", "red")}, s2, "", headerTP))
	if res["resultType"] != "complete" {
		t.Fatalf("flow did not complete: %v", res)
	}

	onA := waitSpans(t, recA, 2, func(s sdktrace.ReadOnlySpan) bool {
		return serverSpans(s) && strings.HasPrefix(s.Name(), "tools/call")
	})
	onB := waitSpans(t, recB, 1, func(s sdktrace.ReadOnlySpan) bool {
		return serverSpans(s) && strings.HasPrefix(s.Name(), "tools/call")
	})
	r1, r2, r3 := onA[0], onB[0], onA[1]
	for i, s := range []sdktrace.ReadOnlySpan{r1, r2, r3} {
		if s.Name() != "tools/call order" {
			t.Fatalf("round %d span name %q", i+1, s.Name())
		}
		wantAttrs(t, s, map[attribute.Key]any{
			"mcp.method.name": "tools/call", "gen_ai.tool.name": "order", "gen_ai.operation.name": "execute_tool",
			"mcp.protocol.version": "2026-07-28", "jsonrpc.request.id": "r-order", "network.protocol.version": "1.1",
			"client.address": "127.0.0.1", "client.port": nil,
			"opsmcp.tenant": "acme", "opsmcp.flow.id": attrs(r1)["opsmcp.flow.id"].AsString(), "opsmcp.flow.round": i + 1,
		})
		if _, ok := attrs(s)["mcp.session.id"]; ok {
			t.Fatal("mcp.session.id set on a 2026-07-28 request")
		}
		if s.Status().Code == codes.Error {
			t.Fatalf("round %d is an error: %v", i+1, s.Status())
		}
	}
	// Parents: _meta first, else the HTTP headers, else a new trace.
	if r1.SpanContext().TraceID().String() != clientTrace || r1.Parent().SpanID().String() != "b7ad6b7169203331" {
		t.Fatalf("round 1 parent %v", r1.Parent())
	}
	if r2.Parent().IsValid() {
		t.Fatalf("round 2 had no trace context but has parent %v", r2.Parent())
	}
	if r3.SpanContext().TraceID().String() != "11111111111111111111111111111111" || r3.Parent().SpanID().String() != "2222222222222222" {
		t.Fatalf("round 3 parent %v", r3.Parent())
	}
	// MRTR attributes of each round.
	wantAttrs(t, r1, map[attribute.Key]any{"opsmcp.mrtr.result_type": "input_required", "opsmcp.state.seal.outcome": "minted",
		"opsmcp.state.seal.key_id": nil, "opsmcp.mrtr.input_request.keys": "[who]", "opsmcp.mrtr.input_request.kinds": "[form]"})
	wantAttrs(t, r2, map[attribute.Key]any{"opsmcp.mrtr.result_type": "input_required", "opsmcp.state.verify.outcome": "verified",
		"opsmcp.state.verify.key_id": attrs(r1)["opsmcp.state.seal.key_id"].AsString(), "opsmcp.state.seal.outcome": "minted",
		"opsmcp.mrtr.input_request.keys": "[colour]", "opsmcp.mrtr.input_request.kinds": "[form]"})
	wantAttrs(t, r3, map[attribute.Key]any{"opsmcp.mrtr.result_type": "complete", "opsmcp.state.verify.outcome": "verified",
		"opsmcp.state.verify.key_id": attrs(r2)["opsmcp.state.seal.key_id"].AsString()})
	if _, ok := attrs(r1)["opsmcp.state.verify.outcome"]; ok {
		t.Fatal("a fresh round has a verify outcome")
	}
	// Links: each round to the one that minted its state, across replicas.
	linksTo := func(s, prev sdktrace.ReadOnlySpan) bool {
		for _, l := range s.Links() {
			if l.SpanContext.SpanID() == prev.SpanContext().SpanID() && l.SpanContext.TraceID() == prev.SpanContext().TraceID() {
				return true
			}
		}
		return false
	}
	if !linksTo(r2, r1) || !linksTo(r3, r2) {
		t.Fatalf("rounds not linked: r2 %v, r3 %v", r2.Links(), r3.Links())
	}

	// One flow span, on the replica that completed it.
	flows := waitSpans(t, recA, 1, func(s sdktrace.ReadOnlySpan) bool { return strings.HasPrefix(s.Name(), "flow ") })
	// A flow span is emitted before its round's span ends, and b's round
	// spans have all been seen above: any flow span of b's is there too.
	for _, s := range recB.Ended() {
		if strings.HasPrefix(s.Name(), "flow ") {
			t.Fatal("flow span on b")
		}
	}
	f := flows[0]
	if f.Name() != "flow tools/call order" || !linksTo(f, r3) || f.Parent().IsValid() {
		t.Fatalf("flow span %q parent %v links %v", f.Name(), f.Parent(), f.Links())
	}
	wantAttrs(t, f, map[attribute.Key]any{"opsmcp.flow.rounds": 3, "opsmcp.flow.id": attrs(r1)["opsmcp.flow.id"].AsString(),
		"opsmcp.tenant": "acme", "opsmcp.flow.outcome": "complete", "opsmcp.flow.client_wait": nil, "opsmcp.flow.server_time": nil})
	// The flow starts when round 1 arrived: the state carries that time
	// to the millisecond, so the flow span starts within round 1's span,
	// less the sub-millisecond part cut off.
	if f.StartTime().Before(r1.StartTime().Add(-time.Millisecond)) || f.StartTime().After(r1.EndTime()) {
		t.Fatalf("flow starts at %s, round 1 spans %s to %s", f.StartTime(), r1.StartTime(), r1.EndTime())
	}
	if f.EndTime().Before(r3.StartTime()) || f.EndTime().After(r3.EndTime()) {
		t.Fatalf("flow ends %v, final round %v to %v", f.EndTime(), r3.StartTime(), r3.EndTime())
	}
	wait := attrs(f)["opsmcp.flow.client_wait"].AsFloat64()
	served := attrs(f)["opsmcp.flow.server_time"].AsFloat64()
	total := f.EndTime().Sub(f.StartTime()).Seconds()
	// The client's wait is at least the gaps between the rounds' spans
	// (the user's thinking above); the server's time is what is left.
	gaps := (r2.StartTime().Sub(r1.EndTime()) + r3.StartTime().Sub(r2.EndTime())).Seconds()
	if wait < gaps-0.001 || wait > total || served <= 0 || wait+served > total+0.001 {
		t.Fatalf("client wait %.4fs (gaps between rounds %.4fs), server %.4fs, total %.4fs", wait, gaps, served, total)
	}

	// The webhook call is a CLIENT child of round 3, and the backend got
	// its context.
	hooks := waitSpans(t, recA, 1, func(s sdktrace.ReadOnlySpan) bool {
		return s.SpanKind() == trace.SpanKindClient && strings.HasPrefix(s.Name(), "webhook ")
	})
	wh := hooks[0]
	if wh.Parent().SpanID() != r3.SpanContext().SpanID() || wh.Name() != "webhook tool order" {
		t.Fatalf("webhook span %q parent %v", wh.Name(), wh.Parent())
	}
	wantAttrs(t, wh, map[attribute.Key]any{"http.request.method": "POST", "http.response.status_code": 200, "server.address": "127.0.0.1", "server.port": nil})
	got := h.last().Trace
	if got == nil || got.Traceparent != telemetry.Traceparent(wh.SpanContext()) {
		t.Fatalf("backend got trace %+v, span is %s", got, telemetry.Traceparent(wh.SpanContext()))
	}
	hdr := h.lastHeader()
	if hdr.Get("Traceparent") != got.Traceparent {
		t.Fatalf("traceparent header %q, delivery trace %q", hdr.Get("Traceparent"), got.Traceparent)
	}
	// Deliveries ask for no compression (small local answers; the
	// response limit counts bytes as sent).
	if v, ok := hdr["Accept-Encoding"]; ok {
		t.Fatalf("a delivery asked for Accept-Encoding %q", v)
	}
}

func TestARejectedStateIsASpanEventAndALogLineWithTheTrace(t *testing.T) {
	rec, with := traced(t)
	h := newHook(t, answersHook)
	p := platformtest.Start(t, platformtest.SQLiteURL(t), with)
	p.Tenant(t, "acme")
	h.setSecret(p.Tool(t, "acme", twoQuestionTool("order", h.URL)))
	_, s1 := inputRequired(t, callTraced(t, p, "order", obj{"order": "o-1"}, nil, nil, "", ""))
	r := callTraced(t, p, "order", obj{"order": "o-2"}, obj{"who": accept("name", "Ada")}, s1, "", "")
	assertFrozen(t, r)
	if strings.Contains(string(r.Body), "binding") {
		t.Fatal("the reason reached the wire")
	}
	spans := waitSpans(t, rec, 2, serverSpans)
	s := spans[1]
	var reason string
	for _, ev := range s.Events() {
		if ev.Name == telemetry.EventStateRejected {
			for _, kv := range ev.Attributes {
				if kv.Key == telemetry.AttrRejectReason {
					reason = kv.Value.AsString()
				}
			}
		}
	}
	if reason != "binding" {
		t.Fatalf("rejection event reason %q in %v", reason, s.Events())
	}
	wantAttrs(t, s, map[attribute.Key]any{"opsmcp.state.verify.outcome": "rejected", "error.type": "-32602", "rpc.response.status_code": "-32602"})
	if s.Status().Code == codes.Error {
		t.Fatal("-32602 counted as a server error")
	}
	// The log line of the rejection carries the span's ids.
	var line map[string]any
	for _, l := range strings.Split(p.Logs.String(), "\n") {
		if strings.Contains(l, "requestState rejected") {
			_ = json.Unmarshal([]byte(l), &line)
		}
	}
	if line["trace_id"] != s.SpanContext().TraceID().String() || line["span_id"] != s.SpanContext().SpanID().String() {
		t.Fatalf("log line %v, span %v", line, s.SpanContext())
	}
}

func TestSpansNameErrorsToolErrorsAndTheDatabaseLoad(t *testing.T) {
	rec, with := traced(t)
	h := newHook(t, func(w http.ResponseWriter, _ *webhook.Request) { http.Error(w, "down", 500) })
	p := platformtest.Start(t, platformtest.SQLiteURL(t), with)
	p.Tenant(t, "acme")
	h.setSecret(p.Tool(t, "acme", echoTool("echo", h.URL)))
	// First request of this replica for the tenant: the catalogue load is
	// a database span under the request's span.
	res := platformtest.Result(t, p.MCP(t, "acme", "tools/call", obj{"name": "echo", "arguments": obj{"msg": "x"}}))
	if res["isError"] != true {
		t.Fatalf("want a tool error: %v", res)
	}
	p.MCP(t, "acme", "nope/method", nil)
	spans := waitSpans(t, rec, 2, serverSpans)
	call, unknown := spans[0], spans[1]
	wantAttrs(t, call, map[attribute.Key]any{"error.type": "tool_error"})
	if call.Status().Code != codes.Error {
		t.Fatal("a tool error is not an error status")
	}
	if _, ok := attrs(call)["rpc.response.status_code"]; ok {
		t.Fatal("a tool error has a JSON-RPC status code")
	}
	if unknown.Name() != "_OTHER" {
		t.Fatalf("an unknown method names the span: %q", unknown.Name())
	}
	wantAttrs(t, unknown, map[attribute.Key]any{"mcp.method.name": "_OTHER", "error.type": "-32601", "rpc.response.status_code": "-32601", "opsmcp.tenant": "acme"})
	hook := waitSpans(t, rec, 1, func(s sdktrace.ReadOnlySpan) bool { return strings.HasPrefix(s.Name(), "webhook ") })[0]
	wantAttrs(t, hook, map[attribute.Key]any{"error.type": "status", "http.response.status_code": 500})
	if hook.Status().Code != codes.Error {
		t.Fatal("a failed delivery is not an error")
	}
	if _, ok := attrs(call)["opsmcp.flow.id"]; ok {
		t.Fatal("a single-round call carries flow attributes")
	}
	var db []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if _, ok := attrs(s)["db.system.name"]; ok && s.Parent().SpanID() == call.SpanContext().SpanID() {
			db = append(db, s)
		}
	}
	if len(db) == 0 {
		t.Fatal("no database span under the first request (the catalogue load)")
	}
	wantAttrs(t, db[0], map[attribute.Key]any{"db.system.name": "sqlite", "db.operation.name": "SELECT"})
	if db[0].StartTime().Before(call.StartTime()) || db[0].EndTime().After(call.EndTime()) {
		t.Fatal("database span outside its request")
	}
}

func TestToolContentIsTracedOnlyWhenTheTenantOptsIn(t *testing.T) {
	rec, with := traced(t)
	h := newHook(t, replyText("result-text"))
	p := platformtest.Start(t, platformtest.SQLiteURL(t), with)
	p.Tenant(t, "acme")
	h.setSecret(p.Tool(t, "acme", echoTool("echo", h.URL)))
	p.MCP(t, "acme", "tools/call", obj{"name": "echo", "arguments": obj{"msg": "argument-text"}})
	// The admin API reloads this replica's catalogue before it answers.
	p.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", obj{"settings": obj{"traceContent": true}})
	p.MCP(t, "acme", "tools/call", obj{"name": "echo", "arguments": obj{"msg": "argument-text"}})
	spans := waitSpans(t, rec, 2, func(s sdktrace.ReadOnlySpan) bool { return serverSpans(s) && s.Name() == "tools/call echo" })
	if _, ok := attrs(spans[0])["gen_ai.tool.call.arguments"]; ok {
		t.Fatal("arguments traced without the opt-in")
	}
	wantAttrs(t, spans[1], map[attribute.Key]any{"gen_ai.tool.call.arguments": `{"msg":"argument-text"}`})
	if r := attrs(spans[1])["gen_ai.tool.call.result"].AsString(); !strings.Contains(r, "result-text") {
		t.Fatalf("result %q", r)
	}
}

// newReceiver runs an OTLP/HTTP collector that decodes every export.
func newReceiver(t testing.TB) (*otlpreceiver.Receiver, string) {
	rc := &otlpreceiver.Receiver{}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	return rc, srv.URL
}

func strAttr(kvs []*commonpb.KeyValue, key string) string { return otlpreceiver.StringAttr(kvs, key) }

func TestTheOTLPExporterDeliversLinkedSpansAndNoSecretIsEverExported(t *testing.T) {
	rc, rcURL := newReceiver(t)
	getenv := func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcURL, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}[k]
	}
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Version: "test", InstanceID: "replica-1", Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	const answer = "Ada-the-answer-0e1f"
	h := newHook(t, answersHook)
	p := platformtest.Start(t, platformtest.SQLiteURL(t), platformtest.WithServer(server.WithTelemetry(tel)))
	p.Tenant(t, "acme")
	secret := p.Tool(t, "acme", twoQuestionTool("order", h.URL))
	h.setSecret(secret)
	const bearer = "Bearer b3arer-t0ken-never-logged"
	do := func(responses obj, state any) *platformtest.Response {
		params := obj{"name": "order", "arguments": obj{"order": "o-1"}, "_meta": platformtest.Meta(allCaps)}
		if responses != nil {
			params["inputResponses"] = responses
		}
		if state != nil {
			params["requestState"] = state
		}
		body, _ := json.Marshal(obj{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
		return platformtest.Do(t, "POST", p.URL+"/t/acme/mcp", http.Header{"Content-Type": {"application/json"}, "Authorization": {bearer},
			"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"order"}}, body)
	}
	_, s1 := inputRequired(t, do(nil, nil))
	_, s2 := inputRequired(t, do(obj{"who": accept("name", answer)}, s1))
	res := platformtest.Result(t, do(obj{"colour": accept("colour", answer+"-red")}, s2))
	if !strings.Contains(toolText(t, res), answer) {
		t.Fatal("the webhook did not see the answer")
	}
	assertFrozen(t, do(obj{"colour": accept("colour", "x")}, s1[:len(s1)-4]+"AAAA")) // a forged state
	// Stopping the platform waits for every request, the spans ended
	// after each answer included; Shutdown then flushes the batch
	// processor to the receiver.
	p.Stop()
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans, resource, metricNames := rc.Spans(), rc.Resource(), rc.MetricNames()
	byName := map[string][]*tracepb.Span{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	rounds := byName["tools/call order"]
	if len(rounds) != 4 || len(byName["flow tools/call order"]) != 1 || len(byName["webhook tool order"]) != 1 {
		t.Fatalf("exported spans: %v", func() []string {
			var n []string
			for k, v := range byName {
				n = append(n, k+"×"+strconv.Itoa(len(v)))
			}
			return n
		}())
	}
	for i := 1; i < 3; i++ {
		prev, cur := rounds[i-1], rounds[i]
		if len(cur.Links) != 1 || string(cur.Links[0].SpanId) != string(prev.SpanId) || string(cur.Links[0].TraceId) != string(prev.TraceId) {
			t.Fatalf("round %d's link %v does not point at round %d", i+1, cur.Links, i)
		}
		if len(cur.TraceId) != 16 || string(cur.TraceId) == string(prev.TraceId) {
			t.Fatal("rounds without client trace context should be separate traces")
		}
	}
	flow := byName["flow tools/call order"][0]
	if string(flow.Links[0].SpanId) != string(rounds[2].SpanId) {
		t.Fatal("flow span not linked to the final round")
	}
	wh := byName["webhook tool order"][0]
	if string(wh.TraceId) != string(rounds[2].TraceId) || string(wh.ParentSpanId) != string(rounds[2].SpanId) {
		t.Fatal("webhook span not under the final round")
	}
	if !slices.Contains(metricNames, telemetry.MetricOperationDuration) || !slices.Contains(metricNames, telemetry.MetricFlowRounds) {
		t.Fatalf("metrics exported over OTLP: %v", metricNames)
	}
	if strAttr(resource, "service.name") != "opsmcp-platform" || strAttr(resource, "service.version") != "test" || strAttr(resource, "service.instance.id") != "replica-1" {
		t.Fatalf("resource %v", resource)
	}
	// No secret anywhere: attributes, events, links, resource, logs.
	var exported []string
	collect := func(kvs []*commonpb.KeyValue) {
		for _, kv := range kvs {
			b, _ := json.Marshal(kv.Value)
			exported = append(exported, kv.Key+"="+string(b)+" "+kv.Value.String())
		}
	}
	collect(resource)
	for _, s := range spans {
		exported = append(exported, s.Name, s.Status.GetMessage(), string(s.TraceState))
		collect(s.Attributes)
		for _, e := range s.Events {
			exported = append(exported, e.Name)
			collect(e.Attributes)
		}
		for _, l := range s.Links {
			collect(l.Attributes)
		}
	}
	all := strings.Join(exported, "\n") + "\n" + p.Logs.String()
	for what, s := range map[string]string{
		"round 1 state": s1, "round 2 state": s2, "webhook secret": secret, "bearer token": strings.TrimPrefix(bearer, "Bearer "),
		"admin token": platformtest.AdminToken, "answer": answer,
	} {
		if s == "" {
			t.Fatalf("%s is empty", what)
		}
		if strings.Contains(all, s) {
			t.Fatalf("the %s was exported or logged", what)
		}
	}
	if !regexp.MustCompile(`opsmcp\.state\.rejection\.reason`).MatchString(all) {
		t.Fatal("the rejection reason was not exported")
	}
}

func TestPrometheusMetricsAfterAKnownFlow(t *testing.T) {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED"} {
		t.Setenv(k, "")
	}
	const metricsToken = "m3trics-t0ken"
	h := newHook(t, answersHook)
	bad := newHook(t, func(w http.ResponseWriter, _ *webhook.Request) { http.Error(w, "down", 500) })
	// The platform builds its own telemetry, as in production.
	rounds, counted := countRounds()
	p := platformtest.Start(t, platformtest.SQLiteURL(t), counted, platformtest.WithConfig(func(c *config.Config) { c.MetricsToken = metricsToken }))
	p.Tenant(t, "acme")
	h.setSecret(p.Tool(t, "acme", twoQuestionTool("order", h.URL)))
	bad.setSecret(p.Tool(t, "acme", echoTool("echo", bad.URL)))
	unregister, err := p.Server.Telemetry().ReportKeyRings(func(_ context.Context, report func(telemetry.KeyRing)) {
		report(telemetry.KeyRing{Tenant: "acme", MinterAge: 2 * time.Hour, Phase: telemetry.PhaseStaged, Keys: 2})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()

	if r := platformtest.Do(t, "GET", p.URL+"/metrics", nil, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("unauthenticated scrape: %d", r.Status)
	}
	args := obj{"order": "o-1"}
	_, s1 := inputRequired(t, call(t, p, "acme", "order", args, nil, nil, allCaps))
	_, s2 := inputRequired(t, call(t, p, "acme", "order", args, obj{"who": accept("name", "Ada")}, s1, allCaps))
	platformtest.Result(t, call(t, p, "acme", "order", args, obj{"colour": accept("colour", "red")}, s2, allCaps))
	assertFrozen(t, call(t, p, "acme", "order", obj{"order": "o-2"}, obj{"colour": accept("colour", "red")}, s2, allCaps)) // binding
	platformtest.Result(t, p.MCP(t, "acme", "tools/call", obj{"name": "echo", "arguments": obj{"msg": "x"}}))              // webhook 500
	p.MCP(t, "ghost", "tools/list", nil)                                                                                   // unknown tenant

	acme := func(kv ...string) map[string]string {
		l := map[string]string{"opsmcp_tenant": "acme"}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	want := []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		// mcp.server.operation.duration, with the conventions' buckets.
		{"mcp_server_operation_duration_seconds_count", acme("mcp_method_name", "tools/call"), 5},
		{"mcp_server_operation_duration_seconds_count", acme("mcp_method_name", "tools/call", "error_type", "tool_error"), 1},
		{"mcp_server_operation_duration_seconds_count", acme("mcp_method_name", "tools/call", "error_type", "-32602", "rpc_response_status_code", "-32602"), 1},
		// The unknown tenant's request counts, with neither a tenant nor a
		// method label (the request was never read).
		{"mcp_server_operation_duration_seconds_count", map[string]string{"opsmcp_tenant": "", "mcp_method_name": "_OTHER", "error_type": "-32600"}, 1},
		// Rounds by result type.
		{"opsmcp_mrtr_rounds_total", acme("opsmcp_mrtr_result_type", "input_required"), 2},
		{"opsmcp_mrtr_rounds_total", acme("opsmcp_mrtr_result_type", "complete"), 2}, // the flow's last round and the echo call
		{"opsmcp_mrtr_rounds_total", acme("opsmcp_mrtr_result_type", "error"), 1},
		// Flow duration and rounds per completed flow.
		{"opsmcp_flow_rounds_count", acme("opsmcp_flow_outcome", "complete"), 1},
		{"opsmcp_flow_rounds_sum", acme("opsmcp_flow_outcome", "complete"), 3},
		{"opsmcp_flow_duration_seconds_count", acme("mcp_method_name", "tools/call"), 1},
		// Rejections by reason.
		{"opsmcp_state_rejections_total", acme("opsmcp_state_rejection_reason", "binding"), 1},
		// Webhook duration and failures by class.
		{"opsmcp_webhook_duration_seconds_count", acme("opsmcp_webhook_kind", "tool"), 2},
		{"opsmcp_webhook_failures_total", acme("opsmcp_webhook_failure_class", "status"), 1},
		// Key rings, through the callback the keys package registers.
		{"opsmcp_keys_ring_age_seconds", acme(), 7200},
		{"opsmcp_keys_rotation_phase", acme(), 1},
		{"opsmcp_keys_ring_keys", acme(), 2},
	}
	// A round's metrics are recorded just after its answer is written,
	// before the rounds reach the sinks behind telemetry: once all six
	// have, every count is final.
	for i := range 6 {
		testwait.Recv(t, rounds, fmt.Sprintf("round %d to be recorded", i+1))
	}
	m := platformtest.Scrape(t, p.URL, metricsToken)
	for _, w := range want {
		if got, ok := m.Value(w.name, w.labels); !ok || got != w.value {
			t.Errorf("%s%v = %v (present %v), want %v", w.name, w.labels, got, ok, w.value)
		}
	}
	for _, le := range []string{"0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1", "2", "5", "10", "30", "60", "120", "300", "+Inf"} {
		if _, ok := m.Value("mcp_server_operation_duration_seconds_bucket", map[string]string{"le": le}); !ok {
			t.Errorf("no bucket le=%s", le)
		}
	}
	for _, s := range m {
		if s.Labels["opsmcp_tenant"] == "ghost" {
			t.Fatal("an unknown tenant became a label")
		}
	}
	if _, ok := m.Value("target_info", map[string]string{"service_name": "opsmcp-platform", "service_version": "test"}); !ok {
		t.Error("no target_info with the service's name and version")
	}
}

func TestAStoppingReplicaFlushesWhatItTraced(t *testing.T) {
	rc, rcURL := newReceiver(t)
	// The platform builds its telemetry from the environment, as in
	// production, and flushes it when it stops.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcURL)
	t.Setenv("OTEL_SERVICE_NAME", "opsmcp-test")
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		t.Setenv(k, "")
	}
	h := newHook(t, replyText("pong"))
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.Tenant(t, "acme")
	h.setSecret(p.Tool(t, "acme", echoTool("echo", h.URL)))
	platformtest.Result(t, p.MCP(t, "acme", "tools/call", obj{"name": "echo", "arguments": obj{"msg": "x"}}))
	p.Stop()
	spans, resource, metricNames := rc.Spans(), rc.Resource(), rc.MetricNames()
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	if !slices.Contains(names, "tools/call echo") || !slices.Contains(names, "webhook tool echo") {
		t.Fatalf("spans flushed at stop: %v", names)
	}
	if strAttr(resource, "service.name") != "opsmcp-test" || strAttr(resource, "service.version") != "test" || strAttr(resource, "service.instance.id") == "" {
		t.Fatalf("resource %v", resource)
	}
	if !slices.Contains(metricNames, telemetry.MetricOperationDuration) {
		t.Fatalf("metrics flushed at stop: %v", metricNames)
	}
}

// TestTheIssuerDiscoveryAndJWKSFetchAreSpansUnderTheRequest: the first
// bearer token of an issuer makes the platform fetch the issuer's
// discovery document and key set while the request waits; both are
// CLIENT spans under the request's span (recorded before it started,
// replayed under it), with the OP's address and no URL path.
func TestTheIssuerDiscoveryAndJWKSFetchAreSpansUnderTheRequest(t *testing.T) {
	rec, with := traced(t)
	op := oidctest.Start(t)
	p := platformtest.Start(t, platformtest.SQLiteURL(t), with)
	authTenant(t, p, "acme", op, oidctest.ClientA, false)
	h := newHook(t, answersHook)
	h.setSecret(p.Tool(t, "acme", echoTool("echo", h.URL)))
	token := op.UserToken(t, oidctest.ClientA, op.UserName(1))
	platformtest.Result(t, bearerCall(t, p, "acme", token, obj{"name": "echo", "arguments": obj{"msg": "x"}, "_meta": platformtest.Meta(allCaps)}))
	server := waitSpans(t, rec, 1, serverSpans)[0]
	u, err := url.Parse(op.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	toOP := func(s sdktrace.ReadOnlySpan) bool {
		a := attrs(s)
		return s.SpanKind() == trace.SpanKindClient && a["server.address"].AsString() == u.Hostname() && strconv.FormatInt(a["server.port"].AsInt64(), 10) == u.Port()
	}
	var fetches []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if toOP(s) {
			fetches = append(fetches, s)
		}
	}
	if len(fetches) < 2 { // discovery, then the key set
		t.Fatalf("%d spans to the OP, want the discovery and the JWKS fetch", len(fetches))
	}
	for _, s := range fetches {
		if s.Parent().SpanID() != server.SpanContext().SpanID() || s.SpanContext().TraceID() != server.SpanContext().TraceID() {
			t.Fatalf("span %q is not a child of the request span", s.Name())
		}
		wantAttrs(t, s, map[attribute.Key]any{"http.request.method": "GET", "http.response.status_code": 200})
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.String(), "/") {
				t.Fatalf("a URL path is recorded: %v", kv)
			}
		}
	}
	// The second request finds the issuer cached: no fetch.
	n := len(rec.Ended())
	platformtest.Result(t, bearerCall(t, p, "acme", token, obj{"name": "echo", "arguments": obj{"msg": "y"}, "_meta": platformtest.Meta(allCaps)}))
	waitSpans(t, rec, 2, serverSpans)
	for _, s := range rec.Ended()[n:] {
		if toOP(s) {
			t.Fatalf("a cached issuer was fetched again: %q", s.Name())
		}
	}
}
