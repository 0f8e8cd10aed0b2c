-- Per-tenant request-state key rings of the local keys provider (dev and
-- single-node use; the Vault provider keeps them in Vault). Each row is
-- the tenant's ring and rotation record, sealed under the configured
-- master key with the tenant id as associated data. version is the
-- check-and-set counter: every write names the version it read.
CREATE TABLE key_rings (
    tenant_id  TEXT PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    version    BIGINT NOT NULL,
    sealed     TEXT NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
