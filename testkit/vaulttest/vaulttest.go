// Package vaulttest runs a real HashiCorp Vault server for tests: the
// unmodified Vault v1.21.1 built from the Go module proxy by
// scripts/vault (see tools/vault), on loopback, with file storage so it
// can be stopped and started again mid-test.
//
// Tests that need Vault call Start. They never skip: when no binary can be
// found or built, they fail and say how to get one.
package vaulttest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	vault "github.com/hashicorp/vault/api"
)

// EnvBinary names the Vault binary to use; scripts/test sets it from
// scripts/vault. When unset, Binary runs scripts/vault itself.
const EnvBinary = "OPSMCP_VAULT_BIN"

var binary struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of the Vault binary: $OPSMCP_VAULT_BIN, else
// the cached build that scripts/vault returns (building it first if it
// is missing or older than tools/vault/go.sum: about 18 minutes once per
// machine). It fails the test, never skips it, when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	binary.once.Do(func() { binary.path, binary.err = locate() })
	if binary.err != nil {
		t.Fatalf("vaulttest: no Vault binary: %v\n"+
			"Build it once with ./scripts/vault (about 18 minutes and 4.4 GB of memory on a fresh machine), "+
			"or set %s to a Vault binary.", binary.err, EnvBinary)
	}
	return binary.path
}

func locate() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		st, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvBinary, p, err)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s=%s is not an executable file", EnvBinary, p)
		}
		return p, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	script := filepath.Join(root, "scripts", "vault")
	cmd := exec.Command(script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s failed: %v\n%s", script, err, stderr.String())
	}
	p := strings.TrimSpace(string(out))
	if p == "" {
		return "", fmt.Errorf("%s printed no path", script)
	}
	return p, nil
}

// moduleRoot finds the directory of the project's go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/opsmcp/platform\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the project's go.mod above the working directory")
		}
		dir = parent
	}
}

// Server is one Vault server, initialised and unsealed, with KV v2
// mounted at secret/ and Transit at transit/.
type Server struct {
	// Addr is the server's URL.
	Addr string
	// RootToken is the initial root token.
	RootToken string

	t         testing.TB
	bin, dir  string
	args      []string // nil: file storage from vault.hcl
	unsealKey string
	mu        sync.Mutex
	cmd       *exec.Cmd
	exited    chan struct{}
	log       *bytes.Buffer
}

