package main

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
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Target names.
const (
	targetPublic = "platform-public"
	targetBearer = "platform-bearer"
	targetSDK    = "go-sdk"
	targetEcho   = "echo"
	// targetEchoHook is the echo that also calls the tool's webhook.
	targetEchoHook = "echo-webhook"
)

var allTargets = []string{targetPublic, targetBearer, targetSDK, targetEchoHook, targetEcho}

// beforeSuffix names a platform target built from -before's checkout.
const beforeSuffix = "@before"

// pprofEnv gives cmd/platform-pprof, and the harness's own server roles,
// the loopback address of their pprof listener (that command reads the
// same name).
const pprofEnv = "PEERS_PPROF_LISTEN"

// notes say what each target runs.
var notes = map[string]string{
	targetPublic:   "the platform binary (cmd/platform serve, SQLite, telemetry off, the memory limit of -memory-limit), tenant with settings.auth.public: round 1 gathers the tool's declared form input (InputRequiredResult, sealed requestState), round 2 verifies the state and calls the tenant's signed webhook in a separate process",
	targetBearer:   "the same, tenant trusting one OpenID issuer (ES256 access token on every round, verified against the issuer's JWKS; flows bound to the principal)",
	targetSDK:      "official Go SDK v1.8.0, StreamableHTTPHandler{Stateless, JSONResponse}: the tool in process returns InputRequests and a fixed requestState, the retry reads InputResponses; no auth, no sealing, no webhook",
	targetEcho:     "net/http + encoding/json answering the same two rounds with the same JSON shapes and checks (headers, fixed requestState, the answer): the ceiling",
	targetEchoHook: "the echo, whose round 2 also delivers the answer to the tool's webhook in the webhook process (a signed delivery over a keep-alive net/http client, its answer decoded), as the platform's does: the floor of any design that calls tools over HTTP; no sealing, auth or record",
}

// target is one server under load.
type target struct {
	Name string
	url  string
	// The processes whose CPU is read: the server and, for the
	// platform, the webhook backend.
	serverPID, hookPID string
	// pprofAddr serves the server's net/http/pprof, with -cpuprofile.
	pprofAddr string
	workers   []*worker
}

// worker is one of a target's concurrent clients.
type worker struct {
	flowClient
	lat      []time.Duration
	flows    int
	errs     int
	firstErr error
}

// harness owns a run's processes and directory.
type harness struct {
	opts     options
	dir      string
	children []*child
	issuer   *issuer
	targets  []*target
	admin    *http.Client
}

// setup builds the platform, starts every process the selected targets
// need, registers the tenants and their tool, and mints the tokens.
func setup(ctx context.Context, o options, progress io.Writer) (h *harness, err error) {
	h = &harness{opts: o, admin: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}}}
	defer func() {
		if err != nil {
			h.close()
			h = nil
		}
	}()
	if h.dir, err = os.MkdirTemp("", "peers-"); err != nil {
		return h, err
	}
	self, err := os.Executable()
	if err != nil {
		return h, err
	}
	want := map[string]bool{}
	for _, n := range o.targets {
		want[n] = true
	}
	byName := map[string]*target{}

	var hook *child
	var hookAddr string
	if want[targetPublic] || want[targetBearer] || want[targetEchoHook] {
		if hook, hookAddr, err = h.start("webhook", self, nil, roleEnvFor(roleWebhook), true); err != nil {
			return h, err
		}
	}
	if want[targetPublic] || want[targetBearer] {
		if want[targetBearer] {
			if h.issuer, err = startIssuer(); err != nil {
				return h, err
			}
		}
		if err := h.setupPlatform(ctx, "", o.repo, o.benchDir, hook, hookAddr, want, byName, progress); err != nil {
			return h, err
		}
		if o.before != "" {
			if err := h.setupPlatform(ctx, beforeSuffix, o.before, filepath.Join(o.before, "bench", "peers"), hook, hookAddr, want, byName, progress); err != nil {
				return h, err
			}
		}
	}
	for _, role := range []string{roleSDK, roleEchoHook, roleEcho} {
		if !want[role] {
			continue
		}
		env := roleEnvFor(role)
		var pprofAddr string
		if o.cpuProfile != "" {
			if pprofAddr, err = freePort(); err != nil {
				return h, err
			}
			env = append(env, pprofEnv+"="+pprofAddr)
		}
		c, addr, err := h.start(role, self, nil, env, true)
		if err != nil {
			return h, err
		}
		tg := &target{Name: role, url: "http://" + addr + "/mcp", serverPID: strconv.Itoa(c.pid()), pprofAddr: pprofAddr}
		if role == roleEchoHook {
			// One secret, handed to both ends on their standard input.
			secret := randomToken()
			if err := hook.hand(secretLine{Path: echoHookPath, Secret: secret}); err != nil {
				return h, err
			}
			if err := c.hand(secretLine{Path: "http://" + hookAddr + echoHookPath, Secret: secret}); err != nil {
				return h, err
			}
			tg.hookPID = strconv.Itoa(hook.pid())
		}
		for range o.concurrency {
			tg.workers = append(tg.workers, &worker{})
		}
		byName[role] = tg
	}
	for _, n := range o.targets {
		t := byName[n]
		// One keep-alive pool per target, big enough that no worker waits
		// for a connection or dials a new one mid-run.
		tr := &http.Transport{Proxy: nil, MaxIdleConns: 4 * o.concurrency, MaxIdleConnsPerHost: 2 * o.concurrency,
			IdleConnTimeout: 5 * time.Minute, DisableCompression: true}
		for _, w := range t.workers {
			w.http, w.url = &http.Client{Transport: tr, Timeout: 30 * time.Second}, t.url
		}
		h.targets = append(h.targets, t)
	}
	return h, nil
}

