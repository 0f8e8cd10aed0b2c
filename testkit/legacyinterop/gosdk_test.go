//lint:file-ignore SA1019 sampling and logging are deprecated in 2026-07-28; a 2025-11-25 client uses them, which is what this test is about.
package legacyinterop

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
)

// goClient is the official Go SDK's session-based client (an initialize
// at 2025-11-25, then requests on the session), answering every request
// the server sends as a user and a model would, and noting what it was
// asked.
type goClient struct {
	mu        sync.Mutex
	asked     []string
	urlIDs    []string
	completed []string
	sampled   int
	// onAsk, when set, runs before an elicitation is answered.
	onAsk func(mode string)
}

func (g *goClient) client() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "go-sdk-legacy-interop", Version: "1.0.0"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{
			Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
			Sampling:    &mcp.SamplingCapabilities{},
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			p := req.Params
			mode := "form"
			if p.Mode == "url" {
				mode = "url"
			}
			g.mu.Lock()
			g.asked = append(g.asked, mode)
			if mode == "url" {
				g.urlIDs = append(g.urlIDs, p.ElicitationID)
			}
			onAsk := g.onAsk
			g.mu.Unlock()
			if onAsk != nil {
				onAsk(mode)
			}
			if mode == "url" {
				return &mcp.ElicitResult{Action: "accept"}, nil
			}
			schema, _ := p.RequestedSchema.(map[string]any)
			props, _ := schema["properties"].(map[string]any)
			switch {
			case props["name"] != nil:
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
			case props["ok"] != nil:
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
			}
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			g.mu.Lock()
			g.sampled++
			g.mu.Unlock()
			return &mcp.CreateMessageResult{Role: "assistant", Model: "interop-model", StopReason: "endTurn",
				Content: &mcp.TextContent{Text: "all good"}}, nil
		},
		ElicitationCompleteHandler: func(_ context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			g.mu.Lock()
			g.completed = append(g.completed, req.Params.ElicitationID)
			g.mu.Unlock()
		},
	})
}

// connect opens a 2025-11-25 session on endpoint.
func (g *goClient) connect(t *testing.T, endpoint string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := g.client().Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("the Go SDK client cannot connect: %v", err)
	}
	return cs
}

func onboard(ctx context.Context, cs *mcp.ClientSession) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "onboard", Arguments: map[string]any{"team": "platform"}})
	if err != nil {
		return "", err
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	if res.IsError {
		return "", &toolError{strings.Join(text, " ")}
	}
	return strings.Join(text, " "), nil
}

type toolError struct{ msg string }

func (e *toolError) Error() string { return "tool error: " + e.msg }

func TestGoSDKSessionClientCompletesABridgedFlow(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	b := newBackend(t)
	register(t, p.URL, platformtest.AdminToken, b, nil)
	g := &goClient{}
	cs := g.connect(t, p.URL+"/t/acme/mcp")
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("negotiated %s", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	text, err := onboard(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	wantOnboarded(t, text)
	g.mu.Lock()
	asked, urlIDs, sampled := g.asked, g.urlIDs, g.sampled
	g.mu.Unlock()
	if strings.Join(asked, ",") != "form,url,form" || sampled != 1 {
		t.Fatalf("asked %v, sampled %d", asked, sampled)
	}
	testwait.Until(t, "the URL elicitation is completed", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(urlIDs) == 1 && slices.Equal(g.completed, urlIDs)
	})
	// Legacy methods on the same session.
	if err := cs.Ping(ctx, nil); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatalf("logging/setLevel: %v", err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "onboard" {
		t.Fatalf("tools/list: %v %v", tools, err)
	}
	if err := cs.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	flows := finishedFlows(t, p)
	if len(flows) != 1 || flows[0]["state"] != "completed" || flows[0]["era"] != "2025-11-25" || flows[0]["rounds"] != float64(5) {
		t.Fatalf("flows %v", flows)
	}
	if live := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/sessions", nil)["items"].([]any); len(live) != 0 {
		t.Fatalf("the session the client closed is live: %v", live)
	}
}
