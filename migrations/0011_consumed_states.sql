-- Request states a single-use tool's round consumed (destructive tools):
-- a replay of the same flow round, on any replica, is refused. Rows go
-- once the state they record has expired.
CREATE TABLE consumed_states (
    tenant_id  TEXT NOT NULL,
    flow_id    TEXT NOT NULL,
    round      INTEGER NOT NULL,
    consumed_at TIMESTAMP NOT NULL,
    expires_at TIMESTAMP NOT NULL,
    PRIMARY KEY (tenant_id, flow_id, round)
);

CREATE INDEX consumed_states_expiry ON consumed_states (expires_at);
