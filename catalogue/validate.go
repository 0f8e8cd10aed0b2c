package catalogue

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
)

// namePattern is the MCP tool naming rule (1 to 128 of ASCII letters,
// digits, '_', '-' and '.'). Every catalogue name follows it, so each item
// is addressable in admin API paths without escaping.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// Length limits keep one definition from bloating every list response.
const (
	maxTitle       = 256
	maxDescription = 16 << 10
	// maxURI also keeps a resource's URI within what PostgreSQL can
	// index (its unique index refuses entries over about 2.7 kB).
	maxURI = 2048
)

// ValidateName checks a catalogue item name.
func ValidateName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("must be 1 to 128 characters of A-Z, a-z, 0-9, '_', '-' or '.'")
	}
	return nil
}

func (p *problems) common(name, title, description string) {
	if err := ValidateName(name); err != nil {
		p.add("name", "%v", err)
	}
	if len(title) > maxTitle {
		p.add("title", "must be at most %d bytes", maxTitle)
	}
	if len(description) > maxDescription {
		p.add("description", "must be at most %d bytes", maxDescription)
	}
}

// handler checks a handler; required says whether one must be present.
func (p *problems) handler(field string, h *Handler, required bool) {
	if h == nil {
		if required {
			p.add(field, "is required")
		}
		return
	}
	if h.Type != "" && h.Type != "webhook" {
		p.add(field+".type", "unknown handler type %q; the only type is \"webhook\"", h.Type)
	}
	if err := ValidateWebhookURL(h.URL); err != nil {
		p.add(field+".url", "%v", err)
	}
	if h.TimeoutMs < 0 || h.TimeoutMs > MaxTimeoutMs {
		p.add(field+".timeoutMs", "must be between 1 and %d (0 means the default %d)", MaxTimeoutMs, DefaultTimeoutMs)
	}
}

// task checks a tool's task settings.
func (p *problems) task(field string, s *TaskSettings) {
	if s == nil {
		return
	}
	switch s.Mode {
	case "", TaskNever, TaskMay, TaskMust:
	default:
		p.add(field+".mode", "must be %q, %q or %q, not %q", TaskNever, TaskMay, TaskMust, s.Mode)
	}
	if s.TTLMs != 0 && (s.TTLMs < 2*MinTaskDeadlineMs || s.TTLMs > MaxTaskTTLMs) {
		p.add(field+".ttlMs", "must be between %d and %d (0 means the default %d)", 2*MinTaskDeadlineMs, MaxTaskTTLMs, DefaultTaskTTLMs)
	}
	if s.DeadlineMs != 0 && (s.DeadlineMs < MinTaskDeadlineMs || s.DeadlineMs >= s.TTL()) {
		p.add(field+".deadlineMs", "must be at least %d and below the task's TTL (%d)", MinTaskDeadlineMs, s.TTL())
	}
	if s.PollIntervalMs != 0 && (s.PollIntervalMs < MinTaskPollIntervalMs || s.PollIntervalMs > MaxTaskPollIntervalMs) {
		p.add(field+".pollIntervalMs", "must be between %d and %d (0 means the default %d)", MinTaskPollIntervalMs, MaxTaskPollIntervalMs, DefaultTaskPollIntervalMs)
	}
}

// ValidateWebhookURL checks that u is an absolute http(s) URL without
// credentials or fragment. Whether its host may be private is decided at
// connect time, not here.
func ValidateWebhookURL(u string) error {
	if u == "" {
		return errors.New("is required")
	}
	if len(u) > 2048 {
		return errors.New("must be at most 2048 characters")
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return errors.New("is not a valid URL")
	}
	switch {
	case parsed.Scheme != "https" && parsed.Scheme != "http":
		return fmt.Errorf("scheme must be https or http, not %q", parsed.Scheme)
	case parsed.Host == "" || parsed.Hostname() == "":
		return errors.New("must name a host")
	case parsed.User != nil:
		return errors.New("must not carry credentials; the platform signs every delivery instead")
	case parsed.Fragment != "" || strings.Contains(u, "#"):
		return errors.New("must not have a fragment")
	}
	return nil
}

