package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Flow states, as the record derives them from a flow's rounds.
const (
	FlowAwaitingInput = "awaiting_input" // its last round asked the client for input; the state is still valid
	FlowRunning       = "running"        // a round is calling the webhook
	FlowCompleted     = "completed"      // its last round completed
	FlowFailed        = "failed"         // its last round answered an error or a tool error
	FlowCancelled     = "cancelled"      // an admin cancelled it
	FlowExpired       = "expired"        // no retry came before its state expired
	FlowRejected      = "rejected"       // its last round's state was refused
)

// FlowStates lists every state, in the order the UI shows them.
var FlowStates = []string{FlowAwaitingInput, FlowRunning, FlowCompleted, FlowFailed, FlowCancelled, FlowExpired, FlowRejected}

// Flow is a flow's latest state in the record.
type Flow struct {
	ID               string `gorm:"primaryKey"`
	TenantID         string
	TenantSlug       string
	Method           string
	Target           string
	PrincipalIssuer  string
	PrincipalSubject string
	PrincipalClient  string
	ClientName       string
	ClientVersion    string
	Era              string
	State            string
	Rounds           int
	// PendingKinds are the kinds of the input requests it waits on,
	// comma-separated and sorted (form, roots, sampling, url).
	PendingKinds string
	// KeyID is the key that sealed its current state (or verified the
	// last one).
	KeyID   string
	Replica string
	TraceID string
	// Detail is the last error or rejection class.
	Detail         string
	StartedAt      time.Time
	UpdatedAt      time.Time
	WaitingSince   *time.Time
	StateExpiresAt *time.Time
	ServerUS       int64 `gorm:"column:server_us"`
	ClientWaitUS   int64 `gorm:"column:client_wait_us"`
	CancelReason   string
	CancelledBy    string
}

// TableName is the flows table.
func (Flow) TableName() string { return "flows" }

// FlowRound is one recorded round of a flow. Asked, Answers, Webhook,
// Principal and Client are JSON documents the recorder writes and the
// API passes through.
type FlowRound struct {
	FlowID         string `gorm:"primaryKey"`
	N              int    `gorm:"primaryKey;column:n"`
	Seq            int64  `gorm:"primaryKey"`
	TenantID       string
	ArrivedAt      time.Time
	EndedAt        time.Time
	ServerUS       int64 `gorm:"column:server_us"`
	ClientWaitUS   int64 `gorm:"column:client_wait_us"`
	ResultType     string
	ErrorClass     string
	StateIn        string
	KeyIn          string
	KeyOut         string
	StateExpiresAt *time.Time
	Asked          string
	Answers        string
	Webhook        string
	Principal      string
	Client         string
	Replica        string
	TraceID        string
	SpanID         string
}

// TableName is the flow_rounds table.
func (FlowRound) TableName() string { return "flow_rounds" }

// FlowEvent is one change to a flow, numbered in commit order across the
// fleet.
type FlowEvent struct {
	ID       int64 `gorm:"primaryKey;autoIncrement:false"`
	FlowID   string
	TenantID string
	At       time.Time
}

// TableName is the flow_events table.
func (FlowEvent) TableName() string { return "flow_events" }

// FlowChange is one change to a flow as a watcher of the record receives
// it.
type FlowChange struct {
	// ID numbers the change across the fleet; a stream resumes after the
	// last ID it saw.
	ID       int64
	TenantID string
	// Flow is the flow as it is now (nil if it was pruned meanwhile).
	Flow *Flow
	// Reset says changes were missed (the watcher fell behind, or asked
	// to resume after changes no longer kept): reload, then follow on.
	Reset bool
}

// RoundWrite is one round to record: the round's row and what it says of
// its flow.
type RoundWrite struct {
	Round FlowRound
	// Flow is the flow as this round leaves it; only the fields a round
	// knows are read (not Rounds, ServerMS or ClientWaitMS, which the
	// write accumulates, nor cancellation).
	Flow Flow
	// Running marks the start of a round that calls the webhook: the flow
	// becomes running, and no round row is written.
	Running bool
}

