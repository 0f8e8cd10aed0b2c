package endpoint

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/catalogue"
	"github.com/opsmcp/platform/internal/bounded"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/store/record"
)

// Tasks on a legacy session (the 2025-11-25 revision's tasks, "v1"), on
// the same stored tasks as the Tasks extension's: a task created by a
// session is read, cancelled and finished by the same engine, its
// backend cannot tell the eras apart, and a 2026-07-28 client of the
// same principal reaches it with tasks/get.
//
// What differs is the wire. The client asks for a task (params.task) of
// a tool whose tools/list entry says it may (execution.taskSupport); the
// answer is {"task": …}, with ttl and pollInterval. tasks/get, tasks/list
// (the caller's own tasks) and tasks/cancel answer a Task; a tool error
// is a failed task, as v1 has it. tasks/result blocks until the task
// ends and answers exactly what the call would have: while it waits, the
// task's questions go to the client as requests on its stream, tagged
// with the task, and the client's responses, which may reach any
// replica, are the task's answers. The session's GET stream carries
// notifications/tasks/status. Both waits follow the flow record's
// changes, as subscriptions/listen does, with a catch-up read every few
// seconds; neither holds anything beyond its own request.

// Legacy tasks.
const (
	// minV1TTL is the shortest ttl a client's params.task.ttl gets.
	minV1TTL = 10_000
	// v1ListPage is the number of tasks per tasks/list page.
	v1ListPage = 50
	// taskQuestionPrefix starts the ids of a task's questions sent on a
	// tasks/result stream: the task's id and the question's key follow,
	// so a response names what it answers, whichever replica takes it.
	taskQuestionPrefix = "opsmcp-task."
	// maxSessionTasks bounds what a session's GET stream remembers of
	// tasks: the last change told of each, the flows of other sessions.
	maxSessionTasks = 1000
)

// v1Capabilities is what initialize adds to the server's capabilities
// for a tenant with a tool that may run as a task.
var v1Capabilities = map[string]any{
	"list": map[string]any{}, "cancel": map[string]any{},
	"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}},
}

// taskSupport is a tool's execution.taskSupport: its task mode, in v1's
// words.
func taskSupport(mode string) string {
	switch mode {
	case catalogue.TaskMay:
		return "optional"
	case catalogue.TaskMust:
		return "required"
	}
	return "forbidden"
}

// v1Task is a task as v1 shows it. A tool error ends it failed, as v1
// says; the 2026-07-28 view of the same task says completed.
func v1Task(tk *store.Task) map[string]any {
	m := map[string]any{
		"taskId":        tk.ID,
		"status":        v1Status(tk),
		"createdAt":     tk.CreatedAt.UTC().Format(taskTime),
		"lastUpdatedAt": tk.UpdatedAt.UTC().Format(taskTime),
		"ttl":           tk.TTLMs,
		"pollInterval":  tk.PollIntervalMs,
	}
	if tk.StatusMessage != "" {
		m["statusMessage"] = tk.StatusMessage
	}
	return m
}

func v1Status(tk *store.Task) string {
	if tk.Status == store.TaskCompleted && tk.ToolError {
		return store.TaskFailed
	}
	return tk.Status
}

// v1Tasks reports whether a session serves v1 tasks: only 2025-11-25 has
// them (2025-06-18 and 2025-03-26 know no tasks), and only a tenant with
// a tool that may run as one declares them.
func v1Tasks(version string, snap *snapshot) bool {
	return version == mcp.Version20251125 && snap.tasks
}

