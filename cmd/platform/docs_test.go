package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/keys"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
	"github.com/opsmcp/platform/testkit/vaulttest"
)

// The pages in docs/ are tested as a reader would use them:
//
//   - every ```sh block runs, in order, in one bash session per page,
//     from a copy of the repository's root (symbolic links, with a data
//     folder of its own), with `platform` on the PATH and a `platform dev`
//     of its own running; addresses 127.0.0.1:PORT in a page are replaced
//     by free ones (127.0.0.1:8080 by that platform's);
//   - a block that starts a command in the background (a line ending in
//     &) is done when every address it names accepts connections;
//   - an ```output block after a ```sh block lists lines its output must
//     hold, in order ("…" matches anything);
//   - a ```sh block whose first line is "# not run here: <why>" is
//     checked instead: every PLATFORM_* variable and every flag of a
//     platform command in it must exist;
//   - ```json blocks must parse; ```go and ```python blocks that name a
//     file must appear in it verbatim, so the example shown is the
//     example run;
//   - relative links resolve, every PLATFORM_* variable named exists, the
//     configuration reference lists every setting, and docs/README.md
//     links every page.
//
// Pages may need more than the platform: PostgreSQL when they name
// postgresURLInDocs, a Vault dev server for 127.0.0.1:8200, an OTLP
// receiver for 127.0.0.1:4318; the test provides each (see services).

// block is one fenced block of a page.
type block struct {
	lang, file string // the info string: language, and a file it quotes
	text       string
	line       int
	output     *block // the ```output block right after a ```sh block
}

var fence = regexp.MustCompile("^```\\s*(\\S*)\\s*(\\S*)\\s*$")

func parseBlocks(t *testing.T, page string) []*block {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []*block
	var cur *block
	var text strings.Builder
	lastEnd := -10
	for i, line := range strings.Split(string(b), "\n") {
		if cur == nil {
			if m := fence.FindStringSubmatch(line); m != nil {
				cur = &block{lang: m[1], file: m[2], line: i + 1}
				text.Reset()
			}
			continue
		}
		if strings.TrimSpace(line) == "```" {
			cur.text = text.String()
			if cur.lang == "output" {
				prev := (*block)(nil)
				if len(out) > 0 {
					prev = out[len(out)-1]
				}
				if prev == nil || prev.lang != "sh" || prev.output != nil || cur.line-lastEnd > 2 {
					t.Errorf("%s:%d: an output block must follow a sh block, separated by one blank line", filepath.Base(page), cur.line)
				} else {
					prev.output = cur
				}
			} else {
				out = append(out, cur)
			}
			lastEnd = i + 1
			cur = nil
			continue
		}
		text.WriteString(line + "\n")
	}
	if cur != nil {
		t.Errorf("%s:%d: a fenced block is never closed", filepath.Base(page), cur.line)
	}
	return out
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no repository root at %s", root)
	}
	return root
}

// settingNames are every flag of `platform serve` and its variable.
func settingNames(t *testing.T) (flags map[string]bool, env map[string]bool) {
	t.Helper()
	fs := flag.NewFlagSet("docs", flag.ContinueOnError)
	config.Flags(fs)
	flags, env = map[string]bool{}, map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		flags[f.Name] = true
		env[config.EnvName(f.Name)] = true
	})
	return flags, env
}

// clientVariables are PLATFORM_* variables read by clients and tools,
// not settings of the platform.
var clientVariables = map[string]bool{
	"PLATFORM_TOKEN": true, "PLATFORM_ADMIN_URL": true, "PLATFORM_ADMIN_TOKEN": true,
	"PLATFORM_URL": true, "PLATFORM_DEV_ISSUER": true, "PLATFORM_TEST_POSTGRES": true,
}

var (
	platformVariable = regexp.MustCompile(`\bPLATFORM_[A-Z0-9_]*[A-Z0-9]\b`)
	relativeLink     = regexp.MustCompile(`\]\(([^)#:\s]+)(#[^)]*)?\)`)
	serveFlag        = regexp.MustCompile(`(?:^|\s)--([a-z][a-z0-9-]*)`)
)

