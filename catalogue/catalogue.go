// Package catalogue defines what a tenant's MCP endpoint serves (tools,
// prompts, resources and resource templates), validates definitions at
// registration, and indexes them for constant-time lookup on the request
// path.
package catalogue

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// Kind is one class of catalogue item.
type Kind string

// The catalogue kinds.
const (
	KindTool             Kind = "tool"
	KindPrompt           Kind = "prompt"
	KindResource         Kind = "resource"
	KindResourceTemplate Kind = "resource_template"
)

// Handler answers calls the platform cannot answer from the definition
// alone. For now every handler is a tenant webhook.
type Handler struct {
	// Type is "webhook" (the default when empty).
	Type string `json:"type,omitempty"`
	// URL is the tenant's HTTPS (or, for private targets, HTTP) endpoint.
	URL string `json:"url"`
	// TimeoutMs bounds one delivery; 0 means DefaultTimeoutMs.
	TimeoutMs int `json:"timeoutMs,omitempty"`
}

// Handler timeout bounds, in milliseconds.
const (
	DefaultTimeoutMs = 10_000
	MaxTimeoutMs     = 120_000
)

// Timeout returns the effective timeout in milliseconds.
func (h *Handler) Timeout() int {
	if h == nil || h.TimeoutMs == 0 {
		return DefaultTimeoutMs
	}
	return h.TimeoutMs
}

// ToolAnnotations are the MCP hints about a tool's behaviour.
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// Tool is a callable tool.
type Tool struct {
	Name         string           `json:"name"`
	Title        string           `json:"title,omitempty"`
	Description  string           `json:"description,omitempty"`
	InputSchema  json.RawMessage  `json:"inputSchema"`
	OutputSchema json.RawMessage  `json:"outputSchema,omitempty"`
	Annotations  *ToolAnnotations `json:"annotations,omitempty"`
	Handler      *Handler         `json:"handler"`
	// Inputs are declared inputs the platform gathers from the user
	// before calling the handler (multi round-trip requests).
	Inputs json.RawMessage `json:"inputs,omitempty"`
	// Scopes a caller's token must carry to call the tool.
	Scopes []string `json:"scopes,omitempty"`
	// SingleUse makes each request state of the tool's flows good for one
	// webhook call, fleet-wide: a replayed round is refused instead of
	// running the tool twice. Tools with annotations.destructiveHint are
	// single-use whatever this says.
	SingleUse bool `json:"singleUse,omitempty"`
	// Task says whether the tool's calls may run as tasks (the Tasks
	// extension), for work longer than one delivery's deadline.
	Task *TaskSettings `json:"task,omitempty"`
	// Icons are images clients may show for the tool.
	Icons []Icon `json:"icons,omitempty"`
	// Meta is the tool's _meta, served in tools/list as registered: the
	// link to its view (ui.resourceUri, ui.visibility: MCP Apps) and
	// other namespaced keys.
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// TaskSettings say whether a tool's calls run as tasks, and for how long.
type TaskSettings struct {
	// Mode is TaskNever (the default), TaskMay or TaskMust.
	Mode string `json:"mode,omitempty"`
	// TTLMs is how long a task is kept from its creation, finished or not;
	// 0 means DefaultTaskTTLMs.
	TTLMs int64 `json:"ttlMs,omitempty"`
	// DeadlineMs is the longest the backend may go without a report while
	// a task is working, before the task fails; 0 means
	// DefaultTaskDeadlineMs (or less, to stay below the TTL).
	DeadlineMs int64 `json:"deadlineMs,omitempty"`
	// PollIntervalMs is how often clients are asked to poll; 0 means
	// DefaultTaskPollIntervalMs.
	PollIntervalMs int64 `json:"pollIntervalMs,omitempty"`
}

// Task modes.
const (
	// TaskNever: every call answers within one delivery.
	TaskNever = "never"
	// TaskMay: a call from a client that can follow tasks is offered to
	// the backend as one, which may accept it or answer at once.
	TaskMay = "may"
	// TaskMust: as TaskMay, and a client that cannot follow tasks is
	// refused (-32021).
	TaskMust = "must"
)

// Task bounds and defaults, in milliseconds.
const (
	DefaultTaskTTLMs          = 3_600_000
	MaxTaskTTLMs              = 7 * 24 * 3_600_000
	DefaultTaskDeadlineMs     = 600_000
	MinTaskDeadlineMs         = 1_000
	DefaultTaskPollIntervalMs = 2_000
	MinTaskPollIntervalMs     = 100
	MaxTaskPollIntervalMs     = 60_000
)

// TaskMode is the tool's task mode, TaskNever when unset.
func (t *Tool) TaskMode() string {
	if t.Task == nil || t.Task.Mode == "" {
		return TaskNever
	}
	return t.Task.Mode
}

// TTL is a task's lifetime in milliseconds.
func (s *TaskSettings) TTL() int64 {
	if s == nil || s.TTLMs == 0 {
		return DefaultTaskTTLMs
	}
	return s.TTLMs
}

// Deadline is how long, in milliseconds, a working task may go without a
// report: the setting, or the default, kept below the TTL.
func (s *TaskSettings) Deadline() int64 {
	if s != nil && s.DeadlineMs > 0 {
		return s.DeadlineMs
	}
	return min(int64(DefaultTaskDeadlineMs), s.TTL()-1)
}

// PollInterval is the polling interval clients are asked to keep, in
// milliseconds.
func (s *TaskSettings) PollInterval() int64 {
	if s == nil || s.PollIntervalMs == 0 {
		return DefaultTaskPollIntervalMs
	}
	return s.PollIntervalMs
}

// OnceOnly reports whether each request state of t's flows is consumed by
// the round that calls its webhook.
func (t *Tool) OnceOnly() bool {
	return t.SingleUse || (t.Annotations != nil && t.Annotations.DestructiveHint != nil && *t.Annotations.DestructiveHint)
}

// PromptArgument is one argument a prompt takes.
type PromptArgument struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
	// Completions are the values completion/complete offers for this
	// argument, filtered by the typed prefix.
	Completions []string `json:"completions,omitempty"`
}

