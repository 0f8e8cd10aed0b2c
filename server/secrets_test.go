package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"flag"
	"strings"
	"testing"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
)

// storedSecret reads the webhook_secret column of the tool named name.
func storedSecret(t *testing.T, p *platformtest.Platform, name string) string {
	t.Helper()
	stored := platformtest.SQL(t, p.DatabaseURL).Strings(t, "SELECT webhook_secret FROM catalogue_items WHERE name = ?", name)
	if len(stored) != 1 {
		t.Fatalf("read the column: %v", stored)
	}
	return stored[0]
}

func hookTool(name string) map[string]any {
	return map[string]any{"name": name, "description": "x", "inputSchema": map[string]any{"type": "object"},
		"handler": map[string]any{"url": "http://127.0.0.1:1/hook"}}
}

// TestSecretsStoredBeforeSealingAreSealedAtTheNextStart: a platform
// without --secrets-keys stores secrets as written and says so at start;
// a replica started with a key on the same database seals them, and
// serves the tool with the same secret.
func TestSecretsStoredBeforeSealingAreSealedAtTheNextStart(t *testing.T) {
	db := platformtest.SQLiteURL(t)
	plain := platformtest.Start(t, db, platformtest.WithConfig(func(c *config.Config) { c.SecretsKeys = "" }))
	if !strings.Contains(plain.Logs.String(), "webhook secrets are stored unsealed") {
		t.Fatal("a start without a secrets key did not warn")
	}
	plain.Tenant(t, "acme")
	secret := plain.Tool(t, "acme", hookTool("order"))
	if got := storedSecret(t, plain, "order"); got != secret {
		t.Fatalf("without a key: stored %q", got)
	}

	sealed := platformtest.Start(t, db)
	if got := storedSecret(t, sealed, "order"); !store.Sealed(got) || strings.Contains(got, secret) {
		t.Fatalf("after a start with a key: stored %q", got)
	}
	if !strings.Contains(sealed.Logs.String(), `"resealed":1`) {
		t.Fatal("the start did not report the reseal")
	}
	c, err := sealed.Server.Store().Tenants().LoadCatalogue(context.Background(), "acme")
	if err != nil || len(c.Items) != 1 || *c.Items[0].WebhookSecret != secret {
		t.Fatalf("the catalogue the sealing replica signs with: %v", err)
	}
}

// TestAnUnmigratedDatabaseStillStartsWithASecretsKey: with migrations
// left to a separate job, a replica with a secrets key starts and reports
// the pending migrations instead of failing on the missing tables.
func TestAnUnmigratedDatabaseStillStartsWithASecretsKey(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t), platformtest.WithConfig(func(c *config.Config) { c.Migrate = false }))
	if !strings.Contains(p.Logs.String(), "not migrated yet") {
		t.Fatal("the start did not say why it did not reseal")
	}
}

// TestAReplicaThatCannotOpenARotatedSecretFailsTheTenantClosed: replica
// b, with a key replica a lacks, rotates a tool's webhook secret. Replica
// a, which had the tenant loaded, must not keep signing with the old
// secret: once it sees the change it answers for the tenant with an
// error, and its log says why.
func TestAReplicaThatCannotOpenARotatedSecretFailsTheTenantClosed(t *testing.T) {
	db := platformtest.SQLiteURL(t)
	a := platformtest.Start(t, db)
	a.Tenant(t, "acme")
	a.Tool(t, "acme", hookTool("order"))
	if r := a.MCP(t, "acme", "tools/list", nil); r.Status != 200 {
		t.Fatalf("tools/list on a: %d %s", r.Status, r.Body)
	}
	other := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{5}, 32))
	b := platformtest.Start(t, db, platformtest.WithConfig(func(c *config.Config) { c.SecretsKeys = other }))
	b.MustAdmin(t, 200, "POST", "/api/v1/tenants/acme/tools/order/webhook-secret", nil)

	testwait.Until(t, "a stops serving the tenant whose secret it cannot open", func() bool {
		return a.MCP(t, "acme", "tools/list", nil).Status == 503
	})
	if !strings.Contains(a.Logs.String(), store.ErrSecretUnreadable.Error()) {
		t.Fatal("a's log does not say why the tenant is unavailable")
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
