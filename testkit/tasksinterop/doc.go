// Package tasksinterop tests the platform's Tasks extension with an
// independent client: the official TypeScript SDK v2 client and its Tasks
// extension client, @modelcontextprotocol/ext-tasks (ts/tasks.mjs, run
// with Node against the packages scripts/ts-sdk v2 installs outside git).
// Everything lives in its tests; this file only names the package.
package tasksinterop
