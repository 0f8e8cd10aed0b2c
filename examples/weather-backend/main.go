// Command weather-backend is an example tenant backend for the platform,
// in plain net/http. It verifies every delivery's signature and serves:
//
//   - get_weather: a one-round tool (arguments in, content out);
//   - book_trip: a tool that asks the user to confirm the booking across
//     rounds (webhook-driven input), keeping its own state between them;
//   - packing_list: a prompt whose declared input (the trip length) the
//     platform gathers before the delivery, so the backend never sees a
//     round it has to manage.
//
// Register them with the definitions printed by `weather-backend -defs URL`,
// then run it with the webhook secrets the platform returned:
//
//	WEBHOOK_SECRETS=whsec_a,whsec_b weather-backend -listen 127.0.0.1:9000
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/opsmcp/platform/webhook"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9000", "address to listen on")
	defs := flag.String("defs", "", "print the catalogue definitions for a backend at this URL and exit")
	flag.Parse()
	if *defs != "" {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(Definitions(*defs))
		return
	}
	secrets := strings.Split(os.Getenv("WEBHOOK_SECRETS"), ",")
	srv := &http.Server{Addr: *listen, Handler: Handler(secrets), ReadHeaderTimeout: 5 * time.Second}
	log.Printf("weather backend on %s", *listen)
	log.Fatal(srv.ListenAndServe())
}

// Definitions are the catalogue entries to register, by admin API
// collection, with handlers pointing at url.
func Definitions(url string) map[string][]map[string]any {
	handler := map[string]any{"url": url, "timeoutMs": 5000}
	return map[string][]map[string]any{
		"tools": {
			{"name": "get_weather", "description": "Current weather for a city",
				"inputSchema": map[string]any{"type": "object", "properties": map[string]any{
					"city": map[string]any{"type": "string", "minLength": 1}}, "required": []string{"city"}},
				"annotations": map[string]any{"readOnlyHint": true}, "handler": handler},
			{"name": "book_trip", "description": "Books a trip to a city after the user confirms",
				"inputSchema": map[string]any{"type": "object", "properties": map[string]any{
					"city": map[string]any{"type": "string"}, "nights": map[string]any{"type": "integer", "minimum": 1}},
					"required": []string{"city", "nights"}},
				"handler": handler},
		},
		"prompts": {
			{"name": "packing_list", "description": "A packing list for a trip",
				"arguments": []map[string]any{{"name": "city", "required": true, "completions": []string{"Lisbon", "London", "Oslo"}}},
				"handler":   handler,
				"inputs": []map[string]any{{"name": "length", "kind": "form", "message": "How many nights in {{args.city}}?",
					"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{
						"nights": map[string]any{"type": "integer", "minimum": 1}}, "required": []string{"nights"}}}}},
		},
	}
}

// Handler serves deliveries signed with any of secrets.
func Handler(secrets []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		if !verified(secrets, r.Header.Get(webhook.SignatureHeader), body) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var req webhook.Request
		if err := json.Unmarshal(body, &req); err != nil || req.Version != webhook.Version {
			http.Error(w, "not a v1 delivery", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer(&req))
	})
}

func verified(secrets []string, header string, body []byte) bool {
	for _, s := range secrets {
		if s != "" && webhook.Verify(s, header, body, time.Now(), webhook.DefaultTolerance) == nil {
			return true
		}
	}
	return false
}

func text(s string) *webhook.Response {
	raw, _ := json.Marshal(map[string]any{"content": []map[string]any{{"type": "text", "text": s}}})
	return &webhook.Response{Type: webhook.TypeComplete, Result: raw}
}

func answer(req *webhook.Request) *webhook.Response {
	switch req.Name {
	case "get_weather":
		var args struct{ City string }
		_ = json.Unmarshal(req.Arguments, &args)
		return text(fmt.Sprintf("%s: %d°C and %s", args.City, 10+len(args.City)%15, []string{"sunny", "cloudy", "raining"}[len(args.City)%3]))
	case "book_trip":
		return bookTrip(req)
	case "packing_list":
		var args struct{ City string }
		_ = json.Unmarshal(req.Arguments, &args)
		var length struct{ Nights int }
		_ = json.Unmarshal(req.Answers["length"].Content, &length)
		raw, _ := json.Marshal(map[string]any{"description": "Packing list", "messages": []map[string]any{{
			"role": "user", "content": map[string]any{"type": "text",
				"text": fmt.Sprintf("Write a packing list for %d nights in %s.", length.Nights, args.City)}}}})
		return &webhook.Response{Type: webhook.TypeComplete, Result: raw}
	}
	return text("unknown tool " + req.Name)
}

// bookTrip asks for confirmation, remembering the quote in its state; the
// platform seals that state, so the backend keeps nothing between rounds.
func bookTrip(req *webhook.Request) *webhook.Response {
	var args struct {
		City   string
		Nights int
	}
	_ = json.Unmarshal(req.Arguments, &args)
	if strings.HasPrefix(req.State, "quoted:") {
		var confirm struct {
			Action  string
			Content struct{ Confirm bool }
		}
		_ = json.Unmarshal(req.InputResponses["confirm"], &confirm)
		switch {
		case confirm.Action == "accept" && confirm.Content.Confirm:
			return text(fmt.Sprintf("Booked %d nights in %s for %s (booking for %s).",
				args.Nights, args.City, strings.TrimPrefix(req.State, "quoted:"), principalName(req)))
		case confirm.Action == "decline" || confirm.Action == "cancel" || (confirm.Action == "accept" && !confirm.Content.Confirm):
			return text("Nothing was booked.")
		}
	}
	price := fmt.Sprintf("€%d", 90*args.Nights)
	q, _ := json.Marshal(map[string]any{"method": "elicitation/create", "params": map[string]any{
		"message": fmt.Sprintf("Book %d nights in %s for %s?", args.Nights, args.City, price),
		"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{
			"confirm": map[string]any{"type": "boolean", "title": "Confirm the booking"}}, "required": []string{"confirm"}},
	}})
	return &webhook.Response{Type: webhook.TypeInputRequired, State: "quoted:" + price,
		InputRequests: map[string]json.RawMessage{"confirm": q}}
}

func principalName(req *webhook.Request) string {
	if req.Principal == nil || req.Principal.Subject == "" {
		return "an anonymous caller"
	}
	return req.Principal.Subject
}
