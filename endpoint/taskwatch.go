package endpoint

import (
	"context"
	"errors"
	"time"

	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/store/record"
)

// A subscriptions/listen stream may follow tasks (notifications.taskIds):
// it gets notifications/tasks, the task as tasks/get shows it, when one
// changes, on whichever replica the stream is. The change reaches the
// stream through the flow record (a task is a flow, and every lifecycle
// event a change of it, followed across replicas by the record's
// watcher), and a catch-up read every few seconds covers a change the
// record did not carry (its queue full, a replica killed before its
// batch). A task is followed until it finishes.

// Following tasks.
const (
	// maxWatchedTasks bounds the tasks one stream follows.
	maxWatchedTasks = 100
	// taskCatchUp is how often a stream reads its tasks again.
	taskCatchUp = 5 * time.Second
)

// FlowChanges follows the flow record's changes across replicas (the
// record's watcher, flows.Watcher).
type FlowChanges interface {
	Subscribe(ctx context.Context, after int64, visible func(tenantID string) bool) (<-chan record.Change, error)
}

// taskWatch is the tasks one stream follows.
type taskWatch struct {
	te      *taskEngine
	c       *call
	ids     []string             // accepted, in the order asked
	byFlow  map[string]string    // flow id -> task id
	updated map[string]time.Time // task id -> the last change notified
	done    map[string]bool      // finished and notified: no longer read
}

// watch accepts the ids that are tasks of the caller; the others are
// left out of the acknowledgement, as ids that do not exist.
func (te *taskEngine) watch(ctx context.Context, c *call, ids []string) *taskWatch {
	w := &taskWatch{te: te, c: c, byFlow: map[string]string{}, updated: map[string]time.Time{}, done: map[string]bool{}}
	for _, id := range ids {
		if _, dup := w.updated[id]; dup {
			continue
		}
		tk, err := te.visibleTask(ctx, c, id)
		if err != nil {
			continue
		}
		w.ids = append(w.ids, id)
		w.byFlow[tk.FlowID] = id
		w.updated[id] = tk.UpdatedAt
		w.done[id] = !store.TaskLive(tk.Status)
	}
	return w
}

// accepted are the ids the stream follows, for the acknowledgement.
func (w *taskWatch) accepted() []string {
	if w.ids == nil {
		return []string{}
	}
	return w.ids
}

// following reports whether a task followed may still change.
func (w *taskWatch) following() bool {
	if w == nil {
		return false
	}
	for _, id := range w.ids {
		if !w.done[id] {
			return true
		}
	}
	return false
}

// subscribe follows the record's changes of the caller's tenant; nil
// when there is no record to follow (the catch-up read alone serves).
func (w *taskWatch) subscribe(ctx context.Context) <-chan record.Change {
	if w.te.changes == nil {
		return nil
	}
	tenant := w.c.snap.tenantID
	ch, err := w.te.changes.Subscribe(ctx, -1, func(id string) bool { return id == tenant })
	if err != nil {
		return nil
	}
	return ch
}

// changed reads the task of flowID ("" for every task followed) and
// returns the notifications of those that changed since last notified.
func (w *taskWatch) changed(ctx context.Context, flowID string) []map[string]any {
	ids := w.ids
	if flowID != "" {
		id, ok := w.byFlow[flowID]
		if !ok {
			return nil
		}
		ids = []string{id}
	}
	var out []map[string]any
	for _, id := range ids {
		if w.done[id] {
			continue
		}
		tk, err := w.te.visibleTask(ctx, w.c, id)
		if err != nil {
			// Swept, or unreadable now: a swept task changes no more.
			if errors.Is(err, store.ErrNotFound) {
				w.done[id] = true
			}
			continue
		}
		if tk.UpdatedAt.Equal(w.updated[id]) {
			continue
		}
		w.updated[id] = tk.UpdatedAt
		w.done[id] = !store.TaskLive(tk.Status)
		out = append(out, detailedTask(tk))
	}
	return out
}
