package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Task statuses, as the Tasks extension names them. working and
// input_required are live; the others are terminal and never change.
const (
	TaskWorking       = "working"
	TaskInputRequired = "input_required"
	TaskCompleted     = "completed"
	TaskFailed        = "failed"
	TaskCancelled     = "cancelled"
)

// TaskLive reports whether a task in status may still change.
func TaskLive(status string) bool { return status == TaskWorking || status == TaskInputRequired }

// Task is a task's row: who created it and for which tool, where it
// stands, what it asks and what it answered, and when it is due for a
// deadline or a retry. JSON documents are kept as text.
type Task struct {
	ID         string `gorm:"primaryKey"`
	TenantID   string
	TenantSlug string
	// FlowID is the task's flow in the record (the flow of the call that
	// created it, MRTR rounds included).
	FlowID string
	Tool   string
	// Era is the protocol revision the task was created in; SessionID
	// the legacy session that created it (2025-11-25 tasks), else "".
	Era       string
	SessionID string
	// PrincipalHash binds the task to its creator; empty on a public
	// tenant. The principal's parts are kept for the record and the UI.
	PrincipalHash    string
	PrincipalIssuer  string
	PrincipalSubject string
	PrincipalClient  string
	ClientName       string
	ClientVersion    string
	// Capabilities are the creating request's client capabilities (JSON):
	// what the task may ask for.
	Capabilities string

	Status        string
	StatusMessage string
	// InputRequests are the outstanding input requests (a JSON object,
	// key to request); AskedKeys every key ever asked (a JSON array), so
	// none is reused.
	InputRequests string
	AskedKeys     string
	// PendingAnswers are answers accepted from the client and not yet
	// delivered to the backend (a JSON object); CancelPending a cancel
	// not yet delivered. due_at is when the next attempt is.
	PendingAnswers string
	CancelPending  bool
	// Result is the complete tool result (JSON); Error the JSON-RPC error
	// of a failed task (JSON).
	Result string
	Error  string
	// ToolError says Result is a tool error (isError).
	ToolError bool
	// Secret keys the backend's reports (HMAC), sealed at rest when a
	// secrets key is configured.
	Secret string
	// LastSeq is the last report applied: a report with a seq at or below
	// it is a duplicate.
	LastSeq int64
	// Attempts counts the failed tries of the delivery now pending.
	Attempts int
	// Events counts the lifecycle events recorded, so each is a round of
	// the flow in the record.
	Events         int
	TTLMs          int64 `gorm:"column:ttl_ms"`
	PollIntervalMs int64
	DeadlineMs     int64
	// Traceparent is the span of the round that created the task: its
	// lifecycle's spans are its children.
	Traceparent string
	CancelledBy string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	ExpiresAt   time.Time
	DueAt       *time.Time
	Version     int64
}

// TableName is the tasks table.
func (Task) TableName() string { return "tasks" }

// TaskLimits bound the live tasks a tenant, and one principal of it, may
// hold; 0 means no limit.
type TaskLimits struct{ PerTenant, PerPrincipal int }

// ErrTaskChanged means a task changed between its read and its write
// more often than Update retries.
var ErrTaskChanged = errors.New("task changed concurrently")

// ErrUnchanged is what a change given to Tasks.Update returns to leave
// the task as it is (Update then returns the task as read, and no error).
var ErrUnchanged = errors.New("unchanged")

// TaskQuotaError is the ErrQuota of Create: which limit the new task
// would pass, and how many live tasks hold it.
type TaskQuotaError struct {
	// Caller: the principal's limit; else the tenant's.
	Caller bool
	Live   int64
}

func (e *TaskQuotaError) Error() string {
	who := "the tenant"
	if e.Caller {
		who = "the caller"
	}
	return fmt.Sprintf("%s holds %d live tasks, its limit: %v", who, e.Live, ErrQuota)
}

// Is makes a TaskQuotaError an ErrQuota.
func (e *TaskQuotaError) Is(target error) bool { return target == ErrQuota }

// Create stores a new task, with its secret sealed, unless its tenant,
// or its principal, holds as many live tasks as limits allow
// (a *TaskQuotaError, which is ErrQuota). Creations for one tenant are
// serialised so concurrent ones
// cannot pass a limit together.
func (s Tasks) Create(ctx context.Context, t *Task, limits TaskLimits) error {
	row := *t
	if s.box != nil {
		row.Secret = s.box.seal("task:"+t.ID, t.Secret)
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if limits.PerTenant > 0 || limits.PerPrincipal > 0 {
			if s.dialect == Postgres {
				if err := tx.Exec("SELECT pg_advisory_xact_lock(hashtext(?))", "tasks:"+t.TenantID).Error; err != nil {
					return fmt.Errorf("lock tenant's tasks: %w", err)
				}
			}
			live := tx.Model(&Task{}).Where("tenant_id = ? AND status IN ?", t.TenantID, []string{TaskWorking, TaskInputRequired})
			var n int64
			if err := live.Count(&n).Error; err != nil {
				return fmt.Errorf("count live tasks: %w", err)
			}
			if limits.PerTenant > 0 && n >= int64(limits.PerTenant) {
				return &TaskQuotaError{Live: n}
			}
			if limits.PerPrincipal > 0 && t.PrincipalHash != "" {
				var m int64
				err := tx.Model(&Task{}).Where("tenant_id = ? AND status IN ? AND principal_hash = ?", t.TenantID,
					[]string{TaskWorking, TaskInputRequired}, t.PrincipalHash).Count(&m).Error
				if err != nil {
					return fmt.Errorf("count live tasks: %w", err)
				}
				if m >= int64(limits.PerPrincipal) {
					return &TaskQuotaError{Caller: true, Live: m}
				}
			}
		}
		if err := tx.Create(&row).Error; err != nil {
			return conflict(err, "task")
		}
		return nil
	})
}

