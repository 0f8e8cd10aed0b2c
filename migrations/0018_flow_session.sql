-- The legacy session a bridged flow ran in (its id as the sessions API
-- shows it), so an admin goes from a session to exactly its flows. Only
-- bridged flows have one: the index holds no other row, and costs the
-- record's writes of stateless calls nothing.
ALTER TABLE flows ADD COLUMN session_id TEXT NOT NULL DEFAULT '';

CREATE INDEX flows_session ON flows (tenant_id, session_id, updated_at) WHERE session_id <> '';
