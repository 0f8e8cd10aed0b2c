-- What caps a tenant's live legacy sessions and ends idle ones: the
-- caller that started each (a hash of its principal's binding, or on a
-- public tenant of its address, as the initialize rate limit knows it),
-- and when the session was last used (written a batch at a time, every
-- 30 s at most, never on the request's path). Sessions from before have
-- no caller, and count from their start.
ALTER TABLE legacy_sessions ADD COLUMN caller TEXT NOT NULL DEFAULT '';
ALTER TABLE legacy_sessions ADD COLUMN last_seen_at TIMESTAMP;

CREATE INDEX legacy_sessions_caller ON legacy_sessions (tenant_id, caller) WHERE ended_at IS NULL;
CREATE INDEX legacy_sessions_seen ON legacy_sessions (last_seen_at) WHERE ended_at IS NULL;
