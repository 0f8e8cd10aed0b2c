package demo

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opsmcp/platform/webhook"
)

// Backend answers the demo tenant's webhook deliveries at <base>/hook
// and serves the change-review pages deploy links to at
// <base>/changes/<id>. It keeps nothing between rounds: what it needs
// next time travels in the state the platform seals.
type Backend struct {
	base *url.URL
	log  *slog.Logger

	mu      sync.RWMutex
	secrets []string

	// migrations are the tasks migrate accepted, by task id; client is
	// what reports on them.
	migrations migrations
	client     *http.Client
}

// New returns a backend served under base (an absolute URL, e.g.
// http://127.0.0.1:8080/dev/demo); it verifies no delivery until
// SetSecrets gives it the webhook secrets.
func New(base string, log *slog.Logger) (*Backend, error) {
	u, err := url.Parse(strings.TrimSuffix(base, "/"))
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("demo: base %q is not an absolute URL", base)
	}
	return &Backend{base: u, log: log, client: &http.Client{Timeout: 10 * time.Second}}, nil
}

// HookURL is where the platform delivers the demo tenant's calls.
func (b *Backend) HookURL() string { return b.base.String() + "/hook" }

// SetSecrets sets the webhook secrets deliveries may be signed with (one
// per catalogue item with a handler).
func (b *Backend) SetSecrets(secrets []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.secrets = slices.Clone(secrets)
}

func (b *Backend) verify(header string, body []byte) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	err := webhook.ErrBadSignature
	for _, s := range b.secrets {
		if err = webhook.Verify(s, header, body, time.Now(), webhook.DefaultTolerance); err == nil {
			return nil
		}
	}
	return err
}

// ServeHTTP serves the hook and the change pages.
func (b *Backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Host, b.base.Host) {
		http.Error(w, "unknown host", http.StatusMisdirectedRequest)
		return
	}
	route, ok := strings.CutPrefix(r.URL.Path, b.base.Path)
	switch {
	case ok && route == "/hook":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		b.hook(w, r)
	case ok && strings.HasPrefix(route, "/changes/") && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		b.changePage(w, r, strings.TrimPrefix(route, "/changes/"))
	default:
		http.NotFound(w, r)
	}
}

