-- The legacy session a call ran in (its id as the sessions API shows
-- it), so an admin goes from a session to exactly its calls. Only calls
-- of legacy sessions have one: the index holds no other row, and costs
-- the record's writes of stateless calls nothing.
ALTER TABLE flows ADD COLUMN session_id TEXT NOT NULL DEFAULT '';

CREATE INDEX flows_session ON flows (tenant_id, session_id, updated_at) WHERE session_id <> '';
