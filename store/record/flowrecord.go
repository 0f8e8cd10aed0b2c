package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/opsmcp/platform/store/internal/sqldb"
	"gorm.io/gorm"
)

// Flow states, as the record derives them from a flow's rounds.
const (
	AwaitingInput = "awaiting_input" // its last round asked the client for input; the state is still valid
	Running       = "running"        // a round is calling the webhook
	Completed     = "completed"      // its last round completed
	Failed        = "failed"         // its last round answered an error or a tool error
	Cancelled     = "cancelled"      // an admin cancelled it
	Expired       = "expired"        // no retry came before its state expired
	Rejected      = "rejected"       // its last round's state was refused
)

// What a recorded call was. Every tools/call, prompts/get and
// resources/read is recorded as one of these.
const (
	// KindCall is a call answered in the round that asked it.
	KindCall = "call"
	// KindFlow is a multi-round flow of the 2026-07-28 era.
	KindFlow = "flow"
	// KindLegacy is a multi-round flow bridged onto a legacy session.
	KindLegacy = "legacy"
	// KindTask is a flow that became a task (the Tasks extension): its
	// rounds are the MRTR rounds before the task, the round that created
	// it, then its lifecycle events.
	KindTask = "task"
)

// Kinds lists every kind.
var Kinds = []string{KindCall, KindFlow, KindLegacy, KindTask}

// States lists every state, in the order the UI shows them.
var States = []string{AwaitingInput, Running, Completed, Failed, Cancelled, Expired, Rejected}

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
	// SessionID is the legacy session the call ran in (the id the
	// sessions API shows); "" for stateless calls. The first round
	// that names one sets it; nothing changes it after.
	SessionID string
	Era       string
	State     string
	Rounds    int
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
	// Kind is KindCall, KindFlow, KindLegacy or KindTask (flows recorded
	// before calls were have "" for a flow, read as KindFlow).
	Kind string
	// Message says in words what its latest change did: a task's status
	// message, why it failed or was refused.
	Message      string
	CancelReason string
	CancelledBy  string
	CancelledAt  *time.Time
	// Seq numbers the flow's latest change, in commit order across the
	// fleet.
	Seq int64
}

// TableName is the flows table.
func (Flow) TableName() string { return "flows" }

// Round is one recorded round of a flow. Asked, Answers, Webhook,
// Principal and Client are JSON documents the recorder writes and the API
// passes through.
type Round struct {
	N            int       `json:"n"`
	ArrivedAt    time.Time `json:"arrivedAt"`
	EndedAt      time.Time `json:"endedAt"`
	ServerUS     int64     `json:"serverUs"`
	ClientWaitUS int64     `json:"clientWaitUs"`
	// Where the server time went (µs), beside the webhook's duration:
	// the bearer token's check, opening the inbound state, the record's
	// writes waited on before the webhook (a destructive or single-use
	// tool's), sealing the outbound state. Absent for a step the round
	// did not take.
	AuthUS     int64  `json:"authUs,omitempty"`
	OpenUS     int64  `json:"openUs,omitempty"`
	RecordUS   int64  `json:"recordUs,omitempty"`
	SealUS     int64  `json:"sealUs,omitempty"`
	ResultType string `json:"resultType,omitempty"`
	ErrorClass string `json:"errorClass,omitempty"`
	// Cause says in words why the round failed or was refused.
	Cause          string          `json:"cause,omitempty"`
	StateIn        string          `json:"stateIn,omitempty"`
	KeyIn          string          `json:"keyIn,omitempty"`
	KeyOut         string          `json:"keyOut,omitempty"`
	StateExpiresAt *time.Time      `json:"stateExpiresAt,omitempty"`
	Asked          json.RawMessage `json:"asked,omitempty"`
	Answers        json.RawMessage `json:"answers,omitempty"`
	Webhook        json.RawMessage `json:"webhook,omitempty"`
	Principal      json.RawMessage `json:"principal,omitempty"`
	Client         json.RawMessage `json:"client,omitempty"`
	Replica        string          `json:"replica,omitempty"`
	TraceID        string          `json:"traceId,omitempty"`
	SpanID         string          `json:"spanId,omitempty"`
	// Event is a task's lifecycle event this round records (progress,
	// input_required, answered, completed, failed, cancelled, delivered);
	// By who caused it; Message the task's status message after it.
	Event   string `json:"event,omitempty"`
	By      string `json:"by,omitempty"`
	Message string `json:"message,omitempty"`
}

