package keys_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/keys"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/vaulttest"
	"github.com/opsmcp/platform/webhook"
)

type obj = map[string]any

// answersHook is a tenant webhook that verifies the signature and
// completes with the answers it got.
type answersHook struct {
	*platformtest.Backend
	calls atomic.Int64
}

func newAnswersHook(t *testing.T) *answersHook {
	h := &answersHook{}
	h.Backend = platformtest.NewBackend(t, func(w http.ResponseWriter, _ *http.Request, req *webhook.Request) {
		h.calls.Add(1)
		b, _ := json.Marshal(req.Answers)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"type":"complete","result":{"content":[{"type":"text","text":%q}]}}`, b)
	})
	return h
}

func formInput(name, msg, field string) obj {
	return obj{"name": name, "kind": "form", "message": msg,
		"requestedSchema": obj{"type": "object", "properties": obj{field: obj{"type": "string"}}, "required": []string{field}}}
}

// chainTool needs three rounds of input (a name, a colour, a size)
// before the webhook completes it on the fourth request.
func chainTool(name, url string) obj {
	colour := formInput("colour", "Colour for {{args.order}}?", "colour")
	colour["when"] = obj{"input": "who"}
	size := formInput("size", "Size?", "size")
	size["when"] = obj{"input": "colour"}
	return obj{"name": name, "description": "three questions in turn",
		"inputSchema": obj{"type": "object", "properties": obj{"order": obj{"type": "string"}}},
		"handler":     obj{"url": url},
		"inputs":      []obj{formInput("who", "Your name?", "name"), colour, size}}
}

var allCaps = obj{"elicitation": obj{}, "sampling": obj{}, "roots": obj{}}

func accept(field, value string) obj { return obj{"action": "accept", "content": obj{field: value}} }

// fleet is three platform instances sharing Vault and PostgreSQL, with a
// tenant whose chain tool takes three rounds.
type fleet struct {
	v    *vaulttest.Server
	ps   []*platformtest.Platform
	slug string
	hook *answersHook
	ttl  time.Duration
}

func startFleet(t *testing.T, ttl time.Duration, mut func(*config.KeysConfig)) *fleet {
	t.Helper()
	v := vaulttest.Start(t)
	db := platformtest.PostgresSchemaURL(t)
	f := &fleet{v: v, slug: "acme", hook: newAnswersHook(t), ttl: ttl}
	var public string
	for i := range 3 {
		p := platformtest.Start(t, db, platformtest.WithConfig(func(c *config.Config) {
			if public != "" {
				c.PublicURL = public // one audience for the fleet
			}
			c.Keys.Provider = "vault"
			c.Keys.VaultAddr = v.Addr
			c.Keys.VaultToken = v.RootToken
			c.Keys.Refresh = 100 * time.Millisecond
			c.Keys.ClockSkew = 300 * time.Millisecond
			c.Keys.ScheduleEvery = 100 * time.Millisecond
			c.Keys.Staleness = 30 * time.Second
			c.Keys.Period = 24 * time.Hour
			c.Keys.VaultTimeout = 2 * time.Second
			if mut != nil {
				mut(&c.Keys)
			}
		}))
		if i == 0 {
			public = p.URL
		}
		f.ps = append(f.ps, p)
	}
	a := f.ps[0]
	a.MustAdmin(t, 201, "POST", "/api/v1/tenants", obj{"slug": f.slug, "displayName": "Acme",
		"settings": obj{"stateTtlSeconds": int(ttl / time.Second), "auth": obj{"public": true}}})
	// The schedulers, looking every refresh here for tenants without a
	// due time, may give the new tenant its ring first, with the same
	// default custody: either way it has one.
	if r := a.Admin(t, "POST", "/api/v1/tenants/"+f.slug+"/keys", obj{}); r.Status != 201 &&
		(r.Status != 409 || !strings.Contains(string(r.Body), "already has a key ring")) {
		t.Fatalf("POST keys: %d %s", r.Status, r.Body)
	}
	f.hook.SetSecrets(a.Tool(t, f.slug, chainTool("order", f.hook.URL)))
	// Every instance serves the tool before the driver starts.
	for _, p := range f.ps {
		waitFor(t, "every instance serves the tool", func() bool {
			r := p.MCP(t, f.slug, "tools/list", nil)
			if r.Status != 200 || !strings.Contains(string(r.Body), `"order"`) {
				t.Logf("tools/list on %s: %d %.300s", p.URL, r.Status, r.Body)
				return false
			}
			return true
		})
	}
	return f
}

// round sends one tools/call of the chain flow to p.
func (f *fleet) round(t *testing.T, p *platformtest.Platform, flow string, n int, state string) *platformtest.Response {
	params := obj{"name": "order", "arguments": obj{"order": flow}, "_meta": platformtest.Meta(allCaps)}
	switch n {
	case 2:
		params["inputResponses"] = obj{"who": accept("name", "Ada")}
	case 3:
		params["inputResponses"] = obj{"colour": accept("colour", "red")}
	case 4:
		params["inputResponses"] = obj{"size": accept("size", "L")}
	}
	if state != "" {
		params["requestState"] = state
	}
	return p.MCP(t, f.slug, "tools/call", params)
}

// driver runs 3-round flows concurrently, each round on the next
// instance in turn, and counts rounds and failures.
type driver struct {
	rounds, flows, failures atomic.Int64
	mu                      sync.Mutex
	firstFailures           []string
	stop                    chan struct{}
	wg                      sync.WaitGroup
}

func (f *fleet) drive(t *testing.T, workers int) *driver {
	d := &driver{stop: make(chan struct{})}
	for w := range workers {
		d.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-d.stop:
					return
				default:
				}
				d.flow(t, f, fmt.Sprintf("w%d-%d", w, i), w+i)
			}
		})
	}
	return d
}

func (d *driver) fail(format string, a ...any) {
	d.failures.Add(1)
	d.mu.Lock()
	if len(d.firstFailures) < 10 {
		d.firstFailures = append(d.firstFailures, fmt.Sprintf(format, a...))
	}
	d.mu.Unlock()
}

func (d *driver) flow(t *testing.T, f *fleet, id string, start int) {
	state := ""
	for n := 1; n <= 4; n++ {
		p := f.ps[(start+n)%len(f.ps)]
		r := f.round(t, p, id, n, state)
		d.rounds.Add(1)
		var m struct {
			Result *struct {
				ResultType   string `json:"resultType"`
				RequestState string `json:"requestState"`
				IsError      bool   `json:"isError"`
			} `json:"result"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(r.Body, &m); err != nil || m.Result == nil {
			d.fail("flow %s round %d on %s: HTTP %d %s", id, n, p.URL, r.Status, r.Body)
			return
		}
		if n < 4 {
			if m.Result.ResultType != "input_required" || m.Result.RequestState == "" {
				d.fail("flow %s round %d: %s", id, n, r.Body)
				return
			}
			state = m.Result.RequestState
			continue
		}
		if m.Result.ResultType != "complete" || m.Result.IsError {
			d.fail("flow %s final round: %s", id, r.Body)
			return
		}
	}
	d.flows.Add(1)
}