// v1TaskParams reads a session's tools/call params.task (absent or null:
// not a task) and checks it against the tool's mode: a task of a tool
// that never runs as one, or a plain call of a tool that must, is -32601
// as v1 has it. A session that was not offered tasks (its revision has
// none, or the tenant declared none) has params.task ignored, as v1 asks
// of a receiver that does not declare them.
func v1TaskParams(c *call) *rpcError {
	if !v1Tasks(c.version, c.snap) {
		return nil
	}
	if raw := c.p.Task; len(raw) > 0 && string(raw) != "null" {
		var t struct {
			TTL json.RawMessage `json:"ttl"`
		}
		if raw[0] != '{' || json.Unmarshal(raw, &t) != nil {
			return errInvalidParams("Invalid params: task must be an object")
		}
		if len(t.TTL) > 0 && string(t.TTL) != "null" {
			var ttl float64
			if json.Unmarshal(t.TTL, &ttl) != nil || ttl < 0 {
				return errInvalidParams("Invalid params: task.ttl must be a number of milliseconds")
			}
			c.v1TTL = int64(min(ttl, 1<<53))
		}
		c.v1Task = true
	}
	tool := c.snap.tools[c.name]
	if tool == nil {
		return nil // the call's own path answers an unknown tool
	}
	switch mode := tool.def.TaskMode(); {
	case c.v1Task && mode == catalogue.TaskNever:
		return newError(http.StatusOK, mcp.CodeMethodNotFound, "Method not found: tool "+bounded.String(c.name, 100)+" does not run as a task (its execution.taskSupport is forbidden); call it without params.task", nil)
	case !c.v1Task && mode == catalogue.TaskMust:
		return newError(http.StatusOK, mcp.CodeMethodNotFound, "Method not found: tool "+bounded.String(c.name, 100)+" runs only as a task (its execution.taskSupport is required); call it with params.task", nil)
	}
	return nil
}

// sessionTask reads a task for a session's caller: the caller's own, and
// on a public tenant, whose callers are all alike, the session's own
// when a session created it.
func (te *taskEngine) sessionTask(ctx context.Context, tenantID string, p *auth.Principal, session, id string) (*store.Task, error) {
	tk, err := te.visible(ctx, tenantID, p, id)
	if err == nil && tk.PrincipalHash == "" && tk.SessionID != "" && tk.SessionID != session {
		return nil, store.ErrNotFound
	}
	return tk, err
}

// v1Visible reads a session request's task: -32602 for one that does not
// exist for the caller.
func (l *legacy) v1Visible(x *exchange, c *call, s *session) (*store.Task, bool) {
	tk, err := l.e.tasks.sessionTask(x.ctx, c.snap.tenantID, c.principal, s.id, c.taskID)
	if errors.Is(err, store.ErrNotFound) {
		legacyFail(x, errInvalidParams("Invalid params: no such task (it never existed, or it expired)"))
		return nil, false
	}
	if err != nil {
		l.e.log.ErrorContext(x.ctx, "task read failed", "tenant", c.snap.slug, "err", err)
		x.fail(errTasksUnavailable())
		return nil, false
	}
	return tk, true
}

// taskMethod answers a session's tasks/* request: 2025-11-25 has them,
// the revisions before do not.
func (l *legacy) taskMethod(x *exchange, c *call, s *session) {
	if s.version != mcp.Version20251125 {
		legacyFail(x, newError(http.StatusNotFound, mcp.CodeMethodNotFound, "Method not found: "+bounded.String(c.method, 100), nil))
		return
	}
	switch c.method {
	case mcp.MethodTasksGet:
		if tk, ok := l.v1Visible(x, c, s); ok {
			x.answer(completed(v1Task(tk)))
		}
	case mcp.MethodTasksCancel:
		l.v1Cancel(x, c, s)
	case mcp.MethodTasksList:
		l.v1List(x, c, s)
	case mcp.MethodTasksResult:
		l.v1Result(x, c, s)
	}
}

// v1Cancel cancels a live task and answers it as it now stands; a task
// that finished already is -32602, as v1 asks.
func (l *legacy) v1Cancel(x *exchange, c *call, s *session) {
	tk, ok := l.v1Visible(x, c, s)
	if !ok {
		return
	}
	if !store.TaskLive(tk.Status) {
		legacyFail(x, errInvalidParams("Invalid params: the task is "+v1Status(tk)+" already and cannot be cancelled"))
		return
	}
	cur, changed, err := l.e.tasks.cancelTask(x.ctx, tk.ID, "client")
	switch {
	case err != nil:
		l.e.log.ErrorContext(x.ctx, "task cancel failed", "tenant", c.snap.slug, "err", err)
		x.fail(errTaskNotCancelled())
	case !changed:
		// It finished between the read and the cancel.
		legacyFail(x, errInvalidParams("Invalid params: the task is "+v1Status(cur)+" already and cannot be cancelled"))
	default:
		x.round.TaskID = cur.ID
		x.answer(completed(v1Task(cur)))
	}
}

