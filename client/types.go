package client

import (
	"bytes"
	"encoding/json"
	"sort"

	"github.com/opsmcp/platform/mrtr"
)

// Implementation names a client or a server.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Title   string `json:"title,omitempty"`
}

// Content is one content block: text, image, audio, resource_link or an
// embedded resource (and, in sampling, tool_use and tool_result). Raw
// keeps the block exactly as received.
type Content struct {
	Type     string            `json:"type"`
	Text     string            `json:"text,omitempty"`
	Data     string            `json:"data,omitempty"`
	MimeType string            `json:"mimeType,omitempty"`
	URI      string            `json:"uri,omitempty"`
	Name     string            `json:"name,omitempty"`
	Resource *ResourceContents `json:"resource,omitempty"`
	Raw      json.RawMessage   `json:"-"`
}

// UnmarshalJSON keeps the raw block beside its common fields.
func (c *Content) UnmarshalJSON(b []byte) error {
	type plain Content
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*c = Content(p)
	c.Raw = append(json.RawMessage(nil), b...)
	return nil
}

// MarshalJSON sends the raw block when the content was received, the
// fields otherwise.
func (c Content) MarshalJSON() ([]byte, error) {
	if len(c.Raw) > 0 {
		return c.Raw, nil
	}
	type plain Content
	return json.Marshal(plain(c))
}

// TextContent returns a text block.
func TextContent(text string) Content { return Content{Type: "text", Text: text} }

// Contents is a list of content blocks that also accepts a single block
// on the wire (sampling messages may carry either).
type Contents []Content

// UnmarshalJSON accepts one block or an array of blocks.
func (cs *Contents) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		var c Content
		if err := json.Unmarshal(b, &c); err != nil {
			return err
		}
		*cs = Contents{c}
		return nil
	}
	var list []Content
	if err := json.Unmarshal(b, &list); err != nil {
		return err
	}
	*cs = list
	return nil
}

// ResourceContents is a resource's text or base64 blob.
type ResourceContents struct {
	URI      string `json:"uri"`
	MimeType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     string `json:"blob,omitempty"`
}

// CacheHints are the caching fields of list, read and discover results.
type CacheHints struct {
	// TTLMs is how long the result may be reused, in milliseconds (nil
	// when the server sent none).
	TTLMs      *int64 `json:"ttlMs,omitempty"`
	CacheScope string `json:"cacheScope,omitempty"`
}

// DiscoverResult is the answer to server/discover.
type DiscoverResult struct {
	SupportedVersions []string        `json:"supportedVersions"`
	Capabilities      json.RawMessage `json:"capabilities"`
	Instructions      string          `json:"instructions,omitempty"`
	// ServerInfo comes from _meta["io.modelcontextprotocol/serverInfo"]
	// (or, from older drafts, a serverInfo member).
	ServerInfo Implementation  `json:"-"`
	Raw        json.RawMessage `json:"-"`
	CacheHints
}

// Tool is a tool as listed.
type Tool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Meta         json.RawMessage `json:"_meta,omitempty"`
	// HeaderParams are the arguments this client mirrors into
	// Mcp-Param-* headers, from the schema's x-mcp-header annotations.
	HeaderParams []HeaderParam `json:"-"`
}

// DroppedTool is a listed tool the client will not call, because its
// x-mcp-header annotations are invalid.
type DroppedTool struct {
	Name   string
	Reason string
}

// ListToolsResult is one page of tools/list. Tools whose x-mcp-header
// annotations are invalid are not in Tools but in Dropped.
type ListToolsResult struct {
	Tools      []Tool          `json:"tools"`
	NextCursor string          `json:"nextCursor,omitempty"`
	Dropped    []DroppedTool   `json:"-"`
	Raw        json.RawMessage `json:"-"`
	CacheHints
}

