-- Each replica's open streams per legacy session (the standalone GET
-- stream, call streams, resumed streams, tasks/result waits), as it
-- last reported them: rewritten every 30 s with the sessions' use, so
-- the admin API can say how many streams a session holds fleet-wide. A
-- report expires (a replica killed cannot withdraw it), and the sweep
-- deletes expired ones.
CREATE TABLE legacy_session_streams (
	session_id TEXT NOT NULL,
	replica TEXT NOT NULL,
	streams INTEGER NOT NULL,
	expires_at TIMESTAMP NOT NULL,
	PRIMARY KEY (session_id, replica)
);

CREATE INDEX legacy_session_streams_replica ON legacy_session_streams (replica);
CREATE INDEX legacy_session_streams_expiry ON legacy_session_streams (expires_at);