// v1List answers tasks/list: the caller's own tasks, newest first. A
// tenant that identifies its callers lists the principal's tasks of any
// session or era; a public tenant, whose callers are all alike, lists
// the session's own, so no client enumerates another's tasks.
func (l *legacy) v1List(x *exchange, c *call, s *session) {
	after := ""
	if len(c.p.Cursor) > 0 && string(c.p.Cursor) != "null" {
		v, ok := jsonString(c.p.Cursor)
		if !ok || v == "" {
			legacyFail(x, errInvalidParams("Invalid params: cursor must be a string"))
			return
		}
		after = v
	}
	session := ""
	if principalHash(c.principal) == "" {
		session = s.id
	}
	tasks, err := l.e.tasks.store.List(x.ctx, c.snap.tenantID, principalHash(c.principal), session, after, v1ListPage+1)
	if errors.Is(err, store.ErrNotFound) {
		legacyFail(x, errInvalidParams("Invalid params: the cursor is invalid, or its task expired; list again from the start"))
		return
	}
	if err != nil {
		l.e.log.ErrorContext(x.ctx, "task list failed", "tenant", c.snap.slug, "err", err)
		x.fail(errTasksUnavailable())
		return
	}
	now := time.Now()
	out := make([]map[string]any, 0, len(tasks))
	for i := range tasks {
		if i == v1ListPage {
			break
		}
		if now.Before(tasks[i].ExpiresAt) {
			out = append(out, v1Task(&tasks[i]))
		}
	}
	res := map[string]any{"tasks": out}
	if len(tasks) > v1ListPage {
		res["nextCursor"] = tasks[v1ListPage-1].ID
	}
	x.answer(completed(res))
}

// v1Result answers tasks/result: once the task ends, exactly what its
// call would have answered. Until then the request waits, following the
// task's changes, and puts each question the task asks to the client as
// a request on its stream. The wait is held as every stream is (capped
// per caller, ended at its maximum lifetime, when the caller's token
// expires or the tenant stops accepting it), and by the relay (the
// client's notifications/cancelled, the session's end, the replica's
// shutdown): a wait that ends so is answered with an error that says to
// ask again.
func (l *legacy) v1Result(x *exchange, c *call, s *session) {
	tk, ok := l.v1Visible(x, c, s)
	if !ok {
		return
	}
	x.round.TaskID = tk.ID
	if !store.TaskLive(tk.Status) {
		l.v1Final(x, c, tk)
		return
	}
	hold, ok := l.e.holdStream(x, c.snap, c.principal)
	if !ok {
		return
	}
	defer hold.release()
	defer l.streams.open(x.req.Context(), s.id)()
	ctx, cancel := context.WithCancel(x.ctx)
	defer cancel()
	held := &bridgeCall{tenantID: c.snap.tenantID, session: s.id, target: callTarget(s.id, c.id), cancel: cancel}
	l.relay.hold(held)
	defer l.relay.release(held)
	w := l.e.tasks.follow(ctx, c.snap.tenantID)
	defer w.stop()
	sse := newSSE(x.w)
	sse.noIDs = true
	x.sse = sse
	asked := map[string]bool{} // the questions sent on this stream
	keepAlive := time.NewTicker(streamKeepAlive)
	defer keepAlive.Stop()
	stopped := func() {
		if ctx.Err() == nil || held.stopped() == stopShutdown || held.stopped() == stopSessionEnded {
			legacyFail(x, newError(http.StatusOK, mcp.CodeInternalError, "The wait for the task ended before the task did; call tasks/result again", nil))
		}
	}
	// Read again now that changes are followed: one made since the first
	// read would otherwise wait for the catch-up.
	for read := true; ; read = false {
		if !read {
			select {
			case <-ctx.Done():
				stopped()
				return
			case <-hold.ending.C:
				stopped()
				return
			case ch, open := <-hold.changes:
				if !open || (ch.tenant && !l.e.mayStay(x, c.snap, c.principal)) {
					stopped()
					return
				}
				continue
			case <-keepAlive.C:
				if sse.comment() != nil {
					return
				}
				continue
			case ch, open := <-w.changes:
				if !open {
					w.changes = nil // closed: the catch-up serves alone
				}
				if flowID, ok := taskFlow(ch, open); !ok || (flowID != "" && flowID != tk.FlowID) {
					continue
				}
			case <-w.tick:
			}
		}
		cur, err := l.e.tasks.sessionTask(ctx, c.snap.tenantID, c.principal, s.id, tk.ID)
		if errors.Is(err, store.ErrNotFound) {
			legacyFail(x, errInvalidParams("Invalid params: the task expired"))
			return
		}
		if err != nil {
			continue // the database is away: read again at the next change or catch-up
		}
		tk = cur
		if !store.TaskLive(tk.Status) {
			l.v1Final(x, c, tk)
			return
		}
		if tk.Status == store.TaskInputRequired && l.askTask(sse, s, tk, asked) != nil {
			return
		}
	}
}

