package store

import (
	"context"
	"errors"
	"fmt"
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
	// NextSeq is the sequence the call's next event gets.
	NextSeq int64
	// Done says the call's response is its last event.
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

// OpenCall records a call whose stream begins; its first event gets
// sequence c.NextSeq.
func (s LegacySessions) OpenCall(ctx context.Context, c *LegacyCall) error {
	c.CreatedAt, c.ExpiresAt, c.HeldUntil = c.CreatedAt.UTC(), c.ExpiresAt.UTC(), c.HeldUntil.UTC()
	if err := s.db.WithContext(ctx).Create(c).Error; err != nil {
		return fmt.Errorf("open legacy call: %w", err)
	}
	return nil
}

// AppendEvents stores events of a call held by holder, the first with
// sequence first, and keeps only the call's latest keep events. A final
// append (the call's response) marks the call done and keeps it until
// expires. ErrNotHeld when holder no longer holds the call.
func (s LegacySessions) AppendEvents(ctx context.Context, callID, holder string, first int64, bodies []string, keep int64, final bool, expires time.Time) error {
	next := first + int64(len(bodies))
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		cols := map[string]any{"next_seq": next}
		if final {
			cols["done"], cols["expires_at"] = true, expires.UTC()
		}
		res := tx.Model(&LegacyCall{}).Where("id = ? AND holder = ? AND NOT done AND next_seq = ?", callID, holder, first).Updates(cols)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return ErrNotHeld
		}
		rows := make([]LegacyEvent, len(bodies))
		for i, b := range bodies {
			rows[i] = LegacyEvent{CallID: callID, Seq: first + int64(i), Body: b}
		}
		if err := tx.Create(&rows).Error; err != nil {
			return err
		}
		// The bound is kept a batch at a time, not at every event.
		step := min(keep, 32)
		if keep > 0 && next > keep && (first-1)/step != (next-1)/step {
			return tx.Where("call_id = ? AND seq < ?", callID, next-keep).Delete(&LegacyEvent{}).Error
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrNotHeld) {
		return fmt.Errorf("append legacy call events: %w", err)
	}
	return err
}

// Checkpoint records the questions a held call now waits on and the
// state they were asked under; the answers start empty.
func (s LegacySessions) Checkpoint(ctx context.Context, callID, holder, state, legs string) error {
	return s.updateHeldCall(ctx, callID, holder, map[string]any{"state": state, "legs": legs, "answers": ""})
}

// SaveAnswers records the answers a held call has received to its
// pending questions.
func (s LegacySessions) SaveAnswers(ctx context.Context, callID, holder, answers string) error {
	return s.updateHeldCall(ctx, callID, holder, map[string]any{"answers": answers})
}

// ReleaseCall ends holder's lease on a call at once (it shuts down), so
// the replica its client resumes at takes it over without waiting.
func (s LegacySessions) ReleaseCall(ctx context.Context, callID, holder string) error {
	return s.updateHeldCall(ctx, callID, holder, map[string]any{"held_until": time.Unix(0, 0).UTC()})
}

// EndCall marks a held call that ended without a response (its client
// cancelled it) done, kept until expires.
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

// Call reads a session's call; ErrNotFound when the session has no such
// call (another session's call is none).
func (s LegacySessions) Call(ctx context.Context, tenantID, sessionID, id string) (*LegacyCall, error) {
	var c LegacyCall
	err := s.db.WithContext(ctx).Where("id = ? AND tenant_id = ? AND session_id = ?", id, tenantID, sessionID).Take(&c).Error
	if err != nil {
		return nil, notFound(err, "legacy call "+id)
	}
	return &c, nil
}

// CallEvents reads a call's stored events after sequence after, in
// order, at most limit.
func (s LegacySessions) CallEvents(ctx context.Context, callID string, after int64, limit int) ([]LegacyEvent, error) {
	var out []LegacyEvent
	err := s.db.WithContext(ctx).Where("call_id = ? AND seq > ?", callID, after).Order("seq").Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("read legacy call events: %w", err)
	}
	return out, nil
}

// RenewCalls extends the lease of every call holder still holds, and
// says how many.
func (s LegacySessions) RenewCalls(ctx context.Context, holder string, until time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Model(&LegacyCall{}).Where("holder = ? AND NOT done", holder).Update("held_until", until.UTC())
	if res.Error != nil {
		return 0, fmt.Errorf("renew legacy calls: %w", res.Error)
	}
	return res.RowsAffected, nil
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

// PruneCalls deletes calls past their expiry with their events, in
// bounded batches, and says how many calls.
func (s LegacySessions) PruneCalls(ctx context.Context) (int64, error) {
	var n int64
	for {
		var ids []string
		err := s.db.WithContext(ctx).Model(&LegacyCall{}).Where("expires_at < ?", time.Now().UTC()).
			Order("expires_at").Limit(max(pruneBatch/10, 1)).Pluck("id", &ids).Error
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
		if len(ids) < max(pruneBatch/10, 1) {
			return n, nil
		}
	}
}
