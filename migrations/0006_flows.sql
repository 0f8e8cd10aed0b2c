-- The flow record: every multi-round flow and each of its rounds, written
-- in batches by the replica that served the round, read by the admin API
-- and UI. A flow's row is its latest state; its rounds are its history.
-- Rows go once the flow has not changed for the retention period.
--
-- seq numbers every change to a flow row in commit order across the fleet
-- (writers serialise on an advisory lock on PostgreSQL; SQLite has one
-- writer): a live stream resumes after the last seq it saw.
CREATE TABLE flows (
    id                TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL,
    tenant_slug       TEXT NOT NULL,
    method            TEXT NOT NULL,
    target            TEXT NOT NULL DEFAULT '',
    principal_issuer  TEXT NOT NULL DEFAULT '',
    principal_subject TEXT NOT NULL DEFAULT '',
    principal_client  TEXT NOT NULL DEFAULT '',
    client_name       TEXT NOT NULL DEFAULT '',
    client_version    TEXT NOT NULL DEFAULT '',
    era               TEXT NOT NULL DEFAULT '',
    state             TEXT NOT NULL,
    rounds            INTEGER NOT NULL DEFAULT 0,
    pending_kinds     TEXT NOT NULL DEFAULT '',
    key_id            TEXT NOT NULL DEFAULT '',
    replica           TEXT NOT NULL DEFAULT '',
    trace_id          TEXT NOT NULL DEFAULT '',
    detail            TEXT NOT NULL DEFAULT '',
    started_at        TIMESTAMP NOT NULL,
    updated_at        TIMESTAMP NOT NULL,
    waiting_since     TIMESTAMP,
    state_expires_at  TIMESTAMP,
    server_us         BIGINT NOT NULL DEFAULT 0,
    client_wait_us    BIGINT NOT NULL DEFAULT 0,
    cancel_reason     TEXT NOT NULL DEFAULT '',
    cancelled_by      TEXT NOT NULL DEFAULT '',
    seq               BIGINT NOT NULL
);

-- What the UI filters and sorts on, each with the state, so the counts
-- per state the list shows come from the index alone. The flows in
-- flight are few and change often; finished ones are many and never
-- change again, so the indexes only in-flight filters need (waiting,
-- expiry, a key's flows to cancel) are partial: a finished flow costs
-- them nothing.
CREATE INDEX flows_tenant_state ON flows (tenant_id, state, updated_at);
CREATE INDEX flows_state_updated ON flows (state, updated_at);
CREATE INDEX flows_updated ON flows (updated_at, id, state);
CREATE UNIQUE INDEX flows_seq ON flows (seq);
CREATE INDEX flows_waiting ON flows (waiting_since) WHERE state = 'awaiting_input';
CREATE INDEX flows_expiry ON flows (state_expires_at) WHERE state = 'awaiting_input';
CREATE INDEX flows_principal ON flows (principal_subject, state);
CREATE INDEX flows_key ON flows (key_id) WHERE state IN ('awaiting_input', 'running');

-- A flow's rounds, as each batch wrote them: one row per flow per batch,
-- its rounds a JSON array (the record reads them only by flow).
CREATE TABLE flow_rounds (
    flow_id   TEXT NOT NULL,
    seq       BIGINT NOT NULL,
    tenant_id TEXT NOT NULL,
    rounds    TEXT NOT NULL,
    PRIMARY KEY (flow_id, seq)
);
