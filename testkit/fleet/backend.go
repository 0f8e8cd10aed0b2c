package fleet

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opsmcp/platform/webhook"
)

// The fleet tenant's tools. Every flow ends with a result the backend
// builds from what it was given across rounds, so the driver can tell a
// right answer from a wrong one, and learns the flow's id.
const (
	// orderTool takes three rounds: a declared form input the platform
	// asks itself (round 1), the webhook's own confirmation question with
	// its plaintext state (round 2), the confirmed result (round 3).
	orderTool = "fleet_order"
	// quickTool takes two: the webhook asks once, then completes.
	quickTool = "fleet_quick"
	// deployTool takes two as quickTool does, and is destructive: its
	// confirmed round consumes its state fleet-wide and is recorded
	// running before the backend hears of it, and each of its rounds is
	// recorded before its answer leaves the replica, so the record knows
	// of every one, a SIGKILL's included.
	deployTool = "fleet_deploy"
	// extraPrefix names the tools the catalogue fault adds and removes;
	// they behave as quickTool.
	extraPrefix = "fleet_extra_"
)

// flowResult is what every tool's last round answers, as JSON text.
type flowResult struct {
	Tool  string `json:"tool"`
	Flow  string `json:"flow"`
	Round int    `json:"round"`
	Ref   string `json:"ref"`
	Who   string `json:"who,omitempty"`
	Nonce string `json:"nonce"`
}

// backend is the tenant's webhook: it verifies each delivery's signature
// with its item's secret and answers the fleet's tools.
type backend struct {
	mu      sync.RWMutex
	secrets map[string]string // item name → webhook secret
	// refused counts deliveries it refused (bad signature, unknown item,
	// a state that does not match the flow): each one is a platform bug.
	refused   atomic.Int64
	delivered atomic.Int64

	// confirmed holds the flow id of each deployTool flow (by its ref)
	// whose confirmed round reached the backend: the deploys that
	// happened, which the record must know of.
	cmu       sync.Mutex
	confirmed map[string]string
	// final counts, by ref, the confirmed rounds that reached it.
	final map[string]int

	// The tasks of taskTool it works on (tasks.go).
	tmu           sync.Mutex
	tasks         map[string]*backendTask
	cancels       int
	reportRetries atomic.Int64
	reportClient  *http.Client
}

func newBackend() *backend {
	return &backend{secrets: map[string]string{}, confirmed: map[string]string{}, final: map[string]int{}, tasks: map[string]*backendTask{}, reportClient: &http.Client{}}
}

// deployed is the flow id of the deployTool flow with ref whose
// confirmed round reached the backend, "" for none.
func (b *backend) deployed(ref string) string {
	b.cmu.Lock()
	defer b.cmu.Unlock()
	return b.confirmed[ref]
}

// finals is how many confirmed rounds of the flow with ref reached the
// backend.
func (b *backend) finals(ref string) int {
	b.cmu.Lock()
	defer b.cmu.Unlock()
	return b.final[ref]
}

