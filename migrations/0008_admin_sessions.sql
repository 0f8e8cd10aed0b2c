-- Admin sessions ended before their expiry (sign-out): their cookie is
-- refused on every replica until it would have expired anyway.
CREATE TABLE ended_sessions (
    id         TEXT PRIMARY KEY,
    ended_at   TIMESTAMP NOT NULL,
    expires_at TIMESTAMP NOT NULL
);

CREATE INDEX ended_sessions_expiry ON ended_sessions (expires_at);
