-- A caller's own tasks, newest first: tasks/list of a 2025-11-25 session
-- (a principal's tasks, or a public tenant's session's) and the tasks a
-- session's stream reports on, read without scanning the tenant's.
CREATE INDEX tasks_owner ON tasks (tenant_id, principal_hash, session_id, created_at);

-- Whether a completed task's result is a tool error (isError), which the
-- 2025-11-25 view shows as failed, kept beside the result so that no
-- view parses the result to tell.
ALTER TABLE tasks ADD COLUMN tool_error BOOLEAN NOT NULL DEFAULT FALSE;
