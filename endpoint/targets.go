package endpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/catalogue"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/webhook"
)

// target is what a carrier request runs: the declared inputs to gather
// and the webhook that answers once they are in.
type target struct {
	// onceOnly consumes the request state of a round that calls the
	// webhook (single-use and destructive tools).
	onceOnly bool
	kind     string // webhook.KindTool, KindPrompt or KindResource
	name     string
	inputs   *mrtr.Inputs
	handler  *catalogue.Handler
	secret   string
	args     json.RawMessage // what the webhook receives as arguments
	// task is the tool's task settings; nil for prompts, resources and
	// tools that never run as tasks.
	task *catalogue.TaskSettings
	// view says the target answers a view's calls or reads (an app-only
	// tool, a ui:// read): nothing tells a host what to do with a
	// question there, so its webhook may ask none.
	view bool
}

// findTarget finds what a carrier request runs. Requests answered
// without a webhook are answered here: the returned target is then nil
// and the answer is the request's (invalid tool arguments are a tool
// error result; a template prompt is rendered; a static resource is
// read; an unknown target is an error).
func findTarget(c *call) (*target, answer) {
	switch c.method {
	case mcp.MethodToolsCall:
		return toolTarget(c)
	case mcp.MethodPromptsGet:
		return promptTarget(c)
	default:
		return resourceTarget(c)
	}
}

// toolTarget checks a tools/call request against the tool's definition.
func toolTarget(c *call) (*target, answer) {
	tool := c.snap.tools[c.name]
	if tool == nil {
		return nil, failed(errInvalidParams("Unknown tool: " + c.name))
	}
	args := c.p.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	} else if args[0] != '{' {
		return nil, failed(errInvalidParams("Invalid params: arguments must be an object"))
	}
	if tool.def.TaskMode() == catalogue.TaskMust && !c.declaresTasks() {
		// Before any round: the call could never finish for this client.
		return nil, failed(errTasksCapability())
	}
	if c.principal != nil && len(tool.def.Scopes) > 0 {
		if missing := c.principal.HasScopes(tool.def.Scopes); len(missing) > 0 {
			// Name every scope the tool needs, so one new token suffices.
			e := newError(http.StatusForbidden, mcp.CodeInvalidRequest, "Forbidden: the token lacks scopes this tool requires", map[string]any{"requiredScopes": tool.def.Scopes})
			e.challenge = auth.InsufficientScope(c.snap.metadataURL, tool.def.Scopes)
			return nil, failed(e)
		}
	}
	if e := checkHeaderParams(c.header, tool.headers, args); e != nil {
		return nil, failed(e)
	}
	if msg := validateArgs(tool.schema, args); msg != "" {
		return nil, toolFailed(toolError(c.snap, "Invalid arguments: "+msg))
	}
	return &target{kind: webhook.KindTool, name: tool.def.Name, inputs: tool.declared, onceOnly: tool.def.OnceOnly(),
		handler: tool.def.Handler, secret: tool.secret, args: args, task: tool.def.Task, view: tool.appOnly}, answer{}
}

// validateArgs checks arguments against the tool's input schema and
// returns a readable reason, or "".
func validateArgs(sch *jsonschema.Schema, args json.RawMessage) string {
	if sch == nil {
		return "" // the schema accepts every object, which arguments always are
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return "arguments are not valid JSON"
	}
	err = sch.Validate(inst)
	if err == nil {
		return ""
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "arguments do not match the input schema"
	}
	var msgs []string
	var walk func(*jsonschema.ValidationError)
	walk = func(v *jsonschema.ValidationError) {
		if len(v.Causes) == 0 {
			loc := pointerOf(v.InstanceLocation)
			msg := v.Error()
			if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "at ") {
				msg = msg[i+2:]
			}
			msgs = append(msgs, loc+": "+msg)
			return
		}
		for _, cause := range v.Causes {
			walk(cause)
		}
	}
	walk(ve)
	if len(msgs) > 5 {
		msgs = append(msgs[:5], fmt.Sprintf("and %d more", len(msgs)-5))
	}
	return strings.Join(msgs, "; ")
}

func pointerOf(loc []string) string {
	if len(loc) == 0 {
		return "/"
	}
	return "/" + strings.Join(loc, "/")
}

