package endpoint

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/opsmcp/platform/catalogue"
	"github.com/opsmcp/platform/internal/jsontext"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/tenant"
)

// snapshot is one tenant's catalogue as served: immutable, indexed for
// constant-time lookup, with list entries pre-rendered so list methods
// only copy bytes. A change builds a new snapshot; requests in flight keep
// the one they started with.
type snapshot struct {
	// size estimates the heap the snapshot holds (see snapshotSize);
	// used is when a request last looked it up (Unix ns), for the
	// cache's evictions.
	size int64
	used atomic.Int64

	tenantID    string
	slug        string
	displayName string
	disabled    bool
	settings    tenant.Settings
	version     int64
	origins     map[string]bool
	// info is the serverInfo _meta every result carries; never mutated.
	info map[string]any
	// resultMeta is info encoded, for the results webhooks send.
	resultMeta resultMeta
	// audience is the endpoint's canonical URL, which state (and tokens)
	// are bound to; metadataURL is its protected-resource metadata.
	audience, metadataURL string
	// scopes are every scope the tenant advertises or a tool requires.
	scopes []string

	tools    map[string]*toolEntry
	toolList []json.RawMessage
	// legacyToolList is toolList as legacy sessions see it: a tool that
	// may run as a task says so (execution.taskSupport), which
	// 2026-07-28 leaves off the wire.
	legacyToolList []json.RawMessage
	// tasks says a tool may run as a task: server/discover advertises
	// the Tasks extension.
	tasks     bool
	prompts   map[string]*promptEntry
	promptLst []json.RawMessage
	resources map[string]*resourceEntry
	resList   []json.RawMessage
	templates []*templateEntry
	tmplList  []json.RawMessage
}

type toolEntry struct {
	def catalogue.Tool
	// schema validates a call's arguments; nil when the input schema
	// accepts every object (catalogue.AcceptsAnyObject), so arguments,
	// always an object, need no decoding to be checked.
	schema *jsonschema.Schema
	secret string
	// headers maps a lower-cased Mcp-Param-{Name} suffix to its argument.
	headers map[string]headerParam
	// declared are the inputs gathered before the webhook is called.
	declared *mrtr.Inputs
	// spanName and flowName name the tool's request spans and flow
	// spans, built once (spanNames).
	spanName, flowName string
	// appOnly says it is for views only (MCP Apps).
	appOnly bool
}

type headerParam struct {
	header   string // as declared
	property string
	typ      string // string, integer or boolean
}

type promptEntry struct {
	def      catalogue.Prompt
	secret   string
	declared *mrtr.Inputs
	spanName string
	flowName string
}

type resourceEntry struct {
	def catalogue.Resource
}

type templateEntry struct {
	def      catalogue.ResourceTemplate
	tmpl     *catalogue.URITemplate
	secret   string
	declared *mrtr.Inputs
}

