package endpoint

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/store/record"
)

// discover answers server/discover.
func (e *Handler) discover(c *call) answer {
	s := c.snap
	caps := map[string]any{
		"tools":       map[string]any{"listChanged": true},
		"prompts":     map[string]any{"listChanged": true},
		"resources":   map[string]any{"listChanged": true},
		"completions": map[string]any{},
		"logging":     map[string]any{},
	}
	// MCP Apps: views are served whatever a client declared (a host
	// without the extension treats a linked tool as a plain one).
	ext := map[string]any{mcp.ExtensionUI: map[string]any{}}
	if s.tasks {
		// The extension, exactly {}, and never the 2025-11-25 revision's
		// capabilities.tasks at this revision.
		ext[mcp.ExtensionTasks] = map[string]any{}
	}
	caps["extensions"] = ext
	return completed(map[string]any{
		"resultType":        mcp.ResultTypeComplete,
		"supportedVersions": supportedVersions,
		"capabilities":      caps,
		"instructions":      s.settings.Instructions,
		"ttlMs":             s.settings.ListTTL(),
		"cacheScope":        "private",
		"_meta":             s.info,
	})
}

// pageSize is the number of entries per list page.
const pageSize = 100

// list answers a list method from pre-rendered entries, with cursor
// pagination. The cursor is the index of the next entry, tagged with the
// catalogue version so a cursor from a changed catalogue is refused
// rather than silently skipping or repeating entries.
func (e *Handler) list(c *call, entries []json.RawMessage, field string) answer {
	start := 0
	if len(c.p.Cursor) > 0 && string(c.p.Cursor) != "null" {
		var cur string
		if json.Unmarshal(c.p.Cursor, &cur) != nil {
			return failed(errInvalidParams("Invalid params: cursor must be a string"))
		}
		v, i, ok := strings.Cut(cur, ":")
		n, err := strconv.Atoi(i)
		if !ok || v != strconv.FormatInt(c.snap.version, 10) || err != nil || n < 0 || n > len(entries) {
			return failed(errInvalidParams("Invalid params: the cursor is invalid or the list changed; list again from the start"))
		}
		start = n
	}
	end := min(start+pageSize, len(entries))
	page := entries[start:end]
	if page == nil {
		page = []json.RawMessage{}
	}
	out := map[string]any{
		"resultType": mcp.ResultTypeComplete,
		field:        page,
		"ttlMs":      c.snap.settings.ListTTL(),
		"cacheScope": "private",
		"_meta":      c.snap.info,
	}
	if end < len(entries) {
		out["nextCursor"] = strconv.FormatInt(c.snap.version, 10) + ":" + strconv.Itoa(end)
	}
	return completed(out)
}

