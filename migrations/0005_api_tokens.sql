-- API tokens for automation: shown once, stored only as a SHA-256 hash,
-- scoped to a role and (for tenant admins) a list of tenants.
CREATE TABLE api_tokens (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    hash        TEXT NOT NULL UNIQUE,
    role        TEXT NOT NULL,
    tenants     TEXT NOT NULL DEFAULT '[]',
    created_by  TEXT NOT NULL,
    created_at  TIMESTAMP NOT NULL,
    expires_at  TIMESTAMP NOT NULL,
    revoked_at  TIMESTAMP
);
