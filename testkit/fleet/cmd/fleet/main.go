// Command fleet is the fleet test's driver (run it through
// scripts/fleet, which builds the binaries, installs HAProxy and cleans
// up): three platform replicas behind HAProxy on their own PostgreSQL
// and Vault, flows of every protocol era driven through them while
// faults are applied, and the assertions of package fleet. It prints one
// summary line on stdout and exits 1 when an assertion fails.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/opsmcp/platform/testkit/fleet"
)

func main() {
	var cfg fleet.Config
	flag.StringVar(&cfg.Dir, "dir", "", "the run's folder (required; scripts/fleet makes a temporary one)")
	flag.StringVar(&cfg.PlatformBin, "platform", "", "platform binary built from this repository (required)")
	flag.StringVar(&cfg.VaultBin, "vault", "", "Vault binary, from scripts/vault (required)")
	flag.StringVar(&cfg.PGBin, "pg-bin", "", "folder of PostgreSQL's initdb, pg_ctl and psql (required)")
	flag.StringVar(&cfg.HAProxyBin, "haproxy", "haproxy", "HAProxy binary")
	flag.StringVar(&cfg.PrometheusBin, "prometheus", "prometheus", "Prometheus binary")
	flag.StringVar(&cfg.Dashboard, "dashboard", "helm/opsmcp/dashboards/opsmcp.json", "the Grafana dashboard whose queries are checked against the fleet's Prometheus")
	flag.DurationVar(&cfg.Duration, "duration", fleet.CycleLength, fmt.Sprintf("how long flows are driven; faults come in cycles of %s", fleet.CycleLength))
	flag.IntVar(&cfg.Concurrency, "concurrency", 8, "flows in flight at once")
	flag.DurationVar(&cfg.Think, "think", 25*time.Millisecond, "mean pause between a flow's rounds (the client answering)")
	flag.DurationVar(&cfg.Outage, "outage", 4*time.Second, "how long Vault and PostgreSQL stay down")
	flag.DurationVar(&cfg.RoundTimeout, "round-timeout", 20*time.Second, "longest a round may take before it counts as a hang")
	flag.StringVar(&cfg.TSSDK, "ts-sdk", os.Getenv("OPSMCP_TS_SDK"), "folder of the official TypeScript SDK v1's node_modules, from scripts/ts-sdk (the legacy stream fault needs it)")
	flag.StringVar(&cfg.Machine, "machine", fmt.Sprintf("%d cores", runtime.NumCPU()), "the machine, for the summary line")
	flag.Parse()
	if cfg.Dir == "" || cfg.PlatformBin == "" || cfg.VaultBin == "" || cfg.PGBin == "" {
		fmt.Fprintln(os.Stderr, "fleet: --dir, --platform, --vault and --pg-bin are required (run ./scripts/fleet)")
		os.Exit(2)
	}
	cfg.Log, cfg.Summary = os.Stderr, os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A watchdog: whatever goes wrong, the run ends (and cleans up).
	ctx, cancel := context.WithTimeout(ctx, max(cfg.Duration, fleet.CycleLength)+15*time.Minute)
	defer cancel()
	if err := fleet.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "fleet: FAIL:", err)
		cancel()
		stop()
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "fleet: PASS")
}
