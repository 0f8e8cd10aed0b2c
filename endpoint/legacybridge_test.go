package endpoint_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/endpoint"
	"github.com/opsmcp/platform/telemetry"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
	"github.com/opsmcp/platform/webhook"
)

// onboardTool needs five rounds: a name (form), a sign-in (URL), a
// summary from the client's model (sampling), each asked once the one
// before is in, then the webhook's own confirmation (confirmHook), then
// the result.
func onboardTool(url string) obj {
	when := func(m obj, after string) obj { m["when"] = obj{"input": after}; return m }
	return obj{"name": "onboard", "description": "asks in turn", "inputSchema": obj{"type": "object"},
		"handler": obj{"url": url},
		"inputs": []obj{
			formInput("who", "Your name?", "name"),
			when(obj{"name": "login", "kind": "url", "message": "Sign in", "url": "https://auth.example.com/start"}, "who"),
			when(obj{"name": "summary", "kind": "sampling", "sampling": obj{
				"messages": []obj{{"role": "user", "content": obj{"type": "text", "text": "Summarise"}}}, "maxTokens": 20}}, "login"),
		}}
}

// answerEverything answers every kind of server request as a user and a
// model would.
func answerEverything(method string, params map[string]any) (any, obj) {
	switch {
	case method == "sampling/createMessage":
		return obj{"role": "assistant", "content": obj{"type": "text", "text": "a fine summary"}, "model": "test-model", "stopReason": "endTurn"}, nil
	case method == "roots/list":
		return obj{"roots": []obj{{"uri": "file:///work", "name": "work"}}}, nil
	case params["mode"] == "url":
		return obj{"action": "accept"}, nil
	}
	props, _ := params["requestedSchema"].(map[string]any)["properties"].(map[string]any)
	switch {
	case props["name"] != nil:
		return obj{"action": "accept", "content": obj{"name": "Ada"}}, nil
	case props["ok"] != nil:
		return obj{"action": "accept", "content": obj{"ok": true}}, nil
	case props["colour"] != nil:
		return obj{"action": "accept", "content": obj{"colour": "red"}}, nil
	case props["size"] != nil:
		return obj{"action": "accept", "content": obj{"size": "L"}}, nil
	}
	return nil, obj{"code": -32602, "message": "unexpected question"}
}

// flowOf reads a flow's record once it reached state.
func flowOf(t *testing.T, p *platformtest.Platform, id, state string) (map[string]any, []any) {
	t.Helper()
	var flow map[string]any
	var rounds []any
	testwait.Until(t, "the flow record shows "+state, func() bool {
		r := p.Admin(t, "GET", "/api/v1/tenants/acme/flows/"+id, nil)
		if r.Status != 200 {
			return false
		}
		m := r.JSON(t)
		flow, _ = m["flow"].(map[string]any)
		rounds, _ = m["rounds"].([]any)
		return flow["state"] == state
	})
	return flow, rounds
}