// TestDocs checks every page of docs/ and runs every command in it.
func TestDocs(t *testing.T) {
	root := repoRoot(t)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages in docs/: %v", err)
	}
	flags, env := settingNames(t)
	index, _ := os.ReadFile(filepath.Join(root, "docs", "README.md"))
	for _, page := range pages {
		name := filepath.Base(page)
		b, _ := os.ReadFile(page)
		for _, v := range platformVariable.FindAllString(string(b), -1) {
			if !env[v] && !clientVariables[v] && !strings.HasSuffix(v, "_") {
				t.Errorf("%s names %s, which is no setting of the platform", name, v)
			}
		}
		for _, m := range relativeLink.FindAllStringSubmatch(string(b), -1) {
			if _, err := os.Stat(filepath.Join(root, "docs", m[1])); err != nil {
				t.Errorf("%s links %s, which does not exist", name, m[1])
			}
		}
		if name != "README.md" && !strings.Contains(string(index), "("+name+")") {
			t.Errorf("docs/README.md does not link %s", name)
		}
	}
	conf, err := os.ReadFile(filepath.Join(root, "docs", "configuration.md"))
	if err != nil {
		t.Error(err)
	}
	for f := range flags {
		if !strings.Contains(string(conf), "`--"+f+"`") {
			t.Errorf("configuration.md does not list --%s", f)
		}
	}
	// The policy the operating guide writes is the one the key tests
	// run the platform under.
	ops, _ := os.ReadFile(filepath.Join(root, "docs", "operating.md"))
	for _, l := range strings.Split(strings.TrimSpace(keys.VaultPolicy), "\n") {
		if !strings.Contains(string(ops), l) {
			t.Errorf("operating.md's Vault policy lacks %q", l)
		}
	}
	for _, page := range pages {
		t.Run(filepath.Base(page), func(t *testing.T) { runPage(t, root, page, flags, env) })
	}
}

func runPage(t *testing.T, root, page string, flags, env map[string]bool) {
	blocks := parseBlocks(t, page)
	var runnable []*block
	for _, b := range blocks {
		where := fmt.Sprintf("%s:%d", filepath.Base(page), b.line)
		switch b.lang {
		case "sh":
			if reason, ok := strings.CutPrefix(strings.SplitN(b.text, "\n", 2)[0], "# not run here:"); ok {
				if strings.TrimSpace(reason) == "" {
					t.Errorf("%s: say why the block is not run", where)
				}
				checkNotRun(t, where, b.text, flags, env)
				continue
			}
			runnable = append(runnable, b)
		case "json":
			if !json.Valid([]byte(b.text)) {
				t.Errorf("%s: the JSON block does not parse", where)
			}
		case "go", "python":
			if b.file == "" {
				t.Errorf("%s: a %s block names the file it shows (```%s path/to/file)", where, b.lang, b.lang)
				continue
			}
			src, err := os.ReadFile(filepath.Join(root, b.file))
			if err != nil || !strings.Contains(string(src), b.text) {
				t.Errorf("%s: the block is not in %s as shown (%v)", where, b.file, err)
			}
		}
	}
	if len(runnable) == 0 {
		return
	}
	// What the pages assume a reader has, besides Go.
	for _, tool := range []string{"bash", "curl", "jq", "python3", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the guides use %s, which is not on the PATH: install it", tool)
		}
	}
	s := newDocShell(t, root, page, runnable)
	for _, b := range runnable {
		s.run(t, b)
	}
}

