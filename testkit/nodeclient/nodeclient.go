// Package nodeclient runs independent MCP clients written for Node (the
// official TypeScript SDKs' clients, the MCP Inspector) from tests, on
// the system's Node, against the npm packages scripts/ts-sdk installs
// outside git.
package nodeclient

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Packages returns the folder whose node_modules holds a client's
// packages: $env when set, else what scripts/ts-sdk installs for variant
// (v1, v2, inspector). A test that cannot have them fails.
func Packages(t testing.TB, env, variant string) string {
	t.Helper()
	if dir := os.Getenv(env); dir != "" {
		return dir
	}
	_, here, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(here), "..", "..", "scripts", "ts-sdk")
	out, err := exec.Command(script, variant).Output()
	if err != nil {
		t.Fatalf("nodeclient: no %s packages (set %s or run scripts/ts-sdk %s): %v", variant, env, variant, err)
	}
	return strings.TrimSpace(string(out))
}

// Script runs a client script (a file of the test's package) with Node,
// beside the node_modules of packages so that it imports them, with args,
// and returns what it printed on stdout; a failure fails the test, with
// what it printed on both.
func Script(t testing.TB, packages, script string, args ...string) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(packages, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, filepath.Base(script))
	if err := os.WriteFile(name, src, 0o600); err != nil {
		t.Fatal(err)
	}
	return Run(t, dir, nil, append([]string{name}, args...)...)
}

// Run runs node with args in dir, its environment this process's with
// env added, for at most two minutes, and returns what it printed on
// stdout; a failure fails the test, with what it printed on both.
func Run(t testing.TB, dir string, env []string, args ...string) []byte {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("nodeclient: node (20 or newer) is needed to run the client")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the Node client failed: %v\n%s\n%s", err, out, stderr.String())
	}
	t.Logf("the Node client printed: %s", out)
	return out
}
