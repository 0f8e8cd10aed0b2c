package main

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// TestResealSecrets: after a new key is put first, reseal-secrets moves
// every stored secret under it and says so; with only a key that opens
// none, it reports them and exits 1; without a key, or with a bad one, it
// refuses (exit 2) without echoing the value.
func TestResealSecrets(t *testing.T) {
	db := platformtest.SQLiteURL(t)
	p := platformtest.Start(t, db)
	p.Tenant(t, "acme")
	secret := p.Tool(t, "acme", map[string]any{"name": "order", "description": "x",
		"inputSchema": map[string]any{"type": "object"}, "handler": map[string]any{"url": "http://127.0.0.1:1/hook"}})
	newKey := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{42}, 32))
	reseal := func(want int, keys string) string {
		t.Helper()
		var out, errb bytes.Buffer
		args := []string{"reseal-secrets", "--database-url", db}
		if keys != "" {
			args = append(args, "--secrets-keys", keys)
		}
		if code := run(args, &out, &errb); code != want {
			t.Fatalf("reseal-secrets: exit %d, want %d\n%s%s", code, want, out.String(), errb.String())
		}
		return out.String() + errb.String()
	}
	if out := reseal(0, newKey+","+platformtest.SecretsKey); !strings.Contains(out, "resealed 1 webhook secret") {
		t.Fatalf("with the new key first:\n%s", out)
	}
	// The new key alone now opens it.
	st, err := store.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	box, _ := store.NewSecretBox(bytes.Repeat([]byte{42}, 32))
	st.SealSecretsWith(box)
	c, err := st.Tenants().LoadCatalogue(t.Context(), "acme")
	if err != nil || *c.Items[0].WebhookSecret != secret {
		t.Fatalf("under the new key alone: %v", err)
	}

	other := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))
	if out := reseal(1, other); !strings.Contains(out, "1 sealed webhook secret(s) open under none") {
		t.Fatalf("with a key that opens nothing:\n%s", out)
	}
	if out := reseal(2, ""); !strings.Contains(out, "secrets-keys") {
		t.Fatalf("without a key:\n%s", out)
	}
	if out := reseal(2, "dG9vLXNob3J0"); !strings.Contains(out, "secrets-keys") || strings.Contains(out, "dG9vLXNob3J0") {
		t.Fatalf("with a short key:\n%s", out)
	}
}
