-- Flows an admin cancelled: their next round is refused on every replica.
-- Rows are kept until no state of the flow can still be valid.
CREATE TABLE revoked_flows (
    flow_id    TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    revoked_at TIMESTAMP NOT NULL,
    expires_at TIMESTAMP NOT NULL
);

CREATE INDEX revoked_flows_expiry ON revoked_flows (expires_at);
