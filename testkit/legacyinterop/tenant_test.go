package legacyinterop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/webhook"
)

type obj = map[string]any

// onboardTool needs four rounds of input before its result, one kind a
// round: a name (form elicitation), a sign-in (URL elicitation), a
// summary from the client's model (sampling), each declared and asked
// once the one before is answered, then a confirmation the webhook asks
// itself (with its own state).
func onboardTool(hookURL string) obj {
	when := func(m obj, after string) obj { m["when"] = obj{"input": after}; return m }
	return obj{"name": "onboard", "description": "Signs a user in, in four questions",
		"inputSchema": obj{"type": "object", "properties": obj{"team": obj{"type": "string"}}},
		"handler":     obj{"url": hookURL},
		"inputs": []obj{
			{"name": "who", "kind": "form", "message": "Your name, for team {{args.team}}?",
				"requestedSchema": obj{"type": "object", "properties": obj{"name": obj{"type": "string"}}, "required": []string{"name"}}},
			when(obj{"name": "login", "kind": "url", "message": "Sign in to continue", "url": "https://auth.example.com/start"}, "who"),
			when(obj{"name": "summary", "kind": "sampling", "sampling": obj{
				"messages": []obj{{"role": "user", "content": obj{"type": "text", "text": "Summarise the sign-in"}}}, "maxTokens": 50}}, "login"),
		}}
}

// backend is the tenant's webhook: it verifies each delivery and answers
// onboard: it asks for a confirmation first, then completes with what
// it was told.
type backend struct {
	*platformtest.Backend
	mu       sync.Mutex
	verified int
	// final counts the deliveries that completed a flow (those with
	// the answer to the webhook's own question).
	final int
}

func newBackend(t testing.TB) *backend {
	b := &backend{}
	b.Backend = platformtest.NewBackend(t, b.serve)
	return b
}

func (b *backend) setSecret(s string) { b.SetSecrets(s) }

// count is how many deliveries came, verified or not.
func (b *backend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.verified + b.Refused()
}

// finals is how many deliveries completed a flow.
func (b *backend) finals() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.final
}

func (b *backend) serve(w http.ResponseWriter, _ *http.Request, req *webhook.Request) {
	b.mu.Lock()
	b.verified++
	if req.State == "asked" {
		b.final++
	}
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if req.State != "asked" {
		fmt.Fprint(w, `{"type":"input_required","state":"asked","inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"Create the account?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}}}}}`)
		return
	}
	var who struct{ Name string }
	_ = json.Unmarshal(req.Answers["who"].Content, &who)
	var summary struct {
		Content struct{ Text string } `json:"content"`
	}
	_ = json.Unmarshal(req.Answers["summary"].Content, &summary)
	var confirm struct {
		Action  string         `json:"action"`
		Content map[string]any `json:"content"`
	}
	_ = json.Unmarshal(req.InputResponses["confirm"], &confirm)
	text := fmt.Sprintf("%s signed in (%s); the model said %q; confirmed %v; round %d",
		who.Name, req.Answers["login"].Action, summary.Content.Text, confirm.Content["ok"], req.Flow.Round)
	out, _ := json.Marshal(obj{"type": "complete", "result": obj{"content": []obj{{"type": "text", "text": text}}}})
	_, _ = w.Write(out)
}

// wantOnboarded checks onboard's final text: every answer reached the
// webhook, on the flow's fifth round.
func wantOnboarded(t testing.TB, text string) {
	t.Helper()
	for _, want := range []string{"Ada signed in (accept)", `the model said "all good"`, "confirmed true", "round 5"} {
		if !strings.Contains(text, want) {
			t.Fatalf("result %q lacks %q", text, want)
		}
	}
}

// admin calls a platform's admin API with token.
func admin(t testing.TB, base, token, method, path string, body any, want int) map[string]any {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: HTTP %d, want %d: %s", method, path, resp.StatusCode, want, out)
	}
	var m map[string]any
	_ = json.Unmarshal(out, &m)
	return m
}

// register creates the public tenant "acme" with onboard answered by b.
func register(t testing.TB, base, token string, b *backend, settings obj) {
	t.Helper()
	if settings == nil {
		settings = obj{}
	}
	settings["auth"] = obj{"public": true}
	admin(t, base, token, "POST", "/api/v1/tenants", obj{"slug": "acme", "displayName": "Acme", "settings": settings}, 201)
	m := admin(t, base, token, "POST", "/api/v1/tenants/acme/tools", onboardTool(b.URL), 201)
	b.setSecret(m["webhookSecret"].(string))
}