// checkNotRun checks a block that cannot run here: the settings and flags
// it names exist.
func checkNotRun(t *testing.T, where, text string, flags, env map[string]bool) {
	for _, v := range platformVariable.FindAllString(text, -1) {
		if !env[v] && !clientVariables[v] {
			t.Errorf("%s: %s is no setting", where, v)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if !strings.Contains(line, "platform serve") && !strings.Contains(line, "platform migrate") {
			continue
		}
		for _, m := range serveFlag.FindAllStringSubmatch(line, -1) {
			if !flags[m[1]] {
				t.Errorf("%s: --%s is no flag of platform serve", where, m[1])
			}
		}
	}
}

// docShell is a bash session running a page's blocks.
type docShell struct {
	dir     string
	cmd     *exec.Cmd
	stdin   io.Writer
	lines   chan outputLine
	exited  chan struct{}
	replace *strings.Replacer
	page    string
	n       int
}

var loopbackAddr = regexp.MustCompile(`127\.0\.0\.1:(\d{2,5})\b`)

func newDocShell(t *testing.T, root, page string, blocks []*block) *docShell {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "data" || e.Name() == ".git" {
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, ".bin")
	_ = os.MkdirAll(bin, 0o755)
	wrapper := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q \"$@\"\n", envRunPlatform, os.Args[0])
	if err := os.WriteFile(filepath.Join(bin, "platform"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}

	// Every address the page names gets a free one; the services the
	// page needs are started on theirs.
	var all strings.Builder
	for _, b := range blocks {
		all.WriteString(b.text)
		if b.output != nil {
			all.WriteString(b.output.text)
		}
	}
	pairs := []string{}
	seen := map[string]bool{}
	for _, m := range loopbackAddr.FindAllString(all.String(), -1) {
		if seen[m] || m == "127.0.0.1:5432" { // PostgreSQL: see services
			continue
		}
		seen[m] = true
		pairs = append(pairs, m, freeAddr(t))
	}
	addr := func(doc string) string {
		for i := 0; i < len(pairs); i += 2 {
			if pairs[i] == doc {
				return pairs[i+1]
			}
		}
		return freeAddr(t)
	}
	startDev(t, "--listen", addr("127.0.0.1:8080"), "--data", filepath.Join(dir, "data", "dev"))
	// `go install` puts the real binary first on the PATH, ahead of the
	// wrapper.
	gobin := filepath.Join(dir, ".gobin")
	sep := string(os.PathListSeparator)
	envv := []string{"PATH=" + gobin + sep + bin + sep + os.Getenv("PATH"), "GOBIN=" + gobin}
	pairs, envv = services(t, dir, all.String(), pairs, envv)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PLATFORM_") || strings.HasPrefix(k, "OTEL_") || strings.HasPrefix(k, "VAULT_") || k == "PATH" || k == "GOBIN" {
			continue
		}
		envv = append(envv, kv)
	}

	s := &docShell{dir: dir, replace: strings.NewReplacer(pairs...), page: filepath.Base(page), lines: make(chan outputLine, 1024), exited: make(chan struct{})}
	s.cmd = exec.Command("bash", "--noprofile", "--norc")
	s.cmd.Dir = dir
	s.cmd.Env = envv
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = pw, pw
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			s.lines <- outputLine{text: sc.Text()}
		}
		s.lines <- outputLine{eof: true}
	}()
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		// The session and everything it started in the background stop
		// as on Ctrl-C, gracefully (a replica flushes its telemetry);
		// whatever would not is killed, and the page fails.
		pgid := s.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		<-s.exited
		gone := func() bool { return syscall.Kill(-pgid, 0) == syscall.ESRCH }
		testwait.Until(t, "what the page started to stop on SIGTERM", func() bool {
			if !gone() && t.Failed() {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
			return gone()
		})
	})
	return s
}

const blockDone = "__OPSMCP_DOCS_BLOCK_DONE__"

// run runs one block and checks its output.
func (s *docShell) run(t *testing.T, b *block) {
	t.Helper()
	where := fmt.Sprintf("%s:%d", s.page, b.line)
	text := s.replace.Replace(b.text)
	s.n++
	file := filepath.Join(s.dir, fmt.Sprintf(".block-%d.sh", s.n))
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(s.stdin, "set -eo pipefail; source %q; set +e +o pipefail; echo %s\n", file, blockDone)
	var out []string
	for {
		line := testwait.Recv(t, s.lines, where+" to finish")
		if line.eof {
			t.Fatalf("%s: the block failed:\n%s\n--- output:\n%s", where, text, strings.Join(out, "\n"))
		}
		if line.text == blockDone {
			break
		}
		out = append(out, line.text)
	}
	if background(text) {
		for _, a := range loopbackAddr.FindAllString(text, -1) {
			s.await(t, where, a)
		}
	}
	if b.output != nil {
		want := strings.Split(strings.TrimRight(s.replace.Replace(b.output.text), "\n"), "\n")
		if !matchLines(out, want) {
			t.Errorf("%s: the output lacks, in order:\n%s\n--- output:\n%s", where, strings.Join(want, "\n"), strings.Join(out, "\n"))
		}
	}
}

// background reports whether a block starts a command in the background.
func background(text string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasSuffix(strings.TrimSpace(l), "&") && !strings.HasSuffix(strings.TrimSpace(l), "&&") {
			return true
		}
	}
	return false
}