func TestABridgedFlowRunsEveryRoundOnTheCallsStream(t *testing.T) {
	rec, opt := traced(t)
	h := newHook(t, confirmHook)
	p := setup(t, h, opt)
	h.setSecret(p.Tool(t, "acme", onboardTool(h.URL)))
	c := newLegacyClient(t, legacyURL(p, "acme"))
	c.initialize("2025-11-25", legacyCaps)
	c.onRequest = answerEverything

	res := c.result("tools/call", obj{"name": "onboard", "arguments": obj{}})
	text := toolText(t, res)
	if !strings.Contains(text, "confirmed by") || !strings.Contains(text, "Ada") || res["isError"] == true {
		t.Fatalf("result %v", res)
	}
	if _, ok := res["resultType"]; ok {
		t.Fatal("a legacy result carries resultType")
	}
	// What the stream carried, in order: four requests, one per round,
	// and the URL elicitation's completion once the flow moved past it.
	var order []string
	var urlID string
	var stream string
	for i, m := range c.seen {
		// Every event has an id naming the call's stream and its place
		// in it (the priming event was 0).
		kind, s, seq, ok := endpoint.ParseEventID(fmt.Sprint(m["__id"]))
		if !ok || kind != 'c' || seq != int64(i+1) || (stream != "" && s != stream) {
			t.Fatalf("event %d has id %v", i, m["__id"])
		}
		stream = s
		method, _ := m["method"].(string)
		params, _ := m["params"].(map[string]any)
		switch {
		case method == "elicitation/create" && params["mode"] == "url":
			urlID, _ = params["elicitationId"].(string)
			order = append(order, "url")
			if len(urlID) != 36 || params["url"] != "https://auth.example.com/start" {
				t.Fatalf("URL elicitation %v", params)
			}
		case method == "elicitation/create":
			if _, ok := params["mode"]; ok {
				t.Fatalf("a form elicitation names its mode: %v", params)
			}
			order = append(order, "form")
		case method == "sampling/createMessage":
			order = append(order, "sampling")
		case method == "notifications/elicitation/complete":
			if params["elicitationId"] != urlID {
				t.Fatalf("completion of %v, asked %s", params, urlID)
			}
			order = append(order, "complete")
		case method == "":
			order = append(order, "result")
		}
	}
	if want := "form,url,complete,sampling,form,result"; strings.Join(order, ",") != want {
		t.Fatalf("stream: %s, want %s", strings.Join(order, ","), want)
	}
	if c.answered != 4 || c.answerStatus != 202 {
		t.Fatalf("answers posted %d, last status %d", c.answered, c.answerStatus)
	}
	// The webhook was called as for a 2026-07-28 client: once the
	// declared inputs were in, and again with its own state.
	if n := len(h.requests); n != 2 {
		t.Fatalf("webhook called %d times", n)
	}
	last := h.last()
	if last.Flow.Round != 5 || last.State != "secret-step-1" || last.Answers["summary"].Action != "accept" {
		t.Fatalf("last delivery %+v", last)
	}
	var sampled struct {
		Content struct{ Text string } `json:"content"`
	}
	_ = json.Unmarshal(last.Answers["summary"].Content, &sampled)
	if sampled.Content.Text != "a fine summary" || last.Answers["login"].Action != "accept" {
		t.Fatalf("answers %+v", last.Answers)
	}

	// The flow record has every round, in the session's era.
	flow, rounds := flowOf(t, p, last.Flow.ID, "completed")
	if flow["era"] != "2025-11-25" || flow["rounds"] != float64(5) || len(rounds) != 5 {
		t.Fatalf("flow %v, %d rounds", flow, len(rounds))
	}
	for i, r := range rounds {
		rt := r.(map[string]any)["resultType"]
		if want := map[bool]string{true: "complete", false: "input_required"}[i == 4]; rt != want {
			t.Fatalf("round %d: %v", i+1, r)
		}
	}
	// One span per round, each with the session's id, in one trace; and
	// the flow span.
	spans := waitSpans(t, rec, 5, func(s sdktrace.ReadOnlySpan) bool {
		return serverSpans(s) && s.Name() == "tools/call onboard"
	})
	sessions := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/sessions", nil)["items"].([]any)
	nonce := sessions[0].(map[string]any)["id"].(string)
	for i, s := range spans {
		wantAttrs(t, s, map[attribute.Key]any{
			telemetry.AttrMCPSessionID: nonce, telemetry.AttrFlowRound: i + 1,
			telemetry.AttrMCPProtocolVersion: "2025-11-25", telemetry.AttrFlowID: last.Flow.ID,
		})
		if s.SpanContext().TraceID() != spans[0].SpanContext().TraceID() {
			t.Fatalf("round %d is in another trace", i+1)
		}
	}
	waitSpans(t, rec, 1, func(s sdktrace.ReadOnlySpan) bool { return s.Name() == "flow tools/call onboard" })
	// No secret: not the session id, not an answer.
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			if v := kv.Value.String(); strings.Contains(v, c.session) || strings.Contains(v, "a fine summary") {
				t.Fatalf("span %s carries a secret in %s", s.Name(), kv.Key)
			}
		}
	}
	if logs := p.Logs.String(); strings.Contains(logs, c.session) || strings.Contains(logs, "a fine summary") {
		t.Fatal("the log carries a session id or an answer")
	}
}

