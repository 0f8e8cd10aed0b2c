package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary play the servers' roles when the harness
// re-executes it, as the command does.
func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role))
	}
	os.Exit(m.Run())
}

// TestEveryTargetCompletesFlows is the smoke test of the whole benchmark:
// the real platform binary, built and started with its webhook backend
// and an OpenID issuer, the Go SDK server and the echo, each a process.
// It checks that every target answers both rounds in the same JSON
// shapes, and that one short round completes flows on every target with
// no error and CPU read for each process.
func TestEveryTargetCompletesFlows(t *testing.T) {
	repo, benchDir, err := findModules()
	if err != nil {
		t.Fatal(err)
	}
	o := options{rounds: 1, trial: time.Second, concurrency: 4, targets: allTargets, repo: repo, benchDir: benchDir}
	ctx := context.Background()
	var progress bytes.Buffer
	h, err := setup(ctx, o, &progress)
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()

	t.Run("the same shapes", func(t *testing.T) {
		// The Go SDK answers in the platform's shapes but for a few
		// fields of its own: the elicitation's mode (optional, "form" by
		// default), an empty content in round 1, and no title in its
		// serverInfo.
		sdkOwn := []string{".result.inputRequests.ok.params.mode", ".result.content",
			".result._meta.io.modelcontextprotocol/serverInfo.title"}
		var want [2][]string
		for i, tg := range h.targets {
			got := rawFlow(t, tg)
			for r := range 2 {
				t.Logf("%s round %d: %s", tg.Name, r+1, got[r])
				s := shape(t, got[r])
				if i == 0 {
					want[r] = s
					continue
				}
				w := want[r]
				if tg.Name == targetSDK {
					s = slices.DeleteFunc(s, func(p string) bool { return slices.Contains(sdkOwn, p) })
					w = slices.DeleteFunc(slices.Clone(w), func(p string) bool { return slices.Contains(sdkOwn, p) })
				}
				if !slices.Equal(s, w) {
					t.Errorf("%s round %d has the fields\n%v\n%s has\n%v", tg.Name, r+1, s, h.targets[0].Name, w)
				}
			}
		}
	})

	t.Run("flows", func(t *testing.T) {
		rep, err := measure(ctx, h, describeMachine(repo), &progress)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Targets) != len(allTargets) {
			t.Fatalf("%d targets reported, want %d", len(rep.Targets), len(allTargets))
		}
		for _, s := range rep.Targets {
			if s.Flows == 0 || s.Errors != 0 {
				t.Errorf("%s: %d flows, %d errors (first: %s)", s.Target, s.Flows, s.Errors, s.FirstError)
			}
			if s.ServerCPU <= 0 || s.P50 <= 0 || s.P99 < s.P50 {
				t.Errorf("%s: server CPU %.0f µs/flow, p50 %.0f µs, p99 %.0f µs", s.Target, s.ServerCPU, s.P50, s.P99)
			}
			if !strings.HasPrefix(s.Target, "platform-") && s.Target != targetEchoHook && s.WebhookCPU != 0 {
				t.Errorf("%s: webhook CPU %.0f µs/flow for a target without a webhook", s.Target, s.WebhookCPU)
			}
		}
		// CPU time is charged in clock ticks, so a short trial's share of
		// a light process may read as zero; the whole run's may not.
		for _, tg := range h.targets {
			if tg.hookPID == "" {
				continue
			}
			if used, err := procCPU(tg.hookPID); err != nil || used <= 0 {
				t.Errorf("%s: the webhook process's CPU reads %s, %v", tg.Name, used, err)
			}
		}
		if len(rep.Ratios) != 6 {
			t.Errorf("%d ratios, want 6", len(rep.Ratios))
		}
		var text, js bytes.Buffer
		rep.writeText(&text)
		if err := rep.writeJSON(&js); err != nil || !json.Valid(js.Bytes()) {
			t.Errorf("JSON output: %v", err)
		}
		t.Log("\n" + text.String())
	})
}