// flowEventLock serialises event numbering across writers on PostgreSQL
// (a transaction-scoped advisory lock), so events commit in id order and
// a reader that has seen id n has seen every event before it.
const flowEventLock = 0x6f70736d63700001

// WriteRounds records a batch of rounds in one transaction and returns
// the events it numbered. A round's flow is created by its first round
// and updated by later ones; a round older than the flow's latest round
// (written late by another replica) adds its row and its times but does
// not move the flow's state back, and a cancelled flow stays cancelled.
func (s *Store) WriteRounds(ctx context.Context, rounds []RoundWrite) ([]FlowEvent, error) {
	if len(rounds) == 0 {
		return nil, nil
	}
	var events []FlowEvent
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		next, err := s.lockEvents(tx)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		var rows []FlowRound
		events = events[:0]
		for i := range rounds {
			w := &rounds[i]
			if err := upsertFlow(tx, w); err != nil {
				return err
			}
			ev := FlowEvent{ID: next, FlowID: w.Flow.ID, TenantID: w.Flow.TenantID, At: now}
			next++
			events = append(events, ev)
			if !w.Running {
				r := w.Round
				r.Seq = ev.ID
				rows = append(rows, r)
			}
		}
		if len(rows) > 0 {
			if err := tx.CreateInBatches(rows, 200).Error; err != nil {
				return fmt.Errorf("write flow rounds: %w", err)
			}
		}
		if err := tx.CreateInBatches(events, 500).Error; err != nil {
			return fmt.Errorf("write flow events: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return events, nil
}

// lockEvents takes the event-numbering lock and returns the next event id.
func (s *Store) lockEvents(tx *gorm.DB) (int64, error) {
	if s.dialect == Postgres {
		if err := tx.Exec("SELECT pg_advisory_xact_lock(?)", int64(flowEventLock)).Error; err != nil {
			return 0, fmt.Errorf("lock flow events: %w", err)
		}
	}
	var last int64
	if err := tx.Raw("SELECT COALESCE(MAX(id), 0) FROM flow_events").Scan(&last).Error; err != nil {
		return 0, fmt.Errorf("read last flow event: %w", err)
	}
	return last + 1, nil
}

// upsertFlow creates or advances a flow's row for one round.
func upsertFlow(tx *gorm.DB, w *RoundWrite) error {
	f := &w.Flow
	n := w.Round.N
	serverUS, waitUS := w.Round.ServerUS, w.Round.ClientWaitUS
	if w.Running {
		serverUS, waitUS = 0, 0
	}
	// A row's state moves only for a round at least as new as its latest
	// one, and never away from cancelled. Every dialect here reads
	// "excluded" as the proposed row.
	const newer = `excluded.rounds >= flows.rounds AND flows.state <> 'cancelled'`
	err := tx.Exec(`INSERT INTO flows (id, tenant_id, tenant_slug, method, target, principal_issuer, principal_subject,
		principal_client, client_name, client_version, era, state, rounds, pending_kinds, key_id, replica, trace_id, detail,
		started_at, updated_at, waiting_since, state_expires_at, server_us, client_wait_us)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET
			state = CASE WHEN `+newer+` THEN excluded.state ELSE flows.state END,
			pending_kinds = CASE WHEN `+newer+` THEN excluded.pending_kinds ELSE flows.pending_kinds END,
			key_id = CASE WHEN `+newer+` AND excluded.key_id <> '' THEN excluded.key_id ELSE flows.key_id END,
			replica = CASE WHEN `+newer+` THEN excluded.replica ELSE flows.replica END,
			trace_id = CASE WHEN `+newer+` AND excluded.trace_id <> '' THEN excluded.trace_id ELSE flows.trace_id END,
			detail = CASE WHEN `+newer+` THEN excluded.detail ELSE flows.detail END,
			waiting_since = CASE WHEN `+newer+` THEN excluded.waiting_since ELSE flows.waiting_since END,
			state_expires_at = CASE WHEN `+newer+` THEN excluded.state_expires_at ELSE flows.state_expires_at END,
			client_name = CASE WHEN excluded.client_name <> '' THEN excluded.client_name ELSE flows.client_name END,
			client_version = CASE WHEN excluded.client_name <> '' THEN excluded.client_version ELSE flows.client_version END,
			rounds = CASE WHEN excluded.rounds > flows.rounds THEN excluded.rounds ELSE flows.rounds END,
			started_at = CASE WHEN excluded.started_at < flows.started_at THEN excluded.started_at ELSE flows.started_at END,
			updated_at = CASE WHEN excluded.updated_at > flows.updated_at THEN excluded.updated_at ELSE flows.updated_at END,
			server_us = flows.server_us + excluded.server_us,
			client_wait_us = flows.client_wait_us + excluded.client_wait_us`,
		f.ID, f.TenantID, f.TenantSlug, f.Method, f.Target, f.PrincipalIssuer, f.PrincipalSubject,
		f.PrincipalClient, f.ClientName, f.ClientVersion, f.Era, f.State, n, f.PendingKinds, f.KeyID, f.Replica, f.TraceID, f.Detail,
		f.StartedAt.UTC(), f.UpdatedAt.UTC(), utcPtr(f.WaitingSince), utcPtr(f.StateExpiresAt), serverUS, waitUS).Error
	if err != nil {
		return fmt.Errorf("write flow %s: %w", f.ID, err)
	}
	return nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// FlowFilter selects flows. Zero fields select everything.
type FlowFilter struct {
	// TenantIDs limits the flows to these tenants; nil means every
	// tenant, an empty non-nil slice none.
	TenantIDs []string
	States    []string
	// Target is a tool or prompt name, or a resource URI; Method limits
	// it to one kind.
	Target, Method string
	// Subject and Issuer select a principal; Client a client name.
	Subject, Issuer, Client string
	// KeyID selects flows whose current state is sealed under a key.
	KeyID string
	// WaitingLonger selects flows awaiting input since before now minus
	// this.
	WaitingLonger time.Duration
	MinRounds     int
	// Since and Until bound the flow's last change.
	Since, Until time.Time
	// IDs selects flows by id.
	IDs []string
}

// FlowSort orders a flow listing.
type FlowSort string

// Flow listing orders.
const (
	SortUpdated FlowSort = "updated" // most recently changed first (default)
	SortStarted FlowSort = "started" // most recently started first
	SortWaiting FlowSort = "waiting" // longest waiting first
	SortRounds  FlowSort = "rounds"  // most rounds first
)

// FlowPage is one page of a listing.
type FlowPage struct {
	Flows []Flow
	// Next is the position after the last flow, for the next page; empty
	// at the end.
	Next *FlowCursor
}

// FlowCursor is a position in a listing: the sort key of the last flow
// seen and its id.
type FlowCursor struct {
	Time   time.Time
	Rounds int
	ID     string
}

func (f FlowFilter) apply(db *gorm.DB, now time.Time) *gorm.DB {
	if f.TenantIDs != nil {
		if len(f.TenantIDs) == 0 {
			return db.Where("1 = 0")
		}
		db = db.Where("tenant_id IN ?", f.TenantIDs)
	}
	if len(f.States) > 0 {
		db = db.Where("state IN ?", f.States)
	}
	if f.Target != "" {
		db = db.Where("target = ?", f.Target)
	}
	if f.Method != "" {
		db = db.Where("method = ?", f.Method)
	}
	if f.Subject != "" {
		db = db.Where("principal_subject = ?", f.Subject)
	}
	if f.Issuer != "" {
		db = db.Where("principal_issuer = ?", f.Issuer)
	}
	if f.Client != "" {
		db = db.Where("client_name = ?", f.Client)
	}
	if f.KeyID != "" {
		db = db.Where("key_id = ?", f.KeyID)
	}
	if f.WaitingLonger > 0 {
		db = db.Where("state = ? AND waiting_since < ?", FlowAwaitingInput, now.Add(-f.WaitingLonger).UTC())
	}
	if f.MinRounds > 0 {
		db = db.Where("rounds >= ?", f.MinRounds)
	}
	if !f.Since.IsZero() {
		db = db.Where("updated_at >= ?", f.Since.UTC())
	}
	if !f.Until.IsZero() {
		db = db.Where("updated_at < ?", f.Until.UTC())
	}
	if len(f.IDs) > 0 {
		db = db.Where("id IN ?", f.IDs)
	}
	return db
}

// ListFlows returns one page of the flows f selects, in order sort, after
// cursor (nil: from the start).
func (s *Store) ListFlows(ctx context.Context, f FlowFilter, sort FlowSort, after *FlowCursor, limit int) (*FlowPage, error) {
	db := f.apply(s.db.WithContext(ctx).Model(&Flow{}), time.Now())
	col, desc := "updated_at", true
	switch sort {
	case SortStarted:
		col = "started_at"
	case SortWaiting:
		col, desc = "waiting_since", false
		db = db.Where("waiting_since IS NOT NULL")
	case SortRounds:
		col = "rounds"
	}
	if after != nil {
		var key any = after.Time.UTC()
		if sort == SortRounds {
			key = after.Rounds
		}
		if desc {
			db = db.Where("("+col+" < ? OR ("+col+" = ? AND id < ?))", key, key, after.ID)
		} else {
			db = db.Where("("+col+" > ? OR ("+col+" = ? AND id > ?))", key, key, after.ID)
		}
	}
	dir := " DESC"
	if !desc {
		dir = " ASC"
	}
	var out []Flow
	if err := db.Order(col + dir).Order("id" + dir).Limit(limit + 1).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list flows: %w", err)
	}
	page := &FlowPage{Flows: out}
	if len(out) > limit {
		page.Flows = out[:limit]
		last := out[limit-1]
		c := &FlowCursor{ID: last.ID, Rounds: last.Rounds}
		switch sort {
		case SortStarted:
			c.Time = last.StartedAt
		case SortWaiting:
			if last.WaitingSince != nil {
				c.Time = *last.WaitingSince
			}
		default:
			c.Time = last.UpdatedAt
		}
		page.Next = c
	}
	return page, nil
}

// CountFlows counts the flows f selects, by state.
func (s *Store) CountFlows(ctx context.Context, f FlowFilter) (map[string]int64, error) {
	f.States = nil
	var rows []struct {
		State string
		N     int64
	}
	db := f.apply(s.db.WithContext(ctx).Model(&Flow{}), time.Now())
	if err := db.Select("state, COUNT(*) AS n").Group("state").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("count flows: %w", err)
	}
	out := make(map[string]int64, len(FlowStates))
	for _, st := range FlowStates {
		out[st] = 0
	}
	for _, r := range rows {
		out[r.State] = r.N
	}
	return out, nil
}

// FlowIDs returns the ids of up to limit flows f selects.
func (s *Store) FlowIDs(ctx context.Context, f FlowFilter, limit int) ([]Flow, error) {
	var out []Flow
	db := f.apply(s.db.WithContext(ctx).Model(&Flow{}), time.Now())
	if err := db.Select("id, tenant_id, tenant_slug, state").Order("id").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("select flows: %w", err)
	}
	return out, nil
}