// flowRounds is one batch's rounds of one flow: a row of flow_rounds.
type flowRounds struct {
	FlowID   string `gorm:"primaryKey"`
	Seq      int64  `gorm:"primaryKey;autoIncrement:false"`
	TenantID string
	Rounds   string
}

func (flowRounds) TableName() string { return "flow_rounds" }

// Change is one change to a flow as a watcher of the record receives
// it.
type Change struct {
	// ID is the change's seq: a stream resumes after the last ID it saw.
	ID       int64
	TenantID string
	// Flow is the flow as this change left it.
	Flow *Flow
	// Reset says changes were missed (the watcher fell behind): reload,
	// then follow on.
	Reset bool
}

// RoundWrite is one round to record: the round and what it says of its
// flow.
type RoundWrite struct {
	Round Round
	// Flow is the flow as this round leaves it; only the fields a round
	// knows are read (not ServerUS, ClientWaitUS, Seq, nor cancellation:
	// the write derives or keeps those; Rounds only when set, for a
	// refused round: the round its flow is at, one before the round's).
	Flow Flow
	// Running marks the start of a round that calls the webhook: the flow
	// becomes running, and no round is written.
	Running bool
}

// flowSeq numbers flow changes in commit order across writers.
var flowSeq = sqldb.NewSequence(0x6f70736d63700001, "flows", "seq")

// lockSeq takes the numbering lock and returns the next seq.
func (s *Record) lockSeq(tx *gorm.DB) (int64, error) {
	next, err := flowSeq.Next(tx, s.dialect)
	if err != nil {
		return 0, fmt.Errorf("number flow changes: %w", err)
	}
	return next, nil
}

// flowUpsert is what a write does to an existing row. A row's state moves
// only for a round at least as new as its latest one, and never away from
// cancelled. Every dialect here reads "excluded" as the proposed row.
const flowUpsert = ` ON CONFLICT (id) DO UPDATE SET
	state = CASE WHEN ` + newer + ` THEN excluded.state ELSE flows.state END,
	pending_kinds = CASE WHEN ` + newer + ` THEN excluded.pending_kinds ELSE flows.pending_kinds END,
	key_id = CASE WHEN ` + newer + ` AND excluded.key_id <> '' THEN excluded.key_id ELSE flows.key_id END,
	replica = CASE WHEN ` + newer + ` THEN excluded.replica ELSE flows.replica END,
	trace_id = CASE WHEN ` + newer + ` AND excluded.trace_id <> '' THEN excluded.trace_id ELSE flows.trace_id END,
	detail = CASE WHEN ` + newer + ` THEN excluded.detail ELSE flows.detail END,
	waiting_since = CASE WHEN ` + newer + ` THEN excluded.waiting_since ELSE flows.waiting_since END,
	state_expires_at = CASE WHEN ` + newer + ` THEN excluded.state_expires_at ELSE flows.state_expires_at END,
	client_name = CASE WHEN excluded.client_name <> '' THEN excluded.client_name ELSE flows.client_name END,
	client_version = CASE WHEN excluded.client_name <> '' THEN excluded.client_version ELSE flows.client_version END,
	session_id = CASE WHEN flows.session_id = '' THEN excluded.session_id ELSE flows.session_id END,
	kind = CASE WHEN flows.kind = 'task' OR excluded.kind = '' THEN flows.kind ELSE excluded.kind END,
	message = CASE WHEN ` + newer + ` THEN excluded.message ELSE flows.message END,
	rounds = CASE WHEN excluded.rounds > flows.rounds THEN excluded.rounds ELSE flows.rounds END,
	started_at = CASE WHEN excluded.started_at < flows.started_at THEN excluded.started_at ELSE flows.started_at END,
	updated_at = CASE WHEN excluded.updated_at > flows.updated_at THEN excluded.updated_at ELSE flows.updated_at END,
	server_us = flows.server_us + excluded.server_us,
	client_wait_us = flows.client_wait_us + excluded.client_wait_us,
	seq = excluded.seq`

