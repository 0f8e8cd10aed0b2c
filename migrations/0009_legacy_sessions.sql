-- Sessions of initialization-era (2025-11-25 and earlier) clients. The
-- session id a client holds is its nonce and a token sealed under the
-- tenant's key ring, which any replica verifies without reading this
-- table; the row holds what changes during a session (log level,
-- subscriptions), its end (DELETE, an admin, the tenant disabled), which
-- every replica honours, and what lets a session outlive the key that
-- sealed it: a hash of the whole id, of the principal it is bound to,
-- and the client's capabilities. id is the nonce, never the token. Rows
-- go once expired.
CREATE TABLE legacy_sessions (
    id                TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    protocol_version  TEXT NOT NULL,
    client_name       TEXT NOT NULL DEFAULT '',
    client_version    TEXT NOT NULL DEFAULT '',
    principal_issuer  TEXT NOT NULL DEFAULT '',
    principal_subject TEXT NOT NULL DEFAULT '',
    principal_client  TEXT NOT NULL DEFAULT '',
    principal_hash    TEXT NOT NULL DEFAULT '',
    token_hash        TEXT NOT NULL DEFAULT '',
    capabilities      TEXT NOT NULL DEFAULT '',
    log_level         TEXT NOT NULL DEFAULT '',
    subscriptions     TEXT NOT NULL DEFAULT '',
    created_at        TIMESTAMP NOT NULL,
    expires_at        TIMESTAMP NOT NULL,
    ended_at          TIMESTAMP,
    ended_by          TEXT NOT NULL DEFAULT ''
);

CREATE INDEX legacy_sessions_tenant ON legacy_sessions (tenant_id, created_at);
CREATE INDEX legacy_sessions_expiry ON legacy_sessions (expires_at);
CREATE INDEX legacy_sessions_ended ON legacy_sessions (ended_at) WHERE ended_at IS NOT NULL;

-- Messages from legacy clients for a bridged call held by another
-- replica (an answer to a request the platform sent on the call's
-- stream, or the cancellation of the call): written by the replica that
-- received the POST, announced by NOTIFY with the target, taken (deleted)
-- by the replica holding the call. Rows nobody took go after an hour.
CREATE TABLE legacy_relay (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    session_id TEXT NOT NULL,
    target     TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL
);

CREATE INDEX legacy_relay_target ON legacy_relay (target);
CREATE INDEX legacy_relay_created ON legacy_relay (created_at);
