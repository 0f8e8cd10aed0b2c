package fleet

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// replica is one `platform serve` process of the fleet.
type replica struct {
	name string
	port int
	// metricsPort serves /metrics apart (--metrics-listen), for
	// Prometheus.
	metricsPort int
	bin         string
	env         []string
	proc        *proc
	// starts counts the times it was started (a restart after SIGKILL
	// is the second).
	starts int
}

// replicaSettings are what every replica shares: one database, one
// Vault, one public URL (the load balancer's, which the sealed state's
// audience names), one admin token, one secrets key.
type replicaSettings struct {
	DatabaseURL    string
	PublicURL      string
	AdminToken     string
	SecretsKey     string
	VaultAddr      string
	VaultToken     string
	OTLPEndpoint   string
	TrustedProxies string
}

func newReplica(name, bin, home string, s replicaSettings) (*replica, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	metricsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	env := append(baseEnv(home),
		"PLATFORM_LISTEN="+fmt.Sprintf("127.0.0.1:%d", port),
		"PLATFORM_METRICS_LISTEN="+fmt.Sprintf("127.0.0.1:%d", metricsPort),
		"PLATFORM_PUBLIC_URL="+s.PublicURL,
		"PLATFORM_DATABASE_URL="+s.DatabaseURL,
		"PLATFORM_BOOTSTRAP_TOKEN="+s.AdminToken,
		"PLATFORM_SECRETS_KEYS="+s.SecretsKey,
		"PLATFORM_ALLOW_PRIVATE_TARGETS=true", // the tenant's webhook is the driver, on loopback
		"PLATFORM_TRUSTED_PROXIES="+s.TrustedProxies,
		"PLATFORM_REPLICA_NAME="+name,
		"PLATFORM_LOG_FORMAT=json",
		"PLATFORM_LOG_LEVEL=info",
		"PLATFORM_SHUTDOWN_TIMEOUT=10s",
		// Per-tenant rings in Vault; a short propagation margin (1 s
		// refresh + 1 s skew, all replicas on one clock) and a scheduler
		// pass every second, so a rotation's three phases fit in a short
		// run.
		"PLATFORM_KEYS_PROVIDER=vault",
		"PLATFORM_VAULT_ADDR="+s.VaultAddr,
		"PLATFORM_VAULT_TOKEN="+s.VaultToken,
		"PLATFORM_KEYS_REFRESH=1s",
		"PLATFORM_KEYS_CLOCK_SKEW=1s",
		"PLATFORM_KEYS_SCHEDULE_INTERVAL=1s",
		// Spans and metrics over OTLP/HTTP to the driver's receiver;
		// spans leave every 100 ms, so a SIGKILL loses little.
		"OTEL_EXPORTER_OTLP_ENDPOINT="+s.OTLPEndpoint,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_METRIC_EXPORT_INTERVAL=5000",
		// Spans name the replica as HAProxy and the flow record do.
		"OTEL_RESOURCE_ATTRIBUTES=service.instance.id="+name,
	)
	return &replica{name: name, port: port, metricsPort: metricsPort, bin: bin, env: env}, nil
}

// URL is the replica's own address (the driver's direct checks; clients
// go through the load balancer).
func (r *replica) URL() string { return fmt.Sprintf("http://127.0.0.1:%d", r.port) }

// start runs the replica and waits until it is ready.
func (r *replica) start(ctx context.Context, dir string) error {
	args := []string{"serve"}
	if r.proc == nil {
		p, err := startProc(dir, r.name, r.bin, args, r.env)
		if err != nil {
			return err
		}
		r.proc = p
	} else if err := r.proc.start(r.bin, args, r.env); err != nil {
		return err
	}
	r.starts++
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return waitHTTP(ctx, r.proc, r.URL()+"/readyz", 200)
}

// kill sends SIGKILL and waits for the process to be gone.
func (r *replica) kill() error {
	if err := r.proc.signal(syscall.SIGKILL); err != nil {
		return err
	}
	_ = r.proc.stop(syscall.SIGKILL, 10*time.Second)
	return nil
}

// stop drains and stops the replica (SIGTERM: in-flight requests end,
// the flow record and telemetry are flushed) and reports a dirty exit.
func (r *replica) stop() error {
	if r.proc == nil || !r.proc.running() {
		return nil
	}
	return r.proc.stop(syscall.SIGTERM, 20*time.Second)
}

// panics returns the log lines of every run of the replica that tell of
// a panic (a recovered one is logged too; none should happen).
func (r *replica) panics() []string {
	if r.proc == nil {
		return nil
	}
	f, err := os.Open(r.proc.logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.Contains(l, "panic") || strings.HasPrefix(l, "goroutine ") || strings.Contains(l, "fatal error:") {
			out = append(out, l)
		}
	}
	return out
}
