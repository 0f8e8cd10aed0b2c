package server_test

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/server"
)

// TestNewChecksEverySettingBeforeOpeningAnything: a configuration New
// refuses leaves no trace (no database file, nothing listening, no
// telemetry), and New never changes the caller's configuration.
func TestNewChecksEverySettingBeforeOpeningAnything(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(c *config.Config)
	}{
		{"admin session key not base64", func(c *config.Config) { c.AdminSessionKey = "not base64!" }},
		{"admin session key too short", func(c *config.Config) { c.AdminSessionKey = "c2hvcnQ=" }},
		{"admin issuer without a client", func(c *config.Config) { c.AdminIssuer = "https://id.example" }},
		{"state keys", func(c *config.Config) { c.StateKeys = "dG9vIHNob3J0" }},
		{"secrets keys", func(c *config.Config) { c.SecretsKeys = "%%%" }},
		{"trusted proxies", func(c *config.Config) { c.HTTP.TrustedProxies = "10.0.0.0/99" }},
		{"local keys without a master key", func(c *config.Config) { c.Keys.Provider = "local" }},
		{"bootstrap token too short", func(c *config.Config) { c.BootstrapToken = "short" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Load(flag.NewFlagSet("t", flag.ContinueOnError), nil, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			db := filepath.Join(t.TempDir(), "data", "platform.db")
			cfg.DatabaseURL = "sqlite:" + db
			tc.set(cfg)
			before := *cfg
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			if s, err := server.New(context.Background(), cfg, log, "test"); err == nil {
				s.Close()
				t.Fatal("a bad configuration was accepted")
			}
			if _, err := os.Stat(db); !os.IsNotExist(err) {
				t.Fatalf("the database was opened before the configuration was refused: %v", err)
			}
			if cfg.PublicURL != before.PublicURL || cfg.DatabaseURL != before.DatabaseURL {
				t.Fatal("New changed the caller's configuration")
			}
		})
	}
}
