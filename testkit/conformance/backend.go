package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/opsmcp/platform/webhook"
)

// Backend is the conformance tenant's webhook: it verifies every
// delivery's signature and answers each fixture as the scenarios expect.
type Backend struct {
	// Admin lets the trigger tools change the tenant's catalogue through
	// the platform's admin API, as a tenant's own tooling would.
	PlatformURL, AdminToken, Tenant string

	mu      sync.Mutex
	secrets map[string]string // "kind/name" -> webhook secret
	toggle  map[string]bool
	tasks   map[string]*backendTask // the tasks it accepted, by id
}

// SetSecret records the webhook secret the platform issued for an item.
func (b *Backend) SetSecret(kind, name, secret string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.secrets == nil {
		b.secrets = map[string]string{}
	}
	b.secrets[kind+"/"+name] = secret
}

func (b *Backend) secret(kind, name string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.secrets[kind+"/"+name]
}

func text(s string) obj { return obj{"type": "text", "text": s} }

func complete(result obj) *webhook.Response {
	raw, _ := json.Marshal(result)
	return &webhook.Response{Type: webhook.TypeComplete, Result: raw}
}

func toolText(s string) *webhook.Response { return complete(obj{"content": []obj{text(s)}}) }

// ServeHTTP answers one delivery.
func (b *Backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	var req webhook.Request
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "not a delivery", http.StatusBadRequest)
		return
	}
	kind := map[string]string{webhook.KindTool: "tool", webhook.KindPrompt: "prompt", webhook.KindResource: "resource_template",
		webhook.KindTaskInput: "tool", webhook.KindTaskCancel: "tool"}[req.Kind]
	if err := webhook.Verify(b.secret(kind, req.Name), r.Header.Get(webhook.SignatureHeader), body, time.Now(), webhook.DefaultTolerance); err != nil {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	if req.Kind == webhook.KindTaskInput || req.Kind == webhook.KindTaskCancel {
		b.taskNews(&req)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if taskFixture(req.Name) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(b.takeTask(&req))
		return
	}
	if req.Name == "test_tool_with_progress" && req.Stream {
		b.streamProgress(w)
		return
	}
	if req.Name == "test_tool_with_logging" && req.Stream {
		b.stream(w, []webhook.Event{
			{Type: "log", Level: "info", Logger: "conformance", Data: json.RawMessage(`"Tool execution started"`)},
			{Type: "log", Level: "info", Logger: "conformance", Data: json.RawMessage(`"Tool processing data"`)},
			{Type: "log", Level: "info", Logger: "conformance", Data: json.RawMessage(`"Tool execution completed"`)},
		}, toolText("Tool with logging executed"))
		return
	}
	if req.Name == "test_logging_tool" && req.Stream {
		b.stream(w, []webhook.Event{{Type: "log", Level: "info", Logger: "conformance", Data: json.RawMessage(`"logging tool ran"`)}}, toolText("Logging evaluated"))
		return
	}
	resp := b.answer(&req)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func (b *Backend) stream(w http.ResponseWriter, events []webhook.Event, final *webhook.Response) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	f, _ := w.(http.Flusher)
	for i := range events {
		_ = enc.Encode(&events[i])
		if f != nil {
			f.Flush()
		}
	}
	_ = enc.Encode(webhook.Event{Type: "response", Response: final})
}