// Get reads a task by id, without its secret; ErrNotFound when there is
// none. Whether the caller may see it is the caller's to decide.
func (s Tasks) Get(ctx context.Context, id string) (*Task, error) {
	var t Task
	// The whole row, its sealed secret dropped rather than left out of
	// the query: GORM's Omit costs more (a column list built per query)
	// than the bytes it saves.
	if err := s.db.WithContext(ctx).Where("id = ?", id).Take(&t).Error; err != nil {
		return nil, notFound(err, "task")
	}
	t.Secret = ""
	return &t, nil
}

// GetWithSecret reads a task by id with its secret opened, which only
// the check of a backend's report needs.
func (s Tasks) GetWithSecret(ctx context.Context, id string) (*Task, error) {
	var t Task
	if err := s.db.WithContext(ctx).Where("id = ?", id).Take(&t).Error; err != nil {
		return nil, notFound(err, "task")
	}
	if err := s.openTask(&t); err != nil {
		return nil, err
	}
	return &t, nil
}

// openTask replaces a task's sealed secret with its plaintext.
func (s Tasks) openTask(t *Task) error {
	if !Sealed(t.Secret) {
		return nil
	}
	if s.box == nil {
		return fmt.Errorf("task %s: its secret is sealed, and no secrets key is configured: %w", t.ID, ErrSecretUnreadable)
	}
	plain, _, err := s.box.open("task:"+t.ID, t.Secret)
	if err != nil {
		return fmt.Errorf("task %s: %w", t.ID, err)
	}
	t.Secret = plain
	return nil
}

// Update reads a task, lets change alter it, and writes it back if it is
// still the version read, retrying on a concurrent change. change may
// return ErrUnchanged to write nothing (Update then returns the task as
// read) or any other error to stop. The secret is neither read nor
// written.
func (s Tasks) Update(ctx context.Context, id string, change func(*Task) error) (*Task, error) {
	return s.UpdateFrom(ctx, &Task{ID: id, Version: -1}, change)
}

// UpdateFrom is Update starting from t, a version of the task the caller
// read already, whole (as Get, GetWithSecret and Due read it; not as the
// reads that leave columns out): it is changed (a copy of it) without
// reading the task again, and read again only if another change came
// first.
func (s Tasks) UpdateFrom(ctx context.Context, t *Task, change func(*Task) error) (*Task, error) {
	cur := *t
	for range 8 {
		if cur.Version < 0 {
			read, err := s.Get(ctx, t.ID)
			if err != nil {
				return nil, err
			}
			cur = *read
		}
		read := cur.Version
		if err := change(&cur); err != nil {
			if errors.Is(err, ErrUnchanged) {
				return &cur, nil
			}
			return nil, err
		}
		cur.Version = read + 1
		res := s.db.WithContext(ctx).Model(&Task{}).Where("id = ? AND version = ?", cur.ID, read).Updates(map[string]any{
			"status": cur.Status, "status_message": cur.StatusMessage, "input_requests": cur.InputRequests,
			"asked_keys": cur.AskedKeys, "pending_answers": cur.PendingAnswers, "cancel_pending": cur.CancelPending,
			"result": cur.Result, "error": cur.Error, "tool_error": cur.ToolError, "last_seq": cur.LastSeq, "events": cur.Events, "attempts": cur.Attempts,
			"cancelled_by": cur.CancelledBy, "updated_at": cur.UpdatedAt, "due_at": cur.DueAt, "version": cur.Version,
		})
		if res.Error != nil {
			return nil, fmt.Errorf("write task: %w", res.Error)
		}
		if res.RowsAffected == 1 {
			return &cur, nil
		}
		cur.Version = -1 // changed meanwhile: read it again
	}
	return nil, ErrTaskChanged
}

// Delete removes a task (one whose call never became a task after all).
func (s Tasks) Delete(ctx context.Context, id string) error {
	if err := s.db.WithContext(ctx).Where("id = ?", id).Delete(&Task{}).Error; err != nil {
		return fmt.Errorf("delete task: %w", err)
	}
	return nil
}

