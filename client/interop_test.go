//lint:file-ignore SA1019 sampling and roots are deprecated in 2026-07-28 but still part of it; the interop tests exercise them on purpose.

package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsmcp/platform/client"
	"github.com/opsmcp/platform/webhook"
)

// sdkServer is a server built with the official Go SDK, speaking
// 2026-07-28 through its stateless Streamable HTTP handler. Its tool
// "book" asks across four legs, the way the SDK lets a handler do it: by
// returning a CallToolResult with InputRequests and RequestState, and
// reading InputResponses and RequestState on the retry.
//
//	leg 1: who (form) and where (roots)         state "r1"
//	leg 2: nothing, come back later (load shed)  state "r2|<name>"
//	leg 3: a sampling request                    state "r3|<name>|<roots>"
//	leg 4: the booking
func sdkServer(t *testing.T) (*httptest.Server, *sdkLog) {
	log := &sdkLog{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "sdk-server", Version: "1.8.0"}, nil)
	type bookIn struct {
		City   string `json:"city"`
		Nights int    `json:"nights"`
	}
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"city":   map[string]any{"type": "string", "x-mcp-header": "City"},
		"nights": map[string]any{"type": "integer", "x-mcp-header": "Nights"}}, "required": []string{"city"}}
	mcp.AddTool(srv, &mcp.Tool{Name: "book", Description: "Books a trip after a few questions", InputSchema: schema},
		func(ctx context.Context, req *mcp.CallToolRequest, in bookIn) (*mcp.CallToolResult, any, error) {
			log.add(req.Params.RequestState)
			parts := strings.Split(req.Params.RequestState, "|")
			switch parts[0] {
			case "":
				return &mcp.CallToolResult{RequestState: "r1", InputRequests: mcp.InputRequestMap{
					"who": &mcp.ElicitParams{Message: "Who is travelling to " + in.City + "?", RequestedSchema: map[string]any{
						"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []string{"name"}}},
					"where": &mcp.ListRootsParams{},
				}}, nil, nil
			case "r1":
				who, _ := req.Params.InputResponses["who"].(*mcp.ElicitResult)
				if who == nil || who.Action != "accept" {
					return nil, nil, errors.New("no traveller")
				}
				return &mcp.CallToolResult{RequestState: "r2|" + fmt.Sprint(who.Content["name"]), InputRequests: mcp.InputRequestMap{}}, nil, nil
			case "r2":
				roots, _ := req.Params.InputResponses["where"].(*mcp.ListRootsResult)
				_ = roots // roots were answered in round 1; round 2 carried none
				return &mcp.CallToolResult{RequestState: "r3|" + parts[1], InputRequests: mcp.InputRequestMap{
					"pitch": &mcp.CreateMessageParams{MaxTokens: 20, Messages: []*mcp.SamplingMessage{
						{Role: "user", Content: &mcp.TextContent{Text: "Pitch " + in.City + " in three words"}}}},
				}}, nil, nil
			case "r3":
				res, _ := req.Params.InputResponses["pitch"].(*mcp.CreateMessageWithToolsResult)
				if res == nil || len(res.Content) == 0 {
					return nil, nil, errors.New("no pitch")
				}
				pitch := res.Content[0].(*mcp.TextContent).Text
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
					Text: fmt.Sprintf("booked %d nights in %s for %s: %s", in.Nights, in.City, parts[1], pitch)}}}, nil, nil
			}
			return nil, nil, errors.New("unknown state")
		})
	srv.AddPrompt(&mcp.Prompt{Name: "brief", Description: "Asks for a topic first"}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		topic, _ := req.Params.InputResponses["topic"].(*mcp.ElicitResult)
		if topic == nil || req.Params.RequestState != "p1" {
			return &mcp.GetPromptResult{RequestState: "p1", InputRequests: mcp.InputRequestMap{"topic": &mcp.ElicitParams{Message: "Topic?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"topic": map[string]any{"type": "string"}}}}}}, nil
		}
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Brief on " + fmt.Sprint(topic.Content["topic"])}}}}, nil
	})
	srv.AddResource(&mcp.Resource{URI: "vault://secret", Name: "secret", MIMEType: "text/plain"}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		if req.Params.RequestState != "unlocked" {
			return &mcp.ReadResourceResult{RequestState: "unlocked", InputRequests: mcp.InputRequestMap{"login": &mcp.ElicitParams{
				Mode: "url", Message: "Log in to read the secret", URL: "https://idp.example/login"}}}, nil
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "42"}}}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts, log
}

type sdkLog struct {
	mu     sync.Mutex
	states []string
}

func (l *sdkLog) add(s string) {
	l.mu.Lock()
	l.states = append(l.states, s)
	l.mu.Unlock()
}

