// Command legacy-client calls a tool as a 2025-11-25 client does, with
// the official MCP Go SDK: a session from initialize, then the call, and
// the server's questions as elicitation/create requests on the call's
// stream, answered in code. The platform bridges its multi-round flow
// onto the session: the provision tool of `platform dev`'s demo tenant
// asks for a region, then for a confirmation.
//
//	PLATFORM_TOKEN=… go run ./examples/legacy-client http://127.0.0.1:8080/t/demo/mcp
package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: legacy-client ENDPOINT_URL")
	}
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "legacy-client-example", Version: "1"}, &mcp.ClientOptions{
		// Declaring form elicitation is what lets the server ask. A
		// question arrives as a form: answer by its fields.
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			fmt.Println("asked:", req.Params.Message)
			schema, _ := req.Params.RequestedSchema.(map[string]any)
			fields, _ := schema["properties"].(map[string]any)
			switch {
			case fields["region"] != nil:
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"region": "eu-west-1"}}, nil
			case fields["confirm"] != nil:
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
			}
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	// The session's requests carry the bearer token; 2025-11-25 is the
	// era this client speaks.
	httpClient := &http.Client{Transport: bearer{token: os.Getenv("PLATFORM_TOKEN"), base: http.DefaultTransport}}
	session, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: os.Args[1], HTTPClient: httpClient},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close()
	fmt.Println("session:", session.InitializeResult().ProtocolVersion)
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "provision", Arguments: map[string]any{"service": "checkout"}})
	if err != nil {
		log.Fatal(err)
	}
	for _, block := range res.Content {
		if t, ok := block.(*mcp.TextContent); ok {
			fmt.Println(t.Text)
		}
	}
}

// bearer adds the token to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}
