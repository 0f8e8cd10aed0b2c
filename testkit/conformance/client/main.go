// Command client is the MCP client under test in the conformance suite's
// client scenarios: the suite runs it with the mock server's URL as the
// last argument and the scenario in MCP_CONFORMANCE_SCENARIO, and checks
// what it sends. It is a thin script over package client: every header,
// _meta member, retry and encoding comes from the library.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/opsmcp/platform/client"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: client URL (with MCP_CONFORMANCE_SCENARIO set)")
		os.Exit(2)
	}
	url := os.Args[len(os.Args)-1]
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	if err := run(ctx, url, scenario, os.Getenv("MCP_CONFORMANCE_CONTEXT")); err != nil {
		fmt.Fprintf(os.Stderr, "conformance client (%s): %v\n", scenario, err)
		os.Exit(1)
	}
}

// answerForm accepts a form with a value for every property, typed from
// the requested schema (true for booleans, as the MRTR mock expects).
func answerForm(_ context.Context, req *client.ElicitRequest) (*client.ElicitResult, error) {
	var s struct {
		Properties map[string]struct {
			Type    string   `json:"type"`
			Enum    []string `json:"enum"`
			Default any      `json:"default"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(req.RequestedSchema, &s)
	content := map[string]any{}
	for name, p := range s.Properties {
		switch {
		case p.Default != nil:
			content[name] = p.Default
		case len(p.Enum) > 0:
			content[name] = p.Enum[0]
		case p.Type == "boolean":
			content[name] = true
		case p.Type == "integer" || p.Type == "number":
			content[name] = 1
		default:
			content[name] = "conformance"
		}
	}
	return &client.ElicitResult{Action: "accept", Content: content}, nil
}

func newClient(url string) (*client.Client, error) {
	return client.New(url, client.Options{
		ClientInfo: client.Implementation{Name: "opsmcp-conformance-client", Version: "1.0.0"},
		ElicitForm: answerForm,
		ElicitURL: func(context.Context, *client.ElicitRequest) (*client.ElicitResult, error) {
			return &client.ElicitResult{Action: "accept"}, nil
		},
		Sample: func(_ context.Context, req *client.SamplingRequest) (*client.SamplingResult, error) {
			return &client.SamplingResult{Content: client.TextContent("ok"), Model: "conformance"}, nil
		},
		Roots: client.StaticRoots(),
	})
}

func run(ctx context.Context, url, scenario, contextJSON string) error {
	c, err := newClient(url)
	if err != nil {
		return err
	}
	if _, err := c.Discover(ctx); err != nil {
		return fmt.Errorf("discover: %w", err)
	}
	switch scenario {
	case "tools_call":
		tools, err := c.AllTools(ctx)
		if err != nil {
			return err
		}
		if len(tools) == 0 {
			return fmt.Errorf("no tools listed")
		}
		_, err = c.CallTool(ctx, tools[0].Name, map[string]any{"a": 2, "b": 3})
		return err

	case "request-metadata", "json-schema-ref-no-deref":
		// Discovery (re-probed after the mock's -32022) and a listing;
		// the listed schemas' $refs are never fetched.
		_, err := c.AllTools(ctx)
		return err

	case "sep-2322-client-request-state":
		if _, err := c.AllTools(ctx); err != nil {
			return err
		}
		// The first round in manual mode, an unrelated call in between,
		// then the flow resumed from its seed: each call carries only
		// its own inputResponses and requestState.
		first, err := c.CallTool(ctx, "test_mrtr_echo_state", map[string]any{}, client.Manual())
		if err != nil {
			return err
		}
		if first.InputRequired == nil {
			return fmt.Errorf("test_mrtr_echo_state did not ask for input")
		}
		if _, err := c.CallTool(ctx, "test_mrtr_unrelated", map[string]any{}); err != nil {
			return err
		}
		answers := map[string]json.RawMessage{}
		for key, req := range first.InputRequired.InputRequests {
			var p struct {
				RequestedSchema json.RawMessage `json:"requestedSchema"`
			}
			_ = json.Unmarshal(req.Params, &p)
			res, _ := answerForm(ctx, &client.ElicitRequest{Key: key, RequestedSchema: p.RequestedSchema})
			answers[key], _ = json.Marshal(res)
		}
		if _, err := c.CallTool(ctx, "test_mrtr_echo_state", map[string]any{}, client.WithSeed(first.InputRequired.Seed(answers))); err != nil {
			return err
		}
		if _, err := c.CallTool(ctx, "test_mrtr_no_state", map[string]any{}); err != nil {
			return err
		}
		_, err = c.CallTool(ctx, "test_mrtr_no_result_type", map[string]any{})
		return err

	case "http-standard-headers":
		tools, err := c.AllTools(ctx)
		if err != nil {
			return err
		}
		for _, t := range tools {
			if _, err := c.CallTool(ctx, t.Name, map[string]any{}); err != nil {
				return err
			}
		}
		resources, err := c.AllResources(ctx)
		if err != nil {
			return err
		}
		for _, r := range resources {
			if _, err := c.ReadResource(ctx, r.URI); err != nil {
				return err
			}
		}
		prompts, err := c.AllPrompts(ctx)
		if err != nil {
			return err
		}
		for _, p := range prompts {
			if _, err := c.GetPrompt(ctx, p.Name, nil); err != nil {
				return err
			}
		}
		return nil

	case "http-custom-headers":
		var sc struct {
			ToolCalls []struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"toolCalls"`
		}
		if err := json.Unmarshal([]byte(contextJSON), &sc); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
		if _, err := c.AllTools(ctx); err != nil {
			return err
		}
		for _, tc := range sc.ToolCalls {
			if _, err := c.CallTool(ctx, tc.Name, tc.Arguments); err != nil {
				return err
			}
		}
		return nil

	case "http-invalid-tool-headers":
		// Tools with invalid x-mcp-header annotations are dropped by the
		// listing; every tool left is called.
		res, err := c.ListTools(ctx, "")
		if err != nil {
			return err
		}
		for _, d := range res.Dropped {
			fmt.Fprintf(os.Stderr, "dropped %s: %s\n", d.Name, d.Reason)
		}
		for _, t := range res.Tools {
			if _, err := c.CallTool(ctx, t.Name, exampleArguments(t.InputSchema)); err != nil {
				return err
			}
		}
		return nil
	}
	// Any other scenario: discover and list.
	_, err = c.AllTools(ctx)
	return err
}

// exampleArguments fills a schema's required properties with plausible
// values.
func exampleArguments(schema json.RawMessage) map[string]any {
	var s struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(schema, &s)
	args := map[string]any{}
	for _, name := range s.Required {
		switch s.Properties[name].Type {
		case "integer", "number":
			args[name] = 1
		case "boolean":
			args[name] = true
		default:
			args[name] = "us-west1"
		}
	}
	return args
}
