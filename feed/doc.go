// Package feed follows the fleet's change feed: every change to what a
// replica caches of a tenant (its catalogue, settings and issuers, its
// key ring), numbered in commit order by the store. A replica learns of
// a change when its commit is announced (PostgreSQL notifications; in
// process on SQLite), and in any case within one poll interval, whose
// read costs one indexed query however many tenants exist: idle cost
// follows the rate of change, not the size of the registry. A follower
// that reconnects reads exactly the changes it missed; one that fell
// further behind than the feed keeps tells its consumers to check
// everything they cache.
package feed