// GetFlow returns a flow and its rounds in order; ErrNotFound when the
// record does not know it.
func (s *Store) GetFlow(ctx context.Context, flowID string) (*Flow, []FlowRound, error) {
	var f Flow
	db := s.db.WithContext(ctx)
	err := db.Where("id = ?", flowID).Take(&f).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil, ErrNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read flow: %w", err)
	}
	var rounds []FlowRound
	if err := db.Where("flow_id = ?", flowID).Order("n, seq").Find(&rounds).Error; err != nil {
		return nil, nil, fmt.Errorf("read flow rounds: %w", err)
	}
	return &f, rounds, nil
}

// CancelFlows marks flows cancelled, with a reason and who did it, and
// returns the events it numbered; flows already in a final state other
// than awaiting input or running are left as they are.
func (s *Store) CancelFlows(ctx context.Context, ids []string, reason, by string) ([]FlowEvent, error) {
	var events []FlowEvent
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		next, err := s.lockEvents(tx)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		var changed []Flow
		err = tx.Model(&Flow{}).Where("id IN ? AND state IN ?", ids, []string{FlowAwaitingInput, FlowRunning}).
			Select("id", "tenant_id").Find(&changed).Error
		if err != nil {
			return fmt.Errorf("read flows to cancel: %w", err)
		}
		if len(changed) == 0 {
			return nil
		}
		changedIDs := make([]string, len(changed))
		for i, f := range changed {
			changedIDs[i] = f.ID
			events = append(events, FlowEvent{ID: next, FlowID: f.ID, TenantID: f.TenantID, At: now})
			next++
		}
		err = tx.Model(&Flow{}).Where("id IN ?", changedIDs).Updates(map[string]any{
			"state": FlowCancelled, "cancel_reason": reason, "cancelled_by": by, "updated_at": now,
			"pending_kinds": "", "waiting_since": nil,
		}).Error
		if err != nil {
			return fmt.Errorf("cancel flows: %w", err)
		}
		return tx.CreateInBatches(events, 500).Error
	})
	if err != nil {
		return nil, err
	}
	return events, nil
}