// buildSnapshot indexes a catalogue read from the store, for a platform
// of the given version at publicURL. A definition that no longer parses
// (written by a newer version, say) is skipped and logged by the caller
// rather than taking the whole tenant down.
func buildSnapshot(c *store.Catalogue, version, publicURL string) (*snapshot, []error) {
	s := &snapshot{
		tenantID:    c.Tenant.ID,
		slug:        c.Tenant.Slug,
		displayName: c.Tenant.DisplayName,
		disabled:    c.Tenant.Disabled,
		version:     c.Tenant.CatalogueVersion,
		tools:       map[string]*toolEntry{},
		prompts:     map[string]*promptEntry{},
		resources:   map[string]*resourceEntry{},
		origins:     map[string]bool{},
	}
	var errs []error
	var err error
	if s.settings, err = tenant.ParseSettings(c.Tenant.Settings); err != nil {
		errs = append(errs, err)
	}
	base := strings.TrimSuffix(publicURL, "/")
	s.audience = base + "/t/" + s.slug + "/mcp"
	s.metadataURL = base + "/.well-known/oauth-protected-resource/t/" + s.slug + "/mcp"
	info := map[string]any{"name": "opsmcp/" + s.slug, "title": s.displayName, "version": version}
	if len(s.settings.Icons) > 0 {
		info["icons"] = s.settings.Icons
	}
	s.info = map[string]any{mcp.MetaServerInfo: info}
	s.resultMeta = newResultMeta(s.info)
	for _, o := range s.settings.AllowedOrigins {
		s.origins[strings.TrimSuffix(o, "/")] = true
	}
	secret := func(it *store.Item) string {
		if it.WebhookSecret == nil {
			return ""
		}
		return *it.WebhookSecret
	}
	for i := range c.Items {
		it := &c.Items[i]
		switch catalogue.Kind(it.Kind) {
		case catalogue.KindTool:
			e := &toolEntry{secret: secret(it)}
			if err := json.Unmarshal([]byte(it.Spec), &e.def); err != nil {
				errs = append(errs, fmt.Errorf("tool %q: %w", it.Name, err))
				continue
			}
			sch, err := catalogue.CompileSchema(e.def.InputSchema)
			if err != nil {
				errs = append(errs, fmt.Errorf("tool %q: input schema: %w", it.Name, err))
				continue
			}
			if e.declared, err = declaredInputs(e.def.Inputs); err != nil {
				errs = append(errs, fmt.Errorf("tool %q: inputs: %w", it.Name, err))
				continue
			}
			if catalogue.AcceptsAnyObject(e.def.InputSchema) {
				sch = nil
			}
			e.schema, e.headers, e.appOnly = sch, headerParams(e.def.InputSchema), e.def.AppOnly()
			e.spanName, e.flowName = spanNames(mcp.MethodToolsCall, e.def.Name)
			s.tools[e.def.Name] = e
			listing := mustJSON(toolListing(&e.def))
			s.toolList = append(s.toolList, listing)
			if e.def.TaskMode() != catalogue.TaskNever {
				s.tasks = true
				listing = mustJSON(legacyToolListing(&e.def))
			}
			s.legacyToolList = append(s.legacyToolList, listing)
		case catalogue.KindPrompt:
			e := &promptEntry{secret: secret(it)}
			if err := json.Unmarshal([]byte(it.Spec), &e.def); err != nil {
				errs = append(errs, fmt.Errorf("prompt %q: %w", it.Name, err))
				continue
			}
			var err error
			if e.declared, err = declaredInputs(e.def.Inputs); err != nil {
				errs = append(errs, fmt.Errorf("prompt %q: inputs: %w", it.Name, err))
				continue
			}
			e.spanName, e.flowName = spanNames(mcp.MethodPromptsGet, e.def.Name)
			s.prompts[e.def.Name] = e
			s.promptLst = append(s.promptLst, mustJSON(promptListing(&e.def)))
		case catalogue.KindResource:
			e := &resourceEntry{}
			if err := json.Unmarshal([]byte(it.Spec), &e.def); err != nil {
				errs = append(errs, fmt.Errorf("resource %q: %w", it.Name, err))
				continue
			}
			s.resources[e.def.URI] = e
			s.resList = append(s.resList, mustJSON(resourceListing(&e.def)))
		case catalogue.KindResourceTemplate:
			e := &templateEntry{secret: secret(it)}
			if err := json.Unmarshal([]byte(it.Spec), &e.def); err != nil {
				errs = append(errs, fmt.Errorf("resource template %q: %w", it.Name, err))
				continue
			}
			t, err := catalogue.ParseURITemplate(e.def.URITemplate)
			if err != nil {
				errs = append(errs, fmt.Errorf("resource template %q: %w", it.Name, err))
				continue
			}
			if e.declared, err = declaredInputs(e.def.Inputs); err != nil {
				errs = append(errs, fmt.Errorf("resource template %q: inputs: %w", it.Name, err))
				continue
			}
			e.tmpl = t
			s.templates = append(s.templates, e)
			s.tmplList = append(s.tmplList, mustJSON(templateListing(&e.def)))
		}
	}
	seen := map[string]bool{}
	for _, sc := range s.settings.Auth.Scopes {
		if !seen[sc] {
			seen[sc] = true
			s.scopes = append(s.scopes, sc)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.tools)) {
		for _, sc := range s.tools[name].def.Scopes {
			if !seen[sc] {
				seen[sc] = true
				s.scopes = append(s.scopes, sc)
			}
		}
	}
	s.size = snapshotSize(c)
	// Items arrive ordered by kind and name; templates are matched in that
	// order, so the first registered name wins when two templates overlap.
	sort.SliceStable(s.templates, func(i, j int) bool { return s.templates[i].def.Name < s.templates[j].def.Name })
	return s, errs
}

// snapshotSize estimates the heap a tenant's snapshot holds from what it
// is built of: a fixed part (the maps, serverInfo, the settings) and,
// for each item, its definition decoded, its pre-rendered list entry
// and its compiled schemas and inputs, which grow with the definition's
// JSON. Calibrated against BenchmarkSnapshotSize (2026-12-04): tenants
// of one and three tools, each with a declared form question (430 bytes
// of definition), hold 7.2 and 16.2 KB of heap; this says 7.0 and 16.0.
// A static resource is mostly its content, held once: it counts as its
// definition's bytes.
func snapshotSize(c *store.Catalogue) int64 {
	n := int64(snapshotBase + len(c.Tenant.Settings))
	for i := range c.Items {
		it := &c.Items[i]
		if catalogue.Kind(it.Kind) == catalogue.KindResource {
			// Mostly its text or blob, held once, as written.
			n += itemBase + int64(len(it.Spec))
			continue
		}
		n += itemBase + specFactor*int64(len(it.Spec))
	}
	return n
}

// The estimate's parts (snapshotSize).
const (
	snapshotBase = 2560
	itemBase     = 1024
	specFactor   = 8
)

