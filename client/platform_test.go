package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/opsmcp/platform/client"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/webhook"
)

// hook is a tenant webhook: it verifies each delivery's signature and
// answers with answer.
type hook struct {
	*platformtest.Backend
	mu       sync.Mutex
	answer   func(req *webhook.Request) any
	requests []*webhook.Request
}

func newHook(t *testing.T, answer func(req *webhook.Request) any) *hook {
	h := &hook{answer: answer}
	h.Backend = platformtest.NewBackend(t, func(w http.ResponseWriter, _ *http.Request, req *webhook.Request) {
		h.mu.Lock()
		h.requests = append(h.requests, req)
		h.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(h.answer(req))
	})
	return h
}

func (h *hook) setSecret(s string) { h.SetSecrets(s) }

func (h *hook) deliveries() []*webhook.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*webhook.Request(nil), h.requests...)
}

func complete(result any) any {
	return obj{"type": "complete", "result": result}
}

func text(s string) any { return obj{"content": []obj{{"type": "text", "text": s}}} }

func form(name, message, field string) obj {
	return obj{"name": name, "kind": "form", "message": message,
		"requestedSchema": obj{"type": "object", "properties": obj{field: obj{"type": "string"}}, "required": []string{field}}}
}

// platform starts a platform with tenant acme and returns its endpoint.
func platform(t *testing.T) (*platformtest.Platform, string) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.Tenant(t, "acme")
	return p, p.URL + "/t/acme/mcp"
}

// answerBy answers form elicitations from a table keyed by message.
func answerBy(t *testing.T, answers map[string]obj) client.ElicitHandler {
	return func(_ context.Context, req *client.ElicitRequest) (*client.ElicitResult, error) {
		a, ok := answers[req.Message]
		if !ok {
			t.Errorf("unexpected question %q (key %s)", req.Message, req.Key)
			return &client.ElicitResult{Action: "cancel"}, nil
		}
		return &client.ElicitResult{Action: "accept", Content: a}, nil
	}
}

// roundLog records what an observer sees.
type roundLog struct {
	mu     sync.Mutex
	events []string
}

func (l *roundLog) observe(r mrtr.Round) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch r.Phase {
	case mrtr.PhaseAsked:
		l.events = append(l.events, fmt.Sprintf("%d:%s", r.Number, strings.Join(r.Keys, "+")))
	case mrtr.PhaseComplete:
		l.events = append(l.events, fmt.Sprintf("complete after %d", r.Number))
	case mrtr.PhaseFailed:
		l.events = append(l.events, fmt.Sprintf("failed: %v", r.Err))
	}
}

func (l *roundLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.events, " ")
}

func TestTheClientCompletesAThreeRoundDeclaredFlowOnThePlatform(t *testing.T) {
	p, url := platform(t)
	h := newHook(t, func(req *webhook.Request) any {
		b, _ := json.Marshal(req.Answers)
		return complete(text(string(b)))
	})
	colour := form("colour", "Colour for {{args.order}}?", "colour")
	colour["when"] = obj{"input": "who"}
	size := form("size", "Size of the red one?", "size")
	size["when"] = obj{"input": "colour", "field": "colour", "equals": "red"}
	h.setSecret(p.Tool(t, "acme", obj{"name": "order", "description": "three questions in turn",
		"inputSchema": obj{"type": "object", "properties": obj{
			"order":  obj{"type": "string", "x-mcp-header": "Order"},
			"urgent": obj{"type": "boolean", "x-mcp-header": "Urgent"}}},
		"handler": obj{"url": h.URL},
		"inputs":  []obj{form("who", "Your name?", "name"), colour, size}}))

	var log roundLog
	c := newClient(t, url, client.Options{
		ElicitForm: answerBy(t, map[string]obj{
			"Your name?":           {"name": "Ada"},
			"Colour for ö-1 <x>?":  {"colour": "red"},
			"Size of the red one?": {"size": "L"},
		}),
		Observer: log.observe,
	})
	res, err := c.CallTool(context.Background(), "order", obj{"order": "ö-1 <x>", "urgent": true})
	if err != nil {
		t.Fatal(err)
	}
	got := res.Content[0].Text
	for _, want := range []string{`"who"`, `"Ada"`, `"red"`, `"L"`} {
		if !strings.Contains(got, want) {
			t.Fatalf("the webhook saw %s, missing %s", got, want)
		}
	}
	if log.String() != "1:who 2:colour 3:size complete after 3" {
		t.Fatalf("rounds %s", log.String())
	}
	var args obj
	if d := h.deliveries(); len(d) != 1 || d[0].Flow.Round != 4 || json.Unmarshal(d[0].Arguments, &args) != nil || args["order"] != "ö-1 <x>" || args["urgent"] != true {
		t.Fatalf("deliveries %d: round %d, arguments %s", len(d), d[0].Flow.Round, d[0].Arguments)
	}
}