// await waits until addr accepts connections (what the block started in
// the background listens), or the session ends.
func (s *docShell) await(t *testing.T, where, addr string) {
	t.Helper()
	testwait.Until(t, where+": something listening on "+addr, func() bool {
		select {
		case <-s.exited:
			t.Fatalf("%s: the session ended before %s listened", where, addr)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// matchLines reports whether every wanted line matches an output line,
// in order; "…" in a wanted line matches anything.
func matchLines(out, want []string) bool {
	i := 0
	for _, w := range want {
		if strings.TrimSpace(w) == "" {
			continue
		}
		for ; i < len(out) && !matchLine(out[i], w); i++ {
		}
		if i == len(out) {
			return false
		}
		i++
	}
	return true
}

func matchLine(line, want string) bool {
	parts := strings.Split(want, "…")
	if len(parts) == 1 {
		return strings.Contains(line, want)
	}
	pos := 0
	for _, p := range parts {
		k := strings.Index(line[pos:], p)
		if k < 0 {
			return false
		}
		pos += k + len(p)
	}
	return true
}

// postgresURLInDocs is the database URL the pages use; the test gives
// each page a fresh schema of the test server instead.
const postgresURLInDocs = "postgres://opsmcp@127.0.0.1:5432/opsmcp?sslmode=disable"

// services starts what a page needs beyond the platform, from the
// addresses and URLs it names, and returns the replacements and
// environment they add.
func services(t *testing.T, dir, text string, pairs, env []string) ([]string, []string) {
	t.Helper()
	if strings.Contains(text, postgresURLInDocs) {
		// First, so it is replaced whole before any address in it.
		pairs = append([]string{postgresURLInDocs, platformtest.PostgresSchemaURL(t)}, pairs...)
	}
	lookup := func(doc string) string {
		for i := 0; i < len(pairs); i += 2 {
			if pairs[i] == doc {
				return pairs[i+1]
			}
		}
		return ""
	}
	if addr := lookup("127.0.0.1:8200"); addr != "" {
		env = append(env, "VAULT_TOKEN="+startVault(t, dir, addr))
	}
	if addr := lookup("127.0.0.1:4318"); addr != "" {
		startOTLPReceiver(t, addr)
	}
	return pairs, env
}

// startVault runs a fresh Vault (the dev server, with its ready-made
// secret/ mount removed, so the page mounts what a fresh Vault needs),
// puts its binary on the page's PATH as vault, and returns an operator
// token.
func startVault(t *testing.T, dir, addr string) string {
	t.Helper()
	bin := vaulttest.Binary(t)
	if err := os.Symlink(bin, filepath.Join(dir, ".bin", "vault")); err != nil {
		t.Fatal(err)
	}
	root := "root-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	home := filepath.Join(dir, ".vault-home")
	_ = os.MkdirAll(home, 0o700)
	cmd := exec.Command(bin, "server", "-dev", "-dev-root-token-id="+root, "-dev-listen-address="+addr, "-log-level=warn")
	cmd.Env = append(os.Environ(), "HOME="+home)
	var log lockedBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	call := func(method, path string) (int, error) {
		req, _ := http.NewRequest(method, "http://"+addr+path, nil)
		req.Header.Set("X-Vault-Token", root)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	testwait.Until(t, "the Vault dev server to become active", func() bool {
		code, err := call("GET", "/v1/sys/health")
		return err == nil && code == 200
	})
	if code, err := call("DELETE", "/v1/sys/mounts/secret"); err != nil || code/100 != 2 {
		t.Fatalf("unmount the dev server's secret/: %d %v", code, err)
	}
	return root
}

// startOTLPReceiver serves OTLP/HTTP on addr and, once the page's
// processes are gone (so replicas have flushed), checks that the
// platform's spans arrived: resource opsmcp-platform, request spans with
// the tenant.
func startOTLPReceiver(t *testing.T, addr string) {
	t.Helper()
	var mu sync.Mutex
	var services, tenants []string
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" {
			var req coltracepb.ExportTraceServiceRequest
			if err := proto.Unmarshal(body, &req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			mu.Lock()
			for _, rs := range req.ResourceSpans {
				for _, a := range rs.GetResource().GetAttributes() {
					if a.Key == "service.name" {
						services = append(services, a.GetValue().GetStringValue())
					}
				}
				for _, ss := range rs.ScopeSpans {
					for _, sp := range ss.Spans {
						for _, a := range sp.Attributes {
							if a.Key == "opsmcp.tenant" {
								tenants = append(tenants, sp.Name+"@"+a.GetValue().GetStringValue())
							}
						}
					}
				}
			}
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	})}
	go func() { _ = srv.Serve(ln) }()
	// Registered before the session's cleanup, so it runs after it.
	t.Cleanup(func() {
		defer srv.Close()
		testwait.Until(t, "a request span of the platform at the collector", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Contains(services, "opsmcp-platform") && len(tenants) > 0
		})
	})
}