// askTask sends the task's outstanding questions not yet sent on this
// stream, as requests tagged with the task; a question the session did
// not declare it can answer (the task may be another session's of the
// same caller) is left for a session that can.
func (l *legacy) askTask(sse *sseWriter, s *session, tk *store.Task, asked map[string]bool) error {
	var open map[string]mrtr.InputRequest
	_ = json.Unmarshal([]byte(tk.InputRequests), &open)
	for _, k := range slices.Sorted(maps.Keys(open)) {
		if asked[k] {
			continue
		}
		asked[k] = true
		if _, _, missing, err := webhookInputs(map[string]json.RawMessage{k: mustJSON(open[k])}, s.caps, ""); err != nil || missing != nil {
			continue
		}
		params, _ := legParams(open[k])
		if err := sse.send(legRequest{JSONRPC: "2.0", ID: taskQuestionID(tk.ID, k), Method: open[k].Method,
			Params: mustJSON(relatedTo(params, tk.ID))}); err != nil {
			return err
		}
	}
	return nil
}

// v1Final writes what a finished task's call would have answered, with
// the task named in _meta: the result (a tool error included), the
// backend's error, or, for a cancelled task, a tool error that says who
// cancelled it.
func (l *legacy) v1Final(x *exchange, c *call, tk *store.Task) {
	switch tk.Status {
	case store.TaskCompleted:
		x.answer(answer{complete: legacyResult(relatedTo(json.RawMessage(tk.Result), tk.ID)), toolError: tk.ToolError})
	case store.TaskFailed:
		var e struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		}
		_ = json.Unmarshal([]byte(tk.Error), &e)
		if e.Code == 0 {
			e.Code = mcp.CodeInternalError
		}
		var data any
		if len(e.Data) > 0 {
			data = e.Data
		}
		legacyFail(x, newError(http.StatusOK, e.Code, e.Message, data))
	default:
		msg := "The task was cancelled by the client."
		if strings.HasPrefix(tk.CancelledBy, "admin:") {
			msg = "The task was cancelled by an administrator."
		}
		x.answer(toolFailed(legacyResult(relatedTo(mustJSON(toolError(c.snap, msg)), tk.ID))))
	}
}

// relatedTo is a JSON object (a result, a request's params) with its
// _meta naming the task, as v1 has every message of a task carry it.
func relatedTo(raw json.RawMessage, taskID string) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		m = map[string]json.RawMessage{}
	}
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(m["_meta"], &meta)
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[mcp.MetaRelatedTask] = mustJSON(map[string]string{"taskId": taskID})
	m["_meta"] = mustJSON(meta)
	return m
}

// taskQuestionID is the id of the request that puts a task's question
// key to the client.
func taskQuestionID(taskID, key string) string {
	return taskQuestionPrefix + taskID + "." + base64.RawURLEncoding.EncodeToString([]byte(key))
}

