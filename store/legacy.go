package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// LegacySession is a session of an initialization-era client: what it
// negotiated, who holds it, what it changed since, and whether it ended.
type LegacySession struct {
	ID               string `gorm:"primaryKey"`
	TenantID         string
	ProtocolVersion  string
	ClientName       string
	ClientVersion    string
	PrincipalIssuer  string
	PrincipalSubject string
	PrincipalClient  string
	// PrincipalHash and TokenHash are SHA-256 (hex) of the principal's
	// binding and of the whole session id: with Capabilities (JSON), they
	// let a replica verify a session whose sealing key was retired.
	PrincipalHash string
	TokenHash     string
	Capabilities  string
	// LogLevel is what logging/setLevel set ("" until then).
	LogLevel string
	// Subscriptions are the resource URIs subscribed to, as a JSON array
	// ("" for none).
	Subscriptions string
	// Caller identifies the caller that started it, among the tenant's
	// (a hash); LastSeenAt is when it was last used, as of the last
	// batch of uses written.
	Caller     string
	LastSeenAt *time.Time
	CreatedAt  time.Time
	ExpiresAt  time.Time
	EndedAt    *time.Time
	// EndedBy says who ended it: "client" (DELETE), "admin:<subject>",
	// "tenant disabled".
	EndedBy string
}

// TableName is the legacy_sessions table.
func (LegacySession) TableName() string { return "legacy_sessions" }

// LegacyRelay is a message for a bridged call held by another replica.
type LegacyRelay struct {
	ID        string `gorm:"primaryKey"`
	TenantID  string
	SessionID string
	Target    string
	Body      string
	CreatedAt time.Time
}

// TableName is the legacy_relay table.
func (LegacyRelay) TableName() string { return "legacy_relay" }

// legacyRelayChannel is the notification channel announcing relay rows;
// the payload is the row's target.
const legacyRelayChannel = "opsmcp_legacy_relay"

// Create records a new session.
func (s LegacySessions) Create(ctx context.Context, ls *LegacySession) error {
	ls.CreatedAt, ls.ExpiresAt = ls.CreatedAt.UTC(), ls.ExpiresAt.UTC()
	if ls.LastSeenAt == nil {
		ls.LastSeenAt = &ls.CreatedAt
	}
	if err := s.db.WithContext(ctx).Create(ls).Error; err != nil {
		return fmt.Errorf("create legacy session: %w", err)
	}
	return nil
}

// Get reads a tenant's session; ErrNotFound when there is
// none (another tenant's session is none).
func (s LegacySessions) Get(ctx context.Context, tenantID, id string) (*LegacySession, error) {
	var ls LegacySession
	err := s.db.WithContext(ctx).Where("id = ? AND tenant_id = ?", id, tenantID).Take(&ls).Error
	if err != nil {
		return nil, notFound(err, "legacy session "+id)
	}
	return &ls, nil
}

// SetLogLevel records a session's logging/setLevel.
func (s LegacySessions) SetLogLevel(ctx context.Context, tenantID, id, level string) error {
	return s.updateLegacySession(ctx, tenantID, id, map[string]any{"log_level": level})
}

// UpdateSubscriptions changes a live session's subscribed URIs
// (kept as a JSON array) with change, under a row lock, so concurrent
// subscribes of one session do not lose each other's. change may refuse
// with an error, which is returned as is; ErrNotFound when the session
// is not live.
func (s LegacySessions) UpdateSubscriptions(ctx context.Context, tenantID, id string, change func(uris []string) ([]string, error)) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var ls LegacySession
		q := tx.Where("id = ? AND tenant_id = ? AND ended_at IS NULL", id, tenantID)
		if s.dialect == Postgres {
			q = q.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		if err := q.Take(&ls).Error; err != nil {
			return notFound(err, "legacy session "+id)
		}
		var uris []string
		if ls.Subscriptions != "" {
			if err := json.Unmarshal([]byte(ls.Subscriptions), &uris); err != nil {
				return fmt.Errorf("legacy session %s: subscriptions: %w", id, err)
			}
		}
		uris, err := change(uris)
		if err != nil {
			return err
		}
		raw, err := json.Marshal(uris)
		if err != nil {
			return err
		}
		return tx.Model(&LegacySession{}).Where("id = ?", id).Update("subscriptions", string(raw)).Error
	})
}

