// Package fleet is the fleet test's driver (scripts/fleet runs it): three
// replicas of the platform built from this repository, behind HAProxy
// (round-robin per request, no stickiness), on a PostgreSQL cluster and
// a Vault of their own, exporting spans and metrics over OTLP/HTTP to a
// receiver in the driver (testkit/otlpreceiver) and calling a tenant
// webhook in the driver. Everything listens on loopback, on free ports.
//
// The driver runs Concurrency flows at a time for the configured
// duration, of every protocol era it has a client for (an Era), through
// HAProxy only: the 2026-07-28 stateless era, whose rounds are
// tools/call requests that HAProxy spreads over the replicas; and the
// 2025-11-25 initialization era, whose sessions are sealed ids any
// replica verifies, whose calls are event streams on which the replica
// holding the call asks each round's questions, and whose answers are
// POSTs that HAProxy sends to any replica (relayed to the holder through
// PostgreSQL when it is another). Each flow is
// a real multi-round flow of the public tenant "fleet": three rounds
// (a declared form input the platform asks, then the webhook's own
// question with its plaintext state, then the result) or two (the
// webhook's question, then the result); the result names the flow and
// carries back the client's answers, so a wrong answer is caught.
//
// Beside the flows, two workers run tasks (the Tasks extension, tasks.go)
// of the tool "fleet_task" through HAProxy, one after another: created on
// one replica, then polled, answered and (one in four) cancelled through
// whichever replicas HAProxy picks, while the driver's webhook, as the
// task's backend, reports progress, a question and the result to the
// task's report URL, HAProxy's, so its reports land on any replica too,
// sending a report again while the platform cannot take it.
//
// Meanwhile, once per cycle of CycleLength, the faults come in sequence:
// a key rotation started through the admin API and followed through its
// three phases (staged, promoted, steady with the old key retired); a
// tool, a prompt and a resource added (flows use the tool once every
// replica lists it); the official TypeScript SDK v1 client called into a
// question it takes its time to answer; one replica
// SIGKILLed, the one holding that client's stream, and started again; Vault
// stopped for the outage and started (and unsealed) again; PostgreSQL
// stopped (pg_ctl -m fast) for the outage and started again; the
// catalogue items removed (after the flows using them end), until no
// replica lists them.
//
// Then it asserts, naming each failure:
//
//   - no-round-wrongly-rejected: no round was answered with a JSON-RPC
//     error (a refused state, an unknown tool), a tool error, or a result
//     that is not the flow's;
//   - failures-clean-and-explained: every round that failed failed
//     cleanly (HTTP 502/503/504/429, or the connection closed before any
//     answer, promptly: never a hang past the round timeout, never any
//     other transport failure) and a fault explains it: the round was in
//     flight on, or sent to, the SIGKILLed replica before it was back
//     (CauseKill), or it overlapped the PostgreSQL outage (CausePG). The
//     driver acts on a clean failure as a client would: it sends the
//     round again (the same answers and state; for a legacy flow, the
//     initialize, the call or the answer) after a pause that grows, for
//     as long as the round timeout allows. A legacy call of the driver
//     (whose client does not resume streams) whose replica dies under
//     it ends there: the flow fails, cleanly, and the client's recourse
//     is its next call;
//   - flow-record-complete: the admin API's record of every completed
//     flow (GET /api/v1/tenants/fleet/flows/{id}) says completed, with
//     its last round's number, and lists every answered round with the
//     replica HAProxy says answered it;
//   - traces-link-every-round: the OTLP receiver got one SERVER span per
//     answered round of every completed flow, a child of the client's
//     span for that round, in the flow's trace, naming the flow and the
//     round, exported by the replica that answered, linked to the
//     previous round's span (the link the sealed state carries from
//     replica to replica); and one flow span linked to the final round;
//   - faults-applied: every fault of every cycle happened as planned;
//   - rounds-spread-over-replicas: every replica answered rounds; at
//     least half of the completed 2026-07-28 flows had rounds on two
//     replicas or more; at least a third of the legacy answers were
//     posted to a replica other than the one holding their call;
//   - no-panic-clean-exit: no replica logged a panic, and each one
//     drained and exited cleanly on SIGTERM at the end;
//   - tasks-survive-faults: every task ended as driven (completed with
//     its own result and answer, or cancelled by the driver), none
//     failed, none was lost (its id stopped resolving) or cancelled
//     without the driver asking; at least half had requests answered by
//     two replicas or more; and tasks were in flight across the SIGKILL
//     and the PostgreSQL outage;
//   - destructive-rounds-recorded: every flow of the destructive tool
//     (fleet_deploy, driven in the 2026-07-28 era: a legacy call is one
//     stream, so a round refused for want of its record reaches the
//     client as an error in it, not a 503 to send again) whose confirmed
//     round reached the backend but that
//     the client did not see complete (its replica killed under it; the
//     round sent again and refused, its state consumed) is in the record
//     as running at that round or past it: whether the deploy happened
//     always has an answer;
//   - legacy-stream-survives-kill: the TypeScript client whose stream's
//     replica was SIGKILLed mid-question resumed at another replica,
//     which took the call over; its call completed with its own result,
//     asked once, and the backend saw one final delivery.
//
// One exemption: a completed flow with a round that the killed replica
// answered in the second before its SIGKILL is not checked against the
// record and the traces (the replica writes both in batches every 100
// ms, and SIGKILL loses what was not yet written); the summary counts
// these flows and how many of them actually lost something. Flows of
// the destructive tool have none from the record: their rounds are
// written before they are answered. A destructive round sent again after
// an attempt lost to a fault may be refused (that attempt consumed its
// state): expected, and counted as such.
//
// It prints one summary line: flows, rounds, throughput per replica,
// p50/p99 round latency, failed rounds by cause, the tasks and how the
// faults met them, the faults, the spans received, PASS or FAIL.
package fleet