func TestTheBridgeAsksOnlyWhatTheSessionDeclared(t *testing.T) {
	h := newHook(t, answersHook)
	p := setup(t, h)
	p.Tool(t, "acme", onboardTool(h.URL))
	h.setSecret(p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/prompts", obj{"name": "brief", "description": "x",
		"handler": obj{"url": h.URL}, "inputs": []obj{{"name": "m", "kind": "sampling", "sampling": obj{
			"messages": []obj{{"role": "user", "content": obj{"type": "text", "text": "hi"}}}, "maxTokens": 5}}}})["webhookSecret"].(string))
	c := newLegacyClient(t, legacyURL(p, "acme"))
	c.initialize("2025-11-25", obj{"elicitation": obj{}}) // form only
	c.onRequest = answerEverything
	res := c.result("tools/call", obj{"name": "onboard", "arguments": obj{}})
	if res["isError"] != true || !strings.Contains(toolText(t, res), "elicitation.url") {
		t.Fatalf("result %v", res)
	}
	for _, m := range c.messages("elicitation/create") {
		if m["params"].(map[string]any)["mode"] == "url" {
			t.Fatal("a URL elicitation was sent to a session that did not declare it")
		}
	}
	if len(c.messages("elicitation/create")) != 1 {
		t.Fatalf("the form question was not asked first: %v", c.seen)
	}
	msg, status := c.call("prompts/get", obj{"name": "brief"})
	e, _ := msg["error"].(map[string]any)
	if status != 200 || e["code"] != float64(-32603) || !strings.Contains(e["message"].(string), "sampling") {
		t.Fatalf("prompt: %d %v", status, msg)
	}
	if need, _ := e["data"].(map[string]any)["requiredCapabilities"].(map[string]any); need["sampling"] == nil {
		t.Fatalf("requiredCapabilities %v", e["data"])
	}
	if len(c.messages("sampling/createMessage")) != 0 || h.last() != nil {
		t.Fatal("a request was sent, or the webhook called, without the capability")
	}
}

func TestABridgedRoundTimesOutAndTheRoundLimitHolds(t *testing.T) {
	h := newHook(t, answersHook)
	p := setup(t, h, platformtest.WithServer(func(o *endpoint.Options) { o.Legacy.RoundTimeout = 200 * time.Millisecond }))
	p.Tool(t, "acme", chainTool("order", h.URL))
	c := newLegacyClient(t, legacyURL(p, "acme"))
	c.initialize("2025-11-25", legacyCaps)
	// Nobody answers.
	res := c.result("tools/call", obj{"name": "order", "arguments": obj{}})
	if res["isError"] != true || !strings.Contains(toolText(t, res), "did not answer the server's elicitation/create request") {
		t.Fatalf("result %v", res)
	}
	asked := c.messages("elicitation/create")
	cancelled := c.messages("notifications/cancelled")
	if len(asked) != 1 || len(cancelled) != 1 || cancelled[0]["params"].(map[string]any)["requestId"] != asked[0]["id"] {
		t.Fatalf("asked %v, cancelled %v", asked, cancelled)
	}
	if h.last() != nil {
		t.Fatal("the webhook was called")
	}
	// An answer arriving after the timeout finds nothing to answer.
	late := c.post(c.url, obj{"jsonrpc": "2.0", "id": asked[0]["id"], "result": obj{"action": "accept", "content": obj{"name": "x"}}})
	if late.Status != 202 {
		t.Fatalf("late answer: %d", late.Status)
	}

	// The round limit: at most two rounds here, the chain needs four.
	q := setup(t, h, platformtest.WithConfig(func(c *config.Config) { c.Legacy.MaxRounds = 2 }))
	q.Tool(t, "acme", chainTool("order", h.URL))
	d := newLegacyClient(t, legacyURL(q, "acme"))
	d.initialize("2025-11-25", legacyCaps)
	d.onRequest = answerEverything
	res = d.result("tools/call", obj{"name": "order", "arguments": obj{}})
	if res["isError"] != true || !strings.Contains(toolText(t, res), "more than 2 rounds") || d.answered != 2 {
		t.Fatalf("result %v after %d answers", res, d.answered)
	}
}

