-- Tenants and their catalogues. Portable SQL: runs unchanged on SQLite
-- and PostgreSQL.

CREATE TABLE tenants (
    id                TEXT PRIMARY KEY,
    slug              TEXT NOT NULL UNIQUE,
    display_name      TEXT NOT NULL,
    disabled          BOOLEAN NOT NULL DEFAULT FALSE,
    settings          TEXT NOT NULL DEFAULT '{}',
    version           BIGINT NOT NULL DEFAULT 1,
    catalogue_version BIGINT NOT NULL DEFAULT 1,
    created_at        TIMESTAMP NOT NULL,
    updated_at        TIMESTAMP NOT NULL
);

-- A deleted tenant's slug stays reserved so a new tenant never silently
-- inherits the old one's clients, tokens or flows.
CREATE TABLE retired_slugs (
    slug       TEXT PRIMARY KEY,
    retired_at TIMESTAMP NOT NULL
);

-- One row per tool, prompt, resource or resource template. The kind's
-- definition is JSON in spec; uri is set for resources only, so a
-- resources/read lookup is one indexed probe.
CREATE TABLE catalogue_items (
    id             TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    kind           TEXT NOT NULL,
    name           TEXT NOT NULL,
    uri            TEXT,
    spec           TEXT NOT NULL,
    webhook_secret TEXT,
    version        BIGINT NOT NULL DEFAULT 1,
    created_at     TIMESTAMP NOT NULL,
    updated_at     TIMESTAMP NOT NULL,
    UNIQUE (tenant_id, kind, name)
);

CREATE UNIQUE INDEX catalogue_items_uri ON catalogue_items (tenant_id, kind, uri);