const newer = `excluded.rounds >= flows.rounds AND flows.state <> 'cancelled'`

// batchBuffer is one batch's encoding space (its COPY stream, or its
// JSON rows). A store keeps one from batch to batch (takeBuffer,
// giveBuffer): a batch is a megabyte or so, and allocated afresh each
// time the runtime spent more zeroing, collecting and returning its pages
// to the system than the encoding took. (A sync.Pool loses it at every
// collection.)
type batchBuffer struct {
	buf             []byte
	rounds, history []byte // SQLite's flows' rounds, and its document of where those bound for flow_rounds are
	plain           []byte // SQLite's flow's rounds before packing
	ids             []byte // SQLite's document of the batch's flows
	recordedIDs     map[string]bool
	merge           batchMerge
}

// takeBuffer takes the store's batch buffer, or a new one while another
// write holds it.
func (s *Record) takeBuffer() *batchBuffer {
	select {
	case bb := <-s.buffers:
		return bb
	default:
		return new(batchBuffer)
	}
}

// giveBuffer gives bb back to s, unless a batch of huge questions grew it
// past what is worth keeping.
func (s *Record) giveBuffer(bb *batchBuffer) {
	if cap(bb.buf)+cap(bb.rounds)+cap(bb.history)+cap(bb.ids)+cap(bb.plain) > 16<<20 {
		return
	}
	select {
	case s.buffers <- bb:
	default:
	}
}

// Filter selects flows. Zero fields select everything.
type Filter struct {
	// TenantIDs limits the flows to these tenants; nil means every
	// tenant, an empty non-nil slice none.
	TenantIDs []string
	States    []string
	// Target is a tool or prompt name, or a resource URI; Method limits
	// it to one kind.
	Target, Method string
	// Subject and Issuer select a principal; Client a client name;
	// Session a legacy session's bridged flows.
	Subject, Issuer, Client, Session string
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
	// Kinds selects flows of these kinds (KindCall, …).
	Kinds []string
	// Prefix selects flows whose id, target, principal subject or client
	// name starts with it (bytes, case-sensitive).
	Prefix string
}

// Sort orders a flow listing.
type Sort string

// Flow listing orders.
const (
	SortUpdated Sort = "updated" // most recently changed first (default)
	SortStarted Sort = "started" // most recently started first
	SortWaiting Sort = "waiting" // longest waiting first, then the rest by latest change
	SortRounds  Sort = "rounds"  // most rounds first
)

// Page is one page of a listing.
type Page struct {
	Flows []Flow
	// Next is the position after the last flow, for the next page; empty
	// at the end.
	Next *Cursor
}

// Cursor is a position in a listing: the sort key of the last flow
// seen and its id.
type Cursor struct {
	Time   time.Time
	Rounds int
	ID     string
	// Rest says a waiting listing is past the flows that wait, in the
	// rest (Time is then a change's time).
	Rest bool
}