// complete answers completion/complete from the values a tenant declared
// for a prompt argument or a template variable.
func (e *Handler) complete(c *call) answer {
	var ref struct {
		Type string `json:"type"`
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	var arg struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	if len(c.p.Ref) == 0 || json.Unmarshal(c.p.Ref, &ref) != nil {
		return failed(errInvalidParams("Invalid params: ref must be an object with type and name or uri"))
	}
	if len(c.p.Argument) == 0 || json.Unmarshal(c.p.Argument, &arg) != nil || arg.Name == "" {
		return failed(errInvalidParams("Invalid params: argument must be an object with name and value"))
	}
	var values []string
	switch ref.Type {
	case "ref/prompt":
		p := c.snap.prompts[ref.Name]
		if p == nil {
			return failed(errInvalidParams("Invalid params: unknown prompt " + strconv.Quote(ref.Name)))
		}
		found := false
		for _, a := range p.def.Arguments {
			if a.Name == arg.Name {
				values, found = a.Completions, true
			}
		}
		if !found {
			return failed(errInvalidParams("Invalid params: prompt " + strconv.Quote(ref.Name) + " has no argument " + strconv.Quote(arg.Name)))
		}
	case "ref/resource":
		var t *templateEntry
		for _, e := range c.snap.templates {
			if e.def.URITemplate == ref.URI {
				t = e
			}
		}
		if t == nil {
			return failed(errInvalidParams("Invalid params: unknown resource template " + strconv.Quote(ref.URI)))
		}
		values = t.def.Completions[arg.Name]
	default:
		return failed(errInvalidParams(`Invalid params: ref.type must be "ref/prompt" or "ref/resource"`))
	}
	matches := []string{}
	for _, v := range values {
		if strings.HasPrefix(v, arg.Value) {
			matches = append(matches, v)
		}
	}
	sort.Strings(matches)
	total := len(matches)
	const maxValues = 100 // the protocol's cap per response
	hasMore := total > maxValues
	if hasMore {
		matches = matches[:maxValues]
	}
	return completed(map[string]any{
		"resultType": mcp.ResultTypeComplete,
		"completion": map[string]any{"values": matches, "total": total, "hasMore": hasMore},
		"_meta":      c.snap.info,
	})
}

// listen answers subscriptions/listen: an SSE stream that first
// acknowledges the subscription, then carries list_changed notifications
// until the client leaves or the server shuts down.
func (e *Handler) listen(x *exchange, c *call) {
	var req struct {
		ToolsListChanged      bool     `json:"toolsListChanged"`
		PromptsListChanged    bool     `json:"promptsListChanged"`
		ResourcesListChanged  bool     `json:"resourcesListChanged"`
		ResourceSubscriptions []string `json:"resourceSubscriptions"`
		TaskIDs               []string `json:"taskIds"`
	}
	if len(c.p.Notifications) > 0 && json.Unmarshal(c.p.Notifications, &req) != nil {
		x.fail(errInvalidParams("Invalid params: notifications must be an object of booleans (and taskIds, an array of task ids)"))
		return
	}
	var tasks *taskWatch
	if req.TaskIDs != nil {
		if !c.declaresTasks() {
			x.fail(errTasksCapability())
			return
		}
		if len(req.TaskIDs) > maxWatchedTasks {
			x.fail(errInvalidParams(fmt.Sprintf("Invalid params: a stream follows at most %d tasks", maxWatchedTasks)))
			return
		}
		tasks = e.tasks.watch(x.ctx, c, req.TaskIDs)
	}
	subID := c.id
	meta := map[string]any{mcp.MetaSubscriptionID: subID}
	agreed := map[string]any{}
	if req.ToolsListChanged {
		agreed["toolsListChanged"] = true
	}
	if req.PromptsListChanged {
		agreed["promptsListChanged"] = true
	}
	if req.ResourcesListChanged {
		agreed["resourcesListChanged"] = true
	}
	if tasks != nil {
		agreed["taskIds"] = tasks.accepted()
	}
	// Static resources never change content in place (a change is a new
	// catalogue version, announced by resourcesListChanged), so
	// per-resource subscriptions are not offered.
	hold, ok := e.holdStream(x, c.snap, c.principal)
	if !ok {
		return
	}
	defer hold.release()
	sse := newSSE(x.w)
	x.sse, x.round.Answered = sse, true
	end := func() { x.answer(completed(map[string]any{"resultType": mcp.ResultTypeComplete, "_meta": meta})) }
	if err := sse.send(notification{JSONRPC: "2.0", Method: mcp.NotificationSubscriptionsAcknowledge,
		Params: map[string]any{"notifications": agreed, "_meta": meta}}); err != nil {
		return
	}
	keepAlive := time.NewTicker(streamKeepAlive)
	defer keepAlive.Stop()
	var taskChanges <-chan record.Change
	var catchUp <-chan time.Time
	if tasks.following() {
		taskChanges = tasks.subscribe(x.ctx)
		t := time.NewTicker(taskCatchUp)
		defer t.Stop()
		catchUp = t.C
	}
	notify := func(changed []map[string]any) bool {
		for _, n := range changed {
			n["_meta"] = meta
			if sse.send(notification{JSONRPC: "2.0", Method: mcp.NotificationTasks, Params: n}) != nil {
				return false
			}
		}
		return true
	}
	for {
		select {
		case <-x.ctx.Done():
			return
		case ch, ok := <-taskChanges:
			if !ok {
				taskChanges = nil // fell behind or stopped: the catch-up read carries on
				if !notify(tasks.changed(x.ctx, "")) {
					return
				}
				continue
			}
			flowID := "" // a reset: read every task again
			if ch.Flow != nil && !ch.Reset {
				flowID = ch.Flow.ID
			}
			if !notify(tasks.changed(x.ctx, flowID)) {
				return
			}
		case <-catchUp:
			if !notify(tasks.changed(x.ctx, "")) {
				return
			}
			if taskChanges == nil && tasks.following() {
				taskChanges = tasks.subscribe(x.ctx)
			}
		case <-keepAlive.C:
			if sse.comment() != nil {
				return
			}
		case <-hold.ending.C:
			end()
			return
		case ch, ok := <-hold.changes:
			if !ok {
				// Shutting down: end the subscription gracefully.
				end()
				return
			}
			if ch.tenant && !e.mayStay(x, c.snap, c.principal) {
				end()
				return
			}
			for _, n := range []struct {
				on     bool
				method string
			}{
				{ch.tools && req.ToolsListChanged, mcp.NotificationToolsListChanged},
				{ch.prompts && req.PromptsListChanged, mcp.NotificationPromptsListChanged},
				{ch.resources && req.ResourcesListChanged, mcp.NotificationResourcesListChanged},
			} {
				if n.on {
					if sse.send(notification{JSONRPC: "2.0", Method: n.method, Params: map[string]any{"_meta": meta}}) != nil {
						return
					}
				}
			}
		}
	}
}
