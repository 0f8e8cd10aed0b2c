package main

import (
	"fmt"
	"os"
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
	work, err := os.MkdirTemp("", "conformance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(work)
	out := keep
	if out == "" {
		out = filepath.Join(work, "results")
	}
	platformURL, stop, err := start(work)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance: start:", err)
		return 1
	}
	defer stop()
	endpoint := platformURL + "/t/conformance/mcp"
	cmd := exec.Command(node, cli, "server", "--url", endpoint, "--requirements", "2025-11-25", "-o", out)
	log, runErr := cmd.CombinedOutput()

	// One folder per scenario: server-<scenario>-<timestamp>.
	dirs, _ := filepath.Glob(filepath.Join(out, "server-*"))
	sort.Strings(dirs)
	passed, failed := 0, 0
	for _, dir := range dirs {
		name := timestamp.ReplaceAllString(strings.TrimPrefix(filepath.Base(dir), "server-"), "")
		checks := readChecks(dir)
		var fails, warns []string
		for _, c := range checks {
			switch c.Status {
			case "FAILURE":
				fails = append(fails, c.ID+": "+firstLine(c.ErrorMessage))
			case "WARNING":
				warns = append(warns, c.ID)
			}
		}
		if len(fails) == 0 && len(checks) > 0 {
			passed++
			line := fmt.Sprintf("PASS %s (%d checks)", name, len(checks))
			if len(warns) > 0 {
				line += " warnings: " + strings.Join(warns, ", ")
			}
			fmt.Println(line)
			continue
		}
		failed++
		fmt.Printf("FAIL %s: %s\n", name, strings.Join(fails, "; "))
	}
	if verbose || len(dirs) == 0 || (runErr != nil && failed == 0) {
		fmt.Println(indent(string(log)))
	}
	fmt.Printf("%d passed, %d failed (2025-11-25 requirement set)\n", passed, failed)
	if failed > 0 || runErr != nil || len(dirs) == 0 {
		return 1
	}
	return 0
}
