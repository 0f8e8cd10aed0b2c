// Command peers is the peer benchmark: one raw-HTTP load client drives
// two-round flows (tools/call → InputRequiredResult → the answered retry
// → the result) at a fixed concurrency against the platform (a public
// tenant and a tenant with an OpenID issuer, the tool's webhook in a
// separate process), the official Go SDK's stateless server doing the
// same flow in process, and a bare net/http + encoding/json echo of the
// same two rounds. Each runs as its own process; targets take turns, a
// trial each per round, and the table gives each target's median
// flows/s, round latency percentiles and server CPU per flow, read from
// /proc, and the ratios between them.
//
// Run it with ./scripts/bench-peers [flags] from the repository root.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	rounds      int
	trial       time.Duration
	warmup      time.Duration
	concurrency int
	targets     []string
	json        bool
	cpuProfile  string
	keep        bool
	repo        string
	benchDir    string
	// before is a checkout of an earlier platform (-before): its
	// platform targets run beside the current ones, as NAME@before.
	before string
	// memoryLimit is the platform's PLATFORM_MEMORY_LIMIT_BYTES (0: none).
	memoryLimit int64
}

// chartMemoryLimit is the Helm chart's default memory limit (512Mi),
// which the chart hands the platform as PLATFORM_MEMORY_LIMIT_BYTES.
const chartMemoryLimit = 512 << 20

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench-peers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.rounds, "rounds", 5, "rounds: each target gets one trial per round, targets taking turns")
	fs.DurationVar(&o.trial, "trial", 5*time.Second, "length of one trial")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured load on each target before the first round")
	fs.IntVar(&o.concurrency, "c", 16, "concurrent flows (workers) per target")
	targets := fs.String("targets", strings.Join(allTargets, ","), "targets to run, in this order")
	fs.BoolVar(&o.json, "json", false, "print the results as JSON")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "directory: serve net/http/pprof from every server (the platform as the pprof variant, bench/peers/cmd/platform-pprof) and, after the rounds, write there a CPU profile of each target's server during one more trial")
	fs.BoolVar(&o.keep, "keep", false, "keep the run's directory (the processes' logs, the database)")
	fs.StringVar(&o.before, "before", "", "directory: a checkout of an earlier platform (git worktree add DIR REV); each platform target also runs as built from it, as NAME"+beforeSuffix+", its own process and database on the same webhook, taking turns with the rest, for interleaved before-and-after figures")
	fs.Int64Var(&o.memoryLimit, "memory-limit", chartMemoryLimit, "PLATFORM_MEMORY_LIMIT_BYTES of every platform target, as the Helm chart's default limit gives it (0: not given, and a platform reads its cgroup's limit, if any); GOGC and GOMEMLIMIT never reach the platforms")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: ./scripts/bench-peers [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.rounds < 1 || o.trial <= 0 || o.warmup < 0 || o.concurrency < 1 || o.memoryLimit < 0 {
		return o, errors.New("-rounds, -trial and -c must be positive, -warmup and -memory-limit not negative")
	}
	seen := map[string]bool{}
	for _, n := range strings.Split(*targets, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if _, ok := notes[n]; !ok {
			return o, fmt.Errorf("unknown target %q (targets: %s)", n, strings.Join(allTargets, ", "))
		}
		if !seen[n] {
			seen[n] = true
			o.targets = append(o.targets, n)
		}
	}
	if len(o.targets) == 0 {
		return o, errors.New("no targets")
	}
	if o.before != "" {
		var err error
		if o.before, err = filepath.Abs(o.before); err != nil {
			return o, err
		}
		if _, err := os.Stat(filepath.Join(o.before, "cmd", "platform")); err != nil {
			return o, fmt.Errorf("-before %s: not a checkout of the platform: %w", o.before, err)
		}
		var with []string
		for _, n := range o.targets {
			with = append(with, n)
			if n == targetPublic || n == targetBearer {
				with = append(with, n+beforeSuffix)
			}
		}
		o.targets = with
	}
	if o.cpuProfile != "" {
		var err error
		if o.cpuProfile, err = filepath.Abs(o.cpuProfile); err != nil {
			return o, err
		}
		if err := os.MkdirAll(o.cpuProfile, 0o755); err != nil {
			return o, err
		}
	}
	var err error
	o.repo, o.benchDir, err = findModules()
	return o, err
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench-peers:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench(ctx, o, stderr)
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "bench-peers: interrupted")
		return 1
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench-peers:", err)
		return 1
	}
	if o.json {
		err = rep.writeJSON(stdout)
	} else {
		rep.writeText(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench-peers:", err)
		return 1
	}
	return 0
}

