// Package keys gives every tenant its own request-state sealing keys and
// rotates them on a schedule in three phases, without failing a round in
// flight on any replica.
//
// A tenant's ring and its rotation record live together in one stored
// [Record]: in HashiCorp Vault (KV v2, one entry per tenant, every write
// check-and-set) or, for dev and single-node use, in the platform's
// database encrypted under a master key. Key material is either held in
// the record (AES-256-GCM ring keys of package mrtr) or never leaves
// Vault (a per-tenant Transit key whose versions are the ring's keys).
//
// Rotation goes steady [old] → staged [old, new] (new verifies only) →
// promoted [new, old] (new mints) → steady [new]. The scheduler on every
// replica advances a tenant's phase when it is due; check-and-set makes
// exactly one replica's write win. Promotion waits for the propagation
// margin (the refresh interval plus the clock skew) after staging, so
// every replica verifies the new key before any replica mints with it;
// retirement waits for the tenant's state TTL plus the margin after
// promotion, so no live token still needs the old key.
package keys
