// Package tenant defines what every part of the platform knows about a
// tenant without serving it: its settings (the policy stored with it and
// edited through the admin API), their defaults and validation, and the
// form of its slug. The admin API, the key manager and the MCP endpoint
// all import it; it imports none of them, only auth (the trusted issuers
// in its settings) and mrtr (the request-state defaults).
package tenant
