-- A caller's own tasks, newest first: tasks/list of a 2025-11-25 session
-- (a principal's tasks, or a public tenant's session's) and the tasks a
-- session's stream reports on, read without scanning the tenant's.
CREATE INDEX tasks_owner ON tasks (tenant_id, principal_hash, created_at);