// Start runs a fresh Vault server for the test and stops it when the test
// ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := fmt.Sprintf(`storage "file" { path = %q }
listener "tcp" {
  address     = %q
  tls_disable = true
}
disable_mlock = true
api_addr      = "http://%s"
log_level     = "warn"
`, filepath.Join(dir, "data"), addr, addr)
	if err := os.WriteFile(filepath.Join(dir, "vault.hcl"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: "http://" + addr, t: t, bin: bin, dir: dir}
	t.Cleanup(s.Stop)
	s.run()
	c := s.rawClient()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	init, err := c.Sys().InitWithContext(ctx, &vault.InitRequest{SecretShares: 1, SecretThreshold: 1})
	if err != nil {
		t.Fatalf("vaulttest: init: %v\n%s", err, s.logs())
	}
	s.RootToken, s.unsealKey = init.RootToken, init.KeysB64[0]
	s.unseal(ctx)
	root := s.Client(t)
	if err := root.Sys().MountWithContext(ctx, "secret", &vault.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		t.Fatalf("vaulttest: mount kv v2: %v", err)
	}
	if err := root.Sys().MountWithContext(ctx, "transit", &vault.MountInput{Type: "transit"}); err != nil {
		t.Fatalf("vaulttest: mount transit: %v", err)
	}
	// A fresh KV v2 mount finishes setting up in the background: wait
	// until it takes writes.
	for {
		_, err := root.KVv2("secret").Put(ctx, "vaulttest/ready", map[string]any{"ok": true})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("vaulttest: kv v2 mount never became writable: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

// StartDev runs Vault's in-memory dev server (`vault server -dev`: no
// storage, unsealed at start, KV v2 at secret/), mounts Transit, and
// stops it when the test ends. It cannot be restarted with its data;
// benchmarks use it.
func StartDev(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &Server{Addr: "http://" + addr, RootToken: "root-" + filepath.Base(t.TempDir()), t: t, bin: bin, dir: t.TempDir()}
	s.args = []string{"server", "-dev", "-dev-root-token-id=" + s.RootToken, "-dev-listen-address=" + addr, "-log-level=warn"}
	t.Cleanup(s.Stop)
	s.run()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root := s.Client(t)
	for {
		h, err := root.Sys().HealthWithContext(ctx)
		if err == nil && h.Initialized && !h.Sealed && !h.Standby {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("vaulttest: dev server not active: %v\n%s", err, s.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := root.Sys().MountWithContext(ctx, "transit", &vault.MountInput{Type: "transit"}); err != nil {
		t.Fatalf("vaulttest: mount transit: %v", err)
	}
	return s
}

func (s *Server) run() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	args := s.args
	if args == nil {
		args = []string{"server", "-config=" + filepath.Join(s.dir, "vault.hcl")}
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+s.dir, "VAULT_ADDR="+s.Addr)
	s.log = &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("vaulttest: start %s: %v", s.bin, err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { _ = cmd.Wait(); close(exited) }(s.exited)
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Any answer (501 uninitialised, 503 sealed) means it listens.
		resp, err := http.Get(s.Addr + "/v1/sys/health")
		if err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-s.exited:
			s.t.Fatalf("vaulttest: vault exited at start:\n%s", s.log.String())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("vaulttest: vault did not listen within 30s:\n%s", s.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *Server) logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

func (s *Server) rawClient() *vault.Client {
	cfg := vault.DefaultConfig()
	cfg.Address = s.Addr
	cfg.MaxRetries = 0
	c, err := vault.NewClient(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	c.ClearToken()
	return c
}

func (s *Server) unseal(ctx context.Context) {
	s.t.Helper()
	c := s.rawClient()
	st, err := c.Sys().UnsealWithContext(ctx, s.unsealKey)
	if err != nil || st.Sealed {
		s.t.Fatalf("vaulttest: unseal: %v\n%s", err, s.logs())
	}
	// Wait until it serves requests as the active node.
	for {
		h, err := c.Sys().HealthWithContext(ctx)
		if err == nil && h.Initialized && !h.Sealed && !h.Standby {
			return
		}
		if ctx.Err() != nil {
			s.t.Fatalf("vaulttest: vault not active after unseal: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Client returns a client with the root token.
func (s *Server) Client(t testing.TB) *vault.Client {
	t.Helper()
	c := s.rawClient()
	c.SetToken(s.RootToken)
	return c
}

// Stop stops the server (SIGTERM) and waits for it; its data stays, so
// Restart brings back the same rings and keys.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Restart starts a stopped server again on the same address and unseals
// it.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.run()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.unseal(ctx)
}

// Policy writes an ACL policy.
func (s *Server) Policy(t testing.TB, name, hcl string) {
	t.Helper()
	if err := s.Client(t).Sys().PutPolicy(name, hcl); err != nil {
		t.Fatalf("vaulttest: policy %s: %v", name, err)
	}
}

// AppRole enables AppRole auth (once), creates role name with the given
// policies and token TTLs, and returns its role id and a fresh secret id.
func (s *Server) AppRole(t testing.TB, name string, policies []string, ttl, maxTTL time.Duration) (roleID, secretID string) {
	t.Helper()
	c := s.Client(t)
	auths, err := c.Sys().ListAuth()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := auths["approle/"]; !ok {
		if err := c.Sys().EnableAuthWithOptions("approle", &vault.EnableAuthOptions{Type: "approle"}); err != nil {
			t.Fatalf("vaulttest: enable approle: %v", err)
		}
	}
	if _, err := c.Logical().Write("auth/approle/role/"+name, map[string]any{
		"token_policies": policies,
		"token_ttl":      int(ttl / time.Second),
		"token_max_ttl":  int(maxTTL / time.Second),
	}); err != nil {
		t.Fatalf("vaulttest: approle role: %v", err)
	}
	r, err := c.Logical().Read("auth/approle/role/" + name + "/role-id")
	if err != nil {
		t.Fatal(err)
	}
	sec, err := c.Logical().Write("auth/approle/role/"+name+"/secret-id", nil)
	if err != nil {
		t.Fatal(err)
	}
	return r.Data["role_id"].(string), sec.Data["secret_id"].(string)
}

// ServiceAccountJWT returns a Kubernetes service-account token (a JWT in
// the legacy secret-token format, RS256 under a throwaway key) for
// namespace/name. Vault's Kubernetes auth, with no issuer keys
// configured, reads its claims and asks the TokenReview API to vouch for
// it.
func ServiceAccountJWT(t testing.TB, namespace, name string) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signing := enc(map[string]string{"alg": "RS256", "typ": "JWT"}) + "." + enc(map[string]any{
		"iss":                                    "kubernetes/serviceaccount",
		"sub":                                    "system:serviceaccount:" + namespace + ":" + name,
		"kubernetes.io/serviceaccount/namespace": namespace,
		"kubernetes.io/serviceaccount/service-account.name": name,
		"kubernetes.io/serviceaccount/service-account.uid":  "uid-" + name,
		"kubernetes.io/serviceaccount/secret.name":          name + "-token",
	})
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// Kubernetes enables Vault's Kubernetes auth method against a stand-in
// for the cluster's TokenReview API that vouches for token only, as the
// service account namespace/name, and binds role to that account with
// the given policies. It returns the number of reviews served.
func Kubernetes(t testing.TB, s *Server, namespace, name, token string, policies []string) *atomic.Int64 {
	t.Helper()
	var reviews atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/apis/authentication.k8s.io/v1/tokenreviews" {
			http.NotFound(w, r)
			return
		}
		reviews.Add(1)
		var review struct {
			Spec struct {
				Token string `json:"token"`
			} `json:"spec"`
		}
		_ = json.NewDecoder(r.Body).Decode(&review)
		status := map[string]any{"authenticated": false, "error": "token not recognised"}
		if review.Spec.Token == token {
			status = map[string]any{"authenticated": true, "user": map[string]any{
				"username": "system:serviceaccount:" + namespace + ":" + name,
				"uid":      "uid-" + name,
				"groups":   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace},
			}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "status": status,
		})
	}))
	t.Cleanup(api.Close)
	c := s.Client(t)
	if err := c.Sys().EnableAuthWithOptions("kubernetes", &vault.EnableAuthOptions{Type: "kubernetes"}); err != nil {
		t.Fatalf("vaulttest: enable kubernetes auth: %v", err)
	}
	if _, err := c.Logical().Write("auth/kubernetes/config", map[string]any{
		"kubernetes_host":      api.URL,
		"token_reviewer_jwt":   token,
		"disable_local_ca_jwt": true,
	}); err != nil {
		t.Fatalf("vaulttest: kubernetes auth config: %v", err)
	}
	if _, err := c.Logical().Write("auth/kubernetes/role/"+name, map[string]any{
		"bound_service_account_names":      []string{name},
		"bound_service_account_namespaces": []string{namespace},
		"token_policies":                   policies,
		"token_ttl":                        60,
	}); err != nil {
		t.Fatalf("vaulttest: kubernetes auth role: %v", err)
	}
	return &reviews
}