func (b *backend) setSecret(name, secret string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.secrets[name] = secret
}

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	var req webhook.Request
	if err := json.Unmarshal(body, &req); err != nil || req.Version != webhook.Version {
		b.refused.Add(1)
		http.Error(w, "not a v1 delivery", http.StatusBadRequest)
		return
	}
	b.mu.RLock()
	secret := b.secrets[req.Name]
	b.mu.RUnlock()
	if secret == "" || webhook.Verify(secret, r.Header.Get(webhook.SignatureHeader), body, time.Now(), webhook.DefaultTolerance) != nil {
		b.refused.Add(1)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	b.delivered.Add(1)
	resp, ok := b.answer(&req)
	if !ok {
		b.refused.Add(1)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// answer is the tools' logic. The backend keeps nothing between rounds:
// what it needs comes back in its state, which the platform seals.
func (b *backend) answer(req *webhook.Request) (*webhook.Response, bool) {
	var args struct {
		Ref string `json:"ref"`
	}
	_ = json.Unmarshal(req.Arguments, &args)
	switch {
	case req.Kind == webhook.KindTaskInput || req.Kind == webhook.KindTaskCancel:
		return &webhook.Response{}, b.taskNews(req)
	case req.Name == taskTool:
		return b.takeTask(req)
	case req.Name == orderTool && req.State == "":
		var who struct {
			Name string `json:"name"`
		}
		a := req.Answers["who"]
		if a.Action != "accept" || json.Unmarshal(a.Content, &who) != nil || who.Name == "" {
			return toolError("round 2 came without the declared answer"), false
		}
		return confirm(req, "who="+who.Name), true
	case req.Name == quickTool || req.Name == deployTool || strings.HasPrefix(req.Name, extraPrefix):
		if req.State == "" {
			return confirm(req, ""), true
		}
		if req.Name == deployTool {
			b.cmu.Lock()
			b.confirmed[args.Ref] = req.Flow.ID
			b.cmu.Unlock()
		}
	case req.Name != orderTool:
		return toolError("unknown tool " + req.Name), false
	}
	// The confirmed round: the state must be the one this flow's previous
	// round returned (same flow, same arguments), and the answer accepted.
	st := parseState(req.State)
	if st["flow"] != req.Flow.ID || st["ref"] != args.Ref {
		return toolError(fmt.Sprintf("state of flow %s (ref %s) delivered to flow %s (ref %s)", st["flow"], st["ref"], req.Flow.ID, args.Ref)), false
	}
	var c struct {
		Action  string `json:"action"`
		Content struct {
			Nonce string `json:"nonce"`
		} `json:"content"`
	}
	if json.Unmarshal(req.InputResponses["confirm"], &c) != nil || c.Action != "accept" || c.Content.Nonce == "" {
		return toolError("the confirmation was not accepted"), false
	}
	b.cmu.Lock()
	b.final[args.Ref]++
	b.cmu.Unlock()
	res, _ := json.Marshal(flowResult{Tool: req.Name, Flow: req.Flow.ID, Round: req.Flow.Round, Ref: args.Ref, Who: st["who"], Nonce: c.Content.Nonce})
	raw, _ := json.Marshal(map[string]any{"content": []map[string]any{{"type": "text", "text": string(res)}}})
	return &webhook.Response{Type: webhook.TypeComplete, Result: raw}, true
}

// confirm asks the client to confirm, carrying the flow's facts in the
// state for the next round.
func confirm(req *webhook.Request, extra string) *webhook.Response {
	var args struct {
		Ref string `json:"ref"`
	}
	_ = json.Unmarshal(req.Arguments, &args)
	q, _ := json.Marshal(map[string]any{"method": "elicitation/create", "params": map[string]any{
		"message": "Confirm " + args.Ref + "?",
		"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{
			"nonce": map[string]any{"type": "string", "title": "Type anything to confirm"}}, "required": []string{"nonce"}},
	}})
	state := "flow=" + req.Flow.ID + ";ref=" + args.Ref
	if extra != "" {
		state += ";" + extra
	}
	return &webhook.Response{Type: webhook.TypeInputRequired, State: state, InputRequests: map[string]json.RawMessage{"confirm": q}}
}

func parseState(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(s, ";") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

func toolError(msg string) *webhook.Response {
	raw, _ := json.Marshal(map[string]any{"isError": true, "content": []map[string]any{{"type": "text", "text": "fleet backend: " + msg}}})
	return &webhook.Response{Type: webhook.TypeComplete, Result: raw}
}

// toolDefinition is a tool of the fleet tenant, for the admin API.
func toolDefinition(name, hookURL string) map[string]any {
	def := map[string]any{
		"name":        name,
		"description": "fleet test tool",
		"inputSchema": map[string]any{"type": "object", "properties": map[string]any{
			"ref": map[string]any{"type": "string", "minLength": 1}}, "required": []string{"ref"}},
		"handler": map[string]any{"url": hookURL, "timeoutMs": 10000},
	}
	if name == deployTool {
		def["annotations"] = map[string]any{"destructiveHint": true}
	}
	if name == orderTool {
		def["inputs"] = []map[string]any{{"name": "who", "kind": "form", "message": "Who orders {{args.ref}}?",
			"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{
				"name": map[string]any{"type": "string", "minLength": 1}}, "required": []string{"name"}}}}
	}
	return def
}
