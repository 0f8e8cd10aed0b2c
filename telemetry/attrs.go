package telemetry

import "go.opentelemetry.io/otel/attribute"

// Attributes of the MCP semantic conventions (semconv v1.39 to v1.41,
// now in semantic-conventions-genai), and the general ones MCP spans use.
const (
	AttrMCPMethod          = attribute.Key("mcp.method.name")
	AttrMCPProtocolVersion = attribute.Key("mcp.protocol.version")
	AttrMCPSessionID       = attribute.Key("mcp.session.id") // legacy sessions only
	AttrMCPResourceURI     = attribute.Key("mcp.resource.uri")
	AttrJSONRPCRequestID   = attribute.Key("jsonrpc.request.id")
	AttrRPCStatusCode      = attribute.Key("rpc.response.status_code")
	AttrErrorType          = attribute.Key("error.type")
	AttrGenAIOperation     = attribute.Key("gen_ai.operation.name")
	AttrGenAIToolName      = attribute.Key("gen_ai.tool.name")
	AttrGenAIPromptName    = attribute.Key("gen_ai.prompt.name")
	AttrToolCallArguments  = attribute.Key("gen_ai.tool.call.arguments") // opt-in per tenant
	AttrToolCallResult     = attribute.Key("gen_ai.tool.call.result")    // opt-in per tenant
	AttrNetworkTransport   = attribute.Key("network.transport")
	AttrNetworkProtoName   = attribute.Key("network.protocol.name")
	AttrNetworkProtoVer    = attribute.Key("network.protocol.version")
	AttrClientAddress      = attribute.Key("client.address")
	AttrClientPort         = attribute.Key("client.port")
	AttrServerAddress      = attribute.Key("server.address")
	AttrServerPort         = attribute.Key("server.port")
	AttrHTTPMethod         = attribute.Key("http.request.method")
	AttrHTTPStatus         = attribute.Key("http.response.status_code")
	AttrDBSystem           = attribute.Key("db.system.name")
	AttrDBOperation        = attribute.Key("db.operation.name")
	AttrDBCollection       = attribute.Key("db.collection.name")
	AttrDBSummary          = attribute.Key("db.query.summary")
)

// OperationExecuteTool is gen_ai.operation.name on tools/call spans.
const OperationExecuteTool = "execute_tool"

// ErrorToolError is error.type for a CallToolResult with isError set.
const ErrorToolError = "tool_error"

// The platform's own namespace, opsmcp.*. The MCP conventions have no
// attributes for multi round-trip requests, so every MRTR round span
// carries these (none of them ever holds a secret: no token, state,
// answer or webhook secret is recorded anywhere).
const (
	// AttrTenant is the tenant's slug: on spans always, on metrics only
	// for tenants that exist (an unknown slug is never a label).
	AttrTenant = attribute.Key("opsmcp.tenant")
	// AttrFlowID is the flow id (fl_…), the same on every round of one
	// flow; spans only, never a metric label.
	AttrFlowID = attribute.Key("opsmcp.flow.id")
	// AttrFlowRound is this request's round: 1 for a fresh call, n+1 for
	// the retry of round n.
	AttrFlowRound = attribute.Key("opsmcp.flow.round")
	// AttrResultType is complete or input_required.
	AttrResultType = attribute.Key("opsmcp.mrtr.result_type")
	// AttrInputKeys and AttrInputKinds list the input requests an
	// InputRequiredResult asked, sorted by key, as parallel arrays: the
	// wire key (a declared input's name, or wh.<key> for a webhook's own)
	// and its kind (form, url, sampling or roots).
	AttrInputKeys  = attribute.Key("opsmcp.mrtr.input_request.keys")
	AttrInputKinds = attribute.Key("opsmcp.mrtr.input_request.kinds")
	// AttrStateVerify is the inbound requestState's outcome: verified or
	// rejected (absent on a fresh call). A rejection's reason is the
	// attribute AttrRejectReason of the span event EventStateRejected,
	// never on the wire.
	AttrStateVerify = attribute.Key("opsmcp.state.verify.outcome")
	// AttrStateVerifyKey is the id of the key that verified it.
	AttrStateVerifyKey = attribute.Key("opsmcp.state.verify.key_id")
	// AttrStateSeal is minted when this round sealed a new requestState,
	// failed when it could not.
	AttrStateSeal = attribute.Key("opsmcp.state.seal.outcome")
	// AttrStateSealKey is the id of the key that sealed it.
	AttrStateSealKey = attribute.Key("opsmcp.state.seal.key_id")
	// AttrRejectReason is why a requestState was rejected (expired,
	// binding, unknown_key, …).
	AttrRejectReason = attribute.Key("opsmcp.state.rejection.reason")
	// AttrFlowRounds is the number of rounds of a completed flow (flow
	// span).
	AttrFlowRounds = attribute.Key("opsmcp.flow.rounds")
	// AttrFlowClientWait is the seconds the flow spent waiting on the
	// client between rounds (flow span).
	AttrFlowClientWait = attribute.Key("opsmcp.flow.client_wait")
	// AttrFlowServerTime is the seconds the platform spent serving the
	// flow's rounds (flow span).
	AttrFlowServerTime = attribute.Key("opsmcp.flow.server_time")
	// AttrFlowOutcome is how a flow ended: complete, tool_error or error.
	AttrFlowOutcome = attribute.Key("opsmcp.flow.outcome")
	// AttrWebhookKind is tool, prompt or resource (webhook metrics; on the
	// span it is in the name, "webhook {kind} {target}").
	AttrWebhookKind = attribute.Key("opsmcp.webhook.kind")
	// AttrWebhookOutcome is complete, input_required, or the failure
	// class (timeout, connect, refused_address, status, invalid_json,
	// contract, oversize, canceled): a label of the webhook duration (on
	// the span, a failure's class is error.type).
	AttrWebhookOutcome = attribute.Key("opsmcp.webhook.outcome")
	// AttrWebhookClass is a webhook failure's class (metrics).
	AttrWebhookClass = attribute.Key("opsmcp.webhook.failure_class")
	// AttrTaskID is a task's id (spans only).
	AttrTaskID = attribute.Key("opsmcp.task.id")
	// AttrTaskStatus is a task's status (working, input_required,
	// completed, failed, cancelled): on lifecycle spans and the tasks
	// gauge.
	AttrTaskStatus = attribute.Key("opsmcp.task.status")
	// AttrTaskEvent is a lifecycle event's kind (progress,
	// input_required, answered, completed, failed, cancelled, delivered).
	AttrTaskEvent = attribute.Key("opsmcp.task.event")
	// AttrTaskBy is who caused a lifecycle event: backend, client,
	// platform, or admin (spans only; never the admin's name).
	AttrTaskBy = attribute.Key("opsmcp.task.by")
	// AttrTaskCause is why the platform failed a task: deadline,
	// delivery.
	AttrTaskCause = attribute.Key("opsmcp.task.cause")
)

// EventStateRejected is the span event of a rejected requestState.
const EventStateRejected = "opsmcp.state.rejected"
