package config

import (
	"errors"
	"flag"
	"fmt"
	"time"
)

// KeysConfig selects where tenants' request-state keys live and how they
// rotate (package keys).
type KeysConfig struct {
	// Provider is static (every tenant shares --state-keys), local (per
	// tenant rings in the database under MasterKey) or vault.
	Provider      string
	MasterKey     string
	Custody       string
	Refresh       time.Duration
	ClockSkew     time.Duration
	Staleness     time.Duration
	ScheduleEvery time.Duration
	Period        time.Duration
	AutoCreate    bool
	Scheduler     bool

	VaultAddr                string
	VaultNamespace           string
	VaultAuth                string
	VaultToken               string
	VaultAppRoleMount        string
	VaultAppRoleRoleID       string
	VaultAppRoleSecretID     string
	VaultAppRoleSecretIDFile string
	VaultK8sMount            string
	VaultK8sRole             string
	VaultK8sTokenFile        string
	VaultKVMount             string
	VaultKVPrefix            string
	VaultTransitMount        string
	VaultTransitPrefix       string
	VaultTimeout             time.Duration
}

func keysFlags(fs *flag.FlagSet, k *KeysConfig) {
	fs.StringVar(&k.Provider, "keys-provider", "static", "where tenants' request-state keys live: static (one shared ring from --state-keys), local (per-tenant rings in the database, sealed under --keys-master-key), or vault")
	fs.StringVar(&k.MasterKey, "keys-master-key", "", "local provider: base64 master key (≥32 bytes) sealing the rings in the database; share it across replicas")
	fs.StringVar(&k.Custody, "keys-custody", "aes", "kind of key new rings and rotations use: aes (secret held in Vault KV or the database) or transit (Vault Transit; material never leaves Vault)")
	fs.DurationVar(&k.Refresh, "keys-refresh", time.Second, "how often a replica checks that the key store answers, and re-checks every ring it caches while the change feed is behind (one metadata read per ring)")
	fs.DurationVar(&k.ClockSkew, "keys-clock-skew", 5*time.Second, "largest clock difference assumed between replicas; the propagation margin is the slower of keys-refresh and catalogue-refresh, plus this")
	fs.DurationVar(&k.Staleness, "keys-staleness", 5*time.Minute, "how long a replica serves cached rings while the key store does not answer; after that, tenants fail closed")
	fs.DurationVar(&k.ScheduleEvery, "keys-schedule-interval", 10*time.Second, "how often the rotation scheduler looks for due phases")
	fs.DurationVar(&k.Period, "keys-rotation-period", 30*24*time.Hour, "rotation period of new rings (changeable per tenant through the admin API)")
	fs.BoolVar(&k.AutoCreate, "keys-auto-create", true, "give a tenant without a ring a fresh one on first use (false: it fails closed until an admin creates one)")
	fs.BoolVar(&k.Scheduler, "keys-scheduler", true, "run the rotation scheduler on this replica")
	fs.StringVar(&k.VaultAddr, "vault-addr", "", "Vault URL, e.g. https://vault.internal:8200 (TLS settings from VAULT_CACERT and friends)")
	fs.StringVar(&k.VaultNamespace, "vault-namespace", "", "Vault Enterprise namespace")
	fs.StringVar(&k.VaultAuth, "vault-auth", "token", "Vault authentication: token, approle or kubernetes")
	fs.StringVar(&k.VaultToken, "vault-token", "", "Vault token (vault-auth=token); prefer the environment variable to a flag")
	fs.StringVar(&k.VaultAppRoleMount, "vault-approle-mount", "approle", "AppRole auth mount")
	fs.StringVar(&k.VaultAppRoleRoleID, "vault-approle-role-id", "", "AppRole role id")
	fs.StringVar(&k.VaultAppRoleSecretID, "vault-approle-secret-id", "", "AppRole secret id; prefer vault-approle-secret-id-file")
	fs.StringVar(&k.VaultAppRoleSecretIDFile, "vault-approle-secret-id-file", "", "file holding the AppRole secret id, read at every login")
	fs.StringVar(&k.VaultK8sMount, "vault-kubernetes-mount", "kubernetes", "Kubernetes auth mount")
	fs.StringVar(&k.VaultK8sRole, "vault-kubernetes-role", "", "Vault role for Kubernetes service-account login")
	fs.StringVar(&k.VaultK8sTokenFile, "vault-kubernetes-token-file", "/var/run/secrets/kubernetes.io/serviceaccount/token", "service-account token file, read at every login")
	fs.StringVar(&k.VaultKVMount, "vault-kv-mount", "secret", "KV v2 mount holding the rings")
	fs.StringVar(&k.VaultKVPrefix, "vault-kv-prefix", "opsmcp/keyrings", "folder under the KV mount: one entry per tenant")
	fs.StringVar(&k.VaultTransitMount, "vault-transit-mount", "transit", "Transit mount for transit custody")
	fs.StringVar(&k.VaultTransitPrefix, "vault-transit-prefix", "opsmcp-", "prefix of every tenant's Transit key name")
	fs.DurationVar(&k.VaultTimeout, "vault-timeout", 5*time.Second, "timeout of each request to Vault")
}

func (k *KeysConfig) validate() []error {
	var errs []error
	switch k.Provider {
	case "static":
	case "local":
		if keys, err := keyList("keys-master-key", k.MasterKey); err != nil || len(keys) != 1 {
			errs = append(errs, errors.New("keys-provider=local needs keys-master-key: base64 of at least 32 random bytes (openssl rand -base64 32)"))
		}
		if k.Custody != "aes" {
			errs = append(errs, errors.New("keys-provider=local holds aes keys only: keys-custody must be aes"))
		}
	case "vault":
		if k.VaultAddr == "" {
			errs = append(errs, errors.New("keys-provider=vault needs vault-addr"))
		}
		switch k.VaultAuth {
		case "token", "approle", "kubernetes":
		default:
			errs = append(errs, fmt.Errorf("vault-auth must be token, approle or kubernetes, not %q", k.VaultAuth))
		}
	default:
		errs = append(errs, fmt.Errorf("keys-provider must be static, local or vault, not %q", k.Provider))
	}
	switch k.Custody {
	case "aes", "transit":
	default:
		errs = append(errs, fmt.Errorf("keys-custody must be aes or transit, not %q", k.Custody))
	}
	if k.Refresh < 10*time.Millisecond {
		errs = append(errs, errors.New("keys-refresh must be at least 10ms"))
	}
	if k.ClockSkew < 0 {
		errs = append(errs, errors.New("keys-clock-skew must not be negative"))
	}
	if k.Staleness < 2*k.Refresh {
		errs = append(errs, errors.New("keys-staleness must be at least twice keys-refresh"))
	}
	if k.ScheduleEvery < 10*time.Millisecond {
		errs = append(errs, errors.New("keys-schedule-interval must be at least 10ms"))
	}
	if k.Period < time.Second {
		errs = append(errs, errors.New("keys-rotation-period must be at least 1s"))
	}
	if k.VaultTimeout <= 0 {
		errs = append(errs, errors.New("vault-timeout must be positive"))
	}
	return errs
}
