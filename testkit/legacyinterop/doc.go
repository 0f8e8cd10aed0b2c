// Package legacyinterop tests the platform's service to
// initialization-era (2025-11-25) MCP clients with independent clients
// and a fleet: the official TypeScript SDK v1 client (ts/client.mjs, run
// with Node against the SDK that scripts/ts-sdk installs outside git),
// the official Go SDK's session-based client, and two replicas behind a
// round-robin proxy, one of which is killed while it holds a bridged
// call's stream. Everything lives in its tests; this file only names the
// package.
package legacyinterop
