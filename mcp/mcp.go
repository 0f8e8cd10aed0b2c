// Package mcp holds the Model Context Protocol's own values, defined once
// for the server, the client and package mrtr: revisions, method and
// notification names, HTTP header names and their value encoding, _meta
// keys, JSON-RPC and MCP error codes, and result types. It imports
// nothing but the standard library.
package mcp

// Revisions.
const (
	// Version is the revision of stateless, per-request metadata that
	// every tenant endpoint speaks.
	Version = "2026-07-28"

	// Revisions of the initialization era, which the endpoints also
	// serve: a client that opens with initialize gets a session at one
	// of these.
	Version20251125 = "2025-11-25"
	Version20250618 = "2025-06-18"
	Version20250326 = "2025-03-26"
)

// LegacyVersions are the initialization-era revisions served, newest
// first: initialize echoes a requested one and offers the first
// otherwise.
var LegacyVersions = []string{Version20251125, Version20250618, Version20250326}

// IsLegacyVersion reports whether v is one of LegacyVersions.
func IsLegacyVersion(v string) bool {
	switch v {
	case Version20251125, Version20250618, Version20250326:
		return true
	}
	return false
}

// Methods, client to server.
const (
	MethodDiscover               = "server/discover"
	MethodToolsList              = "tools/list"
	MethodToolsCall              = "tools/call"
	MethodPromptsList            = "prompts/list"
	MethodPromptsGet             = "prompts/get"
	MethodResourcesList          = "resources/list"
	MethodResourcesTemplatesList = "resources/templates/list"
	MethodResourcesRead          = "resources/read"
	MethodComplete               = "completion/complete"
	MethodSubscriptionsListen    = "subscriptions/listen"

	// Methods of the Tasks extension. tasks/result and tasks/list are the
	// 2025-11-25 revision's (its experimental tasks): 2026-07-28 removed
	// them.
	MethodTasksGet    = "tasks/get"
	MethodTasksUpdate = "tasks/update"
	MethodTasksCancel = "tasks/cancel"
	MethodTasksResult = "tasks/result"
	MethodTasksList   = "tasks/list"

	// Methods of the initialization era (2025-11-25 and before).
	MethodInitialize  = "initialize"
	MethodPing        = "ping"
	MethodSetLevel    = "logging/setLevel"
	MethodSubscribe   = "resources/subscribe"
	MethodUnsubscribe = "resources/unsubscribe"
)

// Methods a server asks a client: embedded in an InputRequiredResult at
// 2026-07-28, sent as requests on a stream before it.
const (
	MethodElicit        = "elicitation/create"
	MethodCreateMessage = "sampling/createMessage"
	MethodListRoots     = "roots/list"
)

// Notifications.
const (
	NotificationInitialized              = "notifications/initialized"
	NotificationCancelled                = "notifications/cancelled"
	NotificationProgress                 = "notifications/progress"
	NotificationMessage                  = "notifications/message"
	NotificationToolsListChanged         = "notifications/tools/list_changed"
	NotificationPromptsListChanged       = "notifications/prompts/list_changed"
	NotificationResourcesListChanged     = "notifications/resources/list_changed"
	NotificationResourceUpdated          = "notifications/resources/updated"
	NotificationSubscriptionsAcknowledge = "notifications/subscriptions/acknowledged"
	NotificationElicitationComplete      = "notifications/elicitation/complete"
	NotificationRootsListChanged         = "notifications/roots/list_changed"
	// NotificationTasks carries a task's state to subscriptions/listen
	// streams that named it (the Tasks extension);
	// NotificationTasksStatus is the 2025-11-25 revision's, on a session.
	NotificationTasks       = "notifications/tasks"
	NotificationTasksStatus = "notifications/tasks/status"
)

// ExtensionTasks names the Tasks extension in capabilities.extensions.
const ExtensionTasks = "io.modelcontextprotocol/tasks"

// ExtensionUI names the MCP Apps extension (interactive views a host
// renders) in capabilities.extensions.
const ExtensionUI = "io.modelcontextprotocol/ui"

// HTTP headers of the Streamable HTTP transport.
const (
	HeaderProtocolVersion = "MCP-Protocol-Version"
	HeaderMethod          = "Mcp-Method"
	HeaderName            = "Mcp-Name"
	// HeaderParamPrefix precedes the x-mcp-header name of a tool argument
	// sent as a header.
	HeaderParamPrefix = "Mcp-Param-"
	HeaderSessionID   = "Mcp-Session-Id"
	// HeaderLastEventID asks a legacy server to resume a stream.
	HeaderLastEventID = "Last-Event-ID"
)

// Keys of the per-request and per-result _meta.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
	// MetaRelatedTask ties a 2025-11-25 message to a task.
	MetaRelatedTask = "io.modelcontextprotocol/related-task"
)

// JSON-RPC and MCP error codes.
const (
	CodeParseError       = -32700
	CodeInvalidRequest   = -32600
	CodeMethodNotFound   = -32601
	CodeInvalidParams    = -32602
	CodeInternalError    = -32603
	CodeResourceNotFound = -32002
	// CodeSessionNotFound answers a legacy request whose session is
	// unknown, expired or ended (with HTTP 404), as the reference SDKs do.
	CodeSessionNotFound           = -32001
	CodeHeaderMismatch            = -32020
	CodeMissingRequiredCapability = -32021
	CodeUnsupportedVersion        = -32022
)

// Result types carried in every 2026-07-28 result's resultType.
const (
	ResultTypeComplete      = "complete"
	ResultTypeInputRequired = "input_required"
	// ResultTypeTask is a tools/call answered with a task (the Tasks
	// extension's CreateTaskResult).
	ResultTypeTask = "task"
)

// IsCarrier reports whether method may answer with an InputRequiredResult
// (and so the only methods whose requestState is verified).
func IsCarrier(method string) bool {
	switch method {
	case MethodToolsCall, MethodPromptsGet, MethodResourcesRead:
		return true
	}
	return false
}