// Due lists up to limit tasks whose due time has come: a live task past
// its deadline, or a delivery to retry. Their secrets are not read.
func (s Tasks) Due(ctx context.Context, now time.Time, limit int) ([]Task, error) {
	var out []Task
	if err := s.db.WithContext(ctx).Where("due_at IS NOT NULL AND due_at <= ?", now.UTC()).Order("due_at").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("read due tasks: %w", err)
	}
	for i := range out {
		out[i].Secret = "" // as Get
	}
	return out, nil
}

// DeleteExpired removes tasks past their expiry (created_at + ttl), in
// batches of limit, and says how many went.
func (s Tasks) DeleteExpired(ctx context.Context, now time.Time, limit int) (int64, error) {
	var ids []string
	db := s.db.WithContext(ctx)
	if err := db.Model(&Task{}).Where("expires_at <= ?", now.UTC()).Order("expires_at").Limit(limit).Pluck("id", &ids).Error; err != nil {
		return 0, fmt.Errorf("read expired tasks: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	res := db.Where("id IN ? AND expires_at <= ?", ids, now.UTC()).Delete(&Task{})
	if res.Error != nil {
		return 0, fmt.Errorf("delete expired tasks: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// List returns up to limit of a tenant's tasks created by principalHash
// (and, when sessionID is set, by that session), newest first, before
// the task with id after ("" for the first page), without their bulky
// columns.
func (s Tasks) List(ctx context.Context, tenantID, principalHash, sessionID, after string, limit int) ([]Task, error) {
	q := s.db.WithContext(ctx).Omit(bulky...).Where("tenant_id = ? AND principal_hash = ?", tenantID, principalHash)
	own := s.db.WithContext(ctx).Model(&Task{}).Where("id = ? AND tenant_id = ? AND principal_hash = ?", after, tenantID, principalHash)
	if sessionID != "" {
		q = q.Where("session_id = ?", sessionID)
		own = own.Where("session_id = ?", sessionID)
	}
	if after != "" {
		// The cursor is one of the caller's own tasks: another's is
		// answered as one that never existed.
		var at []time.Time
		if err := own.Pluck("created_at", &at).Error; err != nil {
			return nil, fmt.Errorf("read tasks: %w", err)
		}
		if len(at) == 0 {
			return nil, fmt.Errorf("cursor: %w", ErrNotFound)
		}
		q = q.Where("created_at < ? OR (created_at = ? AND id < ?)", at[0], at[0], after)
	}
	var out []Task
	if err := q.Order("created_at DESC, id DESC").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("read tasks: %w", err)
	}
	return out, nil
}

// TaskCounts are the tasks of one tenant by status, and when its oldest
// working task was created.
type TaskCounts struct {
	ByStatus      map[string]int64
	OldestWorking *time.Time
}

// Counts reads every tenant's task counts, by tenant slug (tasks of a
// tenant deleted since are left out).
func (s Tasks) Counts(ctx context.Context) (map[string]*TaskCounts, error) {
	var rows []struct {
		Slug   string
		Status string
		N      int64
		Oldest *time.Time
	}
	err := s.db.WithContext(ctx).Table("tasks").
		Select("tenants.slug AS slug, tasks.status AS status, COUNT(*) AS n, MIN(tasks.created_at) AS oldest").
		Joins("JOIN tenants ON tenants.id = tasks.tenant_id").
		Group("tenants.slug, tasks.status").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	out := map[string]*TaskCounts{}
	for _, r := range rows {
		c := out[r.Slug]
		if c == nil {
			c = &TaskCounts{ByStatus: map[string]int64{}}
			out[r.Slug] = c
		}
		c.ByStatus[r.Status] = r.N
		if r.Status == TaskWorking && r.Oldest != nil {
			o := r.Oldest.UTC()
			c.OldestWorking = &o
		}
	}
	return out, nil
}

// ByFlow reads the task a flow became, without its secret, result or
// questions; ErrNotFound when it is no task's.
func (s Tasks) ByFlow(ctx context.Context, flowID string) (*Task, error) {
	var t Task
	if err := s.db.WithContext(ctx).Omit(bulky...).Where("flow_id = ?", flowID).Order("created_at DESC").Take(&t).Error; err != nil {
		return nil, notFound(err, "task")
	}
	return &t, nil
}

// bulky are the columns a task's status (its notifications, its lists)
// does without: the secret, which would be opened for nothing, and what
// may be large.
var bulky = []string{"secret", "result", "input_requests", "pending_answers", "capabilities"}

// ChangedSince returns up to limit of a tenant's tasks of principalHash
// and sessionID changed at or after since, oldest change first, without
// their bulky columns.
func (s Tasks) ChangedSince(ctx context.Context, tenantID, principalHash, sessionID string, since time.Time, limit int) ([]Task, error) {
	var out []Task
	if err := s.db.WithContext(ctx).Omit(bulky...).
		Where("tenant_id = ? AND principal_hash = ? AND session_id = ? AND updated_at >= ?", tenantID, principalHash, sessionID, since).
		Order("updated_at, id").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("read tasks: %w", err)
	}
	return out, nil
}
