// Command conformance runs the official MCP conformance suite against a
// platform it starts in-process, with the conformance tenant registered
// through the admin API and answered by the conformance webhook backend.
// It prints one line per scenario and a last line "N passed, N failed",
// and exits non-zero on any failure. scripts/conformance installs the
// suite and Node 22 and then runs this. With --client it runs the client
// scenarios against testkit/conformance/client instead.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/server"
	"github.com/opsmcp/platform/testkit/conformance"
)

func main() {
	node := flag.String("node", "", "path to the Node.js 22 binary")
	cli := flag.String("cli", "", "path to the conformance suite's dist/index.js")
	mrtrOnly := flag.Bool("mrtr", false, "run only the input-required-result-* scenarios")
	tasksOnly := flag.Bool("tasks", false, "run only the tasks-* scenarios (the Tasks extension)")
	scenario := flag.String("scenario", "", "run only this scenario")
	verbose := flag.Bool("verbose", false, "print every check of failing scenarios")
	keep := flag.String("out", "", "keep the suite's results in this folder")
	clientMode := flag.Bool("client", false, "run the client scenarios against the Go client instead")
	legacyMode := flag.Bool("legacy", false, "run the 2025-11-25 requirement set (initialization-era clients) against the same tenant URL")
	flag.Parse()
	if *node == "" || *cli == "" {
		fmt.Fprintln(os.Stderr, "conformance: --node and --cli are required")
		os.Exit(2)
	}
	if *clientMode {
		os.Exit(runClient(*node, *cli, *scenario, *verbose, *keep))
	}
	if *legacyMode {
		os.Exit(runLegacy(*node, *cli, *verbose, *keep))
	}
	os.Exit(run(*node, *cli, *mrtrOnly, *tasksOnly, *scenario, *verbose, *keep))
}

// runner is one run of the suite: where its results go, and the tally of
// its scenarios. Every mode (server, client, legacy) prints one line per
// scenario and a last line "N passed, N failed".
type runner struct {
	work, out             string
	verbose               bool
	passed, failed, skips int
	stop                  func() // the platform under test, when started
}

// newRunner makes a run's work folder; results go under keep when set
// (and are kept), else under the work folder (removed by close).
func newRunner(verbose bool, keep string) (*runner, error) {
	work, err := os.MkdirTemp("", "conformance-")
	if err != nil {
		return nil, err
	}
	r := &runner{work: work, out: keep, verbose: verbose}
	if r.out == "" {
		r.out = filepath.Join(work, "results")
	}
	return r, nil
}

func (r *runner) close() {
	if r.stop != nil {
		r.stop()
	}
	os.RemoveAll(r.work)
}

// serverRun starts a run of server scenarios and the platform under
// test, and returns the run (close stops the platform too) and the
// platform's URL; nil, after saying why, when either fails.
func serverRun(verbose bool, keep string) (*runner, string) {
	r, err := newRunner(verbose, keep)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return nil, ""
	}
	platformURL, stop, err := start(r.work)
	if err != nil {
		r.close()
		fmt.Fprintln(os.Stderr, "conformance: start:", err)
		return nil, ""
	}
	r.stop = stop
	return r, platformURL
}

// judge reads the checks the suite wrote under dir and prints the
// scenario's line: it passes with checks, no failure and a clean exit
// (runErr nil; ignored when exitMatters is false), and no warning when
// warningsFail. log is the suite's output, printed for a failure with no
// checks or when verbose.
func (r *runner) judge(name, dir string, runErr error, exitMatters, warningsFail bool, log []byte) {
	checks := readChecks(dir)
	var fails, warns []string
	for _, c := range checks {
		switch c.Status {
		case "FAILURE":
			fails = append(fails, c.ID+": "+firstLine(c.ErrorMessage))
		case "WARNING":
			if warningsFail {
				fails = append(fails, c.ID+" (warning): "+firstLine(c.ErrorMessage))
			} else {
				warns = append(warns, c.ID)
			}
		}
	}
	if (runErr == nil || !exitMatters) && len(fails) == 0 && len(checks) > 0 {
		r.passed++
		line := fmt.Sprintf("PASS %s (%d checks)", name, len(checks))
		if len(warns) > 0 {
			line += " warnings: " + strings.Join(warns, ", ")
		}
		fmt.Println(line)
		return
	}
	r.failed++
	if len(fails) == 0 {
		fails = append(fails, fmt.Sprintf("the suite exited with %v and %d checks", runErr, len(checks)))
	}
	fmt.Printf("FAIL %s: %s\n", name, strings.Join(fails, "; "))
	if log != nil && (r.verbose || len(checks) == 0) {
		fmt.Println(indent(string(log)))
	}
}

