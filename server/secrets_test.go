package server_test

import (
	"bytes"
	"encoding/base64"
	"flag"
	"strings"
	"testing"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/internal/platformtest"
	"github.com/opsmcp/platform/store"
)

// TestWhereTheWebhookSecretsKeyComesFrom: --secrets-keys seals webhook
// secrets; without it the local keys provider's master key does; with
// neither they are stored as written, and the start says so.
func TestWhereTheWebhookSecretsKeyComesFrom(t *testing.T) {
	mk := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	for _, c := range []struct {
		name   string
		cfg    func(*config.Config)
		sealed bool
		log    string
	}{
		{"secrets-keys", func(*config.Config) {}, true, `"key_from":"secrets-keys"`},
		{"master key", func(c *config.Config) {
			c.SecretsKeys, c.Keys.Provider, c.Keys.MasterKey = "", "local", mk
		}, true, `"key_from":"keys-master-key"`},
		{"none", func(c *config.Config) { c.SecretsKeys = "" }, false, "webhook secrets are stored unsealed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := platformtest.Start(t, platformtest.SQLiteURL(t), platformtest.WithConfig(c.cfg))
			p.Tenant(t, "acme")
			secret := p.Tool(t, "acme", map[string]any{"name": "order", "description": "x",
				"inputSchema": map[string]any{"type": "object"}, "handler": map[string]any{"url": "http://127.0.0.1:1/hook"}})
			var stored []string
			if err := p.Server.Store().DB().Model(&store.Item{}).Where("name = ?", "order").Pluck("webhook_secret", &stored).Error; err != nil || len(stored) != 1 {
				t.Fatalf("read the column: %v %v", stored, err)
			}
			if got := store.Sealed(stored[0]); got != c.sealed || (c.sealed && strings.Contains(stored[0], secret)) {
				t.Fatalf("stored %q for secret %q: sealed %v, want %v", stored[0], secret, got, c.sealed)
			}
			if !strings.Contains(p.Logs.String(), c.log) {
				t.Fatalf("the start did not log %s", c.log)
			}
		})
	}
}

// TestABadSecretsKeyIsRefusedWithoutEchoingIt: a secrets key that is not
// base64 of 32 bytes stops the start with an error naming the setting,
// not the value.
func TestABadSecretsKeyIsRefusedWithoutEchoingIt(t *testing.T) {
	const short = "c2hvcnQta2V5LXNlY3JldC12YWx1ZQ==" // 22 bytes
	for _, v := range []string{short, "not base64 at all!", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32)) + "," + short} {
		_, err := config.Load(flag.NewFlagSet("t", flag.ContinueOnError), nil, func(k string) string {
			if k == "PLATFORM_SECRETS_KEYS" {
				return v
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), "secrets-keys") {
			t.Fatalf("%q: %v", v, err)
		}
		if strings.Contains(err.Error(), short) || strings.Contains(err.Error(), "not base64 at all") {
			t.Fatalf("the error echoes the key: %v", err)
		}
	}
}
