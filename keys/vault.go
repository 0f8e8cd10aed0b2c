package keys

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	vault "github.com/hashicorp/vault/api"

	"github.com/opsmcp/platform/telemetry"
)

// Vault authentication methods.
const (
	AuthToken      = "token"
	AuthAppRole    = "approle"
	AuthKubernetes = "kubernetes"
)

// VaultOptions configures the Vault provider.
type VaultOptions struct {
	// Address is Vault's URL, e.g. https://vault.internal:8200. TLS
	// settings come from the standard VAULT_CACERT, VAULT_CLIENT_CERT,
	// VAULT_CLIENT_KEY and VAULT_TLS_SERVER_NAME variables.
	Address string
	// Namespace is the Vault Enterprise namespace, if any.
	Namespace string
	// Auth is token, approle or kubernetes.
	Auth string
	// Token authenticates with AuthToken.
	Token string
	// AppRole login: the mount ("approle"), role id, and secret id (or a
	// file holding it, read at every login so it can be replaced).
	AppRoleMount, RoleID, SecretID, SecretIDFile string
	// Kubernetes login: the mount ("kubernetes"), the Vault role, and the
	// service-account token file, read at every login.
	KubernetesMount, KubernetesRole, KubernetesTokenFile string
	// KVMount is the KV v2 mount ("secret"); Prefix the folder under it
	// holding one entry per tenant ("opsmcp/keyrings").
	KVMount, Prefix string
	// TransitMount is the Transit mount ("transit"); TransitPrefix starts
	// every tenant's Transit key name ("opsmcp-").
	TransitMount, TransitPrefix string
	// Timeout bounds every request to Vault (5s).
	Timeout time.Duration
}

func (o *VaultOptions) defaults() {
	if o.Auth == "" {
		o.Auth = AuthToken
	}
	if o.AppRoleMount == "" {
		o.AppRoleMount = "approle"
	}
	if o.KubernetesMount == "" {
		o.KubernetesMount = "kubernetes"
	}
	if o.KubernetesTokenFile == "" {
		o.KubernetesTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	}
	if o.KVMount == "" {
		o.KVMount = "secret"
	}
	if o.Prefix == "" {
		o.Prefix = "opsmcp/keyrings"
	}
	if o.TransitMount == "" {
		o.TransitMount = "transit"
	}
	if o.TransitPrefix == "" {
		o.TransitPrefix = "opsmcp-"
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	o.KVMount = strings.Trim(o.KVMount, "/")
	o.Prefix = strings.Trim(o.Prefix, "/")
	o.TransitMount = strings.Trim(o.TransitMount, "/")
	o.AppRoleMount = strings.Trim(o.AppRoleMount, "/")
	o.KubernetesMount = strings.Trim(o.KubernetesMount, "/")
}

func (o *VaultOptions) validate() error {
	var errs []error
	if o.Address == "" {
		errs = append(errs, errors.New("vault-addr is required with the vault keys provider"))
	}
	switch o.Auth {
	case AuthToken:
		if o.Token == "" {
			errs = append(errs, errors.New("vault-token is required with vault-auth=token"))
		}
	case AuthAppRole:
		if o.RoleID == "" || (o.SecretID == "" && o.SecretIDFile == "") {
			errs = append(errs, errors.New("vault-approle-role-id and vault-approle-secret-id (or -secret-id-file) are required with vault-auth=approle"))
		}
	case AuthKubernetes:
		if o.KubernetesRole == "" {
			errs = append(errs, errors.New("vault-kubernetes-role is required with vault-auth=kubernetes"))
		}
	default:
		errs = append(errs, fmt.Errorf("vault-auth must be token, approle or kubernetes, not %q", o.Auth))
	}
	return errors.Join(errs...)
}

// vaultConn is an authenticated Vault client that keeps its token alive:
// it renews the token before it expires and logs in again when renewal
// is refused or the token is rejected.
type vaultConn struct {
	c    *vault.Client
	opts VaultOptions
	log  *slog.Logger

	mu        sync.Mutex
	loggedIn  bool
	lastLogin time.Time
	ttl       time.Duration // of the current token; 0 never expires
	renewable bool
	loginTTL  time.Duration // as granted at login: the renewal increment
	changed   chan struct{} // closed and replaced on every login
}

func newVaultConn(o VaultOptions, log *slog.Logger) (*vaultConn, error) {
	o.defaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	cfg := vault.DefaultConfig()
	if cfg.Error != nil {
		return nil, fmt.Errorf("vault client: %w", cfg.Error)
	}
	cfg.Address = o.Address
	// Calls made while serving a request (Transit seal and open, a
	// ring's first load) are CLIENT spans under it; background refreshes
	// are not traced. Not over a unix socket (a local Vault Agent): the
	// Vault client dials one only through a bare *http.Transport.
	if !strings.HasPrefix(cfg.Address, "unix://") && !strings.HasPrefix(cfg.AgentAddress, "unix://") {
		cfg.HttpClient.Transport = telemetry.Transport(cfg.HttpClient.Transport)
	}
	cfg.Timeout = o.Timeout
	// No client-side retries: a CAS write retried after a lost answer
	// would report a conflict for our own write, and the refresh and
	// scheduler loops retry on their own schedule anyway.
	cfg.MaxRetries = 0
	c, err := vault.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("vault client: %w", err)
	}
	c.ClearToken() // never pick up VAULT_TOKEN from the environment
	if o.Namespace != "" {
		c.SetNamespace(o.Namespace)
	}
	v := &vaultConn{c: c, opts: o, log: log, changed: make(chan struct{})}
	if o.Auth == AuthToken {
		c.SetToken(o.Token)
	}
	return v, nil
}

