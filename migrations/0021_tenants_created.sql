-- The rotation scheduler looks, every full check, for tenants that a
-- replica of an earlier version created without a due time. With this
-- index it reads only the tenants created since its last look, not every
-- tenant: minutes apart on every replica, a million rows read each time
-- would be an idle cost that grows with the registry.
CREATE INDEX tenants_created ON tenants (created_at);