// stepHook is a webhook that asks across its own rounds: a confirmation,
// then the client's model, then completes with both and the declared
// answers.
func stepHook(req *webhook.Request) any {
	switch req.State {
	case "":
		return obj{"type": "input_required", "state": "step-1", "inputRequests": obj{
			"confirm": obj{"method": "elicitation/create", "params": obj{"message": "Deploy to prod?",
				"requestedSchema": obj{"type": "object", "properties": obj{"ok": obj{"type": "boolean"}}, "required": []string{"ok"}}}}}}
	case "step-1":
		var a client.ElicitResult
		_ = json.Unmarshal(req.InputResponses["confirm"], &a)
		if a.Action != "accept" || a.Content["ok"] != true {
			return complete(text("not confirmed"))
		}
		return obj{"type": "input_required", "state": "step-2", "inputRequests": obj{
			"summary": obj{"method": "sampling/createMessage", "params": obj{"maxTokens": 20,
				"messages": []obj{{"role": "user", "content": obj{"type": "text", "text": "Summarise the deploy"}}}}}}}
	case "step-2":
		var s client.SamplingResult
		_ = json.Unmarshal(req.InputResponses["summary"], &s)
		return complete(text(fmt.Sprintf("deployed by %s with roots %s: %s", req.Answers["who"].Content, req.Answers["where"].Content, s.Content.Text)))
	}
	return complete(text("lost"))
}

func TestTheClientCompletesAWebhookDrivenFlowOnThePlatform(t *testing.T) {
	p, url := platform(t)
	h := newHook(t, stepHook)
	h.setSecret(p.Tool(t, "acme", obj{"name": "deploy", "description": "asks, then its webhook asks twice",
		"inputSchema": obj{"type": "object"}, "handler": obj{"url": h.URL},
		"inputs": []obj{form("who", "Your name?", "name"), {"name": "where", "kind": "roots"}}}))
	var log roundLog
	var sampled []string
	c := newClient(t, url, client.Options{
		ElicitForm: answerBy(t, map[string]obj{"Your name?": {"name": "Ada"}, "Deploy to prod?": {"ok": true}}),
		Sample: func(_ context.Context, req *client.SamplingRequest) (*client.SamplingResult, error) {
			sampled = append(sampled, req.Key+": "+req.Messages[0].Content[0].Text)
			return &client.SamplingResult{Content: client.TextContent("all green"), Model: "test-model"}, nil
		},
		Roots:    client.StaticRoots(client.Root{URI: "file:///srv/app", Name: "app"}),
		Observer: log.observe,
	})
	res, err := c.CallTool(context.Background(), "deploy", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].Text; !strings.Contains(got, `deployed by {"name":"Ada"}`) || !strings.Contains(got, "file:///srv/app") || !strings.HasSuffix(got, ": all green") {
		t.Fatalf("result %q", got)
	}
	// Round 1 asks the declared inputs at once; the webhook's questions
	// come in its own namespace.
	if log.String() != "1:where+who 2:wh.confirm 3:wh.summary complete after 3" {
		t.Fatalf("rounds %s", log.String())
	}
	if len(sampled) != 1 || sampled[0] != "wh.summary: Summarise the deploy" {
		t.Fatalf("sampled %v", sampled)
	}
	if d := h.deliveries(); len(d) != 3 || d[2].State != "step-2" {
		t.Fatalf("%d deliveries", len(d))
	}
}

func TestAFlowSavedInManualModeResumesFromAnotherClientOnThePlatform(t *testing.T) {
	p, url := platform(t)
	h := newHook(t, func(req *webhook.Request) any { return complete(text("hello " + string(req.Answers["who"].Content))) })
	h.setSecret(p.Tool(t, "acme", obj{"name": "greet", "description": "x", "inputSchema": obj{"type": "object"},
		"handler": obj{"url": h.URL}, "inputs": []obj{form("who", "Your name?", "name")}}))
	first := newClient(t, url, client.Options{ElicitForm: answerBy(t, nil)})
	res, err := first.CallTool(context.Background(), "greet", obj{}, client.Manual())
	if err != nil || res.InputRequired == nil {
		t.Fatalf("manual: %v %v", res, err)
	}
	saved, _ := json.Marshal(res.InputRequired.Seed(map[string]json.RawMessage{"who": json.RawMessage(`{"action":"accept","content":{"name":"Grace"}}`)}))

	var seed mrtr.Seed
	_ = json.Unmarshal(saved, &seed)
	second := newClient(t, url, client.Options{ElicitForm: answerBy(t, nil)})
	res, err = second.CallTool(context.Background(), "greet", obj{}, client.WithSeed(seed))
	if err != nil || res.Content[0].Text != `hello {"name":"Grace"}` {
		t.Fatalf("resumed: %v %v", res, err)
	}
}