// declaredInputs decodes and compiles a definition's declared inputs.
func declaredInputs(raw json.RawMessage) (*mrtr.Inputs, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var in []mrtr.Input
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, err
	}
	return mrtr.CompileInputs(in)
}

func mustJSON(v any) json.RawMessage {
	b, err := jsontext.Marshal(v) // a tenant's _meta and text as registered
	if err != nil {
		panic(fmt.Sprintf("marshal catalogue listing: %v", err))
	}
	return b
}

// toolEntryJSON is a tool's list entry: the MCP fields only, its _meta
// (a view's link) as registered.
type toolEntryJSON struct {
	Name         string                     `json:"name"`
	Title        string                     `json:"title,omitempty"`
	Description  string                     `json:"description,omitempty"`
	Icons        []catalogue.Icon           `json:"icons,omitempty"`
	InputSchema  json.RawMessage            `json:"inputSchema"`
	OutputSchema json.RawMessage            `json:"outputSchema,omitempty"`
	Annotations  *catalogue.ToolAnnotations `json:"annotations,omitempty"`
	Meta         json.RawMessage            `json:"_meta,omitempty"`
}

// toolListing is a tool as tools/list shows it.
func toolListing(t *catalogue.Tool) any {
	return toolEntryJSON{t.Name, t.Title, t.Description, t.Icons, t.InputSchema, t.OutputSchema, t.Annotations, t.Meta}
}

// legacyToolListing is a tool that may run as a task as legacy sessions
// list it: with its execution.taskSupport.
func legacyToolListing(t *catalogue.Tool) any {
	type execution struct {
		TaskSupport string `json:"taskSupport"`
	}
	return struct {
		toolEntryJSON
		Execution execution `json:"execution"`
	}{toolListing(t).(toolEntryJSON), execution{taskSupport(t.TaskMode())}}
}

func promptListing(p *catalogue.Prompt) any {
	type arg struct {
		Name        string `json:"name"`
		Title       string `json:"title,omitempty"`
		Description string `json:"description,omitempty"`
		Required    bool   `json:"required,omitempty"`
	}
	args := make([]arg, len(p.Arguments))
	for i, a := range p.Arguments {
		args[i] = arg{a.Name, a.Title, a.Description, a.Required}
	}
	return struct {
		Name        string           `json:"name"`
		Title       string           `json:"title,omitempty"`
		Description string           `json:"description,omitempty"`
		Icons       []catalogue.Icon `json:"icons,omitempty"`
		Arguments   []arg            `json:"arguments,omitempty"`
	}{p.Name, p.Title, p.Description, p.Icons, args}
}

func resourceListing(r *catalogue.Resource) any {
	return struct {
		URI         string           `json:"uri"`
		Name        string           `json:"name"`
		Title       string           `json:"title,omitempty"`
		Description string           `json:"description,omitempty"`
		MimeType    string           `json:"mimeType,omitempty"`
		Icons       []catalogue.Icon `json:"icons,omitempty"`
		Annotations json.RawMessage  `json:"annotations,omitempty"`
		Meta        json.RawMessage  `json:"_meta,omitempty"`
	}{r.URI, r.Name, r.Title, r.Description, r.MimeType, r.Icons, r.Annotations, r.Meta}
}

func templateListing(r *catalogue.ResourceTemplate) any {
	return struct {
		URITemplate string           `json:"uriTemplate"`
		Name        string           `json:"name"`
		Title       string           `json:"title,omitempty"`
		Description string           `json:"description,omitempty"`
		MimeType    string           `json:"mimeType,omitempty"`
		Icons       []catalogue.Icon `json:"icons,omitempty"`
		Meta        json.RawMessage  `json:"_meta,omitempty"`
	}{r.URITemplate, r.Name, r.Title, r.Description, r.MimeType, r.Icons, r.Meta}
}

// headerParams finds the x-mcp-header properties of an input schema
// (validated at registration: top-level properties, primitive types).
func headerParams(raw json.RawMessage) map[string]headerParam {
	var s struct {
		Properties map[string]struct {
			Header string `json:"x-mcp-header"`
			Type   string `json:"type"`
		} `json:"properties"`
	}
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	var out map[string]headerParam
	for name, p := range s.Properties {
		if p.Header == "" {
			continue
		}
		if out == nil {
			out = map[string]headerParam{}
		}
		out[strings.ToLower(p.Header)] = headerParam{header: p.Header, property: name, typ: p.Type}
	}
	return out
}

// matchTemplate finds the template a URI expands from.
func (s *snapshot) matchTemplate(uri string) (*templateEntry, map[string]string) {
	for _, t := range s.templates {
		if vars, ok := t.tmpl.Match(uri); ok {
			return t, vars
		}
	}
	return nil, nil
}

// spanNames are a target's request span name, "{method} {name}", and its
// flow span name, "flow {method} {name}", sharing one string.
func spanNames(method, name string) (span, flow string) {
	flow = "flow " + method + " " + name
	return flow[len("flow "):], flow
}
