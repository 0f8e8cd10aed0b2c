// Package tenant defines what every part of the platform knows about a
// tenant without serving it: its settings (the policy stored with it and
// edited through the admin API), their defaults and validation, and the
// form of its slug. It is a leaf: the admin API, the key manager and the
// MCP endpoint all import it, and it imports none of them.
package tenant
