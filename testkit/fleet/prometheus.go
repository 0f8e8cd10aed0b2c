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

// prometheusJob is the scrape job the replicas are in: the dashboard's
// $job variable picks it.
const prometheusJob = "opsmcp"

// scrapeInterval is how often Prometheus scrapes each replica: often, so
// a short run has many samples.
const scrapeInterval = time.Second

// prometheus is Debian's Prometheus, scraping each replica's metrics
// listener (--metrics-listen, apart from the MCP port, as the Helm
// chart's ServiceMonitor does), so the Grafana dashboard's queries run
// against what the fleet exported (dashboard.go).
type prometheus struct {
	bin, cfg, data string
	port           int
	proc           *proc
}

// newPrometheus writes the configuration for a Prometheus scraping the
// replicas.
func newPrometheus(bin, dir string, replicas []*replica) (*prometheus, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &prometheus{bin: bin, cfg: filepath.Join(dir, "prometheus.yml"), data: filepath.Join(dir, "prometheus"), port: port}
	var targets []string
	for _, r := range replicas {
		targets = append(targets, fmt.Sprintf("'127.0.0.1:%d'", r.metricsPort))
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: %s
  evaluation_interval: %s
scrape_configs:
  - job_name: %s
    static_configs:
      - targets: [%s]
`, scrapeInterval, scrapeInterval, prometheusJob, strings.Join(targets, ", "))
	return p, os.WriteFile(p.cfg, []byte(cfg), 0o644)
}

// URL is its HTTP API's address.
func (p *prometheus) URL() string { return fmt.Sprintf("http://127.0.0.1:%d", p.port) }

func (p *prometheus) start(ctx context.Context, dir string) error {
	pr, err := startProc(dir, "prometheus", p.bin, []string{
		"--config.file=" + p.cfg, "--storage.tsdb.path=" + p.data,
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", p.port),
	}, baseEnv(dir))
	if err != nil {
		return err
	}
	p.proc = pr
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return waitHTTP(ctx, pr, p.URL()+"/-/ready", 200)
}

func (p *prometheus) stop() error {
	if p == nil || p.proc == nil {
		return nil
	}
	return p.proc.stop(syscall.SIGTERM, 10*time.Second)
}
