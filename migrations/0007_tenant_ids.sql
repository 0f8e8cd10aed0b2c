-- Grants and audit entries bind a tenant's id, not its slug: a deleted
-- tenant's slug can be given to a new tenant ("reuseRetiredSlug"), and
-- the old tenant's admins and history must not come with it.

-- The tenants a tenant-admin API token may touch, by id. A deleted
-- tenant's grants go with it, so a token never reaches its successor.
CREATE TABLE api_token_tenants (
    token_id  TEXT NOT NULL REFERENCES api_tokens (id) ON DELETE CASCADE,
    tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    PRIMARY KEY (token_id, tenant_id)
);

CREATE INDEX api_token_tenants_tenant ON api_token_tenants (tenant_id);

-- Tokens made before named slugs, as a JSON array of DNS labels (so a
-- slug appears in it exactly as "slug", and holds no LIKE wildcard).
-- Each grant goes to the tenant holding the slug now, if that tenant
-- already existed when the token was made: an older token was made for
-- an earlier holder of the slug, and gets nothing.
INSERT INTO api_token_tenants (token_id, tenant_id)
SELECT a.id, t.id
FROM api_tokens a
JOIN tenants t ON a.tenants LIKE '%"' || t.slug || '"%' AND t.created_at <= a.created_at
WHERE a.role = 'tenant-admin';

-- Audit entries record the tenant's id; the slug stays, for display.
ALTER TABLE audit_log ADD COLUMN tenant_id TEXT NOT NULL DEFAULT '';

-- Entries written before are attributed to the tenant holding their slug
-- now only when they are not older than it; the rest (a deleted
-- tenant's) keep an empty tenant_id and match no tenant filter.
UPDATE audit_log SET tenant_id = (
    SELECT t.id FROM tenants t
    WHERE t.slug = audit_log.tenant_slug AND t.created_at <= audit_log.at)
WHERE tenant_slug <> '' AND EXISTS (
    SELECT 1 FROM tenants t
    WHERE t.slug = audit_log.tenant_slug AND t.created_at <= audit_log.at);

DROP INDEX audit_log_tenant;

CREATE INDEX audit_log_tenant_id ON audit_log (tenant_id, at);