// bench runs the whole benchmark: setup, then measure.
func bench(ctx context.Context, o options, progress io.Writer) (*report, error) {
	m := describeMachine(o.repo)
	if o.before != "" {
		m.Before = commitOf(o.before)
	}
	h, err := setup(ctx, o, progress)
	if err != nil {
		return nil, err
	}
	defer h.close()
	if o.keep {
		fmt.Fprintln(progress, "keeping the run's directory:", h.dir)
	}
	return measure(ctx, h, m, progress)
}

// measure runs a sanity flow and a warm-up per target, the interleaved
// rounds, and profiling if asked for.
func measure(ctx context.Context, h *harness, m machine, progress io.Writer) (*report, error) {
	o := h.opts
	for _, t := range h.targets {
		var lat []time.Duration
		if err := t.workers[0].flow(&lat); err != nil {
			return nil, fmt.Errorf("%s: the first flow failed: %w", t.Name, err)
		}
		if o.warmup > 0 {
			fmt.Fprintf(progress, "warming up %s for %s\n", t.Name, o.warmup)
			if _, err := trial(ctx, t, o.warmup); err != nil {
				return nil, err
			}
		}
	}
	rep := &report{Machine: m, Concurrency: o.concurrency, Rounds: o.rounds, TrialSeconds: o.trial.Seconds(),
		ClockTicks: clockTicks, Profiled: o.cpuProfile != "", MemoryLimit: o.memoryLimit}
	for round := 1; round <= o.rounds; round++ {
		// Each round starts one target later, and even rounds run the
		// targets in reverse: a target that follows another in one round
		// precedes it in the next, so neither always inherits the other's
		// leftover work (the record's last batch, a checkpoint, a GC),
		// as NAME@before would, always right after NAME.
		n := len(h.targets)
		for i := range n {
			k := (i + round - 1) % n
			if round%2 == 0 {
				k = (n - 1 - i + round - 1) % n
			}
			t := h.targets[k]
			r, err := trial(ctx, t, o.trial)
			if err != nil {
				return nil, err
			}
			r.Round = round
			fmt.Fprintf(progress, "round %d/%d %-16s %8.0f flows/s  server %6.0f µs/flow  errors %d\n",
				round, o.rounds, t.Name, r.FlowsPerSec, r.ServerCPU, r.Errors)
			rep.Trials = append(rep.Trials, r)
		}
	}
	if o.cpuProfile != "" {
		for _, t := range h.targets {
			path := filepath.Join(o.cpuProfile, t.Name+".pprof")
			fmt.Fprintf(progress, "profiling %s for %s into %s\n", t.Name, o.trial, path)
			r, err := profileTrial(ctx, t, o.trial, path)
			if err != nil {
				return nil, fmt.Errorf("profiling %s: %w", t.Name, err)
			}
			rep.Profiles = append(rep.Profiles, profile{Target: t.Name, Path: path, FlowsPerSec: r.FlowsPerSec, ServerCPU: r.ServerCPU})
		}
	}
	for _, c := range h.children {
		if !c.alive() {
			return nil, fmt.Errorf("%s died during the run: %s", c.name, c.logTail())
		}
	}
	rep.Machine.LoadAfter = loadAverage()
	peak := map[string]int64{}
	for _, t := range h.targets {
		if n, err := peakRSS(t.serverPID); err == nil {
			peak[t.Name] = n
		}
	}
	rep.summarize(o.targets, peak)
	return rep, nil
}
