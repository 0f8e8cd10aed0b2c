package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"gorm.io/gorm"
)

// LegacyCall is a bridged call of a legacy session whose event stream
// has begun: what a replica needs to replay its stream to a client that
// resumes it, and to take the call over when its holder died.
type LegacyCall struct {
	ID        string `gorm:"primaryKey"`
	TenantID  string
	SessionID string
	// Request is the client's JSON-RPC request as posted.
	Request string
	// Holder names the process serving the call; HeldUntil is its
	// lease, renewed while it lives.
	Holder    string
	HeldUntil time.Time
	// State is the requestState the pending questions were asked under,
	// Legs those questions and Answers the answers received so far
	// (JSON, the endpoint's format); all empty before the first question.
	State   string
	Legs    string
	Answers string
	// Running says every answer is in and the next round may have
	// reached the backend: it is not to be run again.
	Running bool
	// NextSeq is the sequence the call's next event gets.
	NextSeq int64
	// Done says the call ended: its response, if it had one, is its
	// last event.
	Done      bool
	CreatedAt time.Time
	ExpiresAt time.Time
}

// TableName is the legacy_calls table.
func (LegacyCall) TableName() string { return "legacy_calls" }

// LegacyEvent is one event of a call's stream.
type LegacyEvent struct {
	CallID string `gorm:"primaryKey"`
	Seq    int64  `gorm:"primaryKey"`
	Body   string
}

// TableName is the legacy_events table.
func (LegacyEvent) TableName() string { return "legacy_events" }

// ErrNotHeld says a call is no longer held by the process that wrote:
// another took it over (or it ended), and the writer must stop serving
// it.
var ErrNotHeld = errors.New("legacy call held by another process")

// CallWrite is one write of a held call, in one transaction: its row
// first (Open, at its first write), events appended from sequence
// First, the questions it now waits on (Checkpoint), and, with its
// response, its end (Final, kept until Expires).
type CallWrite struct {
	Open       *LegacyCall
	First      int64
	Bodies     []string
	Keep       int64 // the events a call keeps (0: all)
	Checkpoint *Checkpoint
	Final      bool
	Expires    time.Time
}

// Checkpoint is what a held call waits on: the state its questions were
// asked under and the questions (answers start empty), or, with Running,
// a round about to run.
type Checkpoint struct {
	State, Legs string
	Running     bool
}

// WriteCall writes w for the call holder holds. ErrNotHeld when another
// holds it, it is done, or its next event is not w.First (a writer
// behind the call, fenced off).
func (s LegacySessions) WriteCall(ctx context.Context, callID, holder string, w CallWrite) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if c := w.Open; c != nil {
			row := *c
			row.CreatedAt, row.ExpiresAt, row.HeldUntil = c.CreatedAt.UTC(), c.ExpiresAt.UTC(), c.HeldUntil.UTC()
			row.Request = s.sealCall(callID, "request", c.Request)
			if err := tx.Create(&row).Error; err != nil {
				return err
			}
		}
		next := w.First + int64(len(w.Bodies))
		cols := map[string]any{"next_seq": next}
		if cp := w.Checkpoint; cp != nil {
			cols["state"], cols["legs"], cols["answers"], cols["running"] =
				s.sealCall(callID, "state", cp.State), s.sealCall(callID, "legs", cp.Legs), "", cp.Running
		}
		if w.Final {
			cols["done"], cols["expires_at"] = true, w.Expires.UTC()
		}
		res := tx.Model(&LegacyCall{}).Where("id = ? AND holder = ? AND NOT done AND next_seq = ?", callID, holder, w.First).Updates(cols)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return ErrNotHeld
		}
		if len(w.Bodies) == 0 {
			return nil
		}
		rows := make([]LegacyEvent, len(w.Bodies))
		for i, b := range w.Bodies {
			seq := w.First + int64(i)
			rows[i] = LegacyEvent{CallID: callID, Seq: seq, Body: s.sealCall(callID, strconv.FormatInt(seq, 10), b)}
		}
		if err := tx.Create(&rows).Error; err != nil {
			return err
		}
		// The bound is kept a step at a time, not at every event.
		if step := min(w.Keep, 32); w.Keep > 0 && next > w.Keep && (w.First-1)/step != (next-1)/step {
			return tx.Where("call_id = ? AND seq < ?", callID, next-w.Keep).Delete(&LegacyEvent{}).Error
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrNotHeld) {
		return fmt.Errorf("write legacy call: %w", err)
	}
	return err
}

// sealCall seals one of a call's values for storage, when the store
// seals secrets: what a call's stream and row hold (arguments, answers,
// results) is the user's, and is kept up to a day.
func (s *conn) sealCall(callID, what, v string) string {
	if s.box == nil || v == "" {
		return v
	}
	return s.box.seal("legacy_calls/"+callID+"/"+what, v)
}

// openCall returns the plaintext of a value sealCall stored.
func (s *conn) openCall(callID, what, v string) (string, error) {
	if !Sealed(v) {
		return v, nil
	}
	if s.box == nil {
		return "", fmt.Errorf("legacy call %s: %s is sealed and no secrets key is configured", callID, what)
	}
	plain, _, err := s.box.open("legacy_calls/"+callID+"/"+what, v)
	if err != nil {
		return "", fmt.Errorf("legacy call %s: %s: %w", callID, what, err)
	}
	return plain, nil
}