// parseTaskQuestionID reads a taskQuestionID.
func parseTaskQuestionID(id string) (taskID, key string, ok bool) {
	rest, ok := strings.CutPrefix(id, taskQuestionPrefix)
	if !ok || len(rest) > 400 {
		return "", "", false
	}
	taskID, enc, ok := strings.Cut(rest, ".")
	if !ok || taskID == "" {
		return "", "", false
	}
	k, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(k) == 0 {
		return "", "", false
	}
	return taskID, string(k), true
}

// taskAnswered takes a client's response to a task's question, posted to
// any replica: the answer is the task's, as tasks/update would take it.
// The response is acknowledged once the answer is durable; a task that
// does not exist for the caller, or no longer asks, takes nothing.
func (l *legacy) taskAnswered(x *exchange, snap *snapshot, p *auth.Principal, s *session, taskID, key string, m *wrapped) {
	tk, err := l.e.tasks.sessionTask(x.ctx, snap.tenantID, p, s.id, taskID)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			x.fail(errSessionsUnavailable())
			return
		}
		x.w.WriteHeader(http.StatusAccepted)
		return
	}
	result := m.Result
	switch {
	case m.Error != nil:
		// A refused elicitation is declined: the question is answered,
		// and the task goes on. Any other refused question stays open,
		// for a later tasks/result to ask again.
		var open map[string]mrtr.InputRequest
		_ = json.Unmarshal([]byte(tk.InputRequests), &open)
		if q, ok := open[key]; !ok || q.Method != mcp.MethodElicit {
			x.w.WriteHeader(http.StatusAccepted)
			return
		}
		result = json.RawMessage(`{"action":"decline"}`)
	case len(result) == 0 || result[0] != '{':
		x.w.WriteHeader(http.StatusAccepted) // not an answer
		return
	}
	if _, _, err := l.e.tasks.take(x.ctx, tk, map[string]json.RawMessage{key: result}, snap.settings.RecordAnswers); err != nil && !errors.Is(err, store.ErrNotFound) {
		l.e.log.ErrorContext(x.ctx, "task answer not taken", "tenant", snap.slug, "err", err)
		x.fail(errSessionsUnavailable())
		return
	}
	x.w.WriteHeader(http.StatusAccepted)
}

// taskFollow is one request's view of a tenant's changes in the flow
// record (nil without a record to follow), and a catch-up tick for what
// the record did not carry (nil for none). The subscription ends with
// the request.
type taskFollow struct {
	changes <-chan record.Change
	tick    <-chan time.Time
	stop    func()
}

// follow follows a tenant's changes until ctx ends.
func (te *taskEngine) follow(ctx context.Context, tenantID string) *taskFollow {
	t := time.NewTicker(taskCatchUp)
	f := &taskFollow{tick: t.C, stop: t.Stop}
	if te.changes != nil {
		if ch, err := te.changes.Subscribe(ctx, -1, func(id string) bool { return id == tenantID }); err == nil {
			f.changes = ch
		}
	}
	return f
}

// taskFlow says which task flow a change is about: its flow id, "" when
// changes were missed (read everything again), ok false for a change of
// no task, or a closed subscription (the catch-up then serves alone).
func taskFlow(c record.Change, open bool) (flowID string, ok bool) {
	switch {
	case !open:
		return "", false
	case c.Reset:
		return "", true
	case c.Flow == nil || c.Flow.Kind != record.KindTask:
		return "", false
	}
	return c.Flow.ID, true
}

// sessionTasks are the tasks a session's GET stream reports on: those
// its session created. A change of a task flow is looked up by its flow
// (a task of another session is skipped, and remembered as such); the
// catch-up reads, from the index of the caller's tasks, what changed
// since the newest change it saw, so a change the record did not carry
// (or a record turned off) still reaches the stream within taskCatchUp.
// What it keeps is bounded: a change notified twice, after its memory
// was cleared, is the worst case.
type sessionTasks struct {
	te                           *taskEngine
	tenantID, principal, session string
	// since is where the next catch-up reads from.
	since time.Time
	// sent is the last change notified of each task.
	sent map[string]time.Time
	// others are flows of tasks of other sessions.
	others map[string]bool
}

// catchUpSkew reaches back before a stream opens, for the clocks of the
// replicas that wrote the changes.
const catchUpSkew = 2 * time.Second