// PromptMessage is one message template of a prompt. Text content may use
// {{name}} to insert an argument.
type PromptMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Prompt is a prompt template, answered either from its message templates
// or by its handler.
type Prompt struct {
	Name        string           `json:"name"`
	Title       string           `json:"title,omitempty"`
	Description string           `json:"description,omitempty"`
	Arguments   []PromptArgument `json:"arguments,omitempty"`
	Messages    []PromptMessage  `json:"messages,omitempty"`
	Handler     *Handler         `json:"handler,omitempty"`
	Inputs      json.RawMessage  `json:"inputs,omitempty"`
	Icons       []Icon           `json:"icons,omitempty"`
}

// Resource is a static resource: text or a base64 blob.
type Resource struct {
	Name        string          `json:"name"`
	URI         string          `json:"uri"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	MimeType    string          `json:"mimeType,omitempty"`
	Text        *string         `json:"text,omitempty"`
	Blob        string          `json:"blob,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
	Icons       []Icon          `json:"icons,omitempty"`
	// Meta is the resource's _meta, on its list entry and on what a read
	// returns: a view's ui (its CSP origins, permissions, domain, border).
	Meta json.RawMessage `json:"_meta,omitempty"`
	// CacheScope is what reads say of caching: "private" (the default:
	// per user) or "public", content the same for every user.
	CacheScope string `json:"cacheScope,omitempty"`
}

// ResourceTemplate is an RFC 6570 URI template whose reads go to a handler.
type ResourceTemplate struct {
	Name        string   `json:"name"`
	URITemplate string   `json:"uriTemplate"`
	Title       string   `json:"title,omitempty"`
	Description string   `json:"description,omitempty"`
	MimeType    string   `json:"mimeType,omitempty"`
	Handler     *Handler `json:"handler"`
	// Completions offer values for template variables, by variable name.
	Completions map[string][]string `json:"completions,omitempty"`
	Inputs      json.RawMessage     `json:"inputs,omitempty"`
	Icons       []Icon              `json:"icons,omitempty"`
	// Meta is the template's _meta, on its list entry: a ui:// template's
	// ui, which its handler's answers may carry too.
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// NewWebhookSecret returns a fresh webhook signing secret. It is shown to
// the tenant once and never again.
func NewWebhookSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return "whsec_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// FieldError names one invalid field of a definition.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ValidationError lists every problem found in one definition, so a
// tenant fixes them all in one pass.
type ValidationError struct {
	Errors []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, f := range e.Errors {
		parts[i] = f.Field + ": " + f.Message
	}
	return "invalid definition: " + strings.Join(parts, "; ")
}

// problems accumulates field errors.
type problems []FieldError

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return &ValidationError{Errors: p}
}
