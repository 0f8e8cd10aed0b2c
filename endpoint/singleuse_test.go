package endpoint_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
	"github.com/opsmcp/platform/webhook"
)

// deployHook completes every call and counts, per delivery id, how often
// the tool ran.
type deployHook struct {
	*hook
	mu   sync.Mutex
	runs map[string]int
}

func newDeployHook(t *testing.T) *deployHook {
	d := &deployHook{runs: map[string]int{}}
	d.hook = newHook(t, func(w http.ResponseWriter, req *webhook.Request) {
		d.mu.Lock()
		d.runs[req.Flow.ID]++
		d.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"type":"complete","result":{"content":[{"type":"text","text":"deployed"}]}}`))
	})
	return d
}

func (d *deployHook) ran(flowID string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.runs[flowID]
}

func confirmedTool(name, url string, annotations obj, singleUse bool) obj {
	def := obj{"name": name, "description": "asks, then runs", "inputSchema": obj{"type": "object"},
		"handler": obj{"url": url}, "inputs": []obj{formInput("ok", "Go ahead?", "answer")}}
	if annotations != nil {
		def["annotations"] = annotations
	}
	if singleUse {
		def["singleUse"] = true
	}
	return def
}

// TestAConfirmedRoundOfADestructiveToolRunsOnceFleetWide replays the
// confirmed round of single-use tools (destructive, or marked singleUse)
// many times at once across two replicas on both databases: the tool runs
// exactly once and every other replay gets the frozen rejection. A tool
// that is neither runs once per replay, each delivery carrying the same
// idempotency key.
func TestAConfirmedRoundOfADestructiveToolRunsOnceFleetWide(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			keys := key()
			db := d.New(t)
			a := platformtest.Start(t, db, platformtest.WithStateKeys(keys))
			replicas := []*platformtest.Platform{a}
			if d.Name == "postgres" { // SQLite is one node
				replicas = append(replicas, platformtest.Start(t, db, platformtest.WithStateKeys(keys),
					platformtest.WithConfig(func(c *config.Config) { c.PublicURL = a.URL })))
			}
			a.Tenant(t, "acme")
			yes, no := true, false
			hooks := map[string]*deployHook{}
			for name, def := range map[string]func(url string) obj{
				"drop":     func(u string) obj { return confirmedTool("drop", u, obj{"destructiveHint": yes}, false) },
				"charge":   func(u string) obj { return confirmedTool("charge", u, nil, true) },
				"report":   func(u string) obj { return confirmedTool("report", u, obj{"destructiveHint": no}, false) },
				"ordinary": func(u string) obj { return confirmedTool("ordinary", u, nil, false) },
			} {
				h := newDeployHook(t)
				h.setSecret(a.Tool(t, "acme", def(h.URL)))
				hooks[name] = h
			}
			for _, r := range replicas[1:] {
				testwait.Until(t, "the other replica serves the tenant", func() bool {
					return r.MCP(t, "acme", "tools/list", obj{"_meta": platformtest.Meta(allCaps)}).Status == 200
				})
			}
			answer := obj{"ok": accept("answer", "yes")}
			for _, tc := range []struct {
				tool string
				once bool
			}{{"drop", true}, {"charge", true}, {"report", false}, {"ordinary", false}} {
				h := hooks[tc.tool]
				_, state := inputRequired(t, call(t, a, "acme", tc.tool, obj{}, nil, nil, allCaps))
				const replays = 8
				results := make(chan *platformtest.Response, replays)
				var wg sync.WaitGroup
				for i := range replays {
					wg.Go(func() { results <- call(t, replicas[i%len(replicas)], "acme", tc.tool, obj{}, answer, state, allCaps) })
				}
				wg.Wait()
				close(results)
				var completed, refused int
				for r := range results {
					switch {
					case r.Status == 200 && strings.Contains(string(r.Body), `"deployed"`):
						completed++
					case r.Status == 400 && strings.Contains(string(r.Body), "Invalid or expired requestState"):
						refused++
					default:
						t.Fatalf("%s: replay answered %d %s", tc.tool, r.Status, r.Body)
					}
				}
				flowID := h.last().Flow.ID
				if tc.once && (completed != 1 || refused != replays-1 || h.ran(flowID) != 1) {
					t.Fatalf("%s: %d completed, %d refused, ran %d times; want exactly once", tc.tool, completed, refused, h.ran(flowID))
				}
				if !tc.once && (completed != replays || h.ran(flowID) != replays) {
					t.Fatalf("%s: %d completed, ran %d times; want every replay to run", tc.tool, completed, h.ran(flowID))
				}
			}
			if !strings.Contains(a.Logs.String(), `"reason":"replayed"`) && (len(replicas) == 1 || !strings.Contains(replicas[1].Logs.String(), `"reason":"replayed"`)) {
				t.Fatal("no replay was logged with its reason")
			}
		})
	}
}
