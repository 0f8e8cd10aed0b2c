-- Tasks (the Tasks extension): a tools/call whose backend accepted the
-- work and reports on it later. The row is the task's truth, written
-- before the client learns the id, read by whichever replica answers
-- tasks/get, tasks/update and tasks/cancel or takes the backend's
-- report. Nothing of an open task lives in a replica's memory: deadlines
-- and retries are due_at, swept from the index; rows go at expires_at
-- (created_at + ttl).
--
-- principal_hash binds the task to who created it (issuer, subject,
-- client), as sealed request state is bound; secret is the backend's
-- per-task report key, sealed at rest like webhook secrets.
CREATE TABLE tasks (
    id                TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    tenant_slug       TEXT NOT NULL,
    flow_id           TEXT NOT NULL,
    tool              TEXT NOT NULL,
    era               TEXT NOT NULL DEFAULT '',
    session_id        TEXT NOT NULL DEFAULT '',
    principal_hash    TEXT NOT NULL DEFAULT '',
    principal_issuer  TEXT NOT NULL DEFAULT '',
    principal_subject TEXT NOT NULL DEFAULT '',
    principal_client  TEXT NOT NULL DEFAULT '',
    client_name       TEXT NOT NULL DEFAULT '',
    client_version    TEXT NOT NULL DEFAULT '',
    capabilities      TEXT NOT NULL DEFAULT '',
    status            TEXT NOT NULL,
    status_message    TEXT NOT NULL DEFAULT '',
    input_requests    TEXT NOT NULL DEFAULT '',
    asked_keys        TEXT NOT NULL DEFAULT '',
    pending_answers   TEXT NOT NULL DEFAULT '',
    cancel_pending    BOOLEAN NOT NULL DEFAULT FALSE,
    result            TEXT NOT NULL DEFAULT '',
    error             TEXT NOT NULL DEFAULT '',
    secret            TEXT NOT NULL,
    last_seq          BIGINT NOT NULL DEFAULT 0,
    attempts          INTEGER NOT NULL DEFAULT 0,
    events            INTEGER NOT NULL DEFAULT 0,
    ttl_ms            BIGINT NOT NULL,
    poll_interval_ms  BIGINT NOT NULL,
    deadline_ms       BIGINT NOT NULL,
    traceparent       TEXT NOT NULL DEFAULT '',
    cancelled_by      TEXT NOT NULL DEFAULT '',
    created_at        TIMESTAMP NOT NULL,
    updated_at        TIMESTAMP NOT NULL,
    expires_at        TIMESTAMP NOT NULL,
    due_at            TIMESTAMP,
    version           BIGINT NOT NULL DEFAULT 1
);

-- Live tasks per tenant and per principal (the limits), a caller's own
-- (tasks/list of 2025-11-25), what is due (deadlines, deliveries to
-- retry), and what has expired.
CREATE INDEX tasks_tenant_status ON tasks (tenant_id, status, principal_hash);
CREATE INDEX tasks_due ON tasks (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX tasks_expiry ON tasks (expires_at);
CREATE INDEX tasks_flow ON tasks (flow_id);

-- A flow's kind in the record: '' for a multi-round flow, 'task' for a
-- task (the other kinds come with the record of every call); a task's
-- status message as its latest event left it.
ALTER TABLE flows ADD COLUMN kind TEXT NOT NULL DEFAULT '';
ALTER TABLE flows ADD COLUMN message TEXT NOT NULL DEFAULT '';
