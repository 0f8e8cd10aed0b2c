// Package endpoint serves every tenant's MCP endpoint (POST
// /t/{slug}/mcp, protocol 2026-07-28). One request is one round; its path,
// in the order the files tell it:
//
//   - endpoint.go: Handler.ServeHTTP finds the tenant (catalogues.go: a
//     cached, per-tenant snapshot, snapshot.go), checks Host and Origin,
//     verifies the bearer token, reads the body;
//   - request.go: decodes the JSON-RPC request and checks its headers and
//     _meta against it;
//   - endpoint.go again: starts the request's span and dispatches by
//     method: lists, discovery and completions (methods.go), streams of
//     list changes (subscriptions.go), and the carrier methods;
//   - flow.go: a tools/call, prompts/get or resources/read round: the
//     inbound requestState verified (sealing.go: the tenant's key ring,
//     one sealer per round, cancelled flows), the target found
//     (targets.go), declared inputs gathered, and either the open
//     questions asked under a newly sealed state or the webhook called
//     (webhookclient.go; what a failed delivery tells the operator,
//     webhookcause.go);
//   - exchange.go: the answer written, as JSON or as an event stream
//     (jsonrpc.go: JSON-RPC errors, responses and server-sent events).
//
// The database is reached through the small interfaces of store.go.
//
// The same endpoint serves initialization-era clients (2025-11-25 and
// earlier), decided per request (era.go) and served by legacy.go:
// initialize starts a session whose id any replica verifies
// (legacysession.go), within the starts a caller and a tenant may make
// a minute (legacylimits.go); a session's tools/call, prompts/get and
// resources/read run the same rounds, bridged onto the call's event
// stream as server-to-client requests (legacybridge.go), with the
// client's answers relayed from whichever replica receives them
// (legacyrelay.go); a call's stream is stored as it is sent, so its
// client resumes it at any replica, which takes the call over when its
// holder died (legacyresume.go).
//
// A tools/call may become a task (the Tasks extension) when its tool's
// mode allows it and the request declares the extension: the task is a
// row in the store before the client hears of it (tasks.go: creation,
// tasks/get, tasks/update, tasks/cancel), the backend's signed reports
// move it on any replica (taskreport.go), a sweep from the store's
// due-time index fails tasks whose backend went silent and retries
// deliveries (tasksweep.go), and subscriptions/listen streams follow
// the tasks they name (taskwatch.go). Each lifecycle event is one
// TaskEvent (taskevent.go), handed to the sinks that take them. Legacy
// sessions run the same stored tasks with the 2025-11-25 wire
// (legacytasks.go): params.task, tasks/list and a blocking tasks/result
// that asks the task's questions on its stream.
//
// The facts of the round are gathered on the way into one Round value
// (round.go) and handed, once, after the answer is written, to every
// RoundSink: telemetry (telemetry.go: the span, its attributes, the
// metrics, the flow span) and, through Options.Sinks, any other consumer
// such as the flow recorder.
package endpoint
