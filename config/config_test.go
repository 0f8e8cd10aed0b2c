package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func loadArgs(t *testing.T, args []string, env map[string]string) (*Config, error) {
	t.Helper()
	return Load(flag.NewFlagSet("test", flag.ContinueOnError), args, func(k string) string { return env[k] })
}

// --allow-private-targets is the setting; --allow-private-webhooks, its
// earlier name, still works as an alias from every source, and either one
// set allows.
func TestAllowPrivateWebhooksIsAnAliasOfAllowPrivateTargets(t *testing.T) {
	yaml := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(yaml, []byte("allow-private-webhooks: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want bool
	}{
		{"default", nil, nil, false},
		{"new flag", []string{"--allow-private-targets"}, nil, true},
		{"old flag", []string{"--allow-private-webhooks"}, nil, true},
		{"new variable", nil, map[string]string{"PLATFORM_ALLOW_PRIVATE_TARGETS": "true"}, true},
		{"old variable", nil, map[string]string{"PLATFORM_ALLOW_PRIVATE_WEBHOOKS": "true"}, true},
		{"old name in the YAML file", []string{"--config", yaml}, nil, true},
		{"both false", nil, map[string]string{"PLATFORM_ALLOW_PRIVATE_TARGETS": "false", "PLATFORM_ALLOW_PRIVATE_WEBHOOKS": "false"}, false},
	} {
		cfg, err := loadArgs(t, c.args, c.env)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := cfg.PrivateTargets(); got != c.want {
			t.Errorf("%s: PrivateTargets() = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestTokenCacheSettings(t *testing.T) {
	cfg, err := loadArgs(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TokenCacheTTL != time.Minute || cfg.TokenCacheSize != 10000 {
		t.Fatalf("defaults: %v, %d", cfg.TokenCacheTTL, cfg.TokenCacheSize)
	}
	cfg, err = loadArgs(t, nil, map[string]string{"PLATFORM_TOKEN_CACHE_TTL": "0s", "PLATFORM_TOKEN_CACHE_SIZE": "50"})
	if err != nil || cfg.TokenCacheTTL != 0 || cfg.TokenCacheSize != 50 {
		t.Fatalf("from the environment: %v, %v, %d", err, cfg.TokenCacheTTL, cfg.TokenCacheSize)
	}
	for _, env := range []map[string]string{
		{"PLATFORM_TOKEN_CACHE_TTL": "-1s"}, {"PLATFORM_TOKEN_CACHE_TTL": "2h"},
		{"PLATFORM_TOKEN_CACHE_SIZE": "0"}, {"PLATFORM_TOKEN_CACHE_SIZE": "-5"},
	} {
		if _, err := loadArgs(t, nil, env); err == nil || !strings.Contains(err.Error(), "token-cache") {
			t.Errorf("%v: %v, want a token-cache error", env, err)
		}
	}
}
