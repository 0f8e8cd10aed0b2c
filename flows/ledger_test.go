package flows_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/webhook"
)

// TestADestructiveRoundIsRecordedBeforeItRunsAndItsOutcomeBeforeItsAnswer:
// the confirmed round of a destructive tool is in the record as running
// when its webhook is called (written with its state's consumption), and
// every round's outcome is there when the client reads its answer, with
// no wait:
// "did the deploy happen?" always has an answer, even if the replica is
// lost in between. A tool that is not destructive keeps the batched path.
func TestADestructiveRoundIsRecordedBeforeItRunsAndItsOutcomeBeforeItsAnswer(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			p := platformtest.Start(t, d.New(t))
			slug := p.Tenant(t, "acme")
			var mu sync.Mutex
			seen := map[string]string{} // tool -> the flow's recorded state while its webhook ran
			hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var req webhook.Request
				_ = json.NewDecoder(r.Body).Decode(&req)
				// While the tool runs, ask the record what it knows.
				got := p.Admin(t, "GET", "/api/v1/flows/"+req.Flow.ID, nil)
				state := fmt.Sprint(got.Status)
				if got.Status == 200 {
					f := got.JSON(t)["flow"].(map[string]any)
					state = fmt.Sprintf("%v %v", f["state"], f["rounds"])
				}
				mu.Lock()
				seen[req.Name] = state
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"type":"complete","result":{"content":[{"type":"text","text":"dropped"}]}}`)
			}))
			t.Cleanup(hook.Close)
			yes := true
			for _, tc := range []struct {
				name string
				ann  obj
			}{{"drop", obj{"destructiveHint": yes}}, {"look", nil}} {
				def := obj{"name": tc.name, "inputSchema": obj{"type": "object"}, "handler": obj{"url": hook.URL},
					"inputs": []obj{{"name": "ok", "kind": "form", "message": "Go ahead?",
						"requestedSchema": obj{"type": "object", "properties": obj{"answer": obj{"type": "boolean"}}, "required": []string{"answer"}}}}}
				if tc.ann != nil {
					def["annotations"] = tc.ann
				}
				p.Tool(t, slug, def)
			}
			for _, tool := range []string{"drop", "look"} {
				res, state := call(t, p, slug, tool, nil, "")
				if res["resultType"] != "input_required" {
					t.Fatalf("%s round 1: %v", tool, res)
				}
				res, _ = call(t, p, slug, tool, obj{"ok": accept(obj{"answer": true})}, state)
				if res["resultType"] != "complete" {
					t.Fatalf("%s round 2: %v", tool, res)
				}
				if tool != "drop" {
					continue
				}
				// The answer is in: so is its outcome, read at once.
				items := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/"+slug+"/flows?target=drop", nil)["items"].([]any)
				if len(items) != 1 {
					t.Fatalf("the destructive flow is not in the record when its answer came: %v", items)
				}
				f := items[0].(map[string]any)
				if f["state"] != "completed" || f["rounds"] != 2.0 {
					t.Fatalf("the destructive flow's record when its answer came: %v %v", f["state"], f["rounds"])
				}
				// Both its rounds are there, read at once: the one that asked
				// was settled before its answer too.
				r := p.MustAdmin(t, 200, "GET", "/api/v1/flows/"+f["id"].(string), nil)
				rounds := r["rounds"].([]any)
				if len(rounds) != 2 || rounds[0].(map[string]any)["resultType"] != "input_required" || rounds[1].(map[string]any)["resultType"] != "complete" {
					t.Fatalf("its rounds, when its answer came: %v", rounds)
				}
				// The confirmed round waited on the record before its
				// webhook, within its own time; the round that asked did
				// not (its record is written after it is answered).
				second := rounds[1].(map[string]any)
				waited, _ := second["recordUs"].(float64)
				if server, _ := second["serverUs"].(float64); waited <= 0 || waited > server {
					t.Fatalf("the confirmed round's wait on the record: %v µs of %v µs", second["recordUs"], second["serverUs"])
				}
				if w, ok := rounds[0].(map[string]any)["recordUs"]; ok {
					t.Fatalf("the round that asked says it waited %v µs on the record", w)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if seen["drop"] != "running 2" {
				t.Fatalf("while the destructive tool ran, the record said %q; want it running its second round", seen["drop"])
			}
			// The other tool's round was recorded as ever: in batches, so
			// what the record said while it ran is not asserted.
		})
	}
}