// CallToolResult is the complete answer to tools/call, or, in manual
// mode, the InputRequiredResult to answer.
type CallToolResult struct {
	Content           []Content       `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
	Meta              json.RawMessage `json:"_meta,omitempty"`
	Raw               json.RawMessage `json:"-"`
	// InputRequired is set, in manual mode only, when the server asked
	// for input; the other fields are then empty.
	InputRequired *mrtr.Pending `json:"-"`
	// Task is the task the call became: with NoWait, the task just
	// created (the other fields are then empty); else the task as it
	// ended.
	Task *Task `json:"-"`
}

// Prompt is a prompt as listed.
type Prompt struct {
	Name        string           `json:"name"`
	Title       string           `json:"title,omitempty"`
	Description string           `json:"description,omitempty"`
	Arguments   []PromptArgument `json:"arguments,omitempty"`
}

// PromptArgument is one argument a prompt takes.
type PromptArgument struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// ListPromptsResult is one page of prompts/list.
type ListPromptsResult struct {
	Prompts    []Prompt        `json:"prompts"`
	NextCursor string          `json:"nextCursor,omitempty"`
	Raw        json.RawMessage `json:"-"`
	CacheHints
}

// PromptMessage is one message of a prompt.
type PromptMessage struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
}

// GetPromptResult is the complete answer to prompts/get, or, in manual
// mode, the InputRequiredResult to answer.
type GetPromptResult struct {
	Description   string          `json:"description,omitempty"`
	Messages      []PromptMessage `json:"messages"`
	Raw           json.RawMessage `json:"-"`
	InputRequired *mrtr.Pending   `json:"-"`
}

// Resource is a resource as listed.
type Resource struct {
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
	Size        *int64 `json:"size,omitempty"`
}

// ListResourcesResult is one page of resources/list.
type ListResourcesResult struct {
	Resources  []Resource      `json:"resources"`
	NextCursor string          `json:"nextCursor,omitempty"`
	Raw        json.RawMessage `json:"-"`
	CacheHints
}

// ResourceTemplate is a resource template as listed.
type ResourceTemplate struct {
	URITemplate string `json:"uriTemplate"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
}

// ListResourceTemplatesResult is one page of resources/templates/list.
type ListResourceTemplatesResult struct {
	ResourceTemplates []ResourceTemplate `json:"resourceTemplates"`
	NextCursor        string             `json:"nextCursor,omitempty"`
	Raw               json.RawMessage    `json:"-"`
	CacheHints
}

// ReadResourceResult is the complete answer to resources/read, or, in
// manual mode, the InputRequiredResult to answer.
type ReadResourceResult struct {
	Contents      []ResourceContents `json:"contents"`
	Raw           json.RawMessage    `json:"-"`
	InputRequired *mrtr.Pending      `json:"-"`
	CacheHints
}

// CompletionRef names what completion/complete completes: a prompt
// ({Type: "ref/prompt", Name}) or a resource template ({Type:
// "ref/resource", URI: the template}).
type CompletionRef struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
	URI  string `json:"uri,omitempty"`
}

// CompleteResult is the answer to completion/complete.
type CompleteResult struct {
	Values  []string        `json:"values"`
	Total   *int            `json:"total,omitempty"`
	HasMore bool            `json:"hasMore,omitempty"`
	Raw     json.RawMessage `json:"-"`
}

// Progress is a notifications/progress the server sent while answering.
type Progress struct {
	Token    json.RawMessage `json:"progressToken"`
	Progress float64         `json:"progress"`
	Total    *float64        `json:"total,omitempty"`
	Message  string          `json:"message,omitempty"`
}

// LogMessage is a notifications/message the server sent while answering
// (only when Options.LogLevel asks for them).
type LogMessage struct {
	Level  string          `json:"level"`
	Logger string          `json:"logger,omitempty"`
	Data   json.RawMessage `json:"data"`
}

// Root is one of the client's roots.
type Root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// ElicitRequest is an elicitation/create the server asks.
type ElicitRequest struct {
	// Key is the server's key for the request in inputRequests.
	Key string
	// Mode is "form" or "url".
	Mode    string
	Message string
	// RequestedSchema is the form's schema (form mode).
	RequestedSchema json.RawMessage
	// URL is the page to open (URL mode).
	URL string
	// Params are the request's params as sent.
	Params json.RawMessage
}

// ElicitResult is the answer to an elicitation.
type ElicitResult = mrtr.ElicitResult

// SamplingMessage is one message of a sampling request.
type SamplingMessage struct {
	Role    string   `json:"role"`
	Content Contents `json:"content"`
}

// SamplingRequest is a sampling/createMessage the server asks.
type SamplingRequest struct {
	Key              string            `json:"-"`
	Messages         []SamplingMessage `json:"messages"`
	SystemPrompt     string            `json:"systemPrompt,omitempty"`
	MaxTokens        int               `json:"maxTokens"`
	Temperature      *float64          `json:"temperature,omitempty"`
	StopSequences    []string          `json:"stopSequences,omitempty"`
	IncludeContext   string            `json:"includeContext,omitempty"`
	ModelPreferences json.RawMessage   `json:"modelPreferences,omitempty"`
	Tools            json.RawMessage   `json:"tools,omitempty"`
	Params           json.RawMessage   `json:"-"`
}

// SamplingResult is the answer to a sampling request
// (CreateMessageResult).
type SamplingResult struct {
	Role       string  `json:"role"`
	Content    Content `json:"content"`
	Model      string  `json:"model"`
	StopReason string  `json:"stopReason,omitempty"`
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