func TestPromptsAndTemplatedResourcesCompleteTheirFlowsOnThePlatform(t *testing.T) {
	p, url := platform(t)
	h := newHook(t, func(req *webhook.Request) any {
		ctx := string(req.Answers["ctx"].Content)
		if req.Kind == webhook.KindPrompt {
			return complete(obj{"messages": []obj{{"role": "user", "content": obj{"type": "text", "text": "brief: " + ctx}}}})
		}
		return complete(obj{"contents": []obj{{"uri": req.URI, "text": "doc: " + ctx}}})
	})
	in := []obj{form("ctx", "Context?", "c")}
	h.setSecret(p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/prompts", obj{"name": "brief", "description": "x", "handler": obj{"url": h.URL}, "inputs": in})["webhookSecret"].(string))
	c := newClient(t, url, client.Options{ElicitForm: answerBy(t, map[string]obj{"Context?": {"c": "sunny"}})})
	pr, err := c.GetPrompt(context.Background(), "brief", nil)
	if err != nil || pr.Messages[0].Content.Text != `brief: {"c":"sunny"}` {
		t.Fatalf("prompt %v %v", pr, err)
	}
	h.setSecret(p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/resource-templates", obj{"name": "doc", "uriTemplate": "docs://{id}", "handler": obj{"url": h.URL}, "inputs": in})["webhookSecret"].(string))
	rr, err := c.ReadResource(context.Background(), "docs://42")
	if err != nil || rr.Contents[0].Text != `doc: {"c":"sunny"}` || rr.Contents[0].URI != "docs://42" {
		t.Fatalf("resource %v %v", rr, err)
	}
	tmpls, err := c.AllResourceTemplates(context.Background())
	if err != nil || len(tmpls) != 1 || tmpls[0].URITemplate != "docs://{id}" {
		t.Fatalf("templates %v %v", tmpls, err)
	}
	prompts, err := c.AllPrompts(context.Background())
	if err != nil || len(prompts) != 1 {
		t.Fatalf("prompts %v %v", prompts, err)
	}
}

func TestTheClientReportsAMissingCapabilityAndStreamsProgressFromThePlatform(t *testing.T) {
	p, url := platform(t)
	h := newHook(t, func(req *webhook.Request) any { return complete(text("sampled")) })
	h.setSecret(p.Tool(t, "acme", obj{"name": "needs_model", "description": "x", "inputSchema": obj{"type": "object"}, "handler": obj{"url": h.URL},
		"inputs": []obj{{"name": "m", "kind": "sampling", "sampling": obj{"maxTokens": 5, "messages": []obj{{"role": "user", "content": obj{"type": "text", "text": "hi"}}}}}}}))
	c := newClient(t, url, client.Options{ElicitForm: answerBy(t, nil)})
	_, err := c.CallTool(context.Background(), "needs_model", nil)
	var re *client.RPCError
	if !errors.As(err, &re) || re.Code != mcp.CodeMissingRequiredCapability || strings.Join(re.RequiredCapabilities(), ",") != "sampling" {
		t.Fatalf("err %v", err)
	}

	stream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, line := range []string{
			`{"type":"progress","progress":1,"total":2,"message":"half"}`,
			`{"type":"log","level":"warning","data":"careful"}`,
			`{"type":"progress","progress":2,"total":2}`,
			`{"type":"response","response":{"type":"complete","result":{"content":[{"type":"text","text":"streamed"}]}}}`,
		} {
			io.WriteString(w, line+"\n")
		}
	}))
	defer stream.Close()
	p.Tool(t, "acme", obj{"name": "slow", "description": "x", "inputSchema": obj{"type": "object"}, "handler": obj{"url": stream.URL}})
	var progress []string
	var logs []string
	c = newClient(t, url, client.Options{
		OnProgress: func(pr client.Progress) {
			progress = append(progress, fmt.Sprintf("%v/%v %s", pr.Progress, *pr.Total, pr.Message))
		},
		LogLevel: "info",
		OnLog:    func(l client.LogMessage) { logs = append(logs, l.Level+" "+string(l.Data)) },
	})
	res, err := c.CallTool(context.Background(), "slow", nil)
	if err != nil || res.Content[0].Text != "streamed" {
		t.Fatalf("res %v %v", res, err)
	}
	if strings.Join(progress, ";") != "1/2 half;2/2 " || strings.Join(logs, ";") != `warning "careful"` {
		t.Fatalf("progress %q logs %q", progress, logs)
	}
}