func (s *Record) apply(f Filter, db *gorm.DB, now time.Time) *gorm.DB {
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
	if f.Session != "" {
		// The literal condition lets both planners use flows_session,
		// which holds bridged flows only.
		db = db.Where("session_id = ? AND session_id <> ''", f.Session)
	}
	if f.KeyID != "" {
		db = db.Where("key_id = ?", f.KeyID)
	}
	if f.WaitingLonger > 0 {
		db = db.Where("state = ? AND waiting_since < ?", AwaitingInput, now.Add(-f.WaitingLonger).UTC())
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
	if len(f.Kinds) > 0 {
		kinds := f.Kinds
		if slices.Contains(kinds, KindFlow) {
			kinds = append(slices.Clip(kinds), "") // recorded before kinds were
		}
		db = db.Where("kind IN ?", kinds)
	}
	if f.Prefix != "" {
		var or []string
		var args []any
		for _, col := range []string{"id", "target", "principal_subject", "client_name"} {
			cond, a := s.prefixOf(col, f.Prefix)
			or, args = append(or, cond), append(args, a...)
		}
		db = db.Where("("+strings.Join(or, " OR ")+")", args...)
	}
	return db
}

// prefixOf is a condition that col starts with prefix, as a range of
// the column (which its index serves) checked exactly by substr. The
// range is in byte order: SQLite's, and PostgreSQL's when the
// database's collation orders by code point (C, POSIX, C.UTF-8), whose
// indexes then serve it; under another collation PostgreSQL compares as
// "C" explicitly, correct but with no index to serve it (byteOrder).
func (s *Record) prefixOf(col, prefix string) (string, []any) {
	c := col
	if s.dialect == sqldb.Postgres && !s.byteOrder {
		c = col + ` COLLATE "C"`
	}
	cond := "(" + c + " >= ? AND substr(" + col + ", 1, ?) = ?"
	args := []any{prefix, utf8.RuneCountInString(prefix), prefix}
	if hi, ok := prefixEnd(prefix); ok {
		cond += " AND " + c + " < ?"
		args = append(args, hi)
	}
	return cond + ")", args
}

// prefixEnd is the least string greater than every string that starts
// with p, in byte order: p with its last byte that can grow grown, and
// what follows dropped (no such string for a p of only 0xFF bytes).
func prefixEnd(p string) (string, bool) {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xFF {
			b[i]++
			end := b[:i+1]
			if !utf8.Valid(end) {
				// A grown byte inside a rune: the bound is still a valid
				// upper bound in byte order, but text must be valid
				// UTF-8; step to the next whole rune instead.
				return nextRune(p)
			}
			return string(end), true
		}
	}
	return "", false
}

// nextRune is p with its last rune replaced by the next code point.
func nextRune(p string) (string, bool) {
	for len(p) > 0 {
		r, size := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-size]
		if r < utf8.MaxRune {
			next := r + 1
			if next >= 0xD800 && next <= 0xDFFF {
				next = 0xE000
			}
			return p + string(next), true
		}
	}
	return "", false
}