// canLogin reports whether a rejected token can be replaced.
func (v *vaultConn) canLogin() bool { return v.opts.Auth != AuthToken }

// login authenticates with AppRole or Kubernetes and installs the token.
func (v *vaultConn) login(ctx context.Context) error {
	var path string
	body := map[string]any{}
	switch v.opts.Auth {
	case AuthAppRole:
		path = "auth/" + v.opts.AppRoleMount + "/login"
		secret := v.opts.SecretID
		if v.opts.SecretIDFile != "" {
			b, err := os.ReadFile(v.opts.SecretIDFile)
			if err != nil {
				return fmt.Errorf("vault approle login: read secret id file: %w", err)
			}
			secret = strings.TrimSpace(string(b))
		}
		body["role_id"], body["secret_id"] = v.opts.RoleID, secret
	case AuthKubernetes:
		path = "auth/" + v.opts.KubernetesMount + "/login"
		b, err := os.ReadFile(v.opts.KubernetesTokenFile)
		if err != nil {
			return fmt.Errorf("vault kubernetes login: read service account token: %w", err)
		}
		body["role"], body["jwt"] = v.opts.KubernetesRole, strings.TrimSpace(string(b))
	default:
		return errors.New("vault: token authentication cannot log in again")
	}
	// Log in on a token-less clone so a stale token is never sent.
	lc, err := v.c.Clone()
	if err != nil {
		return err
	}
	lc.ClearToken()
	s, err := lc.Logical().WriteWithContext(ctx, path, body)
	if err != nil {
		return fmt.Errorf("vault %s login: %w", v.opts.Auth, err)
	}
	if s == nil || s.Auth == nil || s.Auth.ClientToken == "" {
		return fmt.Errorf("vault %s login: no token in the answer", v.opts.Auth)
	}
	v.mu.Lock()
	v.c.SetToken(s.Auth.ClientToken)
	v.loggedIn, v.lastLogin = true, time.Now()
	v.ttl = time.Duration(s.Auth.LeaseDuration) * time.Second
	v.loginTTL, v.renewable = v.ttl, s.Auth.Renewable
	close(v.changed)
	v.changed = make(chan struct{})
	v.mu.Unlock()
	v.log.Info("vault login", "method", v.opts.Auth, "ttl", v.ttl, "renewable", s.Auth.Renewable)
	return nil
}

// lookupSelf reads a configured token's lifetime.
func (v *vaultConn) lookupSelf(ctx context.Context) error {
	s, err := v.c.Auth().Token().LookupSelfWithContext(ctx)
	if err != nil {
		return fmt.Errorf("vault token lookup: %w", err)
	}
	ttl, _ := s.TokenTTL()
	renewable, _ := s.TokenIsRenewable()
	v.mu.Lock()
	v.loggedIn, v.ttl, v.loginTTL, v.renewable = true, ttl, ttl, renewable
	v.mu.Unlock()
	return nil
}