// maxCatchUp bounds the changes one catch-up read sends; the rest come
// with the next.
const maxCatchUp = 100

// newSessionTasks starts from now: only later changes are notified.
func (te *taskEngine) newSessionTasks(tenantID, principal, session string) *sessionTasks {
	return &sessionTasks{te: te, tenantID: tenantID, principal: principal, session: session,
		since: te.now().UTC().Add(-catchUpSkew), sent: map[string]time.Time{}, others: map[string]bool{}}
}

// changed returns the notifications/tasks/status of the session's tasks
// that changed: the task of flowID, or, for "" (the catch-up, or changes
// missed), every task of the session changed since the catch-up's last
// read.
func (st *sessionTasks) changed(ctx context.Context, flowID string) []notification {
	var tasks []store.Task
	if flowID != "" {
		if st.others[flowID] {
			return nil
		}
		tk, err := st.te.store.ByFlow(ctx, flowID)
		if err != nil {
			return nil
		}
		if tk.SessionID != st.session || tk.TenantID != st.tenantID || tk.PrincipalHash != st.principal {
			if len(st.others) >= maxSessionTasks {
				clear(st.others)
			}
			st.others[flowID] = true
			return nil
		}
		tasks = []store.Task{*tk}
	} else {
		var err error
		if tasks, err = st.te.store.ChangedSince(ctx, st.tenantID, st.principal, st.session, st.since, maxCatchUp); err != nil {
			return nil
		}
		for i := range tasks {
			st.since = maxTime(st.since, tasks[i].UpdatedAt.UTC())
		}
	}
	var out []notification
	for i := range tasks {
		tk := &tasks[i]
		if last, ok := st.sent[tk.ID]; ok && !tk.UpdatedAt.After(last) {
			continue
		}
		if len(st.sent) >= maxSessionTasks {
			clear(st.sent)
		}
		st.sent[tk.ID] = tk.UpdatedAt
		out = append(out, notification{JSONRPC: "2.0", Method: mcp.NotificationTasksStatus, Params: v1Task(tk)})
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// finishedAtOnce ends the task a legacy client asked for when its
// backend answered at once (its result, a tool error, or a failure): v1
// has the client, not the server, decide that a call is a task, so the
// client gets one, as it was created (working, as v1 says a task
// begins), already finished for its first tasks/get and its
// tasks/result.
func (te *taskEngine) finishedAtOnce(ctx context.Context, c *call, tk *store.Task, a answer, rd *Round) answer {
	if a.err != nil && a.err.Code == mcp.CodeMissingRequiredCapability {
		// The backend asked what the session did not declare: the call's
		// tool error, as a bridged call's would be.
		a = toolFailed(toolError(c.snap, "The tool needs a client capability this session did not declare in initialize."))
	}
	now := te.now().UTC()
	kind, changed := TaskCompleted, false
	cur, err := te.store.UpdateFrom(context.WithoutCancel(ctx), tk, func(t *store.Task) error {
		changed = false
		if !store.TaskLive(t.Status) {
			return store.ErrUnchanged // a report or the sweep ended it first
		}
		if a.err != nil {
			// As every failure is: its message is the status message.
			kind = TaskFailedEvent
			t.Status, t.Error, t.StatusMessage = store.TaskFailed, string(mustJSON(a.err)), a.err.Message
		} else {
			t.Status, t.Result, t.ToolError = store.TaskCompleted, string(mustJSON(a.complete)), a.toolError
		}
		t.InputRequests, t.UpdatedAt, t.DueAt = "", now, nil
		t.Events++
		changed = true
		return nil
	})
	if err != nil {
		te.log.ErrorContext(ctx, "task not finished; answering the call without it", "tenant", c.snap.slug, "err", err)
		te.dropped(ctx, tk)
		return a
	}
	if changed {
		ev := te.event(cur, kind, "backend")
		ev.ToolError = a.toolError
		if a.err != nil {
			ev.ErrorCode = a.err.Code
		}
		te.emit(ctx, ev)
	}
	rd.TaskID = tk.ID
	return taskAnswer(map[string]any{"task": v1Task(tk)})
}