// ListFlows returns one page of the flows f selects, in order sort, after
// cursor (nil: from the start).
func (s *Record) List(ctx context.Context, f Filter, sort Sort, after *Cursor, limit int) (*Page, error) {
	if sort == SortWaiting {
		return s.listWaiting(ctx, f, after, limit)
	}
	db := s.apply(f, s.db.WithContext(ctx).Model(&Flow{}), time.Now())
	col, desc := "updated_at", true
	switch sort {
	case SortStarted:
		col = "started_at"
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
	page := &Page{Flows: out}
	if len(out) > limit {
		page.Flows = out[:limit]
		last := out[limit-1]
		c := &Cursor{ID: last.ID, Rounds: last.Rounds}
		switch sort {
		case SortStarted:
			c.Time = last.StartedAt
		default:
			c.Time = last.UpdatedAt
		}
		page.Next = c
	}
	return page, nil
}

// listWaiting is List by waiting time: the flows that wait, longest
// first, then every other flow the filter selects, latest change first,
// so that the order hides none of them.
func (s *Record) listWaiting(ctx context.Context, f Filter, after *Cursor, limit int) (*Page, error) {
	now := time.Now()
	var out []Flow
	if after == nil || !after.Rest {
		// Only a flow awaiting input has a waiting time: the state says so
		// in a way the partial index of waiting flows serves.
		db := s.apply(f, s.db.WithContext(ctx).Model(&Flow{}), now).Where("state = ?", AwaitingInput)
		if after != nil {
			t := after.Time.UTC()
			db = db.Where("(waiting_since > ? OR (waiting_since = ? AND id > ?))", t, t, after.ID)
		}
		if err := db.Order("waiting_since ASC").Order("id ASC").Limit(limit + 1).Find(&out).Error; err != nil {
			return nil, fmt.Errorf("list flows: %w", err)
		}
		after = nil
	}
	if len(out) <= limit {
		db := s.apply(f, s.db.WithContext(ctx).Model(&Flow{}), now).Where("state <> ?", AwaitingInput)
		if after != nil {
			t := after.Time.UTC()
			db = db.Where("(updated_at < ? OR (updated_at = ? AND id < ?))", t, t, after.ID)
		}
		var rest []Flow
		if err := db.Order("updated_at DESC").Order("id DESC").Limit(limit + 1 - len(out)).Find(&rest).Error; err != nil {
			return nil, fmt.Errorf("list flows: %w", err)
		}
		out = append(out, rest...)
	}
	page := &Page{Flows: out}
	if len(out) > limit {
		page.Flows = out[:limit]
		last := out[limit-1]
		if last.WaitingSince != nil {
			page.Next = &Cursor{Time: *last.WaitingSince, ID: last.ID}
		} else {
			page.Next = &Cursor{Time: last.UpdatedAt, ID: last.ID, Rest: true}
		}
	}
	return page, nil
}

// CountFlows counts the flows f selects, by state.
func (s *Record) Count(ctx context.Context, f Filter) (map[string]int64, error) {
	f.States = nil
	var rows []struct {
		State string
		N     int64
	}
	db := s.apply(f, s.db.WithContext(ctx).Model(&Flow{}), time.Now())
	if err := db.Select("state, COUNT(*) AS n").Group("state").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("count flows: %w", err)
	}
	out := make(map[string]int64, len(States))
	for _, st := range States {
		out[st] = 0
	}
	for _, r := range rows {
		out[r.State] = r.N
	}
	return out, nil
}

// FlowIDs returns the ids of up to limit flows f selects.
func (s *Record) IDs(ctx context.Context, f Filter, limit int) ([]Flow, error) {
	var out []Flow
	db := s.apply(f, s.db.WithContext(ctx).Model(&Flow{}), time.Now())
	if err := db.Select("id, tenant_id, tenant_slug, state").Order("id").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("select flows: %w", err)
	}
	return out, nil
}

// GetFlow returns a flow and its rounds in order; ErrNotFound when the
// record does not know it.
func (s *Record) Get(ctx context.Context, flowID string) (*Flow, []Round, error) {
	// The row with its first rounds: only here are they read.
	var row struct {
		Flow
		History *string
	}
	db := s.db.WithContext(ctx)
	err := db.Model(&Flow{}).Select("*").Where("id = ?", flowID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil, sqldb.ErrNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read flow: %w", err)
	}
	var batches []flowRounds
	if err := db.Where("flow_id = ?", flowID).Order("seq").Find(&batches).Error; err != nil {
		return nil, nil, fmt.Errorf("read flow rounds: %w", err)
	}
	if row.History != nil {
		batches = slices.Insert(batches, 0, flowRounds{Rounds: *row.History})
	}
	var rounds []Round
	for _, b := range batches {
		plain, err := unpackRounds([]byte(b.Rounds))
		if err != nil {
			return nil, nil, fmt.Errorf("read flow %s: %w", flowID, err)
		}
		var rs []Round
		if err := json.Unmarshal(plain, &rs); err != nil {
			return nil, nil, fmt.Errorf("read flow rounds: %w", err)
		}
		rounds = append(rounds, rs...)
	}
	f := row.Flow
	// In round order; rounds of one number (a retried round, a refused
	// replay) in the order they were written.
	slices.SortStableFunc(rounds, func(a, b Round) int { return a.N - b.N })
	return &f, rounds, nil
}