func (b *Backend) streamProgress(w http.ResponseWriter) {
	total := 100.0
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	f, _ := w.(http.Flusher)
	for _, p := range []float64{0, 50, 100} {
		_ = enc.Encode(webhook.Event{Type: "progress", Progress: p, Total: &total, Message: fmt.Sprintf("Completed step %.0f of 100", p)})
		if f != nil {
			f.Flush()
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = enc.Encode(webhook.Event{Type: "response", Response: toolText("progress complete")})
}

// answerText pulls a string field from an accepted form answer.
func answerField(req *webhook.Request, input, field string) string {
	a, ok := req.Answers[input]
	if !ok || a.Action != "accept" {
		return ""
	}
	var m map[string]any
	_ = json.Unmarshal(a.Content, &m)
	s, _ := m[field].(string)
	return s
}

// elicited describes a form answer: its action and content.
func elicited(req *webhook.Request, input, prefix string) string {
	a := req.Answers[input]
	content := string(a.Content)
	if content == "" {
		content = "{}"
	}
	return fmt.Sprintf("%saction=%s, content=%s", prefix, a.Action, content)
}

// sampledText pulls the text of a sampling answer.
func sampledText(req *webhook.Request, input string) string {
	var res struct {
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal(req.Answers[input].Content, &res)
	return res.Content.Text
}

func (b *Backend) answer(req *webhook.Request) *webhook.Response {
	switch req.Name {
	case "test_simple_text":
		return toolText("This is a simple text response for testing.")
	case "greet":
		var args struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(req.Arguments, &args)
		return toolText("Hello, " + args.Name + "!")
	case "test_image_content":
		return complete(obj{"content": []obj{{"type": "image", "data": pngBase64, "mimeType": "image/png"}}})
	case "test_audio_content":
		return complete(obj{"content": []obj{{"type": "audio", "data": wavBase64, "mimeType": "audio/wav"}}})
	case "test_embedded_resource":
		return complete(obj{"content": []obj{{"type": "resource", "resource": obj{
			"uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}}}})
	case "test_multiple_content_types":
		return complete(obj{"content": []obj{
			text("Multiple content types test:"),
			{"type": "image", "data": pngBase64, "mimeType": "image/png"},
			{"type": "resource", "resource": obj{"uri": "test://mixed-content-resource", "mimeType": "application/json", "text": `{"test":"data","value":123}`}},
		}})
	case "test_error_handling":
		return complete(obj{"isError": true, "content": []obj{text("This tool intentionally returns an error for testing")}})
	case "test_tool_with_progress":
		return toolText("progress complete")
	case "test_missing_capability":
		return toolText("The model said: " + sampledText(req, "model_answer"))
	case "test_streaming_elicitation":
		return toolText("Streaming complete")
	case "test_logging_tool":
		return toolText("Logging evaluated")
	case "test_tool_with_logging":
		return toolText("Tool with logging executed")
	case "test_sampling":
		return toolText("LLM response: " + sampledText(req, "llm"))
	case "test_elicitation":
		return toolText(elicited(req, "user_info", "User response: "))
	case "test_elicitation_sep1034_defaults":
		return toolText(elicited(req, "details", "Elicitation completed: "))
	case "test_elicitation_sep1330_enums":
		return toolText(elicited(req, "choices", "Elicitation completed: "))
	case "test_trigger_tool_change":
		if err := b.touch("tools", "test_simple_text"); err != nil {
			return complete(obj{"isError": true, "content": []obj{text(err.Error())}})
		}
		return toolText("The tool list changed.")
	case "test_trigger_prompt_change":
		if err := b.touch("prompts", "test_simple_prompt"); err != nil {
			return complete(obj{"isError": true, "content": []obj{text(err.Error())}})
		}
		return toolText("The prompt list changed.")
	case "json_schema_2020_12_tool":
		return toolText("Schema features accepted: " + string(req.Arguments))
	case "test_header_param":
		var args struct {
			Region string `json:"region"`
		}
		_ = json.Unmarshal(req.Arguments, &args)
		return toolText("Region: " + args.Region)
	case "test_input_required_result_elicitation":
		return toolText("Hello, " + answerField(req, "user_name", "name") + "!")
	case "test_input_required_result_sampling":
		return toolText("The model answered: " + sampledText(req, "capital_question"))
	case "test_input_required_result_list_roots":
		return toolText("Roots: " + string(req.Answers["client_roots"].Content))
	case "test_input_required_result_multiple_inputs":
		return toolText(fmt.Sprintf("Hello %s; greeting %q; roots %s", answerField(req, "user_name", "name"),
			sampledText(req, "greeting"), req.Answers["client_roots"].Content))
	case "test_input_required_result_multi_round":
		return toolText(fmt.Sprintf("%s likes %s", answerField(req, "step1", "name"), answerField(req, "step2", "color")))
	case "test_input_required_result_capabilities":
		return toolText("Sampled: " + sampledText(req, "sample_input"))
	case "test_input_required_result_request_state", "test_input_required_result_tampered_state":
		return confirmFlow(req)
	case "test_input_required_result_prompt":
		ctx := answerField(req, "user_context", "context")
		raw, _ := json.Marshal(obj{"description": "A prompt with gathered context",
			"messages": []obj{{"role": "user", "content": text("Use this context: " + ctx)}}})
		return &webhook.Response{Type: webhook.TypeComplete, Result: raw}
	case "template":
		var vars struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(req.Arguments, &vars)
		data, _ := json.Marshal(obj{"id": vars.ID, "templateTest": true, "data": "Data for ID: " + vars.ID})
		raw, _ := json.Marshal(obj{"contents": []obj{{"uri": req.URI, "mimeType": "application/json", "text": string(data)}}})
		return &webhook.Response{Type: webhook.TypeComplete, Result: raw}
	}
	return complete(obj{"isError": true, "content": []obj{text("the conformance backend has no fixture " + req.Name)}})
}

// confirmFlow is webhook-driven input: the backend asks for confirmation,
// keeps its own state across the round, and completes once confirmed.
func confirmFlow(req *webhook.Request) *webhook.Response {
	const asked = "awaiting-confirm"
	if req.State == asked {
		var ans struct {
			Action  string         `json:"action"`
			Content map[string]any `json:"content"`
		}
		_ = json.Unmarshal(req.InputResponses["confirm"], &ans)
		if ans.Action == "accept" && ans.Content["ok"] == true {
			return toolText("state-ok: confirmed")
		}
	}
	q, _ := json.Marshal(obj{"method": "elicitation/create", "params": obj{
		"message":         "Please confirm to continue",
		"requestedSchema": obj{"type": "object", "properties": obj{"ok": obj{"type": "boolean"}}, "required": []string{"ok"}},
	}})
	return &webhook.Response{Type: webhook.TypeInputRequired, State: asked,
		InputRequests: map[string]json.RawMessage{"confirm": q}}
}

// touch flips an item's description through the admin API, which bumps
// the tenant's catalogue version and so announces list_changed.
func (b *Backend) touch(collection, name string) error {
	url := fmt.Sprintf("%s/api/v1/tenants/%s/%s/%s", b.PlatformURL, b.Tenant, collection, name)
	get, _ := http.NewRequest(http.MethodGet, url, nil)
	get.Header.Set("Authorization", "Bearer "+b.AdminToken)
	resp, err := http.DefaultClient.Do(get)
	if err != nil {
		return err
	}
	var def map[string]any
	err = json.NewDecoder(resp.Body).Decode(&def)
	resp.Body.Close()
	if err != nil {
		return err
	}
	b.mu.Lock()
	if b.toggle == nil {
		b.toggle = map[string]bool{}
	}
	b.toggle[name] = !b.toggle[name]
	on := b.toggle[name]
	b.mu.Unlock()
	desc, _ := def["description"].(string)
	desc = strings.TrimSuffix(desc, " (changed)")
	if on {
		desc += " (changed)"
	}
	def["description"] = desc
	delete(def, "version")
	raw, _ := json.Marshal(def)
	put, _ := http.NewRequest(http.MethodPut, url, bytes.NewReader(raw))
	put.Header.Set("Authorization", "Bearer "+b.AdminToken)
	put.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(put)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("changing %s %s: HTTP %d", collection, name, resp.StatusCode)
	}
	return nil
}