func TestAClientThatLeavesOrCancelsEndsTheFlowCleanly(t *testing.T) {
	h := newHook(t, answersHook)
	// A client that leaves may resume: its call waits for it up to the
	// round timeout, short here.
	p := setup(t, h, platformtest.WithServer(func(o *endpoint.Options) { o.Legacy.RoundTimeout = 300 * time.Millisecond }))
	p.Tool(t, "acme", chainTool("order", h.URL))
	flowIDs := func() []string {
		var ids []string
		for _, f := range p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/flows", nil)["items"].([]any) {
			ids = append(ids, f.(map[string]any)["id"].(string))
		}
		return ids
	}

	// The client goes away while the platform waits for its answer, and
	// never comes back.
	c := newLegacyClient(t, legacyURL(p, "acme"))
	c.initialize("2025-11-25", legacyCaps)
	msg, _ := c.exchange("tools/call", obj{"name": "order", "arguments": obj{}}, func(m map[string]any) bool {
		return m["method"] == "elicitation/create"
	})
	if msg != nil {
		t.Fatalf("answered %v", msg)
	}
	var gone string
	testwait.Until(t, "the flow is recorded", func() bool { ids := flowIDs(); gone = strings.Join(ids, ""); return len(ids) == 1 })
	flow, rounds := flowOf(t, p, gone, "failed")
	if flow["detail"] != "client_timeout" || !strings.Contains(fmt.Sprint(flow["message"]), "did not answer the server's elicitation/create request") || len(rounds) != 2 {
		t.Fatalf("flow %v rounds %v", flow, rounds)
	}

	// The client cancels its call: the stream ends with no answer.
	c.onRequest = func(method string, params map[string]any) (any, obj) {
		r := c.post(c.url, obj{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": obj{"requestId": c.nextID, "reason": "changed my mind"}})
		if r.Status != 202 {
			t.Errorf("cancel: %d", r.Status)
		}
		return obj{"action": "accept", "content": obj{"name": "too late"}}, nil
	}
	msg, _ = c.exchange("tools/call", obj{"name": "order", "arguments": obj{}}, nil)
	if msg != nil {
		t.Fatalf("a cancelled call was answered: %v", msg)
	}
	var cancelled string
	testwait.Until(t, "the second flow is recorded", func() bool {
		for _, id := range flowIDs() {
			if id != gone {
				cancelled = id
			}
		}
		return cancelled != ""
	})
	if flow, _ := flowOf(t, p, cancelled, "failed"); flow["detail"] != "no_answer" {
		t.Fatalf("flow %v", flow)
	}
	if h.last() != nil {
		t.Fatal("the webhook was called for a flow that never completed")
	}
}

func TestProgressAndLogsOfABridgedCallAreRelayed(t *testing.T) {
	h := newHook(t, func(w http.ResponseWriter, req *webhook.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		io.WriteString(w, `{"type":"log","level":"debug","data":"noise"}`+"\n")
		io.WriteString(w, `{"type":"log","level":"warning","data":"careful"}`+"\n")
		if req.State == "" {
			// Round-local progress: 0, 50 here; the next round starts
			// again at 0, which must not be relayed as going backwards.
			io.WriteString(w, `{"type":"progress","progress":0,"total":100}`+"\n")
			io.WriteString(w, `{"type":"progress","progress":50,"total":100}`+"\n")
			io.WriteString(w, `{"type":"response","response":{"type":"input_required","state":"s1","inputRequests":{"go":{"method":"elicitation/create","params":{"message":"Go on?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}}}}`+"\n")
			return
		}
		io.WriteString(w, `{"type":"progress","progress":0,"total":100}`+"\n")
		io.WriteString(w, `{"type":"progress","progress":100,"total":100}`+"\n")
		io.WriteString(w, `{"type":"response","response":{"type":"complete","result":{"content":[{"type":"text","text":"done"}]}}}`+"\n")
	})
	p := setup(t, h)
	c := newLegacyClient(t, legacyURL(p, "acme"))
	c.initialize("2025-11-25", legacyCaps)
	c.onRequest = answerEverything
	if got := c.result("logging/setLevel", obj{"level": "info"}); len(got) != 0 {
		t.Fatalf("setLevel %v", got)
	}
	if msg, _ := c.call("logging/setLevel", obj{"level": "loud"}); msg["error"] == nil {
		t.Fatal("an unknown level was accepted")
	}
	res := c.result("tools/call", obj{"name": "echo", "arguments": obj{}, "_meta": obj{"progressToken": "p-1"}})
	if toolText(t, res) != "done" {
		t.Fatalf("result %v", res)
	}
	var progress []float64
	for _, m := range c.messages("notifications/progress") {
		params := m["params"].(map[string]any)
		if params["progressToken"] != "p-1" {
			t.Fatalf("progress %v", params)
		}
		progress = append(progress, params["progress"].(float64))
	}
	if fmt.Sprint(progress) != "[0 50 100]" {
		t.Fatalf("progress %v", progress)
	}
	logs := c.messages("notifications/message")
	if len(logs) != 2 || logs[0]["params"].(map[string]any)["data"] != "careful" {
		t.Fatalf("logs %v", logs)
	}
}

func TestTheSessionStreamCarriesListChangesAndResourceUpdates(t *testing.T) {
	h := newHook(t, replyText("x"))
	p := setup(t, h)
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/resources", obj{"name": "doc", "uri": "test://doc", "mimeType": "text/plain", "text": "v1"})
	c := newLegacyClient(t, legacyURL(p, "acme"))
	c.initialize("2025-11-25", obj{})
	if got := c.result("resources/subscribe", obj{"uri": "test://doc"}); len(got) != 0 {
		t.Fatalf("subscribe %v", got)
	}
	req, _ := http.NewRequest("GET", c.url, nil)
	req.Header = c.header()
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET: %v %v", err, resp)
	}
	defer resp.Body.Close()
	next := eventReader(resp.Body)
	p.MustAdmin(t, 200, "PUT", "/api/v1/tenants/acme/resources/doc", obj{"name": "doc", "uri": "test://doc", "mimeType": "text/plain", "text": "v2"})
	if m := next(); m["method"] != "notifications/resources/updated" || m["params"].(map[string]any)["uri"] != "test://doc" {
		t.Fatalf("after the resource changed: %v", m)
	}
	p.Tool(t, "acme", echoTool("echo2", h.URL))
	if m := next(); m["method"] != "notifications/tools/list_changed" {
		t.Fatalf("after a tool was added: %v", m)
	}
	// Unsubscribed, a change is not announced; the list change still is.
	c.result("resources/unsubscribe", obj{"uri": "test://doc"})
	p.MustAdmin(t, 200, "PUT", "/api/v1/tenants/acme/resources/doc", obj{"name": "doc", "uri": "test://doc", "mimeType": "text/plain", "text": "v3"})
	p.Tool(t, "acme", echoTool("echo3", h.URL))
	if m := next(); m["method"] != "notifications/tools/list_changed" {
		t.Fatalf("an unsubscribed resource was announced: %v", m)
	}
	// A session subscribes to at most 100 resources.
	for i := 0; i < 99; i++ {
		c.result("resources/subscribe", obj{"uri": fmt.Sprintf("test://r%d", i)})
	}
	c.result("resources/subscribe", obj{"uri": "test://r0"}) // again: no change
	c.result("resources/subscribe", obj{"uri": "test://doc"})
	if msg, _ := c.call("resources/subscribe", obj{"uri": "test://one-too-many"}); msg["error"].(map[string]any)["code"] != float64(-32602) {
		t.Fatalf("the 101st subscription: %v", msg)
	}
	// The session ends: so does its stream.
	platformtest.Do(t, "DELETE", c.url, c.header(), nil)
	done := make(chan bool)
	go func() {
		for next() != nil {
		}
		done <- true
	}()
	testwait.Recv(t, done, "the stream to end with its session")
}