// restate moves flows in states from to state to, each as a change of its
// own, and returns the changes. set are the other columns to write.
func (s *Record) restate(ctx context.Context, ids []string, from []string, expiredBefore *time.Time, set map[string]any) ([]Change, error) {
	var changes []Change
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		next, err := s.lockSeq(tx)
		if err != nil {
			return err
		}
		q := tx.Model(&Flow{}).Where("state IN ?", from)
		if ids != nil {
			q = q.Where("id IN ?", ids)
		}
		if expiredBefore != nil {
			q = q.Where("state_expires_at < ?", expiredBefore.UTC()).Limit(5000)
		}
		var due []Flow
		if err := q.Select("id", "tenant_id").Find(&due).Error; err != nil {
			return fmt.Errorf("read flows: %w", err)
		}
		now := time.Now().UTC()
		for _, f := range due {
			cols := map[string]any{"updated_at": now, "seq": next}
			for k, v := range set {
				cols[k] = v
			}
			if err := tx.Model(&Flow{}).Where("id = ?", f.ID).Updates(cols).Error; err != nil {
				return fmt.Errorf("update flow: %w", err)
			}
			changes = append(changes, Change{ID: next, TenantID: f.TenantID})
			next++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return changes, nil
}

// CancelFlows marks flows cancelled, with a reason and who did it, and
// returns the changes; flows no longer awaiting input or running are left
// as they are.
func (s *Record) Cancel(ctx context.Context, ids []string, reason, by string) ([]Change, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ch, err := s.restate(ctx, ids, []string{AwaitingInput, Running}, nil, map[string]any{
		"state": Cancelled, "cancel_reason": reason, "cancelled_by": by, "cancelled_at": time.Now().UTC(),
		"pending_kinds": "", "waiting_since": nil,
	})
	if err != nil {
		return nil, fmt.Errorf("cancel flows: %w", err)
	}
	return ch, nil
}

// ExpireFlows marks flows whose state expired while they waited for
// input, and returns the changes.
func (s *Record) Expire(ctx context.Context, now time.Time) ([]Change, error) {
	ch, err := s.restate(ctx, nil, []string{AwaitingInput}, &now, map[string]any{
		"state": Expired, "pending_kinds": "", "waiting_since": nil,
	})
	if err != nil {
		return nil, fmt.Errorf("expire flows: %w", err)
	}
	return ch, nil
}

// FlowsChangedAfter returns up to limit flows whose latest change came
// after seq, in the order of their changes.
func (s *Record) ChangedAfter(ctx context.Context, seq int64, limit int) ([]Flow, error) {
	var out []Flow
	if err := s.db.WithContext(ctx).Where("seq > ?", seq).Order("seq").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("read flow changes: %w", err)
	}
	return out, nil
}

// LastFlowChange is the seq of the newest change, 0 when there is none.
func (s *Record) LastChange(ctx context.Context) (int64, error) {
	var last int64
	if err := s.db.WithContext(ctx).Raw(flowSeq.LastQuery).Scan(&last).Error; err != nil {
		return 0, fmt.Errorf("read last flow change: %w", err)
	}
	return last, nil
}

// inFlightGrace is how long past its retention a flow in flight is kept.
const inFlightGrace = 24 * time.Hour

// Prune deletes flows unchanged since before, and their rounds, except
// those of the tenants in own, which go when unchanged since their own
// time; it reports how many flows went. A tenant's own time may be
// earlier or later than before: it keeps its calls for less or longer.
func (s *Record) Prune(ctx context.Context, before time.Time, own map[string]time.Time) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// A flow in flight is kept a day past its retention: a short
		// retention must not delete one a user is still answering or a
		// task is still working on (the expirer ends the first, tasks end
		// on their own); one left running by a lost replica goes then.
		stale := func(db *gorm.DB, before time.Time) *gorm.DB {
			return db.Where("updated_at < ? AND (state NOT IN ? OR updated_at < ?)", before.UTC(),
				[]string{AwaitingInput, Running}, before.Add(-inFlightGrace).UTC())
		}
		prune := func(scope func(*gorm.DB) *gorm.DB, before time.Time) error {
			old := scope(stale(tx.Model(&Flow{}).Select("id"), before))
			if err := tx.Where("flow_id IN (?)", old).Delete(&flowRounds{}).Error; err != nil {
				return err
			}
			res := scope(stale(tx, before)).Delete(&Flow{})
			n += res.RowsAffected
			return res.Error
		}
		ids := make([]string, 0, len(own))
		for id := range own {
			ids = append(ids, id)
		}
		if err := prune(func(db *gorm.DB) *gorm.DB {
			if len(ids) == 0 {
				return db
			}
			return db.Where("tenant_id NOT IN ?", ids)
		}, before); err != nil {
			return err
		}
		for id, t := range own {
			if err := prune(func(db *gorm.DB) *gorm.DB { return db.Where("tenant_id = ?", id) }, t); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune flows: %w", err)
	}
	return n, nil
}