// SaveAnswers records the answers a held call has received to its
// pending questions; running says they are all in, and the next round
// is about to run.
func (s LegacySessions) SaveAnswers(ctx context.Context, callID, holder, answers string, running bool) error {
	return s.updateHeldCall(ctx, callID, holder, map[string]any{"answers": s.sealCall(callID, "answers", answers), "running": running})
}

// ReleaseCall ends holder's lease on a call at once (it shuts down), so
// the replica its client resumes at takes it over without waiting.
func (s LegacySessions) ReleaseCall(ctx context.Context, callID, holder string) error {
	return s.updateHeldCall(ctx, callID, holder, map[string]any{"held_until": time.Unix(0, 0).UTC()})
}

// EndCall marks a held call that ended without a stored response (its
// client cancelled it, or the response could not be stored) done, kept
// until expires.
func (s LegacySessions) EndCall(ctx context.Context, callID, holder string, expires time.Time) error {
	return s.updateHeldCall(ctx, callID, holder, map[string]any{"done": true, "expires_at": expires.UTC()})
}

func (s LegacySessions) updateHeldCall(ctx context.Context, callID, holder string, cols map[string]any) error {
	res := s.db.WithContext(ctx).Model(&LegacyCall{}).Where("id = ? AND holder = ? AND NOT done", callID, holder).Updates(cols)
	if res.Error != nil {
		return fmt.Errorf("update legacy call: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrNotHeld
	}
	return nil
}

// Call reads a session's call, its values opened; ErrNotFound when the
// session has no such call (another session's call is none).
func (s LegacySessions) Call(ctx context.Context, tenantID, sessionID, id string) (*LegacyCall, error) {
	var c LegacyCall
	err := s.db.WithContext(ctx).Where("id = ? AND tenant_id = ? AND session_id = ?", id, tenantID, sessionID).Take(&c).Error
	if err != nil {
		return nil, notFound(err, "legacy call "+id)
	}
	for what, v := range map[string]*string{"request": &c.Request, "state": &c.State, "legs": &c.Legs, "answers": &c.Answers} {
		if *v, err = s.openCall(id, what, *v); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

// CallEvents reads a call's stored events after sequence after, in
// order, at most limit, their bodies opened.
func (s LegacySessions) CallEvents(ctx context.Context, callID string, after int64, limit int) ([]LegacyEvent, error) {
	var out []LegacyEvent
	err := s.db.WithContext(ctx).Where("call_id = ? AND seq > ?", callID, after).Order("seq").Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("read legacy call events: %w", err)
	}
	for i := range out {
		if out[i].Body, err = s.openCall(callID, strconv.FormatInt(out[i].Seq, 10), out[i].Body); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RenewCalls extends holder's lease on the calls ids, and says on how
// many.
func (s LegacySessions) RenewCalls(ctx context.Context, holder string, ids []string, until time.Time) (int64, error) {
	var n int64
	for len(ids) > 0 {
		k := min(len(ids), 500)
		res := s.db.WithContext(ctx).Model(&LegacyCall{}).Where("id IN ? AND holder = ? AND NOT done", ids[:k], holder).
			Update("held_until", until.UTC())
		if res.Error != nil {
			return n, fmt.Errorf("renew legacy calls: %w", res.Error)
		}
		n += res.RowsAffected
		ids = ids[k:]
	}
	return n, nil
}

// TakeOver makes holder the holder of a call whose lease, held by from,
// ran out before now; ErrNotHeld when it is done, renewed, or taken by
// another first.
func (s LegacySessions) TakeOver(ctx context.Context, callID, from, holder string, now, until time.Time) error {
	res := s.db.WithContext(ctx).Model(&LegacyCall{}).
		Where("id = ? AND holder = ? AND held_until < ? AND NOT done", callID, from, now.UTC()).
		Updates(map[string]any{"holder": holder, "held_until": until.UTC()})
	if res.Error != nil {
		return fmt.Errorf("take over legacy call: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrNotHeld
	}
	return nil
}

// CallsInFlight counts, for each of a tenant's sessions, its calls
// that have not ended.
func (s LegacySessions) CallsInFlight(ctx context.Context, tenantID string, sessionIDs []string) (map[string]int, error) {
	out, err := bySession(sessionIDs, s.db.WithContext(ctx).Model(&LegacyCall{}).Select("session_id, count(*) AS n").
		Where("tenant_id = ? AND session_id IN ? AND NOT done", tenantID, sessionIDs))
	if err != nil {
		return nil, fmt.Errorf("count legacy calls: %w", err)
	}
	return out, nil
}

// PruneCalls deletes calls past their expiry with their events, in
// bounded batches, and says how many calls.
func (s LegacySessions) PruneCalls(ctx context.Context) (int64, error) {
	batch := max(pruneBatch/10, 1)
	var n int64
	for {
		var ids []string
		err := s.db.WithContext(ctx).Model(&LegacyCall{}).Where("expires_at < ?", time.Now().UTC()).
			Order("expires_at").Limit(batch).Pluck("id", &ids).Error
		if err != nil {
			return n, fmt.Errorf("prune legacy calls: %w", err)
		}
		if len(ids) == 0 {
			return n, nil
		}
		err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Where("call_id IN ?", ids).Delete(&LegacyEvent{}).Error; err != nil {
				return err
			}
			return tx.Where("id IN ?", ids).Delete(&LegacyCall{}).Error
		})
		if err != nil {
			return n, fmt.Errorf("prune legacy calls: %w", err)
		}
		n += int64(len(ids))
		if len(ids) < batch {
			return n, nil
		}
	}
}