func TestAnswersPostedToAnotherReplicaReachTheStream(t *testing.T) {
	keys := key()
	db := platformtest.PostgresSchemaURL(t)
	a := platformtest.Start(t, db, platformtest.WithStateKeys(keys))
	b := platformtest.Start(t, db, platformtest.WithStateKeys(keys), platformtest.WithConfig(func(c *config.Config) { c.PublicURL = a.URL }))
	h := newHook(t, answersHook)
	a.Tenant(t, "acme")
	h.setSecret(a.Tool(t, "acme", chainTool("order", h.URL)))
	c := newLegacyClient(t, legacyURL(a, "acme"))
	c.initialize("2025-11-25", legacyCaps)
	c.answerTo = legacyURL(b, "acme")
	// Another session (another client of the tenant) posts an answer to
	// the same request first: it is not this call's, and is ignored.
	mallory := newLegacyClient(t, legacyURL(b, "acme"))
	mallory.initialize("2025-11-25", legacyCaps)
	c.onRequest = func(method string, params map[string]any) (any, obj) {
		return answerEverything(method, params)
	}
	first := true
	msg, _ := c.exchange("tools/call", obj{"name": "order", "arguments": obj{"order": "o-1"}}, func(m map[string]any) bool {
		if first && m["method"] == "elicitation/create" {
			first = false
			r := mallory.post(mallory.url, obj{"jsonrpc": "2.0", "id": m["id"], "result": obj{"action": "accept", "content": obj{"name": "Mallory"}}})
			if r.Status != 202 {
				t.Errorf("the other session's answer: %d", r.Status)
			}
		}
		return false
	})
	res, _ := msg["result"].(map[string]any)
	got := toolText(t, res)
	if !strings.Contains(got, "Ada") || strings.Contains(got, "Mallory") || !strings.Contains(got, `"L"`) {
		t.Fatalf("result %q", got)
	}
	if c.answered != 3 || c.answerStatus != 202 {
		t.Fatalf("answers %d, status %d", c.answered, c.answerStatus)
	}
	if !slices.Contains([]int{4}, h.last().Flow.Round) {
		t.Fatalf("final round %d", h.last().Flow.Round)
	}
}