// Listen returns a channel that receives a value whenever another
// replica commits flow changes (PostgreSQL LISTEN/NOTIFY), until ctx ends;
// nil on SQLite, whose single node sees its own writes.
func (s *Record) Listen(ctx context.Context) (<-chan struct{}, error) {
	return s.conn.Wakes(ctx, flowChannel, false)
}

// Notify tells listening replicas that flow changes were committed.
func (s *Record) Notify(ctx context.Context) error {
	return s.conn.Notify(ctx, flowChannel, "")
}

// flowChannel is the notification channel of flow changes.
const flowChannel = "opsmcp_flow_changes"

// CountAwaiting counts flows awaiting input whose state has not expired,
// by tenant slug.
func (s *Record) CountAwaiting(ctx context.Context) (map[string]int64, error) {
	var rows []struct {
		TenantSlug string
		N          int64
	}
	err := s.db.WithContext(ctx).Model(&Flow{}).Select("tenant_slug, COUNT(*) AS n").
		Where("state = ? AND (state_expires_at IS NULL OR state_expires_at > ?)", AwaitingInput, time.Now().UTC()).
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
func (s *Record) CountsByTenant(ctx context.Context) (map[string]map[string]int64, error) {
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

// TargetActivity is what the calls of one target (a tool, prompt or
// resource) did over a window.
type TargetActivity struct {
	Method, Target string
	// Calls changed within the window, and those of them failed or
	// refused.
	Calls, Failed int64
}

// maxTargetRows bounds TargetActivities' rows (a target and state
// each), the busiest first: the URIs a tenant's templates were read at
// are as many as its callers made up.
const maxTargetRows = 5000

// TargetActivities are a tenant's calls changed since, by method and
// target (at most maxTargetRows targets and states, the busiest): the
// catalogue view's failure rates.
func (s *Record) TargetActivities(ctx context.Context, tenantID string, since time.Time) ([]TargetActivity, error) {
	var rows []struct {
		Method, Target, State string
		N                     int64
	}
	err := s.db.WithContext(ctx).Model(&Flow{}).Select("method, target, state, COUNT(*) AS n").
		Where("tenant_id = ? AND updated_at >= ?", tenantID, since.UTC()).Group("method, target, state").
		Order("n DESC").Limit(maxTargetRows).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("count calls by target: %w", err)
	}
	at := map[[2]string]int{}
	var out []TargetActivity
	for _, r := range rows {
		k := [2]string{r.Method, r.Target}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, TargetActivity{Method: r.Method, Target: r.Target})
		}
		a := &out[i]
		a.Calls += r.N
		if r.State == Failed || r.State == Rejected {
			a.Failed += r.N
		}
	}
	return out, nil
}

// Activity is what a tenant's calls did over a window, and what waits
// on its people now.
type Activity struct {
	// Calls changed within the window, and those of them failed or
	// refused.
	Calls, Failed int64
	// P95RoundUS is the 95th percentile of its calls' mean server time a
	// round, in µs (of at most activitySample calls of the window).
	P95RoundUS int64
	// Waiting are its flows awaiting input now, the oldest since
	// OldestWaiting.
	Waiting       int64
	OldestWaiting *time.Time
}

// activitySample bounds the calls read for the percentiles: the most
// recent ones of the window, across tenants.
const activitySample = 50_000

