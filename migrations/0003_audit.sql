-- Who did what to which object, when and from where: every admin action.
CREATE TABLE audit_log (
    id          TEXT PRIMARY KEY,
    at          TIMESTAMP NOT NULL,
    actor       TEXT NOT NULL,
    action      TEXT NOT NULL,
    tenant_slug TEXT NOT NULL DEFAULT '',
    object      TEXT NOT NULL DEFAULT '',
    remote_addr TEXT NOT NULL DEFAULT '',
    detail      TEXT NOT NULL DEFAULT '{}'
);

CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX audit_log_tenant ON audit_log (tenant_slug, at);
