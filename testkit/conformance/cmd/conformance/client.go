package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ClientScenarios are the suite's non-auth client scenarios at
// 2026-07-28, run against testkit/conformance/client, the Go client
// under test.
var ClientScenarios = []string{
	"sep-2322-client-request-state", "tools_call", "request-metadata",
	"http-standard-headers", "http-custom-headers", "http-invalid-tool-headers",
	"json-schema-ref-no-deref",
}

// runClient builds the client under test and runs each client scenario
// against it. The suite fails a client scenario on any WARNING, so a
// warning fails it here too. Output is as in server mode: one line per
// scenario, then "N passed, N failed".
func runClient(node, cli, only string, verbose bool, keep string) int {
	work, err := os.MkdirTemp("", "conformance-client-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(work)
	out := keep
	if out == "" {
		out = filepath.Join(work, "results")
	}
	bin := filepath.Join(work, "conformance-client")
	build := exec.Command("go", "build", "-o", bin, "./testkit/conformance/client")
	if b, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "conformance: building the client: %v\n%s", err, b)
		return 1
	}

	scenarios := ClientScenarios
	if only != "" {
		scenarios = []string{only}
	}
	passed, failed := 0, 0
	for _, sc := range scenarios {
		dir := filepath.Join(out, sc)
		cmd := exec.Command(node, cli, "client", "--command", bin, "--scenario", sc, "--spec-version", "2026-07-28", "-o", dir)
		log, runErr := cmd.CombinedOutput()
		checks := readChecks(dir)
		var problems []string
		for _, c := range checks {
			switch c.Status {
			case "FAILURE":
				problems = append(problems, c.ID+": "+firstLine(c.ErrorMessage))
			case "WARNING":
				problems = append(problems, c.ID+" (warning): "+firstLine(c.ErrorMessage))
			}
		}
		if runErr == nil && len(problems) == 0 && len(checks) > 0 {
			passed++
			fmt.Printf("PASS %s (%d checks)\n", sc, len(checks))
			continue
		}
		failed++
		if len(problems) == 0 {
			problems = append(problems, fmt.Sprintf("the suite exited with %v and %d checks", runErr, len(checks)))
		}
		fmt.Printf("FAIL %s: %s\n", sc, strings.Join(problems, "; "))
		if verbose || len(checks) == 0 {
			fmt.Println(indent(string(log)))
		}
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}