// ExpireFlows marks flows whose state expired while they waited for
// input, and returns the events it numbered.
func (s *Store) ExpireFlows(ctx context.Context, now time.Time) ([]FlowEvent, error) {
	var events []FlowEvent
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var due []Flow
		err := tx.Model(&Flow{}).Where("state = ? AND state_expires_at < ?", FlowAwaitingInput, now.UTC()).
			Select("id", "tenant_id").Limit(5000).Find(&due).Error
		if err != nil || len(due) == 0 {
			return err
		}
		next, err := s.lockEvents(tx)
		if err != nil {
			return err
		}
		ids := make([]string, len(due))
		for i, f := range due {
			ids[i] = f.ID
		}
		// Re-checked under the lock: a round recorded meanwhile wins.
		var still []Flow
		if err := tx.Model(&Flow{}).Where("id IN ? AND state = ? AND state_expires_at < ?", ids, FlowAwaitingInput, now.UTC()).
			Select("id", "tenant_id").Find(&still).Error; err != nil {
			return err
		}
		if len(still) == 0 {
			return nil
		}
		ids = ids[:0]
		at := time.Now().UTC()
		for _, f := range still {
			ids = append(ids, f.ID)
			events = append(events, FlowEvent{ID: next, FlowID: f.ID, TenantID: f.TenantID, At: at})
			next++
		}
		if err := tx.Model(&Flow{}).Where("id IN ?", ids).Updates(map[string]any{
			"state": FlowExpired, "updated_at": at, "pending_kinds": "", "waiting_since": nil,
		}).Error; err != nil {
			return fmt.Errorf("expire flows: %w", err)
		}
		return tx.CreateInBatches(events, 500).Error
	})
	if err != nil {
		return nil, fmt.Errorf("expire flows: %w", err)
	}
	return events, nil
}

