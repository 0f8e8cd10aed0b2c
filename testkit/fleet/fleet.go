package fleet

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opsmcp/platform/mcp"

	"github.com/opsmcp/platform/client"
)

// Config is one fleet run.
type Config struct {
	// Dir is the run's folder: logs, the database cluster, Vault's
	// storage, pid files. scripts/fleet makes it and removes it.
	Dir string
	// Binaries: the platform built from this repository, Vault (from
	// scripts/vault), the folder of PostgreSQL's initdb and pg_ctl, and
	// HAProxy, and Prometheus.
	PlatformBin, VaultBin, PGBin, HAProxyBin, PrometheusBin string
	// Dashboard is the Grafana dashboard whose queries are checked
	// against the fleet's Prometheus.
	Dashboard string
	// TSSDK is the folder holding the official TypeScript SDK v1's
	// node_modules (scripts/ts-sdk), for the legacy stream fault.
	TSSDK string
	// Duration is how long flows are driven. Faults come in cycles of
	// CycleLength (rotation, catalogue add, SIGKILL, Vault outage,
	// PostgreSQL outage, catalogue removal); a duration shorter than
	// one cycle runs one whole cycle.
	Duration time.Duration
	// Concurrency is the number of flows in flight at once.
	Concurrency int
	// RoundTimeout bounds every round: no answer within it is a hang.
	RoundTimeout time.Duration
	// Think is the mean pause between a flow's rounds (uniform from zero
	// to twice it): the client answering its questions.
	Think time.Duration
	// Outage is how long Vault and PostgreSQL stay down.
	Outage time.Duration
	// Log receives progress lines; Summary the one summary line.
	Log, Summary io.Writer
	// Machine describes the machine in the summary line.
	Machine string
}

// CycleLength is one cycle of faults.
const CycleLength = 45 * time.Second

const (
	tenantSlug = "fleet"
	// stateTTL is the fleet tenant's request-state lifetime: short, so a
	// rotation retires its old key (one TTL plus the margin after the
	// promotion) within a cycle.
	stateTTL = 10 * time.Second
	// lossWindow: what a replica answered this long before its SIGKILL
	// may not have reached the record or the OTLP receiver. Both flush
	// every 100 ms, but on a loaded machine a batch's write can lag: a
	// run on 2026-12-04 (p99 round 821 ms) lost a round answered 1.13 s
	// before the kill. Flows with such a round are exempt from those two
	// checks and counted apart (the summary says how many lost rounds).
	lossWindow = 2 * time.Second
	// killRead: an answer the killed replica wrote just before its
	// SIGKILL may reach the driver this long after the signal.
	killRead = 250 * time.Millisecond
	// pgGrace: rounds ending this long after PostgreSQL is back still
	// count as overlapping its outage.
	pgGrace = 2 * time.Second
)

// fleet is one run: the processes, the driver's servers, the timeline.
type fleet struct {
	cfg      Config
	pg       *postgres
	vault    *vaultServer
	replicas []*replica
	lb       *haproxy
	prom     *prometheus
	spans    *spanIndex
	hook     *backend
	admin    *admin
	servers  []*http.Server
	hookURL  string
	otlpURL  string
	eras     []Era
	tasks    *taskDriver

	mu       sync.Mutex
	flows    []*Flow
	tsCalls  []*tsCall
	timeline timeline
	extra    *extraItems
	extras   int
}

// timeline is every fault, as it happened.
type timeline struct {
	driveStart, driveEnd time.Time
	kills                []kill
	pgOutages            []window
	vaultOutages         []window
	rotations            []rotation
	catalogue            []catalogueChange
	restartChanges       []restartChange
	// propagation is, for every catalogue change and every replica, the
	// time from the change's commit (its admin call's answer) to the
	// replica serving it.
	propagation []time.Duration
	notes       []string // a fault that could not be applied
}

// restartChange is a catalogue change made as PostgreSQL came back, while
// the replicas' notification listeners reconnect: delivered says every
// replica served it before its cycle ended.
type restartChange struct {
	cycle     int
	committed time.Time
	delivered bool
	err       string
}

type kill struct {
	replica  string
	at, back time.Time // the SIGKILL; ready again after the restart
}

type window struct{ from, to time.Time }

type rotation struct {
	at           time.Time
	oldMinter    string
	newMinter    string
	phases       []string // distinct phases seen, in order
	oldRemaining bool     // the old key still in the ring at the end
	done         time.Time
}

type catalogueChange struct {
	name           string
	added, visible time.Time
	removed, gone  time.Time
	flows          int
}

// extraItems are the catalogue items one catalogue fault added: flows
// use the tool while it is active; its removal waits for them.
type extraItems struct {
	tool, prompt, resource string
	inFlight               sync.WaitGroup
	flows                  int
}

