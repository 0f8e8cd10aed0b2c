-- Every call is recorded now, not only multi-round flows, and the
-- record is searched by prefix: a flow's id (its primary key), its
-- target, its principal's subject (flows_principal) and its client's
-- name. A prefix is a range of each column, which these indexes serve.
CREATE INDEX flows_target ON flows (target);
CREATE INDEX flows_client ON flows (client_name);

-- When an admin cancelled a flow (its last change may come later: a
-- refused round of it still adds its times).
ALTER TABLE flows ADD COLUMN cancelled_at TIMESTAMP;
