-- The flow record: every multi-round flow and each of its rounds, written
-- in batches by the replica that served the round, read by the admin API
-- and UI. A flow's row is its latest state; its rounds are its history.
-- Rows go once the flow has not changed for the retention period.
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
    cancelled_by      TEXT NOT NULL DEFAULT ''
);

-- What the UI filters and sorts on: state within a tenant, newest first;
-- how long flows have waited; a principal's flows; a key's flows.
CREATE INDEX flows_tenant_state ON flows (tenant_id, state, updated_at);
CREATE INDEX flows_state_updated ON flows (state, updated_at);
CREATE INDEX flows_waiting ON flows (state, waiting_since);
CREATE INDEX flows_expiry ON flows (state, state_expires_at);
CREATE INDEX flows_principal ON flows (principal_subject, principal_issuer);
CREATE INDEX flows_key ON flows (key_id);
CREATE INDEX flows_updated ON flows (updated_at);

CREATE TABLE flow_rounds (
    flow_id          TEXT NOT NULL,
    n                INTEGER NOT NULL,
    seq              INTEGER NOT NULL DEFAULT 0,
    tenant_id        TEXT NOT NULL,
    arrived_at       TIMESTAMP NOT NULL,
    ended_at         TIMESTAMP NOT NULL,
    server_us        BIGINT NOT NULL DEFAULT 0,
    client_wait_us   BIGINT NOT NULL DEFAULT 0,
    result_type      TEXT NOT NULL DEFAULT '',
    error_class      TEXT NOT NULL DEFAULT '',
    state_in         TEXT NOT NULL DEFAULT '',
    key_in           TEXT NOT NULL DEFAULT '',
    key_out          TEXT NOT NULL DEFAULT '',
    state_expires_at TIMESTAMP,
    asked            TEXT NOT NULL DEFAULT '',
    answers          TEXT NOT NULL DEFAULT '',
    webhook          TEXT NOT NULL DEFAULT '',
    principal        TEXT NOT NULL DEFAULT '',
    client           TEXT NOT NULL DEFAULT '',
    replica          TEXT NOT NULL DEFAULT '',
    trace_id         TEXT NOT NULL DEFAULT '',
    span_id          TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (flow_id, n, seq)
);

CREATE INDEX flow_rounds_ended ON flow_rounds (ended_at);

-- Every change to a flow, in commit order (writers serialise on an
-- advisory lock on PostgreSQL; SQLite has one writer), so a stream can
-- resume after the last event it saw, on any replica.
CREATE TABLE flow_events (
    id        BIGINT PRIMARY KEY,
    flow_id   TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    at        TIMESTAMP NOT NULL
);

CREATE INDEX flow_events_at ON flow_events (at);