// rawFlow runs one flow by hand against tg and returns the two answers.
func rawFlow(t *testing.T, tg *target) [2][]byte {
	var out [2][]byte
	w := tg.workers[0]
	post := func(body []byte) []byte {
		req, _ := http.NewRequest(http.MethodPost, tg.url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", protocolVersion)
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", toolName)
		if w.token != "" {
			req.Header.Set("Authorization", "Bearer "+w.token)
		}
		resp, err := w.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: HTTP %d: %s", tg.Name, resp.StatusCode, b)
		}
		return b
	}
	out[0] = post(firstRound)
	var r struct {
		Result struct {
			RequestState string `json:"requestState"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out[0], &r); err != nil || r.Result.RequestState == "" {
		t.Fatalf("%s: round 1: %s", tg.Name, out[0])
	}
	out[1] = post(secondRound(r.Result.RequestState))
	return out
}

// shape is the sorted paths of every field of a JSON document, array
// elements as [] and without the values, leaving out the values of
// _meta's serverInfo (each server names itself).
func shape(t *testing.T, doc []byte) []string {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	var paths []string
	var walk func(string, any)
	walk = func(p string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(p+"."+k, x)
			}
		case []any:
			for _, x := range v {
				walk(p+"[]", x)
			}
		default:
			paths = append(paths, p)
		}
	}
	walk("", v)
	sort.Strings(paths)
	return slices.Compact(paths)
}

// TestAFailedFlowIsAnErrorNotThroughput runs trials against echo servers
// that get one thing wrong each: the flows fail, count as errors, and
// count nothing as flows.
func TestAFailedFlowIsAnErrorNotThroughput(t *testing.T) {
	for name, mangle := range map[string]func(round int, body []byte) []byte{
		"wrong text": func(round int, b []byte) []byte {
			return bytes.Replace(b, []byte(`"`+doneText+`"`), []byte(`"done"`), 1)
		},
		"tool error": func(round int, b []byte) []byte {
			return bytes.Replace(b, []byte(`"resultType":"complete"`), []byte(`"resultType":"complete","isError":true`), 1)
		},
		"no state": func(round int, b []byte) []byte {
			return bytes.Replace(b, []byte(`"requestState":"`+echoState+`"`), []byte(`"requestState":""`), 1)
		},
		"never completes": func(round int, b []byte) []byte {
			return bytes.Replace(b, []byte(`"resultType":"complete"`), []byte(`"resultType":"input_required"`), 1)
		},
		"JSON-RPC error": func(round int, b []byte) []byte {
			if round == 2 {
				return []byte(`{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"Invalid or expired requestState"}}`)
			}
			return b
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				round := 1
				if bytes.Contains(body, []byte(`"inputResponses"`)) {
					round = 2
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				rec := httptest.NewRecorder()
				(&echoServer{}).ServeHTTP(rec, r)
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(mangle(round, rec.Body.Bytes()))
			}))
			defer srv.Close()
			tg := &target{Name: "mangled", url: srv.URL, serverPID: strconv.Itoa(os.Getpid())}
			for range 2 {
				tg.workers = append(tg.workers, &worker{flowClient: flowClient{http: srv.Client(), url: srv.URL}})
			}
			r, err := trial(context.Background(), tg, 100*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if r.Flows != 0 || r.FlowsPerSec != 0 || r.Errors == 0 || r.FirstError == "" {
				t.Fatalf("%d flows (%.0f/s), %d errors, first %q", r.Flows, r.FlowsPerSec, r.Errors, r.FirstError)
			}
			t.Log(r.FirstError)
		})
	}
}

// TestTheEchoAnswersTheFlowAndRefusesWhatIsWrong checks the ceiling does
// the work it claims: a full flow, and refusals for a wrong state, wrong
// headers and an unconfirmed answer.
func TestTheEchoAnswersTheFlowAndRefusesWhatIsWrong(t *testing.T) {
	srv := httptest.NewServer(&echoServer{})
	defer srv.Close()
	c := &flowClient{http: srv.Client(), url: srv.URL}
	var lat []time.Duration
	if err := c.flow(&lat); err != nil || len(lat) != 2 {
		t.Fatalf("flow: %v, %d rounds timed", err, len(lat))
	}
	var r rpcResponse
	if err := c.round(secondRound("forged"), &r, &lat); err == nil || !strings.Contains(err.Error(), "-32602") {
		t.Errorf("a forged state: %v", err)
	}
	declined := bytes.Replace(secondRound(echoState), []byte(`"`+fieldName+`":true`), []byte(`"`+fieldName+`":false`), 1)
	r = rpcResponse{}
	if err := c.round(declined, &r, &lat); err != nil || !r.Result.IsError {
		t.Errorf("an unconfirmed answer: %v, isError %v", err, r.Result != nil && r.Result.IsError)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(firstRound))
	req.Header.Set("MCP-Protocol-Version", protocolVersion)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "other")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a mismatched Mcp-Name header: HTTP %d", resp.StatusCode)
	}
}

// TestProcCPUReadsThisProcess checks the /proc reader against this
// process's own CPU time: it grows while the process works.
func TestProcCPUReadsThisProcess(t *testing.T) {
	before, err := procCPU("self")
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := 0; ; i++ {
		for range 1 << 20 {
			x++
		}
		after, err := procCPU("self")
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			break
		}
		if i > 1<<14 {
			t.Fatalf("CPU time did not grow from %s over %d loops", before, x)
		}
	}
	if _, err := machineBusy(); err != nil {
		t.Fatal(err)
	}
	// The peak resident set is at least what this process holds now.
	hold := make([]byte, 64<<20)
	for i := range hold {
		hold[i] = 1
	}
	peak, err := peakRSS("self")
	if err != nil || peak < int64(len(hold)) {
		t.Fatalf("peak RSS %d (%v) while holding %d bytes", peak, err, len(hold))
	}
	if _, err := peakRSS("0"); err == nil {
		t.Fatal("a process that does not exist has a peak RSS")
	}
}

// TestEchoWebhookDeliversRoundTwoToTheWebhook checks echo-webhook calls
// the tool's webhook as the platform must: a flow completes with the
// webhook's answer, an unconfirmed answer comes back as the webhook's
// refusal, and a delivery the webhook cannot verify fails the round.
func TestEchoWebhookDeliversRoundTwoToTheWebhook(t *testing.T) {
	backend := &hookBackend{secrets: map[string]string{}}
	hookSrv := httptest.NewServer(backend)
	defer hookSrv.Close()
	backend.setSecret([]byte(`{"path":"` + echoHookPath + `","secret":"s3cret"}`))
	e := &echoServer{hook: newHookCaller(hookSrv.Client())}
	// A round before the webhook is configured waits for it.
	go func() {
		time.Sleep(50 * time.Millisecond)
		e.hook.configure([]byte(`{"path":"` + hookSrv.URL + echoHookPath + `","secret":"s3cret"}`))
	}()
	srv := httptest.NewServer(e)
	defer srv.Close()
	c := &flowClient{http: srv.Client(), url: srv.URL}
	var lat []time.Duration
	if err := c.flow(&lat); err != nil {
		t.Fatalf("flow: %v", err)
	}
	declined := bytes.Replace(secondRound(echoState), []byte(`"`+fieldName+`":true`), []byte(`"`+fieldName+`":false`), 1)
	var r rpcResponse
	if err := c.round(declined, &r, &lat); err != nil || !r.Result.IsError || r.Result.Content[0].Text != "not confirmed" {
		t.Errorf("an unconfirmed answer: %v, result %+v", err, r.Result)
	}
	e.hook.configure([]byte(`{"path":"` + hookSrv.URL + echoHookPath + `","secret":"wrong"}`))
	r = rpcResponse{}
	if err := c.round(secondRound(echoState), &r, &lat); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("a delivery signed with the wrong secret: %v", err)
	}
}

// TestBeforeAddsEachPlatformTargetBuiltFromTheCheckout: -before puts
// NAME@before right after each platform target asked for, and nothing
// after the others; a directory that is not a checkout of the platform
// is refused before anything starts.
func TestBeforeAddsEachPlatformTargetBuiltFromTheCheckout(t *testing.T) {
	repo, _, err := findModules()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		targets string
		want    []string
	}{
		{"platform-public,echo", []string{"platform-public", "platform-public@before", "echo"}},
		{"go-sdk,platform-bearer,platform-public", []string{"go-sdk", "platform-bearer", "platform-bearer@before", "platform-public", "platform-public@before"}},
		{"echo,echo-webhook", []string{"echo", "echo-webhook"}},
	} {
		o, err := parse([]string{"-targets", c.targets, "-before", repo}, io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", c.targets, err)
		}
		if !slices.Equal(o.targets, c.want) || o.before != repo {
			t.Errorf("-targets %s -before: targets %v, before %q; want %v", c.targets, o.targets, o.before, c.want)
		}
	}
	for _, dir := range []string{t.TempDir(), filepath.Join(repo, "docs"), filepath.Join(t.TempDir(), "absent")} {
		if _, err := parse([]string{"-before", dir}, io.Discard); err == nil || !strings.Contains(err.Error(), "not a checkout of the platform") {
			t.Errorf("-before %s: %v, want it refused", dir, err)
		}
	}
	// The @before names are not targets of their own.
	if _, err := parse([]string{"-targets", "platform-public@before"}, io.Discard); err == nil {
		t.Error("-targets platform-public@before without -before was accepted")
	}
}
