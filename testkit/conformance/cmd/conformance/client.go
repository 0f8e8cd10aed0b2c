package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	r, err := newRunner(verbose, keep)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer r.close()
	bin := filepath.Join(r.work, "conformance-client")
	build := exec.Command("go", "build", "-o", bin, "./testkit/conformance/client")
	if b, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "conformance: building the client: %v\n%s", err, b)
		return 1
	}
	scenarios := ClientScenarios
	if only != "" {
		scenarios = []string{only}
	}
	for _, sc := range scenarios {
		dir := filepath.Join(r.out, sc)
		log, runErr := exec.Command(node, cli, "client", "--command", bin, "--scenario", sc, "--spec-version", "2026-07-28", "-o", dir).CombinedOutput()
		r.judge(sc, dir, runErr, true, true, log)
	}
	return r.summary("")
}