// Run starts the fleet, drives it, checks it, prints the summary line and
// stops everything. It returns an error naming every failed assertion.
func Run(ctx context.Context, cfg Config) (err error) {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.RoundTimeout <= 0 {
		cfg.RoundTimeout = 20 * time.Second
	}
	if cfg.Outage <= 0 {
		cfg.Outage = 4 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	fl := &fleet{cfg: cfg, spans: newSpanIndex(), hook: newBackend()}
	defer fl.shutdown()
	if err := fl.start(ctx); err != nil {
		return fmt.Errorf("starting the fleet: %w", err)
	}
	if err := fl.setup(ctx); err != nil {
		return fmt.Errorf("setting up the fleet tenant: %w", err)
	}
	fl.drive(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fl.check(ctx)
}

func (fl *fleet) logf(format string, args ...any) {
	fmt.Fprintf(fl.cfg.Log, "fleet: %s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// serve runs an in-process HTTP server of the driver on a loopback port.
func (fl *fleet) serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fl.servers = append(fl.servers, srv)
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

func secret(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// start brings up PostgreSQL, Vault, the OTLP receiver, the webhook,
// three replicas, HAProxy and Prometheus.
func (fl *fleet) start(ctx context.Context) error {
	dir := fl.cfg.Dir
	var err error
	if fl.otlpURL, err = fl.serve(fl.spans.receiver()); err != nil {
		return err
	}
	if fl.hookURL, err = fl.serve(fl.hook); err != nil {
		return err
	}
	if fl.pg, err = newPostgres(fl.cfg.PGBin, dir); err != nil {
		return err
	}
	fl.logf("PostgreSQL: initdb into %s, port %d", fl.pg.data, fl.pg.port)
	if err := fl.pg.init(ctx); err != nil {
		return err
	}
	if fl.vault, err = newVault(fl.cfg.VaultBin, dir); err != nil {
		return err
	}
	fl.logf("Vault: %s (file storage in %s)", fl.vault.URL(), fl.vault.dir)
	if err := fl.vault.start(ctx, dir); err != nil {
		return err
	}
	lbPort, err := freePort()
	if err != nil {
		return err
	}
	settings := replicaSettings{
		DatabaseURL:    fl.pg.URL(),
		PublicURL:      fmt.Sprintf("http://127.0.0.1:%d", lbPort),
		AdminToken:     "fleet-" + strings.NewReplacer("+", "a", "/", "b", "=", "").Replace(secret(30)),
		SecretsKey:     secret(32),
		VaultAddr:      fl.vault.URL(),
		VaultToken:     fl.vault.token,
		OTLPEndpoint:   fl.otlpURL,
		TrustedProxies: "127.0.0.1",
	}
	for i := 1; i <= 3; i++ {
		r, err := newReplica(fmt.Sprintf("r%d", i), fl.cfg.PlatformBin, filepath.Join(dir, "home"), settings)
		if err != nil {
			return err
		}
		fl.replicas = append(fl.replicas, r)
	}
	// All three at once, as a Deployment starts them: their migrations
	// race on one empty database.
	errs := make(chan error, len(fl.replicas))
	for _, r := range fl.replicas {
		go func() { errs <- r.start(ctx, dir) }()
	}
	for range fl.replicas {
		if err := <-errs; err != nil {
			return err
		}
	}
	fl.logf("replicas ready: %s", strings.Join(fl.replicaURLs(), " "))
	if fl.lb, err = newHAProxy(fl.cfg.HAProxyBin, dir, lbPort, fl.replicas); err != nil {
		return err
	}
	if err := fl.lb.start(ctx, dir); err != nil {
		return err
	}
	fl.logf("HAProxy: %s (round-robin over r1 r2 r3)", fl.lb.URL())
	fl.admin = &admin{base: fl.lb.URL(), token: settings.AdminToken, http: &http.Client{}}
	if fl.prom, err = newPrometheus(fl.cfg.PrometheusBin, dir, fl.replicas); err != nil {
		return err
	}
	if err := fl.prom.start(ctx, dir); err != nil {
		return err
	}
	fl.logf("Prometheus: %s (scraping each replica's metrics listener every %s)", fl.prom.URL(), scrapeInterval)
	return nil
}

func (fl *fleet) replicaURLs() []string {
	var out []string
	for _, r := range fl.replicas {
		out = append(out, r.name+"="+r.URL())
	}
	return out
}

// shutdown stops whatever still runs, in reverse order.
func (fl *fleet) shutdown() {
	_ = fl.prom.stop()
	if fl.lb != nil {
		_ = fl.lb.stop()
	}
	for _, r := range fl.replicas {
		_ = r.stop()
	}
	if fl.vault != nil {
		_ = fl.vault.stop()
	}
	if fl.pg != nil {
		fl.pg.close()
	}
	for _, s := range fl.servers {
		_ = s.Close()
	}
}

// setup creates the public fleet tenant and its tools, and runs one flow
// of each tool (which also gives the tenant its key ring).
func (fl *fleet) setup(ctx context.Context) error {
	if err := fl.admin.do(ctx, "POST", "/tenants", map[string]any{
		"slug": tenantSlug, "displayName": "Fleet test",
		"settings": map[string]any{"auth": map[string]any{"public": true}, "stateTtlSeconds": int(stateTTL / time.Second)},
	}, nil); err != nil {
		return err
	}
	for _, def := range []map[string]any{toolDefinition(orderTool, fl.hookURL), toolDefinition(quickTool, fl.hookURL),
		toolDefinition(deployTool, fl.hookURL), taskDefinition(fl.hookURL)} {
		if err := fl.addTool(ctx, def); err != nil {
			return err
		}
	}
	for _, tool := range []string{orderTool, quickTool, deployTool, taskTool} {
		if err := fl.servedEverywhere(ctx, "tool "+tool, time.Now(), time.Now().Add(30*time.Second), listed(tool)); err != nil {
			return err
		}
	}
	modern, err := newModernEra(fl.endpoint(), fl.cfg.Concurrency, fl.cfg.RoundTimeout, fl.cfg.Think)
	if err != nil {
		return err
	}
	fl.eras = append(fl.eras, modern, newLegacyEra(fl.endpoint(), fl.cfg.Concurrency, fl.cfg.RoundTimeout, fl.cfg.Think))
	if fl.tasks, err = newTaskDriver(fl.endpoint()); err != nil {
		return err
	}
	for _, era := range fl.eras {
		for _, tool := range []string{orderTool, quickTool, deployTool} {
			if tool == deployTool && era.Name() != mcp.Version {
				continue // driven in the 2026-07-28 era only (faults.go)
			}
			f := fl.newFlow(era, tool)
			era.Run(ctx, f)
			if !f.Completed {
				return fmt.Errorf("warm-up flow of %s (%s) failed: %s", tool, era.Name(), f.Failure.Detail)
			}
		}
	}
	fl.logf("tenant %q ready: tools %s, %s and %s (destructive), task tool %s, eras %s", tenantSlug, orderTool, quickTool, deployTool, taskTool, fl.eraNames())
	return nil
}

func (fl *fleet) eraNames() string {
	var n []string
	for _, e := range fl.eras {
		n = append(n, e.Name())
	}
	return strings.Join(n, ", ")
}

func (fl *fleet) endpoint() string { return fl.lb.URL() + "/t/" + tenantSlug + "/mcp" }

// addTool creates a tool (a toolDefinition or a taskDefinition) and
// gives the backend its webhook secret.
func (fl *fleet) addTool(ctx context.Context, def map[string]any) error {
	name := def["name"].(string)
	var out struct {
		WebhookSecret string `json:"webhookSecret"`
	}
	if err := fl.admin.do(ctx, "POST", "/tenants/"+tenantSlug+"/tools", def, &out); err != nil {
		return err
	}
	if out.WebhookSecret == "" {
		return errors.New("tool " + name + " created without a webhook secret")
	}
	fl.hook.setSecret(name, out.WebhookSecret)
	return nil
}

// servedEverywhere waits until every replica, asked directly every 10
// ms, lists tools that ok accepts, and records in the timeline how long
// each took after since (the change's commit); it gives up at deadline.
// The setup's changes are not recorded: the replicas have not loaded the
// tenant yet.
func (fl *fleet) servedEverywhere(ctx context.Context, what string, since, deadline time.Time, ok func([]client.Tool) bool) error {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	took := make([]time.Duration, len(fl.replicas))
	errs := make([]error, len(fl.replicas))
	var wg sync.WaitGroup
	for i, r := range fl.replicas {
		wg.Go(func() {
			c, err := client.New(r.URL()+"/t/"+tenantSlug+"/mcp", client.Options{})
			if err != nil {
				errs[i] = err
				return
			}
			for {
				tools, err := c.AllTools(ctx)
				if err == nil && ok(tools) {
					took[i] = time.Since(since)
					return
				}
				select {
				case <-ctx.Done():
					errs[i] = fmt.Errorf("%s: %s never served it (last: %v)", what, r.name, err)
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fl.mu.Lock()
	if !fl.timeline.driveStart.IsZero() {
		fl.timeline.propagation = append(fl.timeline.propagation, took...)
	}
	fl.mu.Unlock()
	return nil
}

// listed says whether tools holds the named tool.
func listed(name string) func([]client.Tool) bool {
	return func(tools []client.Tool) bool {
		return slices.ContainsFunc(tools, func(t client.Tool) bool { return t.Name == name })
	}
}

func (fl *fleet) newFlow(era Era, tool string) *Flow {
	return &Flow{
		Era: era.Name(), Tool: tool, Ref: "ref-" + randomHex(6), Who: "who-" + randomHex(4), Nonce: randomHex(8),
		TraceID: randomHex(16), Start: time.Now(),
	}
}