// checkHeaderParams enforces Mcp-Param-{Name}: for every argument marked
// x-mcp-header, the header is present exactly when the argument is
// (and not null), and carries the same value.
func checkHeaderParams(h http.Header, params map[string]headerParam, args json.RawMessage) *rpcError {
	if len(params) == 0 || h == nil {
		// nil: a legacy session's request, whose revision has no
		// per-request headers to check.
		return nil
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(args, &m)
	for _, p := range params {
		name := mcp.HeaderParamPrefix + p.header
		hv, present := headerValue(h, name)
		raw, has := m[p.property]
		if has && string(raw) == "null" {
			has = false
		}
		switch {
		case !has && !present:
			continue
		case has != present:
			return headerMismatch(name, !present)
		}
		if !headerMatches(p.typ, hv, raw) {
			return headerMismatch(name, false)
		}
	}
	return nil
}

// headerMatches compares a header value with an argument: strings
// exactly, integers numerically, booleans by their JSON spelling.
func headerMatches(typ, hv string, raw json.RawMessage) bool {
	switch typ {
	case "integer":
		hn, err1 := strconv.ParseInt(strings.TrimSpace(hv), 10, 64)
		var an json.Number
		if err1 != nil || json.Unmarshal(raw, &an) != nil {
			return false
		}
		ai, err := an.Int64()
		if err != nil {
			f, ferr := an.Float64()
			return ferr == nil && f == float64(hn)
		}
		return ai == hn
	case "boolean":
		return hv == string(raw)
	default:
		var s string
		return json.Unmarshal(raw, &s) == nil && s == hv
	}
}

// toolError is a complete CallToolResult with isError set.
func toolError(s *snapshot, msg string) any {
	return map[string]any{
		"resultType": mcp.ResultTypeComplete,
		"content":    []any{map[string]string{"type": "text", "text": msg}},
		"isError":    true,
		"_meta":      s.info,
	}
}

// promptTarget checks a prompts/get request; a template prompt without
// declared inputs is rendered here.
func promptTarget(c *call) (*target, answer) {
	p := c.snap.prompts[c.name]
	if p == nil {
		return nil, failed(errInvalidParams("Unknown prompt: " + c.name))
	}
	args := map[string]string{}
	if raw := c.p.Arguments; len(raw) > 0 && string(raw) != "null" {
		if raw[0] != '{' || json.Unmarshal(raw, &args) != nil {
			return nil, failed(errInvalidParams("Invalid params: prompt arguments must be an object of strings"))
		}
	}
	var missing []string
	for _, a := range p.def.Arguments {
		if _, ok := args[a.Name]; a.Required && !ok {
			missing = append(missing, a.Name)
		}
	}
	if len(missing) > 0 {
		return nil, failed(errInvalidParams("Invalid params: missing required prompt arguments: " + strings.Join(missing, ", ")))
	}
	if p.def.Handler == nil {
		return nil, completed(renderPrompt(c.snap, &p.def, args))
	}
	raw, _ := json.Marshal(args)
	return &target{kind: webhook.KindPrompt, name: p.def.Name, inputs: p.declared,
		handler: p.def.Handler, secret: p.secret, args: raw}, answer{}
}

// renderPrompt fills a template prompt's {{argument}} placeholders.
func renderPrompt(s *snapshot, p *catalogue.Prompt, args map[string]string) any {
	pairs := make([]string, 0, 2*len(args))
	for k, v := range args {
		pairs = append(pairs, "{{"+k+"}}", v)
	}
	repl := strings.NewReplacer(pairs...)
	msgs := make([]any, len(p.Messages))
	for i, m := range p.Messages {
		var content map[string]any
		_ = json.Unmarshal(m.Content, &content)
		if text, ok := content["text"].(string); ok && content["type"] == "text" {
			content["text"] = repl.Replace(text)
		}
		msgs[i] = map[string]any{"role": m.Role, "content": content}
	}
	out := map[string]any{"resultType": mcp.ResultTypeComplete, "messages": msgs, "_meta": s.info}
	if p.Description != "" {
		out["description"] = p.Description
	}
	return out
}

// resourceTarget serves a static resource directly, or finds the template
// a URI expands from.
func resourceTarget(c *call) (*target, answer) {
	if r := c.snap.resources[c.uri]; r != nil {
		content := map[string]any{"uri": r.def.URI}
		if r.def.MimeType != "" {
			content["mimeType"] = r.def.MimeType
		}
		if r.def.Text != nil {
			content["text"] = *r.def.Text
		} else {
			content["blob"] = r.def.Blob
		}
		if len(r.def.Meta) > 0 {
			content["_meta"] = r.def.Meta // a view's ui, as on its list entry
		}
		scope := "private"
		if r.def.CacheScope == "public" {
			scope = "public"
		}
		return nil, completed(map[string]any{
			"resultType": mcp.ResultTypeComplete,
			"contents":   []any{content},
			"ttlMs":      c.snap.settings.ListTTL(),
			"cacheScope": scope,
			"_meta":      c.snap.info,
		})
	}
	t, vars := c.snap.matchTemplate(c.uri)
	if t == nil {
		return nil, failed(newError(http.StatusBadRequest, mcp.CodeInvalidParams, "Resource not found", map[string]string{"uri": c.uri}))
	}
	raw, _ := json.Marshal(vars)
	return &target{kind: webhook.KindResource, name: t.def.Name, inputs: t.declared,
		handler: t.def.Handler, secret: t.secret, args: raw, view: catalogue.IsAppURI(c.uri)}, answer{}
}
