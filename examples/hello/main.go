// Command hello is a tenant backend small enough to read in one sitting.
// It verifies every delivery's signature with package webhook, then
// answers the greet tool: it greets the name it is given, asks for one
// when there is none (webhook-driven input, with its own state between
// rounds), and greets formally when a declared input says so.
// hello.py beside it is the same backend in Python; docs/webhooks.md
// walks through both.
//
//	WEBHOOK_SECRET=whsec_… go run ./examples/hello 127.0.0.1:9000
package main

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/opsmcp/platform/webhook"
)

func main() {
	addr := "127.0.0.1:9000"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	// Several secrets, comma-separated, while a secret is rotated.
	secrets := strings.Split(os.Getenv("WEBHOOK_SECRET"), ",")
	http.HandleFunc("POST /hook", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil || !verified(secrets, r.Header.Get(webhook.SignatureHeader), body) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var req webhook.Request
		if err := json.Unmarshal(body, &req); err != nil || req.Version != webhook.Version {
			http.Error(w, "not a v1 delivery", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(greet(&req))
	})
	log.Printf("hello backend on http://%s/hook", addr)
	srv := &http.Server{Addr: addr, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

// verified checks the signature (HMAC-SHA256 over "<t>.<body>") and that
// it was made in the last five minutes, against each secret.
func verified(secrets []string, header string, body []byte) bool {
	for _, s := range secrets {
		if s != "" && webhook.Verify(s, header, body, time.Now(), webhook.DefaultTolerance) == nil {
			return true
		}
	}
	return false
}

func greet(req *webhook.Request) webhook.Response {
	var args struct{ Name string }
	_ = json.Unmarshal(req.Arguments, &args)
	name := args.Name
	if name == "" && req.State == "asked-name" {
		// The answer to the question this backend asked last round.
		var who struct {
			Action  string
			Content struct{ Name string }
		}
		_ = json.Unmarshal(req.InputResponses["who"], &who)
		if who.Action != "accept" {
			return text("Nobody to greet.")
		}
		name = who.Content.Name
	}
	if name == "" {
		// Ask the user; the platform seals the state and hands it back
		// with the answer on the retry.
		ask, _ := json.Marshal(map[string]any{"method": "elicitation/create", "params": map[string]any{
			"message": "Who should I greet?",
			"requestedSchema": map[string]any{"type": "object", "required": []string{"name"},
				"properties": map[string]any{"name": map[string]any{"type": "string", "title": "Name"}}},
		}})
		return webhook.Response{Type: webhook.TypeInputRequired, State: "asked-name",
			InputRequests: map[string]json.RawMessage{"who": ask}}
	}
	greeting := "Hello, " + name + "!"
	// A declared input: the platform asked it before calling.
	var style struct{ Style string }
	if a, ok := req.Answers["style"]; ok && a.Action == "accept" {
		_ = json.Unmarshal(a.Content, &style)
	}
	if style.Style == "formal" {
		greeting = "Good day, " + name + "."
	}
	caller := "an anonymous caller"
	if req.Principal != nil && req.Principal.Subject != "" {
		caller = req.Principal.Subject
	}
	return text(greeting + " (asked by " + caller + ")")
}

func text(s string) webhook.Response {
	result, _ := json.Marshal(map[string]any{"content": []map[string]any{{"type": "text", "text": s}}})
	return webhook.Response{Type: webhook.TypeComplete, Result: result}
}
