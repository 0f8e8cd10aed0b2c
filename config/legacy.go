package config

import (
	"errors"
	"flag"
	"time"
)

// LegacyConfig is how the endpoints serve initialization-era clients
// (protocol 2025-11-25 and earlier) beside 2026-07-28 ones.
type LegacyConfig struct {
	// Serve turns legacy serving on (the default): initialize starts a
	// session, and flows that need input are bridged onto the session's
	// stream. Off, every request is served as 2026-07-28 only.
	Serve bool
	// RoundTimeout bounds how long a bridged round waits for the client
	// to answer the requests it was sent (never longer than the tenant's
	// state TTL, past which the round's state would no longer verify).
	RoundTimeout time.Duration
	// MaxRounds caps the rounds of a bridged flow; 0 means the tenant's
	// maxRounds, which also caps any value set here.
	MaxRounds int
	// SessionTTL is how long a session lives from its initialize: a fixed
	// lifetime, sealed into the session id (a client then initializes
	// again, as the protocol tells it to on 404).
	SessionTTL time.Duration
	// InitializePerCaller and InitializePerTenant bound the sessions a
	// caller, and a tenant, may start a minute, on each replica: each
	// initialize writes a row, and a public tenant's callers need no
	// token to send them.
	InitializePerCaller, InitializePerTenant int
	// SessionsPerCaller and SessionsPerTenant cap the live sessions one
	// caller, and a whole tenant, may hold at once, fleet-wide, so one
	// caller cannot fill a tenant's allowance with sessions that live a
	// day.
	SessionsPerCaller, SessionsPerTenant int
	// SessionIdle ends a session that was not used (no request, no open
	// stream, no call waiting) for that long; 0 never does.
	SessionIdle time.Duration
	// CallsPerSession caps a session's bridged calls in flight on one
	// replica: a call whose client went away still waits (its stream
	// may be resumed), holding a lease and its stored events, so a
	// client must not pile them up.
	CallsPerSession int
}

// maxLegacySessionTTL is the longest session: the longest lifetime a
// sealed token may have (mrtr.MaxTTL).
const maxLegacySessionTTL = 24 * time.Hour

func legacyFlags(fs *flag.FlagSet, c *LegacyConfig) {
	fs.BoolVar(&c.Serve, "legacy-clients", true, "serve initialization-era MCP clients (2025-11-25, 2025-06-18, 2025-03-26) on the same endpoints: sessions, and flows bridged onto their streams")
	fs.DurationVar(&c.RoundTimeout, "legacy-round-timeout", 10*time.Minute, "how long a bridged round waits for a legacy client's answers (at most the tenant's state TTL)")
	fs.IntVar(&c.MaxRounds, "legacy-max-rounds", 0, "most rounds of a bridged flow (0: the tenant's maxRounds, which also caps this)")
	fs.DurationVar(&c.SessionTTL, "legacy-session-ttl", 24*time.Hour, "lifetime of a legacy session from its initialize, fixed (1m to 24h)")
	fs.IntVar(&c.InitializePerCaller, "legacy-initialize-per-caller", 30, "legacy sessions one caller may start a minute on a tenant, on each replica (a caller is its token's principal; on a public tenant, its address)")
	fs.IntVar(&c.InitializePerTenant, "legacy-initialize-per-tenant", 600, "legacy sessions a tenant's callers may start a minute in all, on each replica")
	fs.IntVar(&c.SessionsPerCaller, "legacy-sessions-per-caller", 100, "live legacy sessions one caller may hold on a tenant, fleet-wide")
	fs.IntVar(&c.SessionsPerTenant, "legacy-sessions-per-tenant", 10_000, "live legacy sessions a tenant's callers may hold in all, fleet-wide")
	fs.DurationVar(&c.SessionIdle, "legacy-session-idle", time.Hour, "end a legacy session unused for this long (0: never; else 1m to 24h)")
	fs.IntVar(&c.CallsPerSession, "legacy-calls-per-session", 32, "bridged calls one legacy session may have in flight on each replica (waiting on its client, or running)")
}

func (c *LegacyConfig) validate() []error {
	var errs []error
	if c.RoundTimeout < time.Second || c.RoundTimeout > 24*time.Hour {
		errs = append(errs, errors.New("legacy-round-timeout must be between 1s and 24h"))
	}
	if c.MaxRounds < 0 || c.MaxRounds > 1000 {
		errs = append(errs, errors.New("legacy-max-rounds must be between 0 (the tenant's maxRounds) and 1000"))
	}
	if c.SessionTTL < time.Minute || c.SessionTTL > maxLegacySessionTTL {
		errs = append(errs, errors.New("legacy-session-ttl must be between 1m and 24h"))
	}
	if c.InitializePerCaller < 1 || c.InitializePerCaller > 100_000 || c.InitializePerTenant < 1 || c.InitializePerTenant > 1_000_000 {
		errs = append(errs, errors.New("legacy-initialize-per-caller must be between 1 and 100000, legacy-initialize-per-tenant between 1 and 1000000"))
	} else if c.InitializePerCaller > c.InitializePerTenant {
		errs = append(errs, errors.New("legacy-initialize-per-caller cannot exceed legacy-initialize-per-tenant"))
	}
	if c.SessionsPerCaller < 1 || c.SessionsPerCaller > 1_000_000 || c.SessionsPerTenant < 1 || c.SessionsPerTenant > 100_000_000 {
		errs = append(errs, errors.New("legacy-sessions-per-caller must be between 1 and 1000000, legacy-sessions-per-tenant between 1 and 100000000"))
	} else if c.SessionsPerCaller > c.SessionsPerTenant {
		errs = append(errs, errors.New("legacy-sessions-per-caller cannot exceed legacy-sessions-per-tenant"))
	}
	if c.CallsPerSession < 1 || c.CallsPerSession > 10_000 {
		errs = append(errs, errors.New("legacy-calls-per-session must be between 1 and 10000"))
	}
	if c.SessionIdle != 0 && (c.SessionIdle < time.Minute || c.SessionIdle > maxLegacySessionTTL) {
		errs = append(errs, errors.New("legacy-session-idle must be 0 (never) or between 1m and 24h"))
	}
	return errs
}
