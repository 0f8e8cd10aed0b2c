// Package config loads the platform's settings from, in order of
// precedence, command-line flags, PLATFORM_* environment variables and an
// optional YAML file, over built-in defaults.
package config

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/opsmcp/platform/feed"
)

// Config is every setting of `platform serve`.
type Config struct {
	Listen               string
	DatabaseURL          string
	BootstrapToken       string
	KeepBootstrapToken   bool
	Migrate              bool
	PublicURL            string
	MaxBodyBytes         int64
	MaxMCPBodyBytes      int64
	LogFormat            string
	LogLevel             string
	Metrics              bool
	MetricsToken         string
	ShutdownTimeout      time.Duration
	AllowPrivateWebhooks bool // alias of AllowPrivateTargets; read PrivateTargets
	WebhookMaxResponse   int64
	CatalogueRefresh     time.Duration
	// FullCheck is how often a replica compares every catalogue and key
	// ring it caches with the database and the key store: the change
	// feed's safety net.
	FullCheck time.Duration
	// CatalogueCacheBytes bounds the tenants' catalogue snapshots a
	// replica keeps (estimated bytes); the least recently used are
	// evicted past it, and load again on their next request.
	CatalogueCacheBytes int64
	// MemoryLimitBytes is the memory the replica may use (its
	// container's limit); 0 means the cgroup's limit, if any. Under a
	// known limit the replica tunes Go's collector (internal/memlimit).
	MemoryLimitBytes  int64
	StateKeys         string
	SecretsKeys       string
	ConfigFile        string
	AdminIssuer       string
	AdminClientID     string
	AdminClientSecret string
	AdminRolesClaim   string
	AdminSessionKey   string
	Keys              KeysConfig
	Flows             FlowsConfig
	Limits            LimitsConfig
	Legacy            LegacyConfig

	// AllowPrivateTargets lets every outbound call a tenant controls
	// (webhooks, OpenID discovery, JWKS, redirects) reach loopback,
	// private and link-local addresses: development and tests only. Its
	// earlier name, AllowPrivateWebhooks, is an alias: either one set
	// allows, so read PrivateTargets rather than either field.
	AllowPrivateTargets bool
	// TokenCacheTTL bounds how long a verified bearer token is remembered
	// (never past its own expiry); 0 disables the cache.
	TokenCacheTTL time.Duration
	// TokenCacheSize bounds how many verified tokens are remembered.
	TokenCacheSize int
	HTTP           HTTPConfig
}

