// Package flows keeps the fleet-wide record of calls: every tools/call,
// prompts/get and resources/read, as a call answered at once, a
// multi-round flow (bridged onto a legacy session or not) or a task,
// every round of each written by the replica that served it, and each
// one's state derived from its rounds (awaiting input, running,
// completed, failed, cancelled, expired, rejected) with why it failed
// or was refused, in words (causes.go).
//
// The Recorder (recorder.go) is an endpoint.RoundSink: rounds go into a
// bounded queue and are written in batches, so serving never waits on
// the record (a full queue drops, counted and logged). Each write numbers
// its changes in commit order across the fleet; the Watcher (watch.go)
// follows them, prompted by PostgreSQL LISTEN/NOTIFY (on SQLite, one node
// sees its own writes) and a poll, and hands them to live streams that
// can resume after the last change they saw. The Service (service.go)
// cancels flows: in the record and through the endpoint's revocation, so
// the next round on any replica is refused.
//
// The record's tables, and how a round is encoded and a batch written,
// are package store/record's; this package reaches them through Store
// (store.go), and decides what of a round is recorded (record.go): every
// call's, but refusals only within a budget per tenant a minute, and
// successful one-round calls as the tenant samples them.
package flows
