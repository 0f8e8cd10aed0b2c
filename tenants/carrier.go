package tenants

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

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
	kind    string // webhook.KindTool, KindPrompt or KindResource
	name    string
	inputs  *mrtr.Inputs
	handler *catalogue.Handler
	secret  string
	args    json.RawMessage // what the webhook receives as arguments
}

// responder answers a carrier request as plain JSON or, when the client
// asked for progress or log messages, as an SSE stream that carries them
// before the final response.
type responder struct {
	c   *call
	sse *sseWriter
}

func (r *responder) result(v any) {
	if r.sse != nil {
		_ = r.sse.send(response{JSONRPC: "2.0", ID: r.c.id, Result: v})
		return
	}
	writeJSON(r.c.w, http.StatusOK, response{JSONRPC: "2.0", ID: r.c.id, Result: v})
}

func (r *responder) error(e *rpcError) {
	if r.sse != nil && r.sse.started {
		_ = r.sse.send(response{JSONRPC: "2.0", ID: r.c.id, Error: e})
		return
	}
	writeError(r.c.w, r.c.id, e)
}

// progress relays a webhook's progress event when the client sent a
// progressToken.
func (r *responder) progress(ev *webhook.Event) {
	if r.sse == nil || r.c.progressToken == nil {
		return
	}
	p := map[string]any{"progressToken": r.c.progressToken, "progress": ev.Progress}
	if ev.Total != nil {
		p["total"] = *ev.Total
	}
	if ev.Message != "" {
		p["message"] = ev.Message
	}
	_ = r.sse.send(notification{JSONRPC: "2.0", Method: "notifications/progress", Params: p})
}

// logLevels orders the syslog levels MCP uses.
var logLevels = map[string]int{"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5, "alert": 6, "emergency": 7}

// log relays a webhook's log event when the request's _meta set a log
// level at or below the event's.
func (r *responder) log(ev *webhook.Event) {
	if r.sse == nil || r.c.logLevel == "" {
		return
	}
	lv, ok := logLevels[ev.Level]
	if !ok || lv < logLevels[r.c.logLevel] {
		return
	}
	p := map[string]any{"level": ev.Level, "data": ev.Data}
	if ev.Data == nil {
		p["data"] = ev.Message
	}
	if ev.Logger != "" {
		p["logger"] = ev.Logger
	}
	_ = r.sse.send(notification{JSONRPC: "2.0", Method: "notifications/message", Params: p})
}

// carrier serves tools/call, prompts/get and resources/read: verify any
// inbound state, find the target, gather declared inputs, call the
// webhook, and answer with a result or an InputRequiredResult.
func (reg *Registry) carrier(c *call) {
	s := c.snap
	b := mrtr.Binding{
		Tenant:    s.tenantID,
		Audience:  reg.audience(s),
		Method:    c.method,
		Target:    c.name,
		Principal: c.principal.Binding(),
	}
	if c.method == mcp.MethodResourcesRead {
		b.Target = c.uri
	} else {
		b.Args = c.p.Arguments
	}
	rsp := &responder{c: c}
	rd, e := reg.openRound(c, b)
	if e != nil {
		rsp.error(e)
		return
	}
	responses, e := parseResponses(c.p.InputResponses)
	if e != nil {
		rsp.error(e)
		return
	}
	var t *target
	switch c.method {
	case mcp.MethodToolsCall:
		t, e = reg.toolTarget(c, rsp)
	case mcp.MethodPromptsGet:
		t, e = reg.promptTarget(c, rsp)
	case mcp.MethodResourcesRead:
		t, e = reg.resourceTarget(c, rsp)
	}
	if e != nil {
		rsp.error(e)
		return
	}
	if t == nil {
		return // answered without a webhook
	}
	reg.runFlow(c, rsp, t, b, rd, responses)
}

// audience is the tenant endpoint's canonical URL, the audience its state
// (and, with identity, its tokens) are bound to.
func (reg *Registry) audience(s *snapshot) string {
	return strings.TrimSuffix(reg.opts.PublicURL, "/") + "/t/" + s.slug + "/mcp"
}

// toolTarget checks a tools/call request against the tool's definition.
// Invalid arguments are a tool error the model can read, answered here.
func (reg *Registry) toolTarget(c *call, rsp *responder) (*target, *rpcError) {
	tool := c.snap.tools[c.name]
	if tool == nil {
		return nil, errInvalidParams("Unknown tool: " + c.name)
	}
	args := c.p.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	} else if args[0] != '{' {
		return nil, errInvalidParams("Invalid params: arguments must be an object")
	}
	if c.principal != nil && len(tool.def.Scopes) > 0 {
		if missing := c.principal.HasScopes(tool.def.Scopes); len(missing) > 0 {
			// Name every scope the tool needs, so one new token suffices.
			c.w.Header().Set("WWW-Authenticate", auth.InsufficientScope(reg.metadataURL(c.snap), tool.def.Scopes))
			return nil, newError(http.StatusForbidden, codeInvalidRequest, "Forbidden: the token lacks scopes this tool requires", map[string]any{"requiredScopes": tool.def.Scopes})
		}
	}
	if e := checkHeaderParams(c.r.Header, tool.headers, args); e != nil {
		return nil, e
	}
	if msg := validateArgs(tool.schema, args); msg != "" {
		rsp.result(reg.toolError(c.snap, "Invalid arguments: "+msg))
		return nil, nil
	}
	return &target{kind: webhook.KindTool, name: tool.def.Name, inputs: tool.declared,
		handler: tool.def.Handler, secret: tool.secret, args: args}, nil
}

