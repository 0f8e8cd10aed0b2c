// Package mrtr implements multi round-trip requests (MCP 2026-07-28):
// the wire types of InputRequiredResult and its responses, sealed request
// state bound to its request, declared inputs resolved across rounds, and
// the client-side retry driver.
//
// The parts, by file: wire.go (the wire types), capabilities.go (what a
// client declared and what an input request needs of it), codec.go (the
// AES-256-GCM key ring and token encoding), state.go (claims, sealing and
// the verification order), jcs.go (canonical arguments digests),
// flowid.go (flow ids), driver.go (the client's retry loop). Declared
// inputs: inputs.go (their declaration and kinds), compile.go (checking
// and compiling a declaration), template.go (the {{args.NAME}} text
// templates), formschema.go (an elicitation form's schema, validated
// and checked against answers), sampling.go (a sampling input's
// request), question.go (rendering a question and pinning it by digest),
// resolve.go (one round of resolution), record.go (the progress sealed
// into the state across rounds). form.go reads a form for a client (the
// terminal client's prompts).
//
// It depends on nothing platform-specific (only on package mcp, the
// protocol's own values), so it could be published with it.
package mrtr
