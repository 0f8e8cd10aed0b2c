package legacyinterop

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opsmcp/platform/testkit/nodeclient"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
)

// The fleet tests run real platform processes (the binary built from
// this tree), so killing one is a SIGKILL: nothing of it runs on, no
// graceful shutdown, no last record written. They share PostgreSQL and
// the state keys, and sit behind a round-robin HTTP proxy written here
// (a reverse proxy sending each request to the next replica in turn, as
// a load balancer without sticky sessions does; HAProxy would do the
// same).

var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// platformBinary builds cmd/platform once per test run.
func platformBinary(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		build.dir, build.err = os.MkdirTemp("", "legacyinterop-")
		if build.err != nil {
			return
		}
		build.bin = filepath.Join(build.dir, "platform")
		out, err := exec.Command("go", "build", "-o", build.bin, "github.com/opsmcp/platform/cmd/platform").CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

// replica is one platform process.
type replica struct {
	name string
	url  string
	cmd  *exec.Cmd
	log  *bytes.Buffer
	done chan struct{}
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startReplica runs a platform process on db, answering to publicURL
// (the proxy's: sealed state and sessions are bound to it), with the
// shared state keys.
func startReplica(t *testing.T, name, db, publicURL, stateKeys string) *replica {
	t.Helper()
	addr := freePort(t)
	r := &replica{name: name, url: "http://" + addr, log: &bytes.Buffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(platformBinary(t), "serve")
	r.cmd.Env = append(os.Environ(),
		"PLATFORM_LISTEN="+addr, "PLATFORM_DATABASE_URL="+db, "PLATFORM_PUBLIC_URL="+publicURL,
		"PLATFORM_BOOTSTRAP_TOKEN="+platformtest.AdminToken, "PLATFORM_ALLOW_PRIVATE_TARGETS=true",
		"PLATFORM_STATE_KEYS="+stateKeys, "PLATFORM_SECRETS_KEYS="+platformtest.SecretsKey,
		"PLATFORM_CATALOGUE_REFRESH=50ms", "PLATFORM_REPLICA_NAME="+name, "PLATFORM_LOG_FORMAT=json",
		"PLATFORM_METRICS=false", "OTEL_SDK_DISABLED=true", "PLATFORM_SHUTDOWN_TIMEOUT=2s")
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		r.kill()
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, r.log.String())
		}
	})
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(r.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return r
			}
		}
		select {
		case <-r.done:
			t.Fatalf("%s exited at start:\n%s", name, r.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became ready:\n%s", name, r.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the process with SIGKILL and waits for it.
func (r *replica) kill() {
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.done
}

// proxy sends each request to the next replica in turn, streaming
// answers as they come, and notes where each went.
type proxy struct {
	*httptest.Server
	mu       sync.Mutex
	replicas []*replica
	next     int
	routed   []routed
}

type routed struct {
	kind    string // the JSON-RPC method, "answer" for a posted response, or the HTTP method
	replica string
}

func newProxy(t *testing.T) *proxy {
	p := &proxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

func (p *proxy) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	kind := r.Method
	var m struct {
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if r.Method == http.MethodPost && json.Unmarshal(body, &m) == nil {
		kind = m.Method
		if m.Method == "" && (m.Result != nil || m.Error != nil) {
			kind = "answer"
		}
	}
	if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
		kind = "resume"
	}
	// A replica that refuses the connection (it is dead) is skipped for
	// the next, as HAProxy's redispatch does; any other failure is the
	// client's to see.
	p.mu.Lock()
	start := p.next
	p.next++
	p.mu.Unlock()
	for tries := 0; ; tries++ {
		p.mu.Lock()
		// Each replica once, in turn from this request's own: concurrent
		// requests must not send it to the dead one twice.
		to := p.replicas[(start+tries)%len(p.replicas)]
		last := tries == len(p.replicas)-1
		p.routed = append(p.routed, routed{kind, to.name})
		at := len(p.routed) - 1
		p.mu.Unlock()
		target, _ := url.Parse(to.url)
		rp := httputil.NewSingleHostReverseProxy(target)
		rp.FlushInterval = -1 // event streams pass as they come
		// A connection a request of its own: one kept from before a
		// replica died would fail the request with EOF, which cannot be
		// told from a request the replica took, rather than be refused.
		rp.Transport = noKeepAlive
		refused := false
		rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
			if errors.Is(err, syscall.ECONNREFUSED) && !last {
				refused = true
				return
			}
			w.WriteHeader(http.StatusBadGateway)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		rp.ServeHTTP(w, r)
		if !refused {
			return
		}
		p.mu.Lock()
		p.routed[at].kind = "refused " + kind
		p.mu.Unlock()
	}
}

// noKeepAlive is the proxy's transport to the replicas.
var noKeepAlive = &http.Transport{DisableKeepAlives: true}

// where lists the replicas the requests of a kind went to, in order.
func (p *proxy) where(kind string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, r := range p.routed {
		if r.kind == kind {
			out = append(out, r.replica)
		}
	}
	return out
}

// waiting lists the flows the record shows awaiting input (none when
// the record cannot be read). It may run off the test's goroutine.
func waiting(r *replica) []any {
	req, _ := http.NewRequest("GET", r.url+"/api/v1/tenants/acme/flows", nil)
	req.Header.Set("Authorization", "Bearer "+platformtest.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var m struct {
		Items []map[string]any `json:"items"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&m)
	var out []any
	for _, f := range m.Items {
		if f["state"] == "awaiting_input" {
			out = append(out, f)
		}
	}
	return out
}

func stateKeys() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// fleet is two replicas behind the proxy, on one PostgreSQL schema.
func fleet(t *testing.T, settings obj) (*proxy, *replica, *replica, *backend) {
	db := platformtest.PostgresSchemaURL(t)
	px := newProxy(t)
	keys := stateKeys()
	a := startReplica(t, "replica-a", db, px.URL, keys)
	b := startReplica(t, "replica-b", db, px.URL, keys)
	px.replicas = []*replica{a, b}
	hook := newBackend(t)
	register(t, a.url, platformtest.AdminToken, hook, settings)
	// Both replicas serve the tenant before the test begins.
	for _, r := range px.replicas {
		testwait.Until(t, r.name+" serves the tenant", func() bool {
			resp, err := http.Post(r.url+"/t/acme/mcp", "application/json", strings.NewReader(
				`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}`))
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
	}
	return px, a, b, hook
}

func TestABridgedFlowCompletesWithAnswersLandingOnTheOtherReplica(t *testing.T) {
	px, _, _, _ := fleet(t, nil)
	g := &goClient{}
	cs := g.connect(t, px.URL+"/t/acme/mcp")
	defer cs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	text, err := onboard(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	wantOnboarded(t, text)
	holder := px.where("tools/call")
	answers := px.where("answer")
	if len(holder) != 1 || len(answers) != 4 {
		t.Fatalf("tools/call went to %v, answers to %v", holder, answers)
	}
	elsewhere := 0
	for _, r := range answers {
		if r != holder[0] {
			elsewhere++
		}
	}
	if elsewhere == 0 || elsewhere == len(answers) {
		t.Fatalf("answers went to %v, the stream was on %s: both paths (here and relayed) must be taken", answers, holder[0])
	}
	t.Logf("stream on %s; answers went to %v", holder[0], answers)
}

// killHolder returns what a client runs when it is first asked: it waits
// until the record shows the flow awaiting input, then kills the replica
// holding the call's stream, and says which it killed.
func killHolder(t *testing.T, px *proxy, a, b *replica) (kill func(), killed func() *replica) {
	var once sync.Once
	var dead *replica
	var mu sync.Mutex
	return func() {
			once.Do(func() {
				for deadline := time.Now().Add(30 * time.Second); len(px.where("tools/call")) == 0; time.Sleep(20 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Error("the call never reached a replica")
						return
					}
				}
				holder := a
				if px.where("tools/call")[0] == b.name {
					holder = b
				}
				other := a
				if holder == a {
					other = b
				}
				for deadline := time.Now().Add(10 * time.Second); len(waiting(other)) != 1; time.Sleep(20 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Error("the flow never showed as awaiting input")
						break
					}
				}
				holder.kill()
				mu.Lock()
				dead = holder
				mu.Unlock()
			})
		}, func() *replica {
			mu.Lock()
			defer mu.Unlock()
			return dead
		}
}

// handedOver checks what the fleet shows after the replica holding a
// call's stream was killed mid-question and the client resumed: the
// client resumed at the survivor, which took the call over; the backend
// saw exactly one delivery; the record shows the flow completed, once.
func handedOver(t *testing.T, px *proxy, survivor *replica, hook *backend) {
	t.Helper()
	if resumed := px.where("resume"); len(resumed) == 0 || resumed[len(resumed)-1] != survivor.name {
		t.Fatalf("the client resumed at %v; the survivor is %s", resumed, survivor.name)
	}
	if n, f := hook.count(), hook.finals(); n != 2 || f != 1 {
		t.Fatalf("the webhook was called %d times, %d of them final; want 2 and 1", n, f)
	}
	var flows []any
	testwait.Until(t, "the record shows the flow completed", func() bool {
		flows = admin(t, survivor.url, platformtest.AdminToken, "GET", "/api/v1/tenants/acme/flows", nil, 200)["items"].([]any)
		return len(flows) == 1 && flows[0].(map[string]any)["state"] == "completed"
	})
	if f := flows[0].(map[string]any); f["era"] != "2025-11-25" {
		t.Fatalf("flow %v", f)
	}
}

func TestKillingTheReplicaHoldingTheStreamHandsTheCallOver(t *testing.T) {
	px, a, b, hook := fleet(t, nil)
	g := &goClient{}
	cs := g.connect(t, px.URL+"/t/acme/mcp")
	defer cs.Close()
	// While the flow waits for the first answer, its stream's replica
	// dies; the client's answer, and its resumed stream, reach the other.
	kill, killed := killHolder(t, px, a, b)
	g.onAsk = func(string) { kill() }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	text, err := onboard(ctx, cs)
	if err != nil {
		t.Fatalf("the call did not survive its replica: %v", err)
	}
	wantOnboarded(t, text)
	survivor := a
	if killed() == a {
		survivor = b
	}
	handedOver(t, px, survivor, hook)
	// The session goes on at the survivor.
	text, err = onboard(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	wantOnboarded(t, text)
}

func TestTypeScriptSDKv1ClientResumesAtAnotherReplicaWhenItsStreamsReplicaDies(t *testing.T) {
	packages := nodeclient.Packages(t, "OPSMCP_TS_SDK", "v1")
	px, a, b, hook := fleet(t, nil)
	kill, killed := killHolder(t, px, a, b)
	go kill()
	// The client takes 3 s to answer the first question; meanwhile the
	// replica holding its call's stream is killed.
	out := nodeclient.Script(t, packages, "ts/client.mjs", px.URL+"/t/acme/mcp", "3000")
	var got struct {
		Error  string   `json:"error"`
		Asked  []string `json:"asked"`
		Result struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out, &got); err != nil || got.Error != "" || got.Result.IsError || len(got.Result.Content) != 1 {
		t.Fatalf("client saw %s (%v)", out, err)
	}
	wantOnboarded(t, got.Result.Content[0].Text)
	if strings.Join(got.Asked, ",") != "form,url,form" {
		t.Fatalf("asked %v: a question was asked twice or lost", got.Asked)
	}
	survivor := a
	if killed() == a {
		survivor = b
	}
	if killed() == nil {
		t.Fatal("no replica was killed")
	}
	handedOver(t, px, survivor, hook)
}
