-- The change feed: one row for each change to what replicas cache of a
-- tenant (its catalogue, settings and issuers; its key ring), numbered
-- in commit order across the fleet (writers serialise on an advisory
-- lock on PostgreSQL; SQLite has one writer), so a replica that missed a
-- notification, or was cut off, reads exactly the changes after the
-- last one it saw. Rows go after an hour, the newest always kept; a
-- replica further behind than that checks every tenant it caches.
CREATE TABLE changes (
	seq BIGINT PRIMARY KEY,
	kind TEXT NOT NULL,
	tenant_id TEXT NOT NULL DEFAULT '',
	slug TEXT NOT NULL DEFAULT '',
	at TIMESTAMP NOT NULL
);

CREATE INDEX changes_at ON changes (at);

-- When each tenant's key ring is next due for the rotation scheduler (a
-- lower bound: the scheduler reads the ring then, and writes the next
-- time), so a pass reads only the rings due, not every tenant's. A due
-- time is replaced only by one worked out from the same version of the
-- ring or a later one (ring_version), so a slow writer never pushes a
-- newer phase back. A new tenant is due at once (its ring is created);
-- those that exist now are too, once, and so are any a replica of an
-- earlier version creates meanwhile (the scheduler looks for them every
-- full check).
CREATE TABLE key_schedule (
	tenant_id TEXT PRIMARY KEY,
	due_at TIMESTAMP NOT NULL,
	ring_version BIGINT NOT NULL DEFAULT 0
);

CREATE INDEX key_schedule_due ON key_schedule (due_at);

INSERT INTO key_schedule (tenant_id, due_at) SELECT id, '1970-01-01 00:00:00' FROM tenants;