func TestABridgedFlowAndItsSessionOutliveAKeyRotation(t *testing.T) {
	h := newHook(t, answersHook)
	p := setup(t, h, platformtest.WithConfig(func(c *config.Config) {
		c.Keys.Provider, c.Keys.MasterKey = "local", key()
		c.Keys.Refresh, c.Keys.ClockSkew, c.Keys.ScheduleEvery, c.Keys.Staleness = 20*time.Millisecond, time.Millisecond, 20*time.Millisecond, time.Second
	}))
	// A short state TTL, so the old key retires soon after the rotation
	// (and each round waits at most that long for the client).
	p.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", obj{"settings": obj{"stateTtlSeconds": 2}})
	h.setSecret(p.Tool(t, "acme", chainTool("order", h.URL)))
	keyIDs := func() (phase string, active string, ids []string) {
		v := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/keys", nil)
		for _, k := range v["keys"].([]any) {
			k := k.(map[string]any)
			ids = append(ids, k["id"].(string))
			if k["state"] == "active" {
				active = k["id"].(string)
			}
		}
		return v["phase"].(string), active, ids
	}
	c := newLegacyClient(t, legacyURL(p, "acme"))
	c.initialize("2025-11-25", legacyCaps) // sealed under the first key
	_, first, _ := keyIDs()
	round := 0
	c.onRequest = func(method string, params map[string]any) (any, obj) {
		round++
		if round == 1 {
			// Mid-flow, a rotation: the new key is staged, then mints.
			p.MustAdmin(t, 200, "POST", "/api/v1/tenants/acme/keys/rotate", nil)
			testwait.Until(t, "the new key mints", func() bool {
				phase, active, _ := keyIDs()
				return phase == "promoted" && active != first
			})
		}
		return answerEverything(method, params)
	}
	res := c.result("tools/call", obj{"name": "order", "arguments": obj{}})
	if res["isError"] == true || !strings.Contains(toolText(t, res), `"L"`) {
		t.Fatalf("result %v", res)
	}
	_, second, _ := keyIDs()
	_, rounds := flowOf(t, p, h.last().Flow.ID, "completed")
	r2 := rounds[1].(map[string]any)
	if r2["keyIn"] != first || r2["keyOut"] != second {
		t.Fatalf("round 2 opened under %v and sealed under %v; want %s then %s", r2["keyIn"], r2["keyOut"], first, second)
	}

	// The first key retires: the session sealed under it is verified
	// against its record, and serves a whole bridged flow again.
	testwait.Until(t, "the old key is retired", func() bool {
		phase, _, ids := keyIDs()
		return phase == "steady" && !slices.Contains(ids, first)
	})
	c.onRequest = answerEverything
	res = c.result("tools/call", obj{"name": "order", "arguments": obj{}})
	if res["isError"] == true {
		t.Fatalf("after the retirement: %v", res)
	}
	// …but only for its holder: its nonce with another session's token,
	// or its token altered, is refused.
	other := newLegacyClient(t, c.url)
	other.initialize("2025-11-25", obj{})
	nonce, _, _ := strings.Cut(c.session, ".")
	_, otherToken, _ := strings.Cut(other.session, ".")
	for name, id := range map[string]string{"spliced": nonce + "." + otherToken, "altered": c.session[:len(c.session)-2] + "AA"} {
		d := c.clone()
		d.session = id
		if _, status := d.call("tools/list", obj{}); status != 404 {
			t.Errorf("%s id after the retirement: %d", name, status)
		}
	}
	// Ended, it stays ended without its key.
	platformtest.Do(t, "DELETE", c.url, c.header(), nil)
	if _, status := c.call("tools/list", obj{}); status != 404 {
		t.Fatalf("a deleted session with a retired key: %d", status)
	}
}

