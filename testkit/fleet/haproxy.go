package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ReplicaHeader is the response header HAProxy adds naming the replica
// (its server name, r1…r3) that answered; the driver attributes each
// round by it. HAProxy's own error answers carry it too when a server had
// been chosen.
const ReplicaHeader = "X-Fleet-Replica"

// haproxy is the fleet's load balancer: Debian's HAProxy, round-robin per
// request (HTTP mode balances every request, keep-alive or not), no
// stickiness of any kind. Its health checks mirror the Helm chart's
// readiness probe (GET /readyz every 5 s, out after 2 failures), so a
// few seconds of database outage take no replica out, as in Kubernetes.
// A connection refused (a killed replica) is retried on another replica
// (retries + redispatch): the request was never sent, so that is safe;
// a request a replica dies while answering is not retried (it may have
// had effects) and the client gets 502, or, on a kept-alive client
// connection, the connection closed without an answer (HAProxy leaves
// the retry to the client). http-no-delay passes each event of a
// legacy call's stream on at once: without it HAProxy held them, about
// 40 ms each, and a bridged round waited as long.
type haproxy struct {
	bin  string
	cfg  string
	port int
	proc *proc
}

// haproxyCheckInterval is the health checks' interval: the chart's
// readiness probe period.
const haproxyCheckInterval = 5 * time.Second

// newHAProxy writes the configuration for a balancer on port (chosen
// before the replicas start: their public URL names it).
func newHAProxy(bin, dir string, port int, replicas []*replica) (*haproxy, error) {
	h := &haproxy{bin: bin, cfg: filepath.Join(dir, "haproxy.cfg"), port: port}
	var servers strings.Builder
	for _, r := range replicas {
		fmt.Fprintf(&servers, "  server %s 127.0.0.1:%d check inter %s fall 2 rise 1\n", r.name, r.port, haproxyCheckInterval)
	}
	cfg := fmt.Sprintf(`global
  maxconn 4096

defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  timeout http-request 10s
  timeout http-keep-alive 30s
  retries 3
  option redispatch 1
  option forwardfor
  option http-no-delay

frontend mcp
  bind 127.0.0.1:%d
  default_backend platform

backend platform
  balance roundrobin
  option httpchk GET /readyz
  http-check expect status 200
  http-after-response set-header %s %%s
%s`, port, ReplicaHeader, servers.String())
	return h, os.WriteFile(h.cfg, []byte(cfg), 0o644)
}

// URL is the fleet's one public address.
func (h *haproxy) URL() string { return fmt.Sprintf("http://127.0.0.1:%d", h.port) }

func (h *haproxy) start(ctx context.Context, dir string) error {
	p, err := startProc(dir, "haproxy", h.bin, []string{"-f", h.cfg, "-db"}, baseEnv(dir))
	if err != nil {
		return err
	}
	h.proc = p
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return waitHTTP(ctx, p, h.URL()+"/healthz", 200)
}

func (h *haproxy) stop() error {
	if h.proc == nil {
		return nil
	}
	return h.proc.stop(syscall.SIGTERM, 10*time.Second)
}
