package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	vault "github.com/hashicorp/vault/api"
	"github.com/opsmcp/platform/keys"
)

// vaultServer is the fleet's Vault: the binary scripts/vault builds, on a
// free loopback port, with file storage, so that it can be stopped and
// started again with its rings (a `vault server -dev` keeps everything in
// memory and would come back empty). Starting it again means unsealing
// it, as an operator (or auto-unseal) would.
type vaultServer struct {
	bin, dir string
	addr     string
	proc     *proc

	root      string
	unsealKey string
	// token is what the replicas use: the platform's least-privilege
	// policy (README: Vault access), periodic, so it renews forever.
	token string
}

func newVault(bin, dir string) (*vaultServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	v := &vaultServer{bin: bin, dir: filepath.Join(dir, "vault"), addr: fmt.Sprintf("127.0.0.1:%d", port)}
	if err := os.MkdirAll(v.dir, 0o700); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`storage "file" { path = %q }
listener "tcp" {
  address     = %q
  tls_disable = true
}
disable_mlock = true
api_addr      = "http://%s"
log_level     = "warn"
`, filepath.Join(v.dir, "data"), v.addr, v.addr)
	return v, os.WriteFile(filepath.Join(v.dir, "vault.hcl"), []byte(cfg), 0o600)
}

// URL is the server's address.
func (v *vaultServer) URL() string { return "http://" + v.addr }

func (v *vaultServer) client(token string) (*vault.Client, error) {
	cfg := vault.DefaultConfig()
	cfg.Address = v.URL()
	cfg.MaxRetries = 0
	c, err := vault.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	if token == "" {
		c.ClearToken()
	} else {
		c.SetToken(token)
	}
	return c, nil
}

func (v *vaultServer) run(ctx context.Context, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	env := append(baseEnv(v.dir), "VAULT_ADDR="+v.URL())
	if v.proc == nil {
		p, err := startProc(dir, "vault", v.bin, []string{"server", "-config=" + filepath.Join(v.dir, "vault.hcl")}, env)
		if err != nil {
			return err
		}
		v.proc = p
	} else if err := v.proc.start(v.bin, []string{"server", "-config=" + filepath.Join(v.dir, "vault.hcl")}, env); err != nil {
		return err
	}
	// Any answer (501 uninitialised, 503 sealed) means it listens.
	c, err := v.client("")
	if err != nil {
		return err
	}
	for {
		if _, err := c.Sys().HealthWithContext(ctx); err == nil {
			return nil
		}
		if !v.proc.running() {
			return fmt.Errorf("vault exited at start (see %s)", v.proc.logPath)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("vault did not listen: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// start runs Vault for the first time: initialise, unseal, mount KV v2
// at secret/ and Transit at transit/, and make the platform's token.
func (v *vaultServer) start(ctx context.Context, dir string) error {
	if err := v.run(ctx, dir); err != nil {
		return err
	}
	c, err := v.client("")
	if err != nil {
		return err
	}
	init, err := c.Sys().InitWithContext(ctx, &vault.InitRequest{SecretShares: 1, SecretThreshold: 1})
	if err != nil {
		return fmt.Errorf("vault init: %w", err)
	}
	v.root, v.unsealKey = init.RootToken, init.KeysB64[0]
	if err := v.unseal(ctx); err != nil {
		return err
	}
	root, err := v.client(v.root)
	if err != nil {
		return err
	}
	if err := root.Sys().MountWithContext(ctx, "secret", &vault.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		return fmt.Errorf("vault: mount kv v2: %w", err)
	}
	if err := root.Sys().MountWithContext(ctx, "transit", &vault.MountInput{Type: "transit"}); err != nil {
		return fmt.Errorf("vault: mount transit: %w", err)
	}
	if err := root.Sys().PutPolicyWithContext(ctx, "opsmcp-platform", keys.VaultPolicy); err != nil {
		return fmt.Errorf("vault: policy: %w", err)
	}
	// A fresh KV v2 mount finishes setting up in the background: wait
	// until it takes writes.
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		_, err := root.KVv2("secret").Put(ctx, "fleet/ready", map[string]any{"ok": true})
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("vault: kv v2 mount never became writable: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	tok, err := root.Auth().Token().CreateWithContext(ctx, &vault.TokenCreateRequest{
		Policies: []string{"opsmcp-platform"}, Period: "1h", NoParent: true, DisplayName: "opsmcp-fleet",
	})
	if err != nil {
		return fmt.Errorf("vault: platform token: %w", err)
	}
	v.token = tok.Auth.ClientToken
	return nil
}

func (v *vaultServer) unseal(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	c, err := v.client("")
	if err != nil {
		return err
	}
	st, err := c.Sys().UnsealWithContext(ctx, v.unsealKey)
	if err != nil {
		return fmt.Errorf("vault unseal: %w", err)
	}
	if st.Sealed {
		return errors.New("vault still sealed after unseal")
	}
	for {
		h, err := c.Sys().HealthWithContext(ctx)
		if err == nil && h.Initialized && !h.Sealed && !h.Standby {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("vault not active after unseal: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop stops the server (SIGTERM); its data stays for restart.
func (v *vaultServer) stop() error {
	if v.proc == nil {
		return nil
	}
	return v.proc.stop(syscall.SIGTERM, 15*time.Second)
}

// restart starts the stopped server again on the same address and
// unseals it.
func (v *vaultServer) restart(ctx context.Context, dir string) error {
	if err := v.run(ctx, dir); err != nil {
		return err
	}
	return v.unseal(ctx)
}
