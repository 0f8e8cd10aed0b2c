package flows_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
	"github.com/opsmcp/platform/webhook"
)

type obj = map[string]any

var caps = obj{"elicitation": obj{"form": obj{}, "url": obj{}}, "sampling": obj{}, "roots": obj{}}

// backend completes every call with the answers it received.
func backend(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req webhook.Request
		_ = json.NewDecoder(r.Body).Decode(&req)
		b, _ := json.Marshal(req.Answers)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"type":"complete","result":{"content":[{"type":"text","text":%q}]}}`, b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// orderTool asks two questions in turn, the second about the first's
// answer, then calls the backend.
func orderTool(name, url string) obj {
	return obj{"name": name, "description": "two questions",
		"inputSchema": obj{"type": "object", "properties": obj{"item": obj{"type": "string"}}},
		"handler":     obj{"url": url},
		"inputs": []obj{
			{"name": "size", "kind": "form", "message": "Which size of {{args.item}}?",
				"requestedSchema": obj{"type": "object", "properties": obj{"size": obj{"type": "string", "enum": []string{"S", "M", "L"}}}, "required": []string{"size"}}},
			{"name": "confirm", "kind": "form", "message": "Order it?", "when": obj{"input": "size"},
				"requestedSchema": obj{"type": "object", "properties": obj{"ok": obj{"type": "boolean"}, "note": obj{"type": "string"}}, "required": []string{"ok"}}},
		}}
}

func call(t testing.TB, p *platformtest.Platform, slug, tool string, responses obj, state string) (map[string]any, string) {
	t.Helper()
	params := obj{"name": tool, "arguments": obj{"item": "boots"}, "_meta": platformtest.Meta(caps)}
	if responses != nil {
		params["inputResponses"] = responses
	}
	if state != "" {
		params["requestState"] = state
	}
	res := platformtest.Result(t, p.MCP(t, slug, "tools/call", params))
	s, _ := res["requestState"].(string)
	return res, s
}

func accept(content obj) obj { return obj{"action": "accept", "content": content} }

// flow reads a flow and its rounds once the record shows it in state.
func flow(t *testing.T, p *platformtest.Platform, slug, id, state string) (map[string]any, []any) {
	t.Helper()
	var got map[string]any
	testwait.Until(t, "flow "+id+" never reached state "+state, func() bool {
		r := p.Admin(t, "GET", "/api/v1/tenants/"+slug+"/flows/"+id, nil)
		if r.Status != 200 {
			return false
		}
		got = r.JSON(t)
		return got["flow"].(map[string]any)["state"] == state
	})
	rounds, _ := got["rounds"].([]any)
	return got["flow"].(map[string]any), rounds
}

// flowID finds the id of the only flow of a tenant.
func flowID(t *testing.T, p *platformtest.Platform, slug string) string {
	t.Helper()
	var id string
	testwait.Until(t, "no flow recorded", func() bool {
		items, _ := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/"+slug+"/flows", nil)["items"].([]any)
		if len(items) != 1 {
			return false
		}
		id = items[0].(map[string]any)["id"].(string)
		return true
	})
	return id
}

func newKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

func TestEveryRoundOfAFlowIsRecordedWithItsQuestionsButNotItsAnswers(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			p := platformtest.Start(t, d.New(t))
			p.Tenant(t, "acme")
			p.Tool(t, "acme", orderTool("order", backend(t)))

			res, state := call(t, p, "acme", "order", nil, "")
			if res["resultType"] != "input_required" {
				t.Fatalf("round 1: %v", res)
			}
			id := flowID(t, p, "acme")
			f, rounds := flow(t, p, "acme", id, "awaiting_input")
			if f["rounds"] != 1.0 || f["target"] != "tools/call" && f["target"] != "order" || f["method"] != "tools/call" {
				t.Fatalf("after round 1: %v", f)
			}
			if kinds, _ := f["pendingKinds"].([]any); len(kinds) != 1 || kinds[0] != "form" {
				t.Fatalf("pending kinds %v", f["pendingKinds"])
			}
			if f["stateExpiresAt"] == nil || f["waitingSince"] == nil || f["keyId"] == "" || f["replica"] == "" {
				t.Fatalf("after round 1 the flow lacks expiry, wait, key or replica: %v", f)
			}
			asked := rounds[0].(map[string]any)["asked"].([]any)
			q := asked[0].(map[string]any)
			params, _ := q["params"].(map[string]any)
			if q["key"] != "size" || q["kind"] != "form" || params["message"] != "Which size of boots?" || params["requestedSchema"] == nil {
				t.Fatalf("question recorded as %v", q)
			}

			res, state = call(t, p, "acme", "order", obj{"size": accept(obj{"size": "M"})}, state)
			if res["resultType"] != "input_required" {
				t.Fatalf("round 2: %v", res)
			}
			flow(t, p, "acme", id, "awaiting_input")
			res, _ = call(t, p, "acme", "order", obj{"confirm": accept(obj{"ok": true, "note": "ship-to-4th-floor"})}, state)
			if res["resultType"] != "complete" {
				t.Fatalf("round 3: %v", res)
			}
			f, rounds = flow(t, p, "acme", id, "completed")
			if f["rounds"] != 3.0 || len(rounds) != 3 || len(f["pendingKinds"].([]any)) != 0 {
				t.Fatalf("completed flow %v with %d rounds", f, len(rounds))
			}
			// The answers' actions are recorded, never their content.
			answered := []string{"", "size", "confirm"}
			for i, r := range rounds {
				r := r.(map[string]any)
				if r["n"] != float64(i+1) {
					t.Fatalf("round %d: %v", i+1, r)
				}
				if key := answered[i]; key == "" && r["answers"] != nil {
					t.Fatalf("round %d recorded answers it did not carry: %v", i+1, r["answers"])
				} else if key != "" && fmt.Sprint(r["answers"]) != "map["+key+":map[action:accept]]" {
					t.Fatalf("round %d recorded its answers as %v; want only the action", i+1, r["answers"])
				}
				if i > 0 && (r["stateIn"] != "verified" || r["keyIn"] == "" || r["clientWaitMs"] == nil) {
					t.Fatalf("round %d did not record its verified state: %v", i+1, r)
				}
				// Where its server time went: the state opened (after round
				// 1), the next one sealed (rounds 1 and 2 asked again), each
				// within the round's own time.
				open, _ := r["openUs"].(float64)
				seal, _ := r["sealUs"].(float64)
				server, _ := r["serverUs"].(float64)
				if (i > 0) != (open > 0) || (i < 2) != (seal > 0) || open+seal > server {
					t.Fatalf("round %d's time: open %v µs, seal %v µs of %v µs", i+1, open, seal, server)
				}
			}
			if wh := rounds[2].(map[string]any)["webhook"].(map[string]any); wh["outcome"] != "complete" || wh["kind"] != "tool" {
				t.Fatalf("last round's webhook %v", wh)
			}
			body := p.Admin(t, "GET", "/api/v1/tenants/acme/flows/"+id, nil).Body
			if strings.Contains(string(body), "ship-to-4th-floor") {
				t.Fatalf("an answer's content reached the record: %s", body)
			}
		})
	}
}

func TestAnswersAreRecordedOnlyForATenantThatOptsIn(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants", obj{"slug": "acme", "displayName": "Acme",
		"settings": obj{"auth": obj{"public": true}, "recordAnswers": true}})
	p.Tool(t, "acme", orderTool("order", backend(t)))
	_, state := call(t, p, "acme", "order", nil, "")
	call(t, p, "acme", "order", obj{"size": accept(obj{"size": "XL-secret"})}, state)
	id := flowID(t, p, "acme")
	_, rounds := flow(t, p, "acme", id, "awaiting_input")
	testwait.Until(t, "round 2 not recorded", func() bool {
		_, rounds = flow(t, p, "acme", id, "awaiting_input")
		return len(rounds) == 2
	})
	if a := rounds[1].(map[string]any)["answers"]; !strings.Contains(fmt.Sprint(a), "XL-secret") {
		t.Fatalf("answers of an opted-in tenant not recorded: %v", a)
	}
}

func TestListFiltersSortsPagesAndCounts(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			p := platformtest.Start(t, d.New(t))
			p.Tenant(t, "acme")
			p.Tenant(t, "globex")
			url := backend(t)
			p.Tool(t, "acme", orderTool("order", url))
			p.Tool(t, "acme", orderTool("restock", url))
			p.Tool(t, "globex", orderTool("order", url))
			// acme: three order flows waiting, one finished restock flow;
			// globex: one waiting.
			for range 3 {
				call(t, p, "acme", "order", nil, "")
			}
			_, st := call(t, p, "acme", "restock", nil, "")
			_, st = call(t, p, "acme", "restock", obj{"size": accept(obj{"size": "S"})}, st)
			call(t, p, "acme", "restock", obj{"confirm": accept(obj{"ok": false})}, st)
			call(t, p, "globex", "order", nil, "")

			list := func(query string) map[string]any {
				return p.MustAdmin(t, 200, "GET", "/api/v1/flows"+query, nil)
			}
			testwait.Until(t, "flows not all recorded", func() bool {
				c := list("")["counts"].(map[string]any)
				return c["awaiting_input"] == 4.0 && c["completed"] == 1.0
			})
			for _, tc := range []struct {
				query string
				want  int
			}{
				{"", 5},
				{"?tenant=acme", 4},
				{"?tenant=globex", 1},
				{"?tenant=nobody", 0},
				{"?state=completed", 1},
				{"?state=awaiting_input,completed", 5},
				{"?tenant=acme&target=order", 3},
				{"?target=restock&state=awaiting_input", 0},
				{"?minRounds=3", 1},
				{"?minRounds=2", 1},
				{"?waitingLongerThan=1h", 0},
				{"?since=2000-01-01T00:00:00Z", 5},
				{"?until=2000-01-01T00:00:00Z", 0},
			} {
				items := list(tc.query)["items"].([]any)
				if len(items) != tc.want {
					t.Errorf("GET /flows%s: %d flows, want %d", tc.query, len(items), tc.want)
				}
			}
			if items := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/globex/flows", nil)["items"].([]any); len(items) != 1 {
				t.Errorf("tenant route: %d flows", len(items))
			}
			// Pages of two in each order cover every flow once.
			for _, sort := range []string{"updated", "started", "rounds", "waiting"} {
				seen := map[string]bool{}
				cursor := ""
				for pages := 0; ; pages++ {
					if pages > 5 {
						t.Fatalf("sort %s: pagination does not end", sort)
					}
					m := list("?limit=2&sort=" + sort + cursor)
					for _, it := range m["items"].([]any) {
						id := it.(map[string]any)["id"].(string)
						if seen[id] {
							t.Fatalf("sort %s: %s listed twice", sort, id)
						}
						seen[id] = true
					}
					next, _ := m["nextCursor"].(string)
					if next == "" {
						break
					}
					cursor = "&cursor=" + next
				}
				want := 5 // the waiting sort lists the one that does not wait last
				if len(seen) != want {
					t.Errorf("sort %s: %d flows over all pages, want %d", sort, len(seen), want)
				}
			}
			// Bad filters are named.
			for _, q := range []string{"?state=lost", "?waitingLongerThan=soon", "?minRounds=-1", "?since=yesterday", "?sort=name", "?limit=0", "?cursor=xyz"} {
				r := p.Admin(t, "GET", "/api/v1/flows"+q, nil)
				if r.Status != 422 || !strings.Contains(string(r.Body), "validation-failed") {
					t.Errorf("GET /flows%s: %d %s", q, r.Status, r.Body)
				}
			}
			// A cursor of one sort is refused by another.
			next := list("?limit=1&sort=updated")["nextCursor"].(string)
			if r := p.Admin(t, "GET", "/api/v1/flows?sort=rounds&cursor="+next, nil); r.Status != 422 {
				t.Errorf("a cursor used with another sort: %d", r.Status)
			}
		})
	}
}

func TestCancellingAFlowRefusesItsNextRoundAndIsRecorded(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.Tenant(t, "acme")
	p.Tool(t, "acme", orderTool("order", backend(t)))
	_, state := call(t, p, "acme", "order", nil, "")
	id := flowID(t, p, "acme")
	flow(t, p, "acme", id, "awaiting_input")

	for _, bad := range []string{"fl_AAAAAAAAAAAAAAAA", "nope", id + "A"} {
		if r := p.Admin(t, "POST", "/api/v1/tenants/acme/flows/"+bad+"/cancel", obj{"reason": "x"}); r.Status != 404 {
			t.Fatalf("cancel unknown %q: %d %s", bad, r.Status, r.Body)
		}
	}
	p.Tenant(t, "globex")
	if r := p.Admin(t, "POST", "/api/v1/tenants/globex/flows/"+id+"/cancel", nil); r.Status != 404 {
		t.Fatalf("cancel through another tenant: %d %s", r.Status, r.Body)
	}
	if r := p.Admin(t, "POST", "/api/v1/tenants/acme/flows/"+id+"/cancel", obj{"reason": strings.Repeat("x", 501)}); r.Status != 422 {
		t.Fatalf("overlong reason: %d", r.Status)
	}
	got := p.MustAdmin(t, 200, "POST", "/api/v1/tenants/acme/flows/"+id+"/cancel", obj{"reason": "user asked"})
	if got["state"] != "cancelled" || got["cancelReason"] != "user asked" || got["cancelledBy"] != "bootstrap" {
		t.Fatalf("cancelled flow: %v", got)
	}
	r := p.MCP(t, "acme", "tools/call", obj{"name": "order", "arguments": obj{"item": "boots"},
		"inputResponses": obj{"size": accept(obj{"size": "M"})}, "requestState": state, "_meta": platformtest.Meta(caps)})
	if code, msg, _ := platformtest.RPCError(t, r); code != -32602 || msg != "Invalid or expired requestState" {
		t.Fatalf("the next round was not refused: %d %s", code, msg)
	}
	// The refused round is on the flow's timeline; the flow stays cancelled.
	testwait.Until(t, "the refused round was not recorded", func() bool {
		f, rounds := flow(t, p, "acme", id, "cancelled")
		return f["state"] == "cancelled" && len(rounds) == 2 && rounds[1].(map[string]any)["errorClass"] == "revoked"
	})
	if r := p.Admin(t, "POST", "/api/v1/tenants/acme/flows/"+id+"/cancel", nil); r.Status != 409 {
		t.Fatalf("cancelling a cancelled flow: %d %s", r.Status, r.Body)
	}
	audit := p.MustAdmin(t, 200, "GET", "/api/v1/audit", nil)
	if !strings.Contains(fmt.Sprint(audit), id) {
		t.Fatalf("cancellation not audited: %v", audit)
	}
}

func TestBulkCancelPreviewsThenCancelsExactlyWhatItShowed(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			p := platformtest.Start(t, d.New(t))
			p.Tenant(t, "acme")
			url := backend(t)
			p.Tool(t, "acme", orderTool("order", url))
			p.Tool(t, "acme", orderTool("restock", url))
			var states []string
			for range 3 {
				_, s := call(t, p, "acme", "order", nil, "")
				states = append(states, s)
			}
			_, other := call(t, p, "acme", "restock", nil, "")
			testwait.Until(t, "flows not recorded", func() bool {
				return p.MustAdmin(t, 200, "GET", "/api/v1/flows", nil)["counts"].(map[string]any)["awaiting_input"] == 4.0
			})
			filter := obj{"tenant": "acme", "target": "order"}
			prev := p.MustAdmin(t, 200, "POST", "/api/v1/flows/cancel", obj{"filter": filter, "preview": true})
			if prev["matched"] != 3.0 || len(prev["sample"].([]any)) != 3 {
				t.Fatalf("preview %v", prev)
			}
			if n := p.MustAdmin(t, 200, "GET", "/api/v1/flows?state=cancelled", nil)["items"].([]any); len(n) != 0 {
				t.Fatal("the preview cancelled something")
			}
			for _, body := range []obj{
				{"filter": filter},                                      // no expected count
				{"filter": filter, "expect": 2},                         // a stale count
				{"filter": obj{}, "expect": 0},                          // no filter at all
				{"filter": obj{"state": "awaiting_input"}, "expect": 4}, // state is implied
				{"filter": obj{"colour": "red"}, "expect": 4},
			} {
				if r := p.Admin(t, "POST", "/api/v1/flows/cancel", body); r.Status != 409 && r.Status != 422 {
					t.Fatalf("bulk cancel %v: %d %s", body, r.Status, r.Body)
				}
			}
			done := p.MustAdmin(t, 200, "POST", "/api/v1/flows/cancel", obj{"filter": filter, "expect": 3, "reason": "recall"})
			if done["cancelled"] != 3.0 {
				t.Fatalf("bulk cancel: %v", done)
			}
			for _, s := range states {
				r := p.MCP(t, "acme", "tools/call", obj{"name": "order", "arguments": obj{"item": "boots"},
					"inputResponses": obj{"size": accept(obj{"size": "M"})}, "requestState": s, "_meta": platformtest.Meta(caps)})
				if code, _, _ := platformtest.RPCError(t, r); code != -32602 {
					t.Fatalf("a bulk-cancelled flow continued: %s", r.Body)
				}
			}
			res, _ := call(t, p, "acme", "restock", obj{"size": accept(obj{"size": "M"})}, other)
			if res["resultType"] != "input_required" {
				t.Fatalf("a flow the filter did not select was affected: %v", res)
			}
		})
	}
}

// stream reads server-sent events from the flow stream.
type stream struct {
	events chan sse
	cancel context.CancelFunc
	status int
}

type sse struct {
	id, event string
	data      map[string]any
}

func openStream(t testing.TB, p *platformtest.Platform, query, lastID string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", p.URL+"/api/v1/flows/stream"+query, nil)
	req.Header.Set("Authorization", "Bearer "+platformtest.AdminToken)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &stream{events: make(chan sse, 100), cancel: cancel, status: resp.StatusCode}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		var ev sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.event != "" {
					s.events <- ev
				}
				ev = sse{}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(line[6:]), &ev.data)
			}
		}
	}()
	return s
}

// nextAny waits for the stream's next flow event.
func (s *stream) nextAny(t testing.TB) sse {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			t.Fatal("stream ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
	return sse{}
}

// next waits for the next event of flow id in state.
func (s *stream) next(t *testing.T, id, state string) sse {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("stream ended before %s was %s", id, state)
			}
			if ev.event == "flow" && ev.data["id"] == id && ev.data["state"] == state {
				return ev
			}
		case <-timeout:
			t.Fatalf("no event for %s in state %s", id, state)
		}
	}
}

func TestTheStreamFollowsChangesAndResumesAfterTheLastEventSeen(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.Tenant(t, "acme")
	p.Tool(t, "acme", orderTool("order", backend(t)))
	s := openStream(t, p, "", "")
	if s.status != 200 {
		t.Fatalf("stream: %d", s.status)
	}
	_, state := call(t, p, "acme", "order", nil, "")
	id := flowID(t, p, "acme")
	first := s.next(t, id, "awaiting_input")
	s.cancel()

	// Two more rounds while nobody watches; a stream resuming after the
	// first event replays them, in order, then follows live.
	_, state = call(t, p, "acme", "order", obj{"size": accept(obj{"size": "L"})}, state)
	call(t, p, "acme", "order", obj{"confirm": accept(obj{"ok": true})}, state)
	flow(t, p, "acme", id, "completed")
	resumed := openStream(t, p, "", first.id)
	ev := resumed.next(t, id, "completed")
	if ev.id <= first.id && len(ev.id) <= len(first.id) {
		t.Fatalf("resumed event %s not after %s", ev.id, first.id)
	}
	// Malformed resume positions are refused.
	for _, bad := range []string{"abc", "-5", "1e3"} {
		if r := openStream(t, p, "", bad); r.status != 422 {
			t.Fatalf("Last-Event-ID %q: %d", bad, r.status)
		}
	}
}

func TestTwoReplicasKeepOneFlowAndStreamEachOthersRounds(t *testing.T) {
	keys := newKey()
	db := platformtest.PostgresSchemaURL(t)
	a := platformtest.Start(t, db, platformtest.WithStateKeys(keys), platformtest.WithConfig(func(c *config.Config) { c.Flows.Replica = "replica-a" }))
	b := platformtest.Start(t, db, platformtest.WithStateKeys(keys), platformtest.WithConfig(func(c *config.Config) {
		c.PublicURL = a.URL
		c.Flows.Replica = "replica-b"
	}))
	a.Tenant(t, "acme")
	a.Tool(t, "acme", orderTool("order", backend(t)))
	onA := openStream(t, a, "", "")

	// Rounds alternate replicas: 1 on a, 2 on b, 3 on a.
	_, state := call(t, a, "acme", "order", nil, "")
	id := flowID(t, a, "acme")
	testwait.Until(t, "replica b never served the tenant", func() bool {
		r := b.MCP(t, "acme", "tools/list", obj{"_meta": platformtest.Meta(caps)})
		return r.Status == 200
	})
	_, state = call(t, b, "acme", "order", obj{"size": accept(obj{"size": "S"})}, state)
	ev := onA.next(t, id, "awaiting_input") // round 1, from a
	for ev.data["rounds"] != 2.0 {
		ev = onA.next(t, id, "awaiting_input")
	}
	if ev.data["replica"] != "replica-b" {
		t.Fatalf("a's stream shows round 2 from %v, want replica-b", ev.data["replica"])
	}
	call(t, a, "acme", "order", obj{"confirm": accept(obj{"ok": true})}, state)
	onA.next(t, id, "completed")
	f, rounds := flow(t, b, "acme", id, "completed")
	if f["rounds"] != 3.0 || len(rounds) != 3 {
		t.Fatalf("one flow with all rounds, want 3: %v, %d rounds", f, len(rounds))
	}
	for i, want := range []string{"replica-a", "replica-b", "replica-a"} {
		if got := rounds[i].(map[string]any)["replica"]; got != want {
			t.Errorf("round %d served by %v, want %s", i+1, got, want)
		}
	}
}

func TestRolesScopeWhatFlowsAnAdminSeesAndMayCancel(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.Tenant(t, "acme")
	p.Tenant(t, "globex")
	url := backend(t)
	p.Tool(t, "acme", orderTool("order", url))
	p.Tool(t, "globex", orderTool("order", url))
	call(t, p, "acme", "order", nil, "")
	call(t, p, "globex", "order", nil, "")
	testwait.Until(t, "flows not recorded", func() bool {
		return len(p.MustAdmin(t, 200, "GET", "/api/v1/flows", nil)["items"].([]any)) == 2
	})
	token := func(role string, tenants ...string) string {
		m := p.MustAdmin(t, 201, "POST", "/api/v1/tokens", obj{"name": role, "role": role, "tenants": tenants})
		return m["token"].(string)
	}
	as := func(tok, method, path string, body any) *platformtest.Response {
		return p.Admin(t, method, path, body, "Authorization", "Bearer "+tok)
	}
	acmeAdmin, viewer := token("tenant-admin", "acme"), token("viewer")
	var globexFlow, acmeFlow string
	for _, it := range p.MustAdmin(t, 200, "GET", "/api/v1/flows", nil)["items"].([]any) {
		f := it.(map[string]any)
		if f["tenant"] == "globex" {
			globexFlow = f["id"].(string)
		} else {
			acmeFlow = f["id"].(string)
		}
	}

	// A tenant admin lists, reads and streams only their tenant's flows.
	r := as(acmeAdmin, "GET", "/api/v1/flows", nil)
	if items := r.JSON(t)["items"].([]any); len(items) != 1 || items[0].(map[string]any)["tenant"] != "acme" {
		t.Fatalf("tenant admin's list: %s", r.Body)
	}
	if c := r.JSON(t)["counts"].(map[string]any); c["awaiting_input"] != 1.0 {
		t.Fatalf("tenant admin's counts include another tenant: %v", c)
	}
	for _, q := range []string{"?tenant=globex", "?tenant=globex&state=awaiting_input"} {
		if items := as(acmeAdmin, "GET", "/api/v1/flows"+q, nil).JSON(t)["items"].([]any); len(items) != 0 {
			t.Fatalf("tenant admin filtering for another tenant sees %v", items)
		}
	}
	for _, path := range []string{"/api/v1/tenants/globex/flows", "/api/v1/tenants/globex/flows/" + globexFlow, "/api/v1/tenants/acme/flows/" + globexFlow} {
		if r := as(acmeAdmin, "GET", path, nil); r.Status != 404 {
			t.Fatalf("tenant admin GET %s: %d", path, r.Status)
		}
	}
	if r := as(acmeAdmin, "POST", "/api/v1/tenants/globex/flows/"+globexFlow+"/cancel", nil); r.Status != 404 {
		t.Fatalf("tenant admin cancelling another tenant's flow: %d", r.Status)
	}
	prev := as(acmeAdmin, "POST", "/api/v1/flows/cancel", obj{"filter": obj{"target": "order"}, "preview": true}).JSON(t)
	if prev["matched"] != 1.0 {
		t.Fatalf("a tenant admin's bulk cancel reaches other tenants: %v", prev)
	}
	// Viewers read everything and change nothing.
	if items := as(viewer, "GET", "/api/v1/flows", nil).JSON(t)["items"].([]any); len(items) != 2 {
		t.Fatalf("viewer's list: %v", items)
	}
	for _, req := range []struct {
		path string
		body any
	}{
		{"/api/v1/tenants/acme/flows/" + acmeFlow + "/cancel", obj{"reason": "x"}},
		{"/api/v1/flows/cancel", obj{"filter": obj{"tenant": "acme"}, "preview": true}},
	} {
		if r := as(viewer, "POST", req.path, req.body); r.Status != 403 {
			t.Fatalf("viewer POST %s: %d", req.path, r.Status)
		}
	}
	// The tenant admin's stream carries only their tenant's changes.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sreq, _ := http.NewRequestWithContext(ctx, "GET", p.URL+"/api/v1/flows/stream?after=0", nil)
	sreq.Header.Set("Authorization", "Bearer "+acmeAdmin)
	resp, err := http.DefaultClient.Do(sreq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// A change after both flows' makes the stream carry everything
	// before it: reading up to it shows whether globex's slipped through.
	as(acmeAdmin, "POST", "/api/v1/tenants/acme/flows/"+acmeFlow+"/cancel", obj{"reason": "end of test"})
	seen := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data: ") {
			var f map[string]any
			_ = json.Unmarshal([]byte(line[6:]), &f)
			seen[fmt.Sprint(f["id"])] = true
			if f["id"] == acmeFlow && f["state"] == "cancelled" {
				break
			}
		}
	}
	if !seen[acmeFlow] || seen[globexFlow] {
		t.Fatalf("tenant admin's stream carried %v", seen)
	}
}
