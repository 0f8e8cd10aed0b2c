// Package tasksinterop tests the platform's tasks with independent
// clients of both protocol eras: at 2026-07-28, the official TypeScript
// SDK v2 client and its Tasks extension client,
// @modelcontextprotocol/ext-tasks (ts/tasks.mjs); on a 2025-11-25
// session, the official TypeScript SDK v1 client's experimental tasks
// (ts/legacy.mjs); and the MCP Inspector's CLI in both eras. All run
// with Node against the packages scripts/ts-sdk installs outside git.
// Everything lives in its tests; this file only names the package.
package tasksinterop