func (s *conn) updateLegacySession(ctx context.Context, tenantID, id string, cols map[string]any) error {
	res := s.db.WithContext(ctx).Model(&LegacySession{}).
		Where("id = ? AND tenant_id = ? AND ended_at IS NULL", id, tenantID).Updates(cols)
	if res.Error != nil {
		return fmt.Errorf("update legacy session: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("legacy session %s: %w", id, ErrNotFound)
	}
	return nil
}

// End ends a tenant's session now; ErrNotFound when the
// tenant has no such live session (unknown, expired or already ended).
func (s LegacySessions) End(ctx context.Context, tenantID, id, by string) error {
	now := time.Now().UTC()
	res := s.db.WithContext(ctx).Model(&LegacySession{}).
		Where("id = ? AND tenant_id = ? AND ended_at IS NULL AND expires_at > ?", id, tenantID, now).
		Updates(map[string]any{"ended_at": now, "ended_by": by})
	if res.Error != nil {
		return fmt.Errorf("end legacy session: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("legacy session %s: %w", id, ErrNotFound)
	}
	return nil
}

// CountLive counts a tenant's live sessions, and those of them one
// caller started.
func (s LegacySessions) CountLive(ctx context.Context, tenantID, caller string) (tenant, byCaller int64, err error) {
	now := time.Now().UTC()
	live := s.db.WithContext(ctx).Model(&LegacySession{}).Where("tenant_id = ? AND ended_at IS NULL AND expires_at > ?", tenantID, now)
	if err := live.Count(&tenant).Error; err != nil {
		return 0, 0, fmt.Errorf("count legacy sessions: %w", err)
	}
	err = s.db.WithContext(ctx).Model(&LegacySession{}).
		Where("tenant_id = ? AND caller = ? AND ended_at IS NULL AND expires_at > ?", tenantID, caller, now).Count(&byCaller).Error
	if err != nil {
		return 0, 0, fmt.Errorf("count legacy sessions: %w", err)
	}
	return tenant, byCaller, nil
}

// Touch records that the live sessions ids were used at at.
func (s LegacySessions) Touch(ctx context.Context, ids []string, at time.Time) error {
	for len(ids) > 0 {
		n := min(len(ids), 500)
		err := s.db.WithContext(ctx).Model(&LegacySession{}).Where("id IN ? AND ended_at IS NULL", ids[:n]).
			Update("last_seen_at", at.UTC()).Error
		if err != nil {
			return fmt.Errorf("touch legacy sessions: %w", err)
		}
		ids = ids[n:]
	}
	return nil
}

// EndIdle ends the live sessions not used since before (ended by
// "idle"), pruneBatch at a time, and says how many.
func (s LegacySessions) EndIdle(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	for {
		now := time.Now().UTC()
		res := s.db.WithContext(ctx).Exec("UPDATE legacy_sessions SET ended_at = ?, ended_by = 'idle' WHERE id IN "+
			"(SELECT id FROM legacy_sessions WHERE ended_at IS NULL AND last_seen_at < ? AND expires_at > ? ORDER BY last_seen_at LIMIT ?)",
			now, before.UTC(), now, pruneBatch)
		if res.Error != nil {
			return n, fmt.Errorf("end idle legacy sessions: %w", res.Error)
		}
		n += res.RowsAffected
		if res.RowsAffected < int64(pruneBatch) {
			return n, nil
		}
	}
}

// EndAll ends every live session of a tenant and says how
// many it ended.
func (s LegacySessions) EndAll(ctx context.Context, tenantID, by string) (int64, error) {
	return endLegacySessions(s.db.WithContext(ctx), tenantID, by)
}

func endLegacySessions(tx *gorm.DB, tenantID, by string) (int64, error) {
	now := time.Now().UTC()
	res := tx.Model(&LegacySession{}).
		Where("tenant_id = ? AND ended_at IS NULL AND expires_at > ?", tenantID, now).
		Updates(map[string]any{"ended_at": now, "ended_by": by})
	if res.Error != nil {
		return 0, fmt.Errorf("end legacy sessions: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// EndedLegacySession is a session that ended before it expired.
type EndedLegacySession struct {
	ID        string
	TenantID  string
	EndedAt   time.Time
	ExpiresAt time.Time
}

// EndedSince lists the sessions ended at or after since that
// have not expired yet (a replica follows them with a since a little
// before its last read, so a slow commit is not missed).
func (s LegacySessions) EndedSince(ctx context.Context, since time.Time) ([]EndedLegacySession, error) {
	var out []EndedLegacySession
	err := s.db.WithContext(ctx).Model(&LegacySession{}).
		Select("id, tenant_id, ended_at, expires_at").
		Where("ended_at IS NOT NULL AND ended_at >= ? AND expires_at > ?", since.UTC(), time.Now().UTC()).
		Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("read ended legacy sessions: %w", err)
	}
	return out, nil
}

// List lists a tenant's live sessions (not ended, not
// expired) by id, after the id after, at most limit.
func (s LegacySessions) List(ctx context.Context, tenantID, after string, limit int) ([]LegacySession, error) {
	var out []LegacySession
	err := s.db.WithContext(ctx).
		Where("tenant_id = ? AND ended_at IS NULL AND expires_at > ? AND id > ?", tenantID, time.Now().UTC(), after).
		Order("id").Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("list legacy sessions: %w", err)
	}
	return out, nil
}

// Prune deletes expired sessions, relay messages older than
// maxRelayAge (nobody took them: their call had ended) and expired
// stream reports, each in bounded batches; it returns how many sessions
// and relay messages it deleted.
func (s LegacySessions) Prune(ctx context.Context, maxRelayAge time.Duration) (sessions, relay int64, err error) {
	now := time.Now().UTC()
	if sessions, _, err = s.deleteInBatches(ctx, "legacy_sessions", "id", "expires_at", now); err != nil {
		return sessions, 0, fmt.Errorf("prune legacy sessions: %w", err)
	}
	if relay, _, err = s.deleteInBatches(ctx, "legacy_relay", "id", "created_at", now.Add(-maxRelayAge)); err != nil {
		return sessions, relay, fmt.Errorf("prune legacy relay: %w", err)
	}
	// Expired stream reports: a killed replica's, never withdrawn.
	if _, _, err = s.deleteInBatches(ctx, "legacy_session_streams", "session_id, replica", "expires_at", now); err != nil {
		return sessions, relay, fmt.Errorf("prune legacy stream reports: %w", err)
	}
	return sessions, relay, nil
}

// LegacySessionStreams is one replica's report of a session's open
// streams.
type LegacySessionStreams struct {
	SessionID string `gorm:"primaryKey"`
	Replica   string `gorm:"primaryKey"`
	Streams   int
	ExpiresAt time.Time
}

// TableName is the legacy_session_streams table.
func (LegacySessionStreams) TableName() string { return "legacy_session_streams" }

// ReportStreams replaces replica's report of its open streams per
// session (counts; none withdraws it), valid until expires, in one
// transaction.
func (s LegacySessions) ReportStreams(ctx context.Context, replica string, counts map[string]int, expires time.Time) error {
	rows := make([]LegacySessionStreams, 0, len(counts))
	for id, n := range counts {
		if n > 0 {
			rows = append(rows, LegacySessionStreams{SessionID: id, Replica: replica, Streams: n, ExpiresAt: expires.UTC()})
		}
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("replica = ?", replica).Delete(&LegacySessionStreams{}).Error; err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		return tx.CreateInBatches(rows, 500).Error
	})
	if err != nil {
		return fmt.Errorf("report open legacy streams: %w", err)
	}
	return nil
}

// OpenStreams sums the unexpired reports of the sessions' open streams,
// by session id (a session with none is absent).
func (s LegacySessions) OpenStreams(ctx context.Context, sessionIDs []string) (map[string]int, error) {
	out, err := bySession(sessionIDs, s.db.WithContext(ctx).Model(&LegacySessionStreams{}).Select("session_id, SUM(streams) AS n").
		Where("session_id IN ? AND expires_at > ?", sessionIDs, time.Now().UTC()))
	if err != nil {
		return nil, fmt.Errorf("count open legacy streams: %w", err)
	}
	return out, nil
}

// bySession runs q, a query selecting session_id and n (of sessionIDs,
// none when empty), grouped by session, into a map.
func bySession(sessionIDs []string, q *gorm.DB) (map[string]int, error) {
	out := make(map[string]int, len(sessionIDs))
	if len(sessionIDs) == 0 {
		return out, nil
	}
	var rows []struct {
		SessionID string
		N         int
	}
	if err := q.Group("session_id").Scan(&rows).Error; err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[r.SessionID] = r.N
	}
	return out, nil
}

// pruneBatch is how many rows one statement of a sweep deletes. A sweep
// after a long stop, or after a flood of sessions, has millions to
// delete: in one statement SQLite's only writer would be held until the
// last (every other write waiting on it), and PostgreSQL would lock
// every row to the end.
var pruneBatch = 1000

// deleteInBatches deletes table's rows whose column (indexed) is before
// before, oldest first, pruneBatch at a time, each statement its own
// transaction, until none is left or ctx ends; key names the columns
// that identify a row ("id", or "session_id, replica"). It says how many
// rows it deleted, in how many statements.
func (s *conn) deleteInBatches(ctx context.Context, table, key, column string, before time.Time) (rows, statements int64, err error) {
	q := "DELETE FROM " + table + " WHERE (" + key + ") IN (SELECT " + key + " FROM " + table + " WHERE " + column + " < ? ORDER BY " + column + " LIMIT ?)"
	for {
		res := s.db.WithContext(ctx).Exec(q, before, pruneBatch)
		if res.Error != nil {
			return rows, statements, res.Error
		}
		rows += res.RowsAffected
		statements++
		if res.RowsAffected < int64(pruneBatch) {
			return rows, statements, nil
		}
	}
}

// Relay stores a message for the replica holding its target and
// announces it on legacyRelayChannel, in one transaction: the
// notification is delivered at commit, when the row can be read.
func (s LegacySessions) Relay(ctx context.Context, tenantID, sessionID, target string, body []byte) error {
	var b [12]byte
	_, _ = rand.Read(b[:])
	row := LegacyRelay{ID: hex.EncodeToString(b[:]), TenantID: tenantID, SessionID: sessionID, Target: target,
		Body: string(body), CreatedAt: time.Now().UTC()}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			return err
		}
		if s.dialect == Postgres {
			return tx.Exec("SELECT pg_notify(?, ?)", legacyRelayChannel, target).Error
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("relay legacy message: %w", err)
	}
	return nil
}

// TakeRelayed removes and returns the stored messages for targets,
// oldest first. Each message is returned to exactly one taker.
func (s LegacySessions) TakeRelayed(ctx context.Context, targets []string) ([]LegacyRelay, error) {
	if len(targets) == 0 {
		return nil, nil
	}
	var out []LegacyRelay
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var rows []LegacyRelay
		if err := tx.Where("target IN ?", targets).Order("created_at").Find(&rows).Error; err != nil {
			return err
		}
		for _, r := range rows {
			// Only the taker whose delete removed the row gets it, so two
			// concurrent takes never both deliver one message.
			res := tx.Where("id = ?", r.ID).Delete(&LegacyRelay{})
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 1 {
				out = append(out, r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("take legacy relay: %w", err)
	}
	return out, nil
}

// Shared reports whether other replicas may share this database
// (PostgreSQL), so a message may have to be relayed to the one holding a
// call; on SQLite one process serves.
func (s LegacySessions) Shared() bool { return s.dialect == Postgres }

// ListenRelayed follows the notifications Relay sends (the target of
// each message), as sqldb's Listen does.
func (s LegacySessions) ListenRelayed(ctx context.Context) (<-chan string, error) {
	return s.shared.Listen(ctx, legacyRelayChannel, false)
}