// Activity reads, by tenant id, what calls did since since (their last
// change) and what waits now. Three reads, each served by an index: the
// counts by state, the server times of the most recent calls, the flows
// waiting (a partial index).
func (s *Record) Activity(ctx context.Context, since time.Time) (map[string]*Activity, error) {
	out := map[string]*Activity{}
	of := func(id string) *Activity {
		a := out[id]
		if a == nil {
			a = &Activity{}
			out[id] = a
		}
		return a
	}
	db := s.db.WithContext(ctx)
	var counts []struct {
		TenantID, State string
		N               int64
	}
	if err := db.Model(&Flow{}).Select("tenant_id, state, COUNT(*) AS n").Where("updated_at >= ?", since.UTC()).
		Group("tenant_id, state").Scan(&counts).Error; err != nil {
		return nil, fmt.Errorf("count recent calls: %w", err)
	}
	for _, c := range counts {
		a := of(c.TenantID)
		a.Calls += c.N
		if c.State == Failed || c.State == Rejected {
			a.Failed += c.N
		}
	}
	var times []struct {
		TenantID string
		ServerUS int64
		Rounds   int64
	}
	if err := db.Model(&Flow{}).Select("tenant_id, server_us, rounds").Where("updated_at >= ?", since.UTC()).
		Order("updated_at DESC").Limit(activitySample).Scan(&times).Error; err != nil {
		return nil, fmt.Errorf("read recent calls' times: %w", err)
	}
	per := map[string][]int64{}
	for _, t := range times {
		per[t.TenantID] = append(per[t.TenantID], t.ServerUS/max(t.Rounds, 1))
	}
	for id, us := range per {
		slices.Sort(us)
		of(id).P95RoundUS = us[(len(us)*95+99)/100-1]
	}
	rows, err := db.Model(&Flow{}).Select("tenant_id, COUNT(*), MIN(waiting_since)").Where("state = ?", AwaitingInput).
		Group("tenant_id").Rows()
	if err != nil {
		return nil, fmt.Errorf("count waiting flows: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int64
		var oldest any // a time on PostgreSQL; SQLite's MIN has no declared type, so text
		if err := rows.Scan(&id, &n, &oldest); err != nil {
			return nil, fmt.Errorf("count waiting flows: %w", err)
		}
		a := of(id)
		a.Waiting, a.OldestWaiting = n, timeValue(oldest)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count waiting flows: %w", err)
	}
	return out, nil
}

// timeValue reads a time an aggregate returned: a time.Time, or the
// text SQLite keeps times as; nil for anything else.
func timeValue(v any) *time.Time {
	switch t := v.(type) {
	case time.Time:
		return &t
	case []byte:
		return timeValue(string(t))
	case string:
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999-07:00", "2006-01-02 15:04:05.999999999"} {
			if p, err := time.Parse(layout, t); err == nil {
				return &p
			}
		}
	}
	return nil
}

// InFlightByKey counts the flows in flight (awaiting input or running)
// by tenant id and the key that sealed their current state: what a
// key's retirement or revocation would touch (served by the partial
// index of in-flight keys).
func (s *Record) InFlightByKey(ctx context.Context) (map[string]map[string]int64, error) {
	var rows []struct {
		TenantID, KeyID string
		N               int64
	}
	if err := s.db.WithContext(ctx).Model(&Flow{}).Select("tenant_id, key_id, COUNT(*) AS n").
		Where("state IN ?", []string{AwaitingInput, Running}).Group("tenant_id, key_id").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("count flows in flight by key: %w", err)
	}
	out := map[string]map[string]int64{}
	for _, r := range rows {
		if out[r.TenantID] == nil {
			out[r.TenantID] = map[string]int64{}
		}
		out[r.TenantID][r.KeyID] = r.N
	}
	return out, nil
}

// Ping checks that the record's database answers.
func (s *Record) Ping(ctx context.Context) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return fmt.Errorf("database handle: %w", err)
	}
	return sqlDB.PingContext(ctx)
}