// setupPlatform builds the platform from repo (the pprof variant from
// benchDir, with -cpuprofile), starts it and registers the tenants of
// the wanted platform targets named with suffix, their tools on the
// shared webhook under paths with the suffix.
func (h *harness) setupPlatform(ctx context.Context, suffix, repo, benchDir string, hook *child, hookAddr string, want map[string]bool, byName map[string]*target, progress io.Writer) error {
	o := h.opts
	name := "platform" + suffix
	bin := filepath.Join(h.dir, name)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/platform")
	build.Dir = repo
	if o.cpuProfile != "" {
		build = exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/platform-pprof")
		build.Dir = benchDir
	}
	fmt.Fprintf(progress, "building %s in %s\n", build.Args[len(build.Args)-1], build.Dir)
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	base, plat, pprofAddr, token, err := h.startPlatform(name, bin)
	if err != nil {
		return err
	}
	hookURL := "http://" + hookAddr
	for _, t := range []struct {
		name, slug, path string
		auth             map[string]any
	}{
		{targetPublic, "bench-public", publicHookPath, map[string]any{"public": true}},
		{targetBearer, "bench-bearer", bearerHookPath, nil},
	} {
		t.name += suffix
		t.path += strings.TrimPrefix(suffix, "@")
		if !want[t.name] {
			continue
		}
		url := base + "/t/" + t.slug + "/mcp"
		auth := t.auth
		if auth == nil {
			auth = map[string]any{"issuers": []any{map[string]any{"issuer": h.issuer.URL,
				"audiences": []string{url}, "algorithms": []string{"ES256"}}}}
		}
		if _, err := h.adminPost(base, token, "/api/v1/tenants", map[string]any{"slug": t.slug,
			"displayName": "peer benchmark " + t.name, "settings": map[string]any{"auth": auth}}); err != nil {
			return err
		}
		tool, err := h.adminPost(base, token, "/api/v1/tenants/"+t.slug+"/tools", map[string]any{
			"name": toolName, "description": "Asks for confirmation, then calls its webhook",
			"inputSchema": map[string]any{"type": "object"},
			"handler":     map[string]any{"url": hookURL + t.path, "timeoutMs": 5000},
			"inputs": []any{map[string]any{"name": inputKey, "kind": "form", "message": question,
				"requestedSchema": requestedSchema()}}})
		if err != nil {
			return err
		}
		secret, _ := tool["webhookSecret"].(string)
		if secret == "" {
			return errors.New("registering the tool: no webhookSecret in the answer")
		}
		if err := hook.hand(secretLine{Path: t.path, Secret: secret}); err != nil {
			return err
		}
		tg := &target{Name: t.name, url: url, serverPID: strconv.Itoa(plat.pid()), hookPID: strconv.Itoa(hook.pid()), pprofAddr: pprofAddr}
		for i := range o.concurrency {
			w := &worker{}
			if strings.HasPrefix(t.name, targetBearer) {
				ttl := time.Hour + time.Duration(o.rounds+2)*(o.trial+o.warmup)*time.Duration(len(o.targets))
				if w.token, err = h.issuer.token(fmt.Sprintf("peers-user-%d", i), url, ttl); err != nil {
					return err
				}
			}
			tg.workers = append(tg.workers, w)
		}
		byName[t.name] = tg
	}
	return nil
}