// ValidateTool checks a tool definition.
func ValidateTool(t *Tool) error {
	var p problems
	p.common(t.Name, t.Title, t.Description)
	if len(t.InputSchema) == 0 {
		p.add("inputSchema", "is required (use {\"type\":\"object\"} for a tool without arguments)")
	} else if _, err := CompileSchema(t.InputSchema); err != nil {
		p.schemaError("inputSchema", err)
	} else {
		p.objectSchema("inputSchema", t.InputSchema)
		p.headerParams("inputSchema", t.InputSchema)
	}
	if len(t.OutputSchema) > 0 {
		if _, err := CompileSchema(t.OutputSchema); err != nil {
			p.schemaError("outputSchema", err)
		} else {
			p.objectSchema("outputSchema", t.OutputSchema)
		}
	}
	p.handler("handler", t.Handler, true)
	p.inputs(t.Inputs)
	p.task("task", t.Task)
	for i, sc := range t.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \"\\") {
			p.add(fmt.Sprintf("scopes[%d]", i), "must be a non-empty scope token")
		}
	}
	p.icons("icons", t.Icons)
	p.toolMeta(t)
	// A call a view makes reaches the platform as any other: nothing
	// tells the host what to do with questions or a task on it.
	if t.AppOnly() {
		if len(t.Inputs) > 0 && string(t.Inputs) != "null" {
			p.add("inputs", "a tool for views only (visibility [\"app\"]) cannot declare inputs: hosts cannot ask them of a view's call")
		}
		if t.TaskMode() != TaskNever {
			p.add("task.mode", "a tool for views only (visibility [\"app\"]) cannot run as a task")
		}
	}
	return p.err()
}

// ValidatePrompt checks a prompt definition.
func ValidatePrompt(pr *Prompt) error {
	var p problems
	p.common(pr.Name, pr.Title, pr.Description)
	seen := map[string]bool{}
	for i, a := range pr.Arguments {
		f := fmt.Sprintf("arguments[%d]", i)
		if a.Name == "" || len(a.Name) > 128 {
			p.add(f+".name", "must be 1 to 128 characters")
		} else if seen[a.Name] {
			p.add(f+".name", "duplicate argument %q", a.Name)
		}
		seen[a.Name] = true
	}
	switch {
	case len(pr.Messages) == 0 && pr.Handler == nil:
		p.add("messages", "a prompt needs either messages or a handler")
	case len(pr.Messages) > 0 && pr.Handler != nil:
		p.add("handler", "a prompt takes either messages or a handler, not both")
	}
	for i, m := range pr.Messages {
		f := fmt.Sprintf("messages[%d]", i)
		if m.Role != "user" && m.Role != "assistant" {
			p.add(f+".role", "must be \"user\" or \"assistant\"")
		}
		p.contentBlock(f+".content", m.Content)
	}
	p.handler("handler", pr.Handler, false)
	p.inputs(pr.Inputs)
	p.icons("icons", pr.Icons)
	return p.err()
}

// ValidateResource checks a static resource definition.
func ValidateResource(r *Resource) error {
	var p problems
	p.common(r.Name, r.Title, r.Description)
	if err := validateURI(r.URI); err != nil {
		p.add("uri", "%v", err)
	}
	switch {
	case r.Text == nil && r.Blob == "":
		p.add("text", "a resource needs text or blob")
	case r.Text != nil && r.Blob != "":
		p.add("blob", "a resource takes text or blob, not both")
	case r.Blob != "":
		if _, err := base64.StdEncoding.Strict().DecodeString(r.Blob); err != nil {
			p.add("blob", "must be standard base64")
		}
	}
	if len(r.Annotations) > 0 && !isJSONObject(r.Annotations) {
		p.add("annotations", "must be an object")
	}
	sizeField, size := "blob", base64.StdEncoding.DecodedLen(len(r.Blob))
	if r.Text != nil {
		sizeField, size = "text", len(*r.Text)
	}
	p.view("uri", r.URI, r.MimeType, sizeField, size)
	p.icons("icons", r.Icons)
	p.viewMeta("_meta", r.Meta, IsAppURI(r.URI))
	if r.CacheScope != "" && r.CacheScope != "private" && r.CacheScope != "public" {
		p.add("cacheScope", "must be private (the default) or public")
	}
	return p.err()
}

// ValidateResourceTemplate checks a resource template definition.
func ValidateResourceTemplate(rt *ResourceTemplate) error {
	var p problems
	p.common(rt.Name, rt.Title, rt.Description)
	tmpl, err := ParseURITemplate(rt.URITemplate)
	if err != nil {
		p.add("uriTemplate", "%v", err)
	}
	p.handler("handler", rt.Handler, true)
	if tmpl != nil {
		for _, v := range slices.Sorted(maps.Keys(rt.Completions)) {
			if !tmpl.HasVar(v) {
				p.add("completions."+v, "the template has no variable %q", v)
			}
		}
	}
	p.inputs(rt.Inputs)
	p.view("uriTemplate", rt.URITemplate, rt.MimeType, "", 0)
	p.icons("icons", rt.Icons)
	p.viewMeta("_meta", rt.Meta, IsAppURI(rt.URITemplate))
	if IsAppURI(rt.URITemplate) && len(rt.Inputs) > 0 && string(rt.Inputs) != "null" {
		p.add("inputs", "a ui:// template cannot declare inputs: hosts read views without asking anyone")
	}
	return p.err()
}