func TestTheClientCompletesMultiRoundFlowsAgainstAGoSDKServer(t *testing.T) {
	ts, log := sdkServer(t)
	var rounds roundLog
	c := newClient(t, ts.URL, client.Options{
		ElicitForm: func(_ context.Context, req *client.ElicitRequest) (*client.ElicitResult, error) {
			switch req.Message {
			case "Who is travelling to Zürich?":
				return &client.ElicitResult{Action: "accept", Content: obj{"name": "Ada"}}, nil
			case "Topic?":
				return &client.ElicitResult{Action: "accept", Content: obj{"topic": "MRTR"}}, nil
			}
			return nil, fmt.Errorf("unexpected question %q", req.Message)
		},
		ElicitURL: func(_ context.Context, req *client.ElicitRequest) (*client.ElicitResult, error) {
			return &client.ElicitResult{Action: "accept"}, nil
		},
		Sample: func(_ context.Context, req *client.SamplingRequest) (*client.SamplingResult, error) {
			return &client.SamplingResult{Content: client.TextContent("lakes, trains, chocolate"), Model: "test"}, nil
		},
		Roots:    client.StaticRoots(client.Root{URI: "file:///home/ada/trips", Name: "trips"}),
		Observer: rounds.observe,
	})
	ctx := context.Background()
	d, err := c.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.ServerInfo.Name != "sdk-server" {
		t.Fatalf("discover %s", d.Raw)
	}
	tools, err := c.AllTools(ctx)
	if err != nil || len(tools) != 1 || len(tools[0].HeaderParams) != 2 {
		t.Fatalf("tools %+v %v", tools, err)
	}
	// The SDK server checks the Mcp-Param-City (base64: ü) and
	// Mcp-Param-Nights headers against the arguments on every leg.
	res, err := c.CallTool(ctx, "book", obj{"city": "Zürich", "nights": 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].Text; got != "booked 3 nights in Zürich for Ada: lakes, trains, chocolate" {
		t.Fatalf("result %q", got)
	}
	if rounds.String() != "1:where+who 2: 3:pitch complete after 3" {
		t.Fatalf("rounds %s", rounds.String())
	}
	if strings.Join(log.states, ",") != ",r1,r2|Ada,r3|Ada" {
		t.Fatalf("server saw states %q", log.states)
	}

	pr, err := c.GetPrompt(ctx, "brief", nil)
	if err != nil || len(pr.Messages) != 1 || pr.Messages[0].Content.Text != "Brief on MRTR" {
		t.Fatalf("prompt %v %v", pr, err)
	}
	rr, err := c.ReadResource(ctx, "vault://secret")
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "42" {
		t.Fatalf("resource %v %v", rr, err)
	}
}

func TestTheGoSDKClientCompletesThePlatformsFlows(t *testing.T) {
	p, url := platform(t)
	chain := newHook(t, func(req *webhook.Request) any {
		b, _ := json.Marshal(req.Answers)
		return complete(text(string(b)))
	})
	colour := form("colour", "Colour for {{args.order}}?", "colour")
	colour["when"] = obj{"input": "who"}
	size := form("size", "Size?", "size")
	size["when"] = obj{"input": "colour"}
	chain.setSecret(p.Tool(t, "acme", obj{"name": "order", "description": "three questions in turn",
		"inputSchema": obj{"type": "object", "properties": obj{"order": obj{"type": "string", "x-mcp-header": "Order"}}},
		"handler":     obj{"url": chain.URL},
		"inputs":      []obj{form("who", "Your name?", "name"), colour, size}}))
	steps := newHook(t, stepHook)
	steps.setSecret(p.Tool(t, "acme", obj{"name": "deploy", "description": "asks, then its webhook asks twice",
		"inputSchema": obj{"type": "object"}, "handler": obj{"url": steps.URL},
		"inputs": []obj{form("who", "Your name?", "name"), {"name": "where", "kind": "roots"}}}))

	answers := map[string]map[string]any{
		"Your name?": {"name": "Ada"}, "Colour for o-7?": {"colour": "red"}, "Size?": {"size": "L"}, "Deploy to prod?": {"ok": true},
	}
	var mu sync.Mutex
	var asked []string
	sdk := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-client", Version: "1.8.0"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params.Message)
			mu.Unlock()
			a, ok := answers[req.Params.Message]
			if !ok {
				return &mcp.ElicitResult{Action: "cancel"}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: a}, nil
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "sdk-model", Content: &mcp.TextContent{Text: "all green"}}, nil
		},
	})
	sdk.AddRoots(&mcp.Root{URI: "file:///srv/app", Name: "app"})
	ctx := context.Background()
	session, err := sdk.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	if _, err := session.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "order", Arguments: map[string]any{"order": "o-7"}})
	if err != nil {
		t.Fatal(err)
	}
	got := res.Content[0].(*mcp.TextContent).Text
	for _, want := range []string{`"Ada"`, `"red"`, `"L"`} {
		if !strings.Contains(got, want) {
			t.Fatalf("chain result %s lacks %s", got, want)
		}
	}
	if strings.Join(asked, "|") != "Your name?|Colour for o-7?|Size?" {
		t.Fatalf("asked %q", asked)
	}
	res, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(got, `deployed by {"name":"Ada"}`) || !strings.Contains(got, "file:///srv/app") || !strings.HasSuffix(got, "all green") {
		t.Fatalf("deploy result %q", got)
	}
}
