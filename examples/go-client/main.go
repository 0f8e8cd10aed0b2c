// Command go-client calls a tool with package client, the platform's Go
// MCP client (protocol 2026-07-28), answering the server's questions in
// code: the provision tool of `platform dev`'s demo tenant asks for a
// region, then for a confirmation.
//
//	PLATFORM_TOKEN=… go run ./examples/go-client http://127.0.0.1:8080/t/demo/mcp
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/opsmcp/platform/client"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: go-client ENDPOINT_URL")
	}
	c, err := client.New(os.Args[1], client.Options{
		ClientInfo:  client.Implementation{Name: "go-client-example", Version: "1"},
		TokenSource: client.StaticToken(os.Getenv("PLATFORM_TOKEN")),
		// Registering a handler declares the capability: here form
		// elicitation. Each question arrives with its key.
		ElicitForm: func(ctx context.Context, req *client.ElicitRequest) (*client.ElicitResult, error) {
			fmt.Println("asked:", req.Message)
			switch req.Key {
			case "region":
				return &client.ElicitResult{Action: "accept", Content: map[string]any{"region": "eu-west-1"}}, nil
			case "confirm":
				return &client.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
			}
			return &client.ElicitResult{Action: "decline"}, nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.CallTool(context.Background(), "provision", map[string]any{"service": "checkout"})
	if err != nil {
		log.Fatal(err)
	}
	for _, block := range res.Content {
		fmt.Println(block.Text)
	}
}