// validateArgs checks arguments against the tool's input schema and
// returns a readable reason, or "".
func validateArgs(sch *jsonschema.Schema, args json.RawMessage) string {
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
	if len(params) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(args, &m)
	for _, p := range params {
		name := "Mcp-Param-" + p.header
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
func (reg *Registry) toolError(s *snapshot, msg string) any {
	return map[string]any{
		"resultType": mcp.ResultTypeComplete,
		"content":    []any{map[string]string{"type": "text", "text": msg}},
		"isError":    true,
		"_meta":      reg.serverInfo(s),
	}
}

// promptTarget checks a prompts/get request; a template prompt without
// declared inputs is rendered here.
func (reg *Registry) promptTarget(c *call, rsp *responder) (*target, *rpcError) {
	p := c.snap.prompts[c.name]
	if p == nil {
		return nil, errInvalidParams("Unknown prompt: " + c.name)
	}
	args := map[string]string{}
	if raw := c.p.Arguments; len(raw) > 0 && string(raw) != "null" {
		if raw[0] != '{' || json.Unmarshal(raw, &args) != nil {
			return nil, errInvalidParams("Invalid params: prompt arguments must be an object of strings")
		}
	}
	var missing []string
	for _, a := range p.def.Arguments {
		if _, ok := args[a.Name]; a.Required && !ok {
			missing = append(missing, a.Name)
		}
	}
	if len(missing) > 0 {
		return nil, errInvalidParams("Invalid params: missing required prompt arguments: " + strings.Join(missing, ", "))
	}
	if p.def.Handler == nil {
		rsp.result(reg.renderPrompt(c.snap, &p.def, args))
		return nil, nil
	}
	raw, _ := json.Marshal(args)
	return &target{kind: webhook.KindPrompt, name: p.def.Name, inputs: p.declared,
		handler: p.def.Handler, secret: p.secret, args: raw}, nil
}

// renderPrompt fills a template prompt's {{argument}} placeholders.
func (reg *Registry) renderPrompt(s *snapshot, p *catalogue.Prompt, args map[string]string) any {
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
	out := map[string]any{"resultType": mcp.ResultTypeComplete, "messages": msgs, "_meta": reg.serverInfo(s)}
	if p.Description != "" {
		out["description"] = p.Description
	}
	return out
}

// resourceTarget serves a static resource directly, or finds the template
// a URI expands from.
func (reg *Registry) resourceTarget(c *call, rsp *responder) (*target, *rpcError) {
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
		rsp.result(map[string]any{
			"resultType": mcp.ResultTypeComplete,
			"contents":   []any{content},
			"ttlMs":      c.snap.settings.ListTTL(),
			"cacheScope": "private",
			"_meta":      reg.serverInfo(c.snap),
		})
		return nil, nil
	}
	t, vars := c.snap.matchTemplate(c.uri)
	if t == nil {
		return nil, newError(http.StatusBadRequest, codeInvalidParams, "Resource not found", map[string]string{"uri": c.uri})
	}
	raw, _ := json.Marshal(vars)
	return &target{kind: webhook.KindResource, name: t.def.Name, inputs: t.declared,
		handler: t.def.Handler, secret: t.secret, args: raw}, nil
}

// runFlow gathers declared inputs, calls the webhook, and answers.
func (reg *Registry) runFlow(c *call, rsp *responder, t *target, b mrtr.Binding, rd *round, responses map[string]json.RawMessage) {
	declared, hookResponses := splitResponses(responses, rd.state.Asked)
	var answers map[string]webhook.Answer
	if t.inputs.Len() > 0 {
		res, err := t.inputs.Resolve(t.args, rd.record, declared, c.caps)
		if err != nil {
			var mc *mrtr.MissingCapabilityError
			if errors.As(err, &mc) {
				rsp.error(errMissingCapability(mc.Required))
				return
			}
			reg.log.ErrorContext(c.ctx(), "declared inputs failed", "tenant", c.snap.slug, "target", t.name, "err", err)
			rsp.error(errInternal())
			return
		}
		rd.record = res.Record
		if !res.Done {
			reg.inputRequired(c, rsp, b, rd, res.Open)
			return
		}
		answers = make(map[string]webhook.Answer, len(res.Answers))
		for k, a := range res.Answers {
			answers[k] = webhook.Answer{Action: a.Action, Content: a.Content}
		}
	}
	if c.progressToken != nil || c.logLevel != "" {
		rsp.sse = newSSE(c.w)
	}
	req := &webhook.Request{
		Version:            webhook.Version,
		Kind:               t.kind,
		Name:               t.name,
		Arguments:          t.args,
		Answers:            answers,
		InputResponses:     hookResponses,
		State:              rd.state.Webhook,
		Flow:               webhook.Flow{ID: rd.flowID, Round: rd.number},
		ClientCapabilities: c.rawCaps,
		Stream:             rsp.sse != nil,
	}
	if p := c.principal; p != nil {
		req.Principal = &webhook.Principal{Issuer: p.Issuer, Subject: p.Subject, Client: p.Client}
		if p.Machine() {
			req.Principal.Subject = ""
		}
	}
	if t.kind == webhook.KindResource {
		req.URI = c.uri
	}
	start := time.Now()
	resp, err := reg.webhooks.deliver(c.ctx(), c.snap.slug, t.handler.URL, t.secret,
		time.Duration(t.handler.Timeout())*time.Millisecond, req, rsp)
	if err != nil {
		var we *WebhookError
		errors.As(err, &we)
		reg.log.WarnContext(c.ctx(), "webhook failed", "tenant", c.snap.slug, "target", t.name, "class", we.Class,
			"detail", we.Detail, "duration", time.Since(start))
		if we.Class == "canceled" {
			return
		}
		reg.webhookFailed(c, rsp, t, we)
		return
	}
	if resp.Type == webhook.TypeInputRequired {
		open, keys, e, err := webhookInputs(resp.InputRequests, c.caps)
		if err != nil {
			reg.webhookFailed(c, rsp, t, &WebhookError{Class: "contract", Detail: err.Error()})
			return
		}
		if e != nil {
			rsp.error(e)
			return
		}
		rd.state = flowState{Webhook: resp.State, Asked: keys}
		reg.inputRequired(c, rsp, b, rd, open)
		return
	}
	result, err := completeResult(t.kind, resp.Result, reg.serverInfo(c.snap))
	if err != nil {
		reg.webhookFailed(c, rsp, t, &WebhookError{Class: "contract", Detail: err.Error()})
		return
	}
	rsp.result(result)
}

// webhookFailed answers a failed delivery: a tool error result the model
// can read for tools, an internal error naming the failure otherwise.
func (reg *Registry) webhookFailed(c *call, rsp *responder, t *target, we *WebhookError) {
	msg := fmt.Sprintf("The %s's backend failed (%s): %s", t.kind, we.Class, we.Detail)
	if t.kind == webhook.KindTool {
		rsp.result(reg.toolError(c.snap, msg))
		return
	}
	rsp.error(newError(http.StatusBadGateway, codeInternal, msg, map[string]string{"webhook": we.Class}))
}

// inputRequired seals the next round's state and answers with an
// InputRequiredResult.
func (reg *Registry) inputRequired(c *call, rsp *responder, b mrtr.Binding, rd *round, open map[string]mrtr.InputRequest) {
	tok, err := reg.seal(c.ctx(), c.snap, b, rd)
	c.obs().sealOutcome(rd.sealedKey, err == nil)
	if err != nil {
		if errors.Is(err, mrtr.ErrTooManyRounds) {
			msg := fmt.Sprintf("This call needed more than %d rounds of input and was stopped.", c.snap.settings.Rounds())
			if c.method == mcp.MethodToolsCall {
				rsp.result(reg.toolError(c.snap, msg))
			} else {
				rsp.error(errInvalidParams(msg))
			}
			return
		}
		reg.log.ErrorContext(c.ctx(), "refusing to seal requestState", "tenant", c.snap.slug, "method", c.method, "err", err)
		rsp.error(errInternal())
		return
	}
	c.obs().askedInputs(open)
	rsp.result(&mrtr.InputRequiredResult{
		ResultType:    mcp.ResultTypeInputRequired,
		InputRequests: open,
		RequestState:  tok,
		Meta:          reg.serverInfo(c.snap),
	})
}

// completeResult checks a webhook's complete result against the contract
// for its kind and adds resultType and serverInfo.
func completeResult(kind string, raw json.RawMessage, meta map[string]any) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, errors.New("result must be a JSON object")
	}
	need := map[string]string{webhook.KindTool: "content", webhook.KindPrompt: "messages", webhook.KindResource: "contents"}[kind]
	if v, ok := m[need]; !ok || len(v) == 0 || v[0] != '[' {
		return nil, fmt.Errorf("a %s result needs a %q array", kind, need)
	}
	m["resultType"] = json.RawMessage(`"complete"`)
	metaObj := map[string]json.RawMessage{}
	if raw, ok := m["_meta"]; ok {
		_ = json.Unmarshal(raw, &metaObj)
	}
	for k, v := range meta {
		metaObj[k], _ = json.Marshal(v)
	}
	m["_meta"], _ = json.Marshal(metaObj)
	if kind == webhook.KindResource {
		if _, ok := m["ttlMs"]; !ok {
			m["ttlMs"] = json.RawMessage("0")
		}
		if _, ok := m["cacheScope"]; !ok {
			m["cacheScope"] = json.RawMessage(`"private"`)
		}
	}
	return m, nil
}