// isAuthError reports a rejected token or a denied path.
func isAuthError(err error) bool {
	var re *vault.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusForbidden
}

// do runs fn with the client; when the token is rejected and another one
// can be had, it logs in again (at most every few seconds) and retries
// fn once.
func (v *vaultConn) do(ctx context.Context, fn func(*vault.Client) error) error {
	if err := v.ensureLogin(ctx); err != nil {
		return err
	}
	err := fn(v.c)
	if err == nil || !isAuthError(err) || !v.canLogin() {
		return err
	}
	v.mu.Lock()
	recent := time.Since(v.lastLogin) < 2*time.Second
	v.mu.Unlock()
	if !recent {
		if lerr := v.login(ctx); lerr != nil {
			return errors.Join(err, lerr)
		}
	}
	return fn(v.c)
}

// ensureLogin logs in once before first use.
func (v *vaultConn) ensureLogin(ctx context.Context) error {
	v.mu.Lock()
	done := v.loggedIn || v.opts.Auth == AuthToken
	v.mu.Unlock()
	if done {
		return nil
	}
	return v.login(ctx)
}

// keepAlive renews the token at two thirds of its lifetime and logs in
// again when renewal fails or no longer extends it enough. It returns
// when ctx is done.
func (v *vaultConn) keepAlive(ctx context.Context) {
	backoff := time.Second
	retry := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
		return true
	}
	for ctx.Err() == nil {
		var err error
		if v.opts.Auth == AuthToken {
			err = v.lookupSelf(ctx)
		} else {
			err = v.ensureLogin(ctx)
		}
		if err != nil {
			v.log.Warn("vault authentication failed; retrying", "method", v.opts.Auth, "err", err)
			if !retry() {
				return
			}
			continue
		}
		backoff = time.Second
		for {
			v.mu.Lock()
			ttl, renewable, inc, changed := v.ttl, v.renewable, v.loginTTL, v.changed
			v.mu.Unlock()
			if ttl <= 0 {
				// A token that never expires (a root or periodic-less
				// token): nothing to renew. Wait for a re-login.
				select {
				case <-ctx.Done():
					return
				case <-changed:
					continue
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-changed: // someone logged in again: restart the clock
				continue
			case <-time.After(ttl * 2 / 3):
			}
			if renewable {
				s, err := v.c.Auth().Token().RenewSelfWithContext(ctx, int(inc/time.Second))
				if err == nil && s != nil && s.Auth != nil {
					got := time.Duration(s.Auth.LeaseDuration) * time.Second
					v.mu.Lock()
					v.ttl = got
					v.mu.Unlock()
					if got >= inc/2 || !v.canLogin() {
						continue
					}
					// Near the token's max TTL: log in before it runs out.
				} else if err != nil {
					v.log.Warn("vault token renewal failed", "err", err)
				}
			}
			if !v.canLogin() {
				v.log.Warn("vault token cannot be renewed and will expire; configure approle or kubernetes auth for unattended renewal")
				v.mu.Lock()
				v.ttl = 0
				v.mu.Unlock()
				continue
			}
			if err := v.login(ctx); err != nil {
				v.log.Warn("vault login failed; retrying", "err", err)
				v.mu.Lock()
				v.loggedIn = false
				v.mu.Unlock()
				break
			}
		}
		if !retry() {
			return
		}
	}
}

// VaultPolicy is the least privilege the platform needs in Vault under
// the default mounts and prefixes (KV v2 at secret/ with prefix
// opsmcp/keyrings, Transit at transit/ with key prefix opsmcp-).
const VaultPolicy = `
path "secret/data/opsmcp/keyrings/*"     { capabilities = ["create", "read", "update"] }
path "secret/metadata/opsmcp/keyrings/*" { capabilities = ["read"] }
path "transit/keys/opsmcp-*"             { capabilities = ["create", "read", "update"] }
path "transit/keys/opsmcp-*/rotate"      { capabilities = ["update"] }
path "transit/keys/opsmcp-*/config"      { capabilities = ["update"] }
path "transit/encrypt/opsmcp-*"          { capabilities = ["update"] }
path "transit/decrypt/opsmcp-*"          { capabilities = ["update"] }
path "transit/hmac/opsmcp-*"             { capabilities = ["update"] }
`