func TestAnAdminCancellingABridgedFlowStopsItAtOnce(t *testing.T) {
	h := newHook(t, answersHook)
	p := setup(t, h)
	h.setSecret(p.Tool(t, "acme", chainTool("order", h.URL)))
	c := newLegacyClient(t, legacyURL(p, "acme"))
	c.initialize("2025-11-25", legacyCaps)
	var flowID string
	msg, _ := c.exchange("tools/call", obj{"name": "order", "arguments": obj{}}, func(m map[string]any) bool {
		if m["method"] == "elicitation/create" {
			// The question is out; the user has not answered; an admin
			// cancels the flow.
			testwait.Until(t, "the flow is recorded", func() bool {
				items := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/flows", nil)["items"].([]any)
				if len(items) == 1 {
					flowID = items[0].(map[string]any)["id"].(string)
				}
				return flowID != ""
			})
			p.MustAdmin(t, 200, "POST", "/api/v1/tenants/acme/flows/"+flowID+"/cancel", obj{"reason": "wrong order"})
		}
		return false
	})
	res, _ := msg["result"].(map[string]any)
	if res["isError"] != true || !strings.Contains(toolText(t, res), "cancelled by an administrator") {
		t.Fatalf("answer %v", msg)
	}
	if len(c.messages("notifications/cancelled")) != 1 {
		t.Fatalf("the pending request was not cancelled: %v", c.seen)
	}
	if flow, _ := flowOf(t, p, flowID, "cancelled"); flow["cancelReason"] != "wrong order" {
		t.Fatalf("flow %v", flow)
	}
	if h.last() != nil {
		t.Fatal("the webhook was called")
	}
}