func (d *driver) halt(t *testing.T) {
	t.Helper()
	close(d.stop)
	d.wg.Wait()
	t.Logf("driver: %d flows, %d rounds, %d failed", d.flows.Load(), d.rounds.Load(), d.failures.Load())
	if n := d.failures.Load(); n > 0 {
		t.Fatalf("%d rounds failed; first: %s", n, strings.Join(d.firstFailures, "\n"))
	}
}

// ring reads the tenant's ring through instance p's admin API.
func (f *fleet) ring(t *testing.T, p *platformtest.Platform) *keys.View {
	t.Helper()
	r := p.Admin(t, "GET", "/api/v1/tenants/"+f.slug+"/keys", nil)
	if r.Status != 200 {
		t.Fatalf("GET keys: %d %s", r.Status, r.Body)
	}
	var v keys.View
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

// assertFrozen checks the one frozen answer to bad request state.
func assertFrozen(t *testing.T, r *platformtest.Response) {
	t.Helper()
	code, msg, data := platformtest.RPCError(t, r)
	if r.Status != 400 || code != -32602 || msg != "Invalid or expired requestState" || data["reason"] != "invalid_request_state" {
		t.Fatalf("not the frozen rejection: HTTP %d %d %q %v", r.Status, code, msg, data)
	}
}

// TestRotationAcrossThreeInstancesFailsNoRound is the headline: three
// instances share Vault and PostgreSQL; a driver runs many concurrent
// 3-round flows whose rounds go to the instances in turn while a full
// rotation (stage, promote, retire) runs end to end on the schedulers.
// No round is rejected; a flow sealed under the retired key is rejected
// after retirement.
func TestRotationAcrossThreeInstancesFailsNoRound(t *testing.T) {
	f := startFleet(t, 4*time.Second, nil)
	a, b := f.ps[0], f.ps[1]

	// A flow paused under the first key, to be continued after retirement.
	r := f.round(t, a, "paused", 1, "")
	var first struct {
		Result struct {
			RequestState string `json:"requestState"`
		} `json:"result"`
	}
	_ = json.Unmarshal(r.Body, &first)
	k1 := f.ring(t, a)
	if k1.Phase != keys.PhaseSteady || len(k1.Keys) != 1 {
		t.Fatalf("initial ring: %+v", k1)
	}
	oldKey := k1.Keys[0].ID

	d := f.drive(t, 6)
	time.Sleep(time.Second) // flows in flight under the first key

	start := time.Now()
	rot := b.MustAdmin(t, 200, "POST", "/api/v1/tenants/"+f.slug+"/keys/rotate", nil)
	if rot["phase"] != string(keys.PhaseStaged) {
		t.Fatalf("rotate now: %v", rot)
	}
	// Watch the phases go by on another instance while the driver runs.
	// The staged phase lasts one propagation margin (0.4 s here), which a
	// loaded machine can spend on the rotate request alone, so the
	// rotate answer stands witness for it; the promoted phase lasts the
	// state TTL and is seen on the other instance. The ring's own record
	// below orders the steps.
	seen := map[keys.Phase]bool{}
	var newKey string
	waitFor(t, "the rotation completes on another instance", func() bool {
		v := f.ring(t, f.ps[2])
		seen[v.Phase] = true
		if v.Phase == keys.PhaseSteady && v.Keys[0].ID != oldKey {
			newKey = v.Keys[0].ID
			return true
		}
		time.Sleep(50 * time.Millisecond)
		return false
	})
	took := time.Since(start)
	time.Sleep(time.Second) // and a while after retirement
	d.halt(t)

	if !seen[keys.PhasePromoted] {
		t.Fatalf("phases observed: %v", seen)
	}
	// The ring's own record orders the steps: promotion a propagation
	// margin after staging, retirement (the steady phase) the state TTL
	// and a margin after promotion.
	done := f.ring(t, f.ps[2])
	nk := done.Keys[0]
	margin := time.Duration(done.PropagationMarginSeconds * float64(time.Second))
	if nk.Promoted.Before(nk.Created.Add(margin)) {
		t.Fatalf("%s promoted at %s, staged at %s: sooner than the propagation margin %s", nk.ID, nk.Promoted, nk.Created, margin)
	}
	if done.PhaseSince.Before(nk.Promoted.Add(f.ttl + margin)) {
		t.Fatalf("retirement at %s, %s after promotion: before the state TTL (%s) and margin", done.PhaseSince, done.PhaseSince.Sub(nk.Promoted), f.ttl)
	}
	if d.flows.Load() < 30 {
		t.Fatalf("only %d flows completed; the test proves little", d.flows.Load())
	}
	t.Logf("rotation %s → %s took %s", oldKey, newKey, took.Round(time.Millisecond))
	// No replica ever met a token under a key it had not loaded: the
	// margin alone kept promotion behind every replica's refresh.
	for _, p := range f.ps {
		if n := p.Server.Keys().Rescued(); n != 0 {
			t.Fatalf("%s opened %d tokens only after a refresh on an unknown key: promotion outran propagation", p.URL, n)
		}
	}

	// The paused flow's state was sealed under the retired key: refused,
	// with the key (not only the expiry) as the logged reason.
	assertFrozen(t, f.round(t, a, "paused", 2, first.Result.RequestState))
	if !strings.Contains(a.Logs.String(), `"reason":"unknown_key"`) {
		t.Fatal("the retired key's token was not refused as unknown_key")
	}
	// Every instance reports the key store ready.
	for _, p := range f.ps {
		r := platformtest.Do(t, "GET", p.URL+"/readyz", nil, nil)
		if r.Status != 200 || !strings.Contains(string(r.Body), `"keys":"ok"`) {
			t.Fatalf("readyz: %d %s", r.Status, r.Body)
		}
	}
}

// TestAdvanceRaceAcrossInstances: all three instances try to advance the
// same due phase at once, through "rotate now" and through the
// scheduler's Advance; exactly one does each time.
func TestAdvanceRaceAcrossInstances(t *testing.T) {
	f := startFleet(t, 2*time.Second, func(k *config.KeysConfig) { k.Scheduler = false })
	id := tenantID(t, f)

	// Rotate now on every instance at once: one 200, the rest 409.
	var wg sync.WaitGroup
	codes := make(chan int, 9)
	start := make(chan struct{})
	for _, p := range f.ps {
		for range 3 {
			wg.Go(func() {
				<-start
				codes <- p.Admin(t, "POST", "/api/v1/tenants/"+f.slug+"/keys/rotate", nil).Status
			})
		}
	}
	close(start)
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	if count[200] != 1 || count[409] != 8 {
		t.Fatalf("concurrent rotate now: %v, want one 200 and eight 409", count)
	}

	// Promotion, then retirement: every instance's manager races.
	var ms []*keys.Manager
	for _, p := range f.ps {
		ms = append(ms, p.Server.Keys())
	}
	time.Sleep(ms[0].Margin() + 100*time.Millisecond)
	if n := raceAdvance(t, ms, id, keys.Promote, 3); n != 1 {
		t.Fatalf("promote: %d advanced", n)
	}
	time.Sleep(f.ttl + ms[0].Margin() + 100*time.Millisecond)
	if n := raceAdvance(t, ms, id, keys.Retire, 3); n != 1 {
		t.Fatalf("retire: %d advanced", n)
	}
	if v := f.ring(t, f.ps[1]); v.Phase != keys.PhaseSteady || v.Generation != 4 {
		t.Fatalf("after the races: phase %s generation %d (want steady, 4 writes)", v.Phase, v.Generation)
	}
}

func tenantID(t *testing.T, f *fleet) string {
	t.Helper()
	tn, err := f.ps[0].Server.Store().Tenants().Get(context.Background(), f.slug)
	if err != nil {
		t.Fatal(err)
	}
	return tn.ID
}

// TestVaultStoppedMidRotationFailsNoRound: Vault stops right after a
// rotation is staged; the fleet keeps serving from cached rings (no
// failed round within the staleness window), reports degraded, pauses
// the rotation, and completes it once Vault is back.
func TestVaultStoppedMidRotationFailsNoRound(t *testing.T) {
	f := startFleet(t, 3*time.Second, func(k *config.KeysConfig) {
		k.ClockSkew = time.Second // a margin long enough to stop Vault before promotion
		k.VaultTimeout = 500 * time.Millisecond
	})
	a := f.ps[0]
	k1 := f.ring(t, a).Keys[0].ID
	d := f.drive(t, 4)
	time.Sleep(500 * time.Millisecond)

	a.MustAdmin(t, 200, "POST", "/api/v1/tenants/"+f.slug+"/keys/rotate", nil)
	f.v.Stop()
	stopped := time.Now()
	for _, p := range f.ps {
		waitFor(t, "every instance reports the keys degraded", func() bool {
			r := platformtest.Do(t, "GET", p.URL+"/readyz", nil, nil)
			return r.Status == 200 && strings.Contains(string(r.Body), `"keys":"degraded`)
		})
	}
	time.Sleep(3 * time.Second) // promotion is overdue, and cannot happen
	if r := a.Admin(t, "GET", "/api/v1/tenants/"+f.slug+"/keys", nil); r.Status != 503 {
		t.Fatalf("keys with Vault down: %d %s", r.Status, r.Body)
	}
	down := time.Since(stopped)
	// Vault answers no earlier than its restart begins: promotion must
	// come at least a propagation margin after that.
	restarting := time.Now()
	f.v.Restart(t)

	// Rotation resumes and completes; the promotion waited for Vault,
	// and then a propagation margin (Refresh 100ms + ClockSkew 1s) for
	// the replicas that missed the staging.
	var done *keys.View
	waitFor(t, "the rotation completes once Vault is back", func() bool {
		done = f.ring(t, f.ps[1])
		return done.Phase == keys.PhaseSteady && done.Keys[0].ID != k1
	})
	const margin = 1100 * time.Millisecond
	if p := done.Keys[0].Promoted; p.Before(restarting.Add(margin)) {
		t.Fatalf("promoted at %s, %s after Vault's restart began at %s: sooner than the propagation margin", p, p.Sub(restarting), restarting)
	}
	time.Sleep(500 * time.Millisecond)
	d.halt(t)
	t.Logf("Vault was down for %s", down.Round(time.Millisecond))
	for _, p := range f.ps {
		r := platformtest.Do(t, "GET", p.URL+"/readyz", nil, nil)
		if r.Status != 200 || !strings.Contains(string(r.Body), `"keys":"ok"`) {
			t.Fatalf("readyz after Vault returned: %d %s", r.Status, r.Body)
		}
	}
}