// hook verifies a delivery and answers it. A delivery that is not signed
// with a current secret (or is older than five minutes) is refused
// before its body is even parsed.
func (b *Backend) hook(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	if err := b.verify(r.Header.Get(webhook.SignatureHeader), body); err != nil {
		b.log.WarnContext(r.Context(), "demo backend: delivery refused", "err", err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var req webhook.Request
	if err := json.Unmarshal(body, &req); err != nil || req.Version != webhook.Version {
		http.Error(w, "not a v1 delivery", http.StatusBadRequest)
		return
	}
	if req.Kind == webhook.KindTaskInput || req.Kind == webhook.KindTaskCancel {
		b.migrations.news(&req)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	res := b.answer(&req)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}

func (b *Backend) answer(req *webhook.Request) *webhook.Response {
	switch req.Kind + "/" + req.Name {
	case webhook.KindTool + "/provision":
		return provision(req)
	case webhook.KindTool + "/deploy":
		return b.deploy(req)
	case webhook.KindTool + "/rollout_status":
		return rolloutStatus(req)
	case webhook.KindTool + "/migrate":
		return b.migrate(req)
	case webhook.KindTool + "/summarize":
		return summarize(req)
	case webhook.KindTool + "/workspace":
		return workspace(req)
	case webhook.KindPrompt + "/incident_update":
		return incidentUpdate(req)
	case webhook.KindResource + "/customer":
		return customer(req)
	}
	return toolError(fmt.Sprintf("the demo backend does not know %s %q", req.Kind, req.Name))
}

// result is a complete tool result with text and, when set, structured
// content.
func result(text string, structured any) *webhook.Response {
	r := obj{"content": []obj{{"type": "text", "text": text}}}
	if structured != nil {
		r["structuredContent"] = structured
	}
	raw, _ := json.Marshal(r)
	return &webhook.Response{Type: webhook.TypeComplete, Result: raw}
}

func toolError(text string) *webhook.Response {
	raw, _ := json.Marshal(obj{"content": []obj{{"type": "text", "text": text}}, "isError": true})
	return &webhook.Response{Type: webhook.TypeComplete, Result: raw}
}

// ask answers input_required with one request and the state for the
// next round.
func ask(key string, request obj, state any) *webhook.Response {
	raw, _ := json.Marshal(request)
	st, _ := json.Marshal(state)
	return &webhook.Response{Type: webhook.TypeInputRequired, State: string(st),
		InputRequests: map[string]json.RawMessage{key: raw}}
}

// accepted decodes a declared input's content when the user accepted it.
func accepted(a webhook.Answer, into any) bool {
	return a.Action == "accept" && json.Unmarshal(a.Content, into) == nil
}

// shortID derives a stable id from the flow, so every round of one flow
// names the same database or change.
func shortID(flow string, mod uint32) uint32 {
	sum := sha256.Sum256([]byte(flow))
	return binary.BigEndian.Uint32(sum[:4]) % mod
}

func provision(req *webhook.Request) *webhook.Response {
	var args struct{ Service, Size string }
	_ = json.Unmarshal(req.Arguments, &args)
	if args.Size == "" {
		args.Size = "small"
	}
	var region struct{ Region string }
	var confirm struct{ Confirm bool }
	if !accepted(req.Answers["region"], &region) || !accepted(req.Answers["confirm"], &confirm) || !confirm.Confirm {
		return result(fmt.Sprintf("Nothing was created: the database for %s was not confirmed.", args.Service),
			obj{"service": args.Service, "status": "cancelled"})
	}
	id := fmt.Sprintf("db-%05x", shortID(req.Flow.ID, 1<<20))
	host := fmt.Sprintf("%s-db.%s.demo.internal", args.Service, region.Region)
	return result(fmt.Sprintf("Creating %s: a %s PostgreSQL 17 database for %s in %s, at %s:5432. It is ready in about five minutes.",
		id, args.Size, args.Service, region.Region, host),
		obj{"id": id, "service": args.Service, "region": region.Region, "size": args.Size, "host": host, "port": 5432, "status": "creating"})
}

// instances are a service's instances as the demo's rollouts leave
// them: all healthy.
func instances(service string) []obj {
	out := make([]obj, 3)
	for i := range out {
		out[i] = obj{"name": fmt.Sprintf("%s-%d", service, i+1), "status": "healthy"}
	}
	return out
}

// rolloutStatus answers the rollout view's refresh.
func rolloutStatus(req *webhook.Request) *webhook.Response {
	var args struct{ Service string }
	_ = json.Unmarshal(req.Arguments, &args)
	return result(fmt.Sprintf("%s: 3 of 3 instances healthy.", args.Service),
		obj{"service": args.Service, "status": "healthy", "instances": instances(args.Service)})
}

// deployState is what deploy keeps between its rounds; the platform
// seals it, so the client can neither read nor change it.
type deployState struct {
	Step   string `json:"step"` // confirm, then review
	Change string `json:"change"`
}

func (b *Backend) deploy(req *webhook.Request) *webhook.Response {
	var args struct{ Service, Version, Environment string }
	_ = json.Unmarshal(req.Arguments, &args)
	if args.Environment == "" {
		args.Environment = "production"
	}
	var st deployState
	_ = json.Unmarshal([]byte(req.State), &st)
	what := fmt.Sprintf("%s %s to %s", args.Service, args.Version, args.Environment)
	cancelled := func() *webhook.Response {
		return result("Deployment cancelled: nothing changed.", obj{"service": args.Service, "version": args.Version, "status": "cancelled"})
	}
	deployed := func() *webhook.Response {
		by := "an anonymous caller"
		if p := req.Principal; p != nil && p.Subject != "" {
			by = p.Subject
		}
		return result(fmt.Sprintf("Deployed %s under change %s, requested by %s. 3 of 3 instances healthy.", what, st.Change, by),
			obj{"service": args.Service, "version": args.Version, "environment": args.Environment, "change": st.Change, "status": "deployed",
				"instances": instances(args.Service)})
	}
	switch st.Step {
	case "":
		change := fmt.Sprintf("CHG-%04d", 1000+shortID(req.Flow.ID, 9000))
		return ask("confirm", obj{"method": "elicitation/create", "params": obj{
			"message": fmt.Sprintf("Deploy %s? 3 instances restart one at a time: about two minutes of reduced capacity.", what),
			"requestedSchema": obj{"type": "object", "required": []string{"confirm"}, "properties": obj{
				"confirm": obj{"type": "boolean", "title": "Deploy now"}}},
		}}, deployState{Step: "confirm", Change: change})
	case "confirm":
		var answer struct {
			Action  string
			Content struct{ Confirm bool }
		}
		_ = json.Unmarshal(req.InputResponses["confirm"], &answer)
		if answer.Action != "accept" || !answer.Content.Confirm {
			return cancelled()
		}
		if args.Environment != "production" {
			return deployed()
		}
		page := b.base.String() + "/changes/" + st.Change + "?" + url.Values{"service": {args.Service}, "version": {args.Version}}.Encode()
		return ask("review", obj{"method": "elicitation/create", "params": obj{
			"mode":    "url",
			"message": fmt.Sprintf("Production deploys need a reviewed change request: open %s, check the rollout plan, then continue.", st.Change),
			"url":     page,
		}}, deployState{Step: "review", Change: st.Change})
	case "review":
		var answer struct{ Action string }
		_ = json.Unmarshal(req.InputResponses["review"], &answer)
		if answer.Action != "accept" {
			return cancelled()
		}
		return deployed()
	}
	return toolError("deploy: unknown step")
}

func summarize(req *webhook.Request) *webhook.Response {
	var args struct{ Incident string }
	_ = json.Unmarshal(req.Arguments, &args)
	inc, ok := incidents[args.Incident]
	if !ok {
		return toolError(fmt.Sprintf("unknown incident %q", args.Incident))
	}
	if req.State != `"summary"` {
		return ask("summary", obj{"method": "sampling/createMessage", "params": obj{
			"systemPrompt": "You write incident summaries for a public status page: three sentences, plain language, no internal host names.",
			"messages": []obj{{"role": "user", "content": obj{"type": "text",
				"text": fmt.Sprintf("Summarize %s (%s, %s) from its timeline:\n\n%s", args.Incident, inc.Title, inc.Window, inc.Timeline)}}},
			"maxTokens":        300,
			"modelPreferences": obj{"intelligencePriority": 0.8, "speedPriority": 0.3},
		}}, "summary")
	}
	var reply struct {
		Model   string
		Content struct{ Type, Text string }
	}
	if err := json.Unmarshal(req.InputResponses["summary"], &reply); err != nil || reply.Content.Type != "text" || strings.TrimSpace(reply.Content.Text) == "" {
		return toolError("the client's model sent no text summary")
	}
	return result(fmt.Sprintf("Summary of %s, written by %s:\n\n%s", args.Incident, reply.Model, reply.Content.Text),
		obj{"incident": args.Incident, "model": reply.Model, "summary": reply.Content.Text})
}

func workspace(req *webhook.Request) *webhook.Response {
	var args struct{ Service string }
	_ = json.Unmarshal(req.Arguments, &args)
	var list struct {
		Roots []struct{ URI, Name string }
	}
	if !accepted(req.Answers["workspace"], &list) || len(list.Roots) == 0 {
		return result("The client shares no folders, so there is nowhere to suggest. Offer one (platform call --root PATH) and try again.", nil)
	}
	pick := list.Roots[0]
	for _, r := range list.Roots {
		if strings.Contains(strings.ToLower(r.Name+r.URI), strings.ToLower(args.Service)) {
			pick = r
			break
		}
	}
	var lines []string
	for _, r := range list.Roots {
		lines = append(lines, "  "+r.URI)
	}
	where := strings.TrimSuffix(pick.URI, "/") + "/deploy/opsmcp.yaml"
	return result(fmt.Sprintf("The client shares %d folder(s):\n%s\nPut %s's configuration in %s.", len(list.Roots), strings.Join(lines, "\n"), args.Service, where),
		obj{"roots": len(list.Roots), "config": where})
}

func incidentUpdate(req *webhook.Request) *webhook.Response {
	var args struct{ Incident string }
	_ = json.Unmarshal(req.Arguments, &args)
	inc, ok := incidents[args.Incident]
	if !ok {
		inc = incident{Title: "an incident", Window: "recently", Timeline: "(no timeline on record)"}
	}
	var audience struct{ Audience string }
	if !accepted(req.Answers["audience"], &audience) {
		audience.Audience = "engineering"
	}
	style := map[string]string{
		"engineering": "Be precise: name the systems, the timeline and the follow-up actions with owners.",
		"support":     "Give support staff what they need to answer customers: impact, workarounds, when it was fixed.",
		"customers":   "Use plain language, no internal names; say what happened, who was affected, and what we are doing so it does not happen again.",
	}[audience.Audience]
	raw, _ := json.Marshal(obj{
		"description": fmt.Sprintf("Status update about %s for %s", args.Incident, audience.Audience),
		"messages": []obj{{"role": "user", "content": obj{"type": "text", "text": fmt.Sprintf(
			"Write a status update about %s (%s, %s) for %s. %s\n\nTimeline:\n%s", args.Incident, inc.Title, inc.Window, audience.Audience, style, inc.Timeline)}}},
	})
	return &webhook.Response{Type: webhook.TypeComplete, Result: raw}
}

func customer(req *webhook.Request) *webhook.Response {
	var args struct{ ID string }
	_ = json.Unmarshal(req.Arguments, &args)
	contents := func(mime, text string) *webhook.Response {
		raw, _ := json.Marshal(obj{"contents": []obj{{"uri": req.URI, "mimeType": mime, "text": text}}})
		return &webhook.Response{Type: webhook.TypeComplete, Result: raw}
	}
	var access struct{ Reason string }
	if !accepted(req.Answers["access"], &access) {
		return contents("text/plain", "Not opened: no reason for access was given.")
	}
	c, ok := customers[args.ID]
	if !ok {
		return contents("text/plain", fmt.Sprintf("No customer %s.", args.ID))
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	return contents("application/json", string(b))
}

var changeTemplate = template.Must(template.New("change").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.ID}} · change request</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:40rem;margin:8vh auto;padding:0 1rem;color:#1d2330}code{background:#f1f3f6;padding:0 .3em;border-radius:3px}</style>
</head><body>
<h1>Change request {{.ID}}</h1>
<p>Deploy <code>{{.Service}}</code> version <code>{{.Version}}</code> to <strong>production</strong>.</p>
<h2>Rollout plan</h2>
<ol><li>Drain and restart instance 1 of 3; wait for its health check.</li><li>Repeat for instances 2 and 3.</li><li>Watch the error rate for ten minutes; roll back by deploying the previous version.</li></ol>
<p>Reviewed? Go back to your MCP client and continue: the deploy starts when you do.</p>
</body></html>
`))

// changePage is the page deploy's URL elicitation sends the user to.
func (b *Backend) changePage(w http.ResponseWriter, r *http.Request, id string) {
	q := r.URL.Query()
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = changeTemplate.Execute(w, obj{"ID": id, "Service": q.Get("service"), "Version": q.Get("version")})
}