// skipped judges a scenario the suite always skips: it passes when the
// suite ran it and reported it skipped, and no check failed.
func (r *runner) skipped(name, dir string, runErr error, log []byte) {
	checks := readChecks(dir)
	ok := runErr == nil && len(checks) > 0
	for _, c := range checks {
		if c.Status != "SKIPPED" && c.Status != "SUCCESS" && c.Status != "INFO" {
			ok = false
		}
	}
	if ok {
		r.skips++
		fmt.Printf("SKIP %s (the suite always skips it)\n", name)
		return
	}
	r.judge(name, dir, runErr, true, false, log)
}

// summary prints the last line and returns the exit code.
func (r *runner) summary(suffix string) int {
	if r.skips > 0 {
		suffix = fmt.Sprintf(", %d skipped by the suite", r.skips) + suffix
	}
	fmt.Printf("%d passed, %d failed%s\n", r.passed, r.failed, suffix)
	if r.failed > 0 {
		return 1
	}
	return 0
}

// run runs the 2026-07-28 server scenarios against the conformance
// tenant.
func run(node, cli string, mrtrOnly, tasksOnly bool, only string, verbose bool, keep string) int {
	r, platformURL := serverRun(verbose, keep)
	if r == nil {
		return 1
	}
	defer r.close()
	endpoint := platformURL + "/t/conformance/mcp"

	scenarios := append(append(append([]string{}, conformance.ServerScenarios...), conformance.MRTRScenarios...), conformance.TaskScenarios...)
	switch {
	case mrtrOnly:
		scenarios = conformance.MRTRScenarios
	case tasksOnly:
		scenarios = conformance.TaskScenarios
	}
	if only != "" {
		scenarios = []string{only}
	}
	for _, sc := range scenarios {
		dir := filepath.Join(r.out, sc)
		url := endpoint
		if strings.HasPrefix(sc, "tasks-") {
			url = platformURL + "/t/" + conformance.TasksTenant("conformance") + "/mcp"
		}
		args := []string{cli, "server", "--url", url, "--scenario", sc, "-o", dir}
		if !strings.HasPrefix(sc, "tasks-") {
			// An extension's scenarios are off the spec's timeline: named
			// with a spec version, the suite skips them.
			args = append(args, "--spec-version", "2026-07-28")
		}
		log, runErr := exec.Command(node, args...).CombinedOutput()
		if conformance.SkippedScenarios[sc] {
			r.skipped(sc, dir, runErr, log)
			continue
		}
		r.judge(sc, dir, runErr, true, false, log)
	}
	return r.summary("")
}

type check struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// readChecks reads the checks.json the suite wrote under dir.
func readChecks(dir string) []check {
	var all []check
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "checks.json" {
			b, _ := os.ReadFile(path)
			var cs []check
			if json.Unmarshal(b, &cs) == nil {
				all = append(all, cs...)
			}
		}
		return nil
	})
	return all
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n    ")
}

// start runs the platform and the backend on free loopback ports and
// registers the conformance tenant.
func start(work string) (string, func(), error) {
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	token := hex.EncodeToString(tok[:])

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	cfg, err := config.Load(fs, nil, func(string) string { return "" })
	if err != nil {
		return "", nil, err
	}
	cfg.DatabaseURL = "sqlite:" + filepath.Join(work, "platform.db")
	cfg.Listen = ln.Addr().String()
	cfg.PublicURL = "http://" + ln.Addr().String()
	cfg.BootstrapToken = token
	cfg.AllowPrivateTargets = true
	// The suite's scenarios start sessions from one address far faster
	// than a client would.
	cfg.Legacy.InitializePerCaller, cfg.Legacy.InitializePerTenant = 100_000, 1_000_000
	logFile, err := os.Create(filepath.Join(work, "platform.log"))
	if err != nil {
		return "", nil, err
	}
	logger := slog.New(slog.NewJSONHandler(logFile, nil))
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, logger, "conformance")
	if err != nil {
		cancel()
		return "", nil, err
	}
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, ln); close(done) }()

	backend := &conformance.Backend{}
	hookLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		return "", nil, err
	}
	hookSrv := &http.Server{Handler: backend, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hookSrv.Serve(hookLn) }()

	platformURL := "http://" + ln.Addr().String()
	stop := func() {
		cancel()
		<-done
		_ = hookSrv.Close()
		srv.Close()
		logFile.Close()
	}
	if err := conformance.Register(platformURL, token, "conformance", "http://"+hookLn.Addr().String()+"/hook", backend); err != nil {
		stop()
		return "", nil, err
	}
	return platformURL, stop, nil
}