func roleEnvFor(role string) []string {
	return append(os.Environ(), roleEnv+"="+role)
}

func (h *harness) start(name, path string, args, env []string, readAddr bool) (*child, string, error) {
	c, addr, err := startChild(name, h.dir, path, args, env, readAddr)
	if err != nil {
		return nil, "", err
	}
	h.children = append(h.children, c)
	return c, addr, nil
}

// startPlatform starts the platform binary on a free loopback port with
// SQLite in the run's directory and telemetry off, and waits until it is
// ready. It returns its base URL, the process, its pprof address (with
// -cpuprofile) and the admin token.
func (h *harness) startPlatform(name, bin string) (base string, c *child, pprofAddr, token string, err error) {
	addr, err := freePort()
	if err != nil {
		return "", nil, "", "", err
	}
	token = randomToken()
	env := []string{}
	for _, kv := range os.Environ() {
		// The developer's own platform, OpenTelemetry and collector
		// settings stay out: -memory-limit decides the collector.
		if !strings.HasPrefix(kv, "PLATFORM_") && !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, roleEnv+"=") &&
			!strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "GOMEMLIMIT=") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"PLATFORM_LISTEN="+addr,
		"PLATFORM_DATABASE_URL=sqlite:"+filepath.Join(h.dir, name+".db"),
		"PLATFORM_BOOTSTRAP_TOKEN="+token,
		"PLATFORM_ALLOW_PRIVATE_WEBHOOKS=true",
		"PLATFORM_ALLOW_PRIVATE_TARGETS=true",
		"PLATFORM_METRICS=false",
		"PLATFORM_LOG_LEVEL=warn",
		"PLATFORM_LOG_FORMAT=json",
	)
	if h.opts.memoryLimit > 0 {
		env = append(env, "PLATFORM_MEMORY_LIMIT_BYTES="+strconv.FormatInt(h.opts.memoryLimit, 10))
	}
	if h.opts.cpuProfile != "" {
		if pprofAddr, err = freePort(); err != nil {
			return "", nil, "", "", err
		}
		env = append(env, pprofEnv+"="+pprofAddr)
	}
	if c, _, err = h.start(name, bin, []string{"serve"}, env, false); err != nil {
		return "", nil, "", "", err
	}
	base = "http://" + addr
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := h.admin.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base, c, pprofAddr, token, nil
			}
		}
		if !c.alive() || time.Now().After(deadline) {
			return "", nil, "", "", fmt.Errorf("the platform did not become ready: %s", c.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// adminPost calls the platform's admin API; 201 with a JSON object is
// success.
func (h *harness) adminPost(base, token, path string, body any) (map[string]any, error) {
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.admin.Do(req)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusCreated {
		return nil, fmt.Errorf("POST %s: HTTP %d: %s", path, resp.StatusCode, snippet(out))
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("POST %s: %w", path, err)
	}
	return m, nil
}

// close stops every process and removes the run's directory.
func (h *harness) close() {
	for i := len(h.children) - 1; i >= 0; i-- {
		h.children[i].stop()
	}
	if h.issuer != nil {
		h.issuer.close()
	}
	for _, t := range h.targets {
		if len(t.workers) > 0 {
			t.workers[0].http.CloseIdleConnections()
		}
	}
	if h.dir != "" && !h.opts.keep {
		_ = os.RemoveAll(h.dir)
	}
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// findModules finds the platform's repository root and this module's
// directory, walking up from the working directory.
func findModules() (repo, bench string, err error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			first, _, _ := strings.Cut(string(b), "\n")
			switch strings.TrimSpace(first) {
			case "module github.com/opsmcp/platform/bench/peers":
				bench = d
			case "module github.com/opsmcp/platform":
				if bench == "" {
					return "", "", fmt.Errorf("run from bench/peers (found the platform's module at %s first)", d)
				}
				return d, bench, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", "", fmt.Errorf("%s is not inside the platform's bench/peers module", dir)
		}
	}
}
