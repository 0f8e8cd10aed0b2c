package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// timestamp is the suffix the suite gives each scenario's folder.
var timestamp = regexp.MustCompile(`-\d{4}-\d\d-\d\dT[\d-]+Z$`)

// runLegacy runs the suite's 2025-11-25 requirement set against the
// conformance tenant's endpoint, the same URL the 2026-07-28 scenarios
// use: a dual-era server passes both. The suite runs every scenario of
// the set (scored and not) at the initialize-based wire; each scenario
// is printed with its checks, and any failed check of any scenario,
// scored or not, fails the run.
func runLegacy(node, cli string, verbose bool, keep string) int {
	r, platformURL := serverRun(verbose, keep)
	if r == nil {
		return 1
	}
	defer r.close()
	endpoint := platformURL + "/t/conformance/mcp"
	log, runErr := exec.Command(node, cli, "server", "--url", endpoint, "--requirements", "2025-11-25", "-o", r.out).CombinedOutput()

	// One folder per scenario: server-<scenario>-<timestamp>. The suite's
	// exit is judged for the whole set below, not per scenario.
	dirs, _ := filepath.Glob(filepath.Join(r.out, "server-*"))
	sort.Strings(dirs)
	for _, dir := range dirs {
		name := timestamp.ReplaceAllString(strings.TrimPrefix(filepath.Base(dir), "server-"), "")
		r.judge(name, dir, runErr, false, false, nil)
	}
	if verbose || len(dirs) == 0 || (runErr != nil && r.failed == 0) {
		fmt.Println(indent(string(log)))
	}
	code := r.summary(" (2025-11-25 requirement set)")
	if runErr != nil || len(dirs) == 0 {
		code = 1
	}
	return code
}