// EnvName is the environment variable for a flag name:
// "database-url" -> "PLATFORM_DATABASE_URL".
func EnvName(flagName string) string {
	return "PLATFORM_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Flags registers every setting on fs, with its default, and returns the
// config they fill.
func Flags(fs *flag.FlagSet) *Config {
	c := &Config{}
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8080", "address to listen on (host:port)")
	fs.StringVar(&c.DatabaseURL, "database-url", "sqlite:data/platform.db", "database: sqlite:PATH for the embedded database, or postgres://… for PostgreSQL")
	fs.StringVar(&c.BootstrapToken, "bootstrap-token", "", "admin bearer token for a first start: at least 32 characters, refused once admin-issuer is set unless keep-bootstrap-token (kept only as a hash in memory; prefer the environment variable to a flag)")
	fs.BoolVar(&c.KeepBootstrapToken, "keep-bootstrap-token", false, "keep accepting bootstrap-token although admin-issuer is configured (default: refuse to start with both)")
	fs.BoolVar(&c.Migrate, "migrate", true, "apply pending database migrations at start")
	fs.StringVar(&c.PublicURL, "public-url", "", "external base URL of this platform, e.g. https://mcp.example.com (default: http://LISTEN)")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", 1<<20, "largest admin API request body, in bytes")
	fs.Int64Var(&c.MaxMCPBodyBytes, "max-mcp-body-bytes", 4<<20, "largest MCP request body, in bytes")
	fs.StringVar(&c.LogFormat, "log-format", "auto", "log format: json, text, or auto (text on a terminal, else json)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&c.Metrics, "metrics", true, "serve Prometheus metrics at /metrics (traces and OTLP metrics follow the standard OTEL_* variables)")
	fs.StringVar(&c.MetricsToken, "metrics-token", "", "bearer token /metrics requires (default: none; tenant slugs are metric labels, so guard it here or at the ingress)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long to drain in-flight requests on SIGINT/SIGTERM")
	fs.BoolVar(&c.AllowPrivateTargets, "allow-private-targets", false, "let webhooks, OpenID discovery, JWKS fetches and their redirects reach loopback, private and link-local addresses, and issuers on loopback over plain http (tests and dev only)")
	fs.BoolVar(&c.AllowPrivateWebhooks, "allow-private-webhooks", false, "alias of --allow-private-targets (its earlier name); either one set allows")
	fs.DurationVar(&c.TokenCacheTTL, "token-cache-ttl", time.Minute, "longest a verified bearer token is remembered, never past its expiry (0 disables the cache)")
	fs.IntVar(&c.TokenCacheSize, "token-cache-size", 10000, "most verified bearer tokens remembered, across tenants")
	fs.Int64Var(&c.WebhookMaxResponse, "webhook-max-response-bytes", 4<<20, "largest webhook answer accepted, in bytes")
	fs.DurationVar(&c.CatalogueRefresh, "catalogue-refresh", time.Second, "how often each replica reads the change feed (catalogues, settings, issuers, key rings changed elsewhere) when no notification woke it")
	fs.DurationVar(&c.FullCheck, "full-check", feed.DefaultFullCheck, "how often each replica compares every catalogue and key ring it caches with the database and key store, the change feed's safety net")
	fs.Int64Var(&c.CatalogueCacheBytes, "catalogue-cache-bytes", 1<<30, "bound on the tenants' catalogues a replica keeps in memory, in bytes (estimated); the least recently used are evicted past it and load again on their next request")
	fs.Int64Var(&c.MemoryLimitBytes, "memory-limit-bytes", 0, "memory this replica may use, in bytes: its container's limit (0: the cgroup's limit, if any; the smaller of the two counts); under a known limit Go's collector runs less often, its heap kept under nine tenths of the limit (docs/operating.md, Sizing a replica)")
	fs.StringVar(&c.StateKeys, "state-keys", "", "comma-separated base64 request-state secrets (≥32 bytes each), minting key first; shared by all replicas (default: a random per-process key)")
	fs.StringVar(&c.SecretsKeys, "secrets-keys", "", "comma-separated base64 keys (≥32 bytes each) sealing webhook secrets in the database, sealing key first; the same on every replica (default: none, and secrets are stored unsealed)")
	fs.StringVar(&c.ConfigFile, "config", "", "optional YAML file of settings, keyed by flag name")
	fs.StringVar(&c.AdminIssuer, "admin-issuer", "", "OIDC issuer admins sign in with (authorization code + PKCE); empty disables admin sign-in")
	fs.StringVar(&c.AdminClientID, "admin-client-id", "", "OAuth client id of the admin sign-in")
	fs.StringVar(&c.AdminClientSecret, "admin-client-secret", "", "OAuth client secret of the admin sign-in (empty for a public PKCE client)")
	fs.StringVar(&c.AdminRolesClaim, "admin-roles-claim", "roles", "ID-token claim listing an admin's roles: platform-admin, viewer, tenant-admin:<slug>")
	fs.StringVar(&c.AdminSessionKey, "admin-session-key", "", "base64 key (≥32 bytes) signing admin session cookies; share it across replicas (default: random per process)")
	keysFlags(fs, &c.Keys)
	flowsFlags(fs, &c.Flows)
	limitsFlags(fs, &c.Limits)
	legacyFlags(fs, &c.Legacy)
	httpFlags(fs, &c.HTTP)
	return c
}

// Load parses args into a Config: flags win over PLATFORM_* environment
// variables, which win over the YAML file named by --config (or
// PLATFORM_CONFIG), which wins over defaults.
func Load(fs *flag.FlagSet, args []string, getenv func(string) string) (*Config, error) {
	c := Flags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	fromEnv := func(name string) (string, bool) {
		v := getenv(EnvName(name))
		return v, v != ""
	}
	if !onCommandLine["config"] {
		if v, ok := fromEnv("config"); ok {
			c.ConfigFile = v
		}
	}
	if c.ConfigFile != "" {
		values, err := readYAML(c.ConfigFile)
		if err != nil {
			return nil, err
		}
		names := make([]string, 0, len(values))
		for k := range values {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, name := range names {
			if name == "config" || fs.Lookup(name) == nil {
				return nil, fmt.Errorf("config file %s: unknown setting %q", c.ConfigFile, name)
			}
			if _, env := fromEnv(name); onCommandLine[name] || env {
				continue
			}
			if err := fs.Set(name, values[name]); err != nil {
				return nil, fmt.Errorf("config file %s: %s: %w", c.ConfigFile, name, err)
			}
		}
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := fromEnv(f.Name); ok && !onCommandLine[f.Name] && f.Name != "config" && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", EnvName(f.Name), e)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return c, c.Validate()
}

func readYAML(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	var raw map[string]any
	if err := yaml.NewDecoder(io.LimitReader(f, 1<<20)).Decode(&raw); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		switch v := v.(type) {
		case string:
			out[k] = v
		case bool:
			out[k] = strconv.FormatBool(v)
		case int:
			out[k] = strconv.Itoa(v)
		case float64:
			out[k] = strconv.FormatFloat(v, 'f', -1, 64)
		case []any:
			parts := make([]string, len(v))
			for i, p := range v {
				parts[i] = fmt.Sprint(p)
			}
			out[k] = strings.Join(parts, ",")
		default:
			return nil, fmt.Errorf("config file %s: %s: want a scalar or a list, got %T", path, k, v)
		}
	}
	return out, nil
}

// Validate checks every setting and says what is wrong with each bad
// one. Load calls it; so does server.New, for configurations built in
// code.
func (c *Config) Validate() error {
	var errs []error
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, errors.New("max-body-bytes must be at least 1024"))
	}
	if c.MaxMCPBodyBytes < 1024 {
		errs = append(errs, errors.New("max-mcp-body-bytes must be at least 1024"))
	}
	switch c.LogFormat {
	case "auto", "json", "text":
	default:
		errs = append(errs, fmt.Errorf("log-format must be auto, json or text, not %q", c.LogFormat))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log-level must be debug, info, warn or error, not %q", c.LogLevel))
	}
	if c.CatalogueCacheBytes < 1<<20 {
		errs = append(errs, errors.New("catalogue-cache-bytes must be at least 1048576 (1 MiB)"))
	}
	if c.MemoryLimitBytes < 0 {
		errs = append(errs, errors.New("memory-limit-bytes must not be negative (0: the cgroup's limit)"))
	}
	if c.CatalogueRefresh < 10*time.Millisecond {
		errs = append(errs, errors.New("catalogue-refresh must be at least 10ms"))
	}
	if c.FullCheck < time.Second {
		errs = append(errs, errors.New("full-check must be at least 1s"))
	}
	if c.TokenCacheTTL < 0 || c.TokenCacheTTL > time.Hour {
		errs = append(errs, errors.New("token-cache-ttl must be between 0 (off) and 1h"))
	}
	if c.TokenCacheSize < 1 || c.TokenCacheSize > 10_000_000 {
		errs = append(errs, errors.New("token-cache-size must be between 1 and 10000000"))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("shutdown-timeout must be positive"))
	}
	for _, read := range []func() error{
		func() error { _, err := c.SecretKeys(); return err },
		func() error { _, err := c.StateKeySecrets(); return err },
		func() error { _, err := c.SessionKey(); return err },
	} {
		if err := read(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.AdminIssuer != "" && c.AdminClientID == "" {
		errs = append(errs, errors.New("admin-issuer needs admin-client-id"))
	}
	errs = append(errs, c.Keys.validate()...)
	errs = append(errs, c.Flows.validate()...)
	errs = append(errs, c.Limits.validate()...)
	errs = append(errs, c.Legacy.validate()...)
	errs = append(errs, c.HTTP.validate()...)
	if c.HTTP.MetricsListen != "" && !c.Metrics {
		errs = append(errs, errors.New("metrics-listen is set but metrics is off: set metrics=true, or drop metrics-listen"))
	}
	errs = append(errs, c.checkBootstrap()...)
	return errors.Join(errs...)
}

// PrivateTargets reports whether outbound calls a tenant controls may
// reach private addresses: --allow-private-targets or its alias
// --allow-private-webhooks.
func (c *Config) PrivateTargets() bool { return c.AllowPrivateTargets || c.AllowPrivateWebhooks }

// SecretKeys decodes --secrets-keys: nil when unset.
func (c *Config) SecretKeys() ([][]byte, error) { return keyList("secrets-keys", c.SecretsKeys) }

// StateKeySecrets decodes --state-keys, minting key first: nil when unset
// (a random per-process key).
func (c *Config) StateKeySecrets() ([][]byte, error) { return keyList("state-keys", c.StateKeys) }

// SessionKey decodes --admin-session-key: nil when unset (a random key
// per process).
func (c *Config) SessionKey() ([]byte, error) {
	keys, err := keyList("admin-session-key", c.AdminSessionKey)
	if err != nil || keys == nil {
		return nil, err
	}
	if len(keys) != 1 {
		return nil, errors.New("admin-session-key: one key, not a list")
	}
	return keys[0], nil
}

// keyList decodes a setting holding comma-separated base64 keys (standard
// or URL alphabet) of at least 32 bytes each: the one reader of every
// key setting.
func keyList(setting, value string) ([][]byte, error) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var out [][]byte
	for i, k := range strings.Split(value, ",") {
		k = strings.TrimSpace(k)
		b, err := base64.StdEncoding.DecodeString(k)
		if err != nil {
			b, err = base64.RawURLEncoding.DecodeString(k)
		}
		if err != nil || len(b) < 32 {
			return nil, fmt.Errorf("%s: key %d must be base64 of at least 32 random bytes (openssl rand -base64 32)", setting, i+1)
		}
		out = append(out, b)
	}
	return out, nil
}

// Usage writes every setting with its environment variable and default.
func Usage(w io.Writer, fs *flag.FlagSet, synopsis string) {
	fmt.Fprintf(w, "%s\n\nSettings (flag, environment variable, default). Precedence: flag > environment > --config YAML file > default.\n\n", synopsis)
	fs.VisitAll(func(f *flag.Flag) {
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(w, "  --%s  (%s, default %s)\n      %s\n", f.Name, EnvName(f.Name), def, f.Usage)
	})
}