func validateURI(u string) error {
	if u == "" {
		return errors.New("is required")
	}
	if len(u) > maxURI {
		return fmt.Errorf("must be at most %d bytes", maxURI)
	}
	parsed, err := url.Parse(u)
	if err != nil || parsed.Scheme == "" {
		return errors.New("must be an absolute URI with a scheme")
	}
	return nil
}

func isJSONObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

// contentBlock checks the shape of one MCP content block.
func (p *problems) contentBlock(field string, raw json.RawMessage) {
	var b struct {
		Type     string          `json:"type"`
		Text     *string         `json:"text"`
		Data     string          `json:"data"`
		MimeType string          `json:"mimeType"`
		Resource json.RawMessage `json:"resource"`
		URI      string          `json:"uri"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		p.add(field, "must be a content block object")
		return
	}
	switch b.Type {
	case "text":
		if b.Text == nil {
			p.add(field+".text", "is required for text content")
		}
	case "image", "audio":
		if b.MimeType == "" {
			p.add(field+".mimeType", "is required for %s content", b.Type)
		}
		if _, err := base64.StdEncoding.DecodeString(b.Data); err != nil || b.Data == "" {
			p.add(field+".data", "must be non-empty standard base64")
		}
	case "resource":
		if !isJSONObject(b.Resource) {
			p.add(field+".resource", "must be an object with uri and text or blob")
		}
	case "resource_link":
		if err := validateURI(b.URI); err != nil {
			p.add(field+".uri", "%v", err)
		}
	default:
		p.add(field+".type", "must be text, image, audio, resource or resource_link")
	}
}

// inputs checks declared inputs, once the resolver validates them.
func (p *problems) inputs(raw json.RawMessage) {
	if len(raw) == 0 || string(raw) == "null" {
		return
	}
	if err := validateInputs(raw); err != nil {
		p.add("inputs", "%v", err)
	}
}

// validateInputs decodes declared inputs strictly and checks them with
// the resolver's own rules, so a mistake is reported at registration, not
// to a user mid-call.
func validateInputs(raw json.RawMessage) error {
	var list []mrtr.Input
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&list); err != nil {
		return fmt.Errorf("must be an array of input objects: %v", err)
	}
	return mrtr.ValidateInputs(list)
}

// schemaDialect2020 is the only JSON Schema dialect accepted.
const schemaDialect2020 = "https://json-schema.org/draft/2020-12/schema"

// denyLoader refuses every external $ref: a schema must be self-contained,
// and the platform never reads files or URLs named by a tenant.
type denyLoader struct{}

func (denyLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("external reference %q is not allowed; schemas must be self-contained", u)
}

// AcceptsAnyObject reports whether an input schema accepts every JSON
// object: {"type":"object"}, as a tool without arguments declares it,
// with at most annotations, no properties ({}), no required members ([])
// and additional properties allowed. A call's arguments are always an
// object, so such a tool's need no validation; the common case, decided
// once per catalogue instead of decoding the arguments each call. Any
// other keyword, or a value it cannot read, answers false.
func AcceptsAnyObject(raw json.RawMessage) bool {
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil || members == nil {
		return false
	}
	// emptyObject: {} (a JSON object with no members).
	emptyObject := func(v json.RawMessage) bool {
		var m map[string]json.RawMessage
		return json.Unmarshal(v, &m) == nil && m != nil && len(m) == 0
	}
	for k, v := range members {
		var ok bool
		switch k {
		case "type":
			var t string
			ok = json.Unmarshal(v, &t) == nil && t == "object"
		case "properties":
			ok = emptyObject(v)
		case "additionalProperties":
			var b bool
			ok = emptyObject(v) || (json.Unmarshal(v, &b) == nil && b)
		case "required":
			var r []json.RawMessage
			ok = json.Unmarshal(v, &r) == nil && r != nil && len(r) == 0
		case "$schema":
			ok = string(v) == `"`+schemaDialect2020+`"`
		case "title", "description", "$comment":
			var text string
			ok = json.Unmarshal(v, &text) == nil
		}
		if !ok {
			return false
		}
	}
	return true
}

// CompileSchema compiles a JSON Schema 2020-12 document. The error, when
// it is a metaschema violation, carries the offending location.
func CompileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, &schemaError{path: "", msg: "is not valid JSON"}
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		if _, isBool := doc.(bool); !isBool {
			return nil, &schemaError{path: "", msg: "must be a JSON Schema object"}
		}
	}
	if d, ok := obj["$schema"]; ok && d != schemaDialect2020 {
		return nil, &schemaError{path: "/$schema", msg: fmt.Sprintf("must be %q (JSON Schema 2020-12) or absent", schemaDialect2020)}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(denyLoader{})
	const loc = "urn:opsmcp:schema"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, &schemaError{msg: err.Error()}
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, schemaErrorFrom(err)
	}
	return s, nil
}

// schemaError is a schema compile failure at a JSON pointer in the schema.
type schemaError struct {
	path string
	msg  string
}

func (e *schemaError) Error() string { return e.path + ": " + e.msg }

// schemaErrorFrom finds the most specific location in a metaschema
// validation failure, so the tenant is told exactly which keyword is bad.
func schemaErrorFrom(err error) *schemaError {
	var sv *jsonschema.SchemaValidationError
	if errors.As(err, &sv) {
		var ve *jsonschema.ValidationError
		if errors.As(sv.Err, &ve) {
			leaf := ve
			for len(leaf.Causes) > 0 {
				leaf = leaf.Causes[0]
			}
			msg := leaf.Error()
			// The library prefixes messages with the instance location; keep
			// only the description.
			if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "at ") {
				msg = msg[i+2:]
			}
			return &schemaError{path: pointer(leaf.InstanceLocation), msg: msg}
		}
	}
	msg := err.Error()
	msg = strings.ReplaceAll(msg, "urn:opsmcp:schema#", "")
	msg = strings.ReplaceAll(msg, "urn:opsmcp:schema", "schema")
	return &schemaError{msg: msg}
}

func pointer(loc []string) string {
	if len(loc) == 0 {
		return ""
	}
	var b strings.Builder
	for _, s := range loc {
		b.WriteByte('/')
		s = strings.ReplaceAll(s, "~", "~0")
		b.WriteString(strings.ReplaceAll(s, "/", "~1"))
	}
	return b.String()
}

func (p *problems) schemaError(field string, err error) {
	var se *schemaError
	if errors.As(err, &se) {
		p.add(field+se.path, "%s", se.msg)
		return
	}
	p.add(field, "%v", err)
}

// objectSchema enforces MCP's rule that tool input and output schemas
// describe objects.
func (p *problems) objectSchema(field string, raw json.RawMessage) {
	var s struct {
		Type json.RawMessage `json:"type"`
	}
	if json.Unmarshal(raw, &s) != nil || string(s.Type) != `"object"` {
		p.add(field+"/type", `must be "object"`)
	}
}

// headerParams checks x-mcp-header annotations: only on string, integer
// or boolean properties reached from the root through properties, with
// names that are RFC 9110 tokens, unique ignoring case.
func (p *problems) headerParams(field string, raw json.RawMessage) {
	seen := map[string]string{}
	var walk func(path string, raw json.RawMessage, viaProperties bool)
	walk = func(path string, raw json.RawMessage, viaProperties bool) {
		var s map[string]json.RawMessage
		if json.Unmarshal(raw, &s) != nil {
			return
		}
		if h, ok := s["x-mcp-header"]; ok {
			var name string
			var typ string
			_ = json.Unmarshal(s["type"], &typ)
			switch {
			case json.Unmarshal(h, &name) != nil || !mcp.ValidHeaderName(name):
				p.add(field+path+"/x-mcp-header", "must be a header-name token (RFC 9110)")
			case !viaProperties:
				p.add(field+path+"/x-mcp-header", "is allowed only on properties reached through \"properties\" from the root")
			case typ != "string" && typ != "integer" && typ != "boolean":
				p.add(field+path+"/x-mcp-header", "is allowed only on string, integer or boolean properties")
			default:
				key := strings.ToLower(name)
				if prev, dup := seen[key]; dup {
					p.add(field+path+"/x-mcp-header", "duplicates the header of %s (names are compared ignoring case)", prev)
				}
				seen[key] = path
			}
		}
		// In key order, so the same schema always gets the same errors in
		// the same order (and a duplicate header is blamed on the same
		// property).
		for _, k := range slices.Sorted(maps.Keys(s)) {
			v := s[k]
			switch k {
			case "properties":
				var props map[string]json.RawMessage
				if json.Unmarshal(v, &props) == nil {
					for _, name := range slices.Sorted(maps.Keys(props)) {
						walk(path+"/properties/"+name, props[name], viaProperties)
					}
				}
			case "items", "additionalProperties", "not", "if", "then", "else", "contains":
				walk(path+"/"+k, v, false)
			case "allOf", "anyOf", "oneOf", "prefixItems":
				var list []json.RawMessage
				if json.Unmarshal(v, &list) == nil {
					for i, sub := range list {
						walk(fmt.Sprintf("%s/%s/%d", path, k, i), sub, false)
					}
				}
			case "$defs", "definitions", "patternProperties":
				var m map[string]json.RawMessage
				if json.Unmarshal(v, &m) == nil {
					for _, name := range slices.Sorted(maps.Keys(m)) {
						walk(path+"/"+k+"/"+name, m[name], false)
					}
				}
			}
		}
	}
	walk("", raw, true)
}