// FlowEventsAfter returns up to limit events numbered after id, oldest
// first.
func (s *Store) FlowEventsAfter(ctx context.Context, id int64, limit int) ([]FlowEvent, error) {
	var out []FlowEvent
	if err := s.db.WithContext(ctx).Where("id > ?", id).Order("id").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("read flow events: %w", err)
	}
	return out, nil
}

// LastFlowEvent is the id of the newest event, 0 when there is none.
func (s *Store) LastFlowEvent(ctx context.Context) (int64, error) {
	var last int64
	if err := s.db.WithContext(ctx).Raw("SELECT COALESCE(MAX(id), 0) FROM flow_events").Scan(&last).Error; err != nil {
		return 0, fmt.Errorf("read last flow event: %w", err)
	}
	return last, nil
}

// FlowsByID reads the current rows of flows, for events.
func (s *Store) FlowsByID(ctx context.Context, ids []string) ([]Flow, error) {
	var out []Flow
	if len(ids) == 0 {
		return nil, nil
	}
	if err := s.db.WithContext(ctx).Where("id IN ?", ids).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("read flows: %w", err)
	}
	return out, nil
}

// PruneFlows deletes flows unchanged since before, their rounds, and
// events older than eventsBefore; it reports how many flows went.
func (s *Store) PruneFlows(ctx context.Context, before, eventsBefore time.Time) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		sub := tx.Model(&Flow{}).Select("id").Where("updated_at < ?", before.UTC())
		if err := tx.Where("flow_id IN (?)", sub).Delete(&FlowRound{}).Error; err != nil {
			return err
		}
		res := tx.Where("updated_at < ?", before.UTC()).Delete(&Flow{})
		if res.Error != nil {
			return res.Error
		}
		n = res.RowsAffected
		return tx.Where("at < ?", eventsBefore.UTC()).Delete(&FlowEvent{}).Error
	})
	if err != nil {
		return 0, fmt.Errorf("prune flows: %w", err)
	}
	return n, nil
}

