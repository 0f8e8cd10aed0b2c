-- The bridged calls of legacy sessions whose event stream has begun,
-- and the events sent on those streams, so that a client whose stream
-- dropped can resume it (GET with Last-Event-ID) at any replica, and a
-- replica can take over a call whose holder died. A call row holds what
-- a taker needs: the client's request as posted, the requestState its
-- pending questions were asked under, those questions (id, key, method)
-- and the answers received so far; holder and held_until are the
-- holder's lease, renewed while it lives. running marks a call whose
-- answers are all in and whose next round may have reached its backend:
-- a taker does not run it again. next_seq is the sequence of the next
-- event; done marks a call that ended (its response, when it had one,
-- is its last event). With secrets keys configured, request, state,
-- legs, answers and the events' bodies are sealed as webhook secrets
-- are. Rows and their events go when expires_at passes: the session's
-- expiry while the call runs, a few minutes after its response once
-- done.
CREATE TABLE legacy_calls (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    session_id TEXT NOT NULL,
    request    TEXT NOT NULL,
    holder     TEXT NOT NULL,
    held_until TIMESTAMP NOT NULL,
    state      TEXT NOT NULL DEFAULT '',
    legs       TEXT NOT NULL DEFAULT '',
    answers    TEXT NOT NULL DEFAULT '',
    running    BOOLEAN NOT NULL DEFAULT FALSE,
    next_seq   BIGINT NOT NULL,
    done       BOOLEAN NOT NULL DEFAULT FALSE,
    created_at TIMESTAMP NOT NULL,
    expires_at TIMESTAMP NOT NULL
);

CREATE INDEX legacy_calls_holder ON legacy_calls (holder) WHERE NOT done;
CREATE INDEX legacy_calls_expiry ON legacy_calls (expires_at);

-- One event of a call's stream, by its sequence: the body is the
-- JSON-RPC message as sent. A call keeps its latest events (a bound the
-- server sets); a resumption from before them is told of the gap.
CREATE TABLE legacy_events (
    call_id TEXT NOT NULL,
    seq     BIGINT NOT NULL,
    body    TEXT NOT NULL,
    PRIMARY KEY (call_id, seq)
);