// ListenFlows returns a channel that receives a value whenever another
// replica commits flow events (PostgreSQL LISTEN/NOTIFY), until ctx ends;
// nil on SQLite, whose single node sees its own writes.
func (s *Store) ListenFlows(ctx context.Context) (<-chan struct{}, error) {
	if s.dialect != Postgres {
		return nil, nil
	}
	payloads, err := s.Listen(ctx, flowChannel)
	if err != nil {
		return nil, err
	}
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for range payloads {
			select {
			case out <- struct{}{}:
			default: // one pending wake-up covers any number of notifications
			}
		}
	}()
	return out, nil
}

// NotifyFlows tells listening replicas that flow events were committed.
func (s *Store) NotifyFlows(ctx context.Context) error {
	return s.Notify(ctx, flowChannel, "")
}

// flowChannel is the notification channel of flow events.
const flowChannel = "opsmcp_flow_events"

// CountAwaiting counts flows awaiting input whose state has not expired,
// by tenant slug.
func (s *Store) CountAwaiting(ctx context.Context) (map[string]int64, error) {
	var rows []struct {
		TenantSlug string
		N          int64
	}
	err := s.db.WithContext(ctx).Model(&Flow{}).Select("tenant_slug, COUNT(*) AS n").
		Where("state = ? AND (state_expires_at IS NULL OR state_expires_at > ?)", FlowAwaitingInput, time.Now().UTC()).
		Group("tenant_slug").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("count flows awaiting input: %w", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.TenantSlug] = r.N
	}
	return out, nil
}

// FlowCountsByTenant counts flows by tenant id and state.
func (s *Store) FlowCountsByTenant(ctx context.Context) (map[string]map[string]int64, error) {
	var rows []struct {
		TenantID string
		State    string
		N        int64
	}
	if err := s.db.WithContext(ctx).Model(&Flow{}).Select("tenant_id, state, COUNT(*) AS n").Group("tenant_id, state").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("count flows by tenant: %w", err)
	}
	out := map[string]map[string]int64{}
	for _, r := range rows {
		if out[r.TenantID] == nil {
			out[r.TenantID] = map[string]int64{}
		}
		out[r.TenantID][r.State] = r.N
	}
	return out, nil
}
