package store_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// acmeStore is a migrated store at url holding the tenant acme, sealing
// under key(1) when sealed is set.
func acmeStore(t testing.TB, url string, sealed bool) *store.Store {
	t.Helper()
	ctx := context.Background()
	st := platformtest.Store(t, url)
	if sealed {
		box, err := store.NewSecretBox(key(1))
		if err != nil {
			t.Fatal(err)
		}
		st.SealSecretsWith(box)
	}
	if err := st.Tenants().Create(ctx, &store.Tenant{Slug: "acme", DisplayName: "Acme", Settings: "{}"}, false); err != nil {
		t.Fatal(err)
	}
	return st
}

// storedSecret is the webhook_secret column of an item, as the database
// at url holds it.
func storedSecret(t *testing.T, url, id string) string {
	t.Helper()
	v := platformtest.SQL(t, url).Strings(t, "SELECT webhook_secret FROM catalogue_items WHERE id = ?", id)
	if len(v) != 1 {
		t.Fatalf("read the stored secret: %v", v)
	}
	return v[0]
}

func secretOf(t *testing.T, st *store.Store, slug, name string) string {
	t.Helper()
	c, err := st.Tenants().LoadCatalogue(context.Background(), slug)
	if err != nil {
		t.Fatalf("load catalogue: %v", err)
	}
	for _, it := range c.Items {
		if it.Name == name && it.WebhookSecret != nil {
			return *it.WebhookSecret
		}
	}
	t.Fatalf("no secret for %s", name)
	return ""
}

func addTool(t *testing.T, st *store.Store, slug, name, secret string) *store.Item {
	t.Helper()
	it := &store.Item{Kind: "tool", Name: name, Spec: `{"name":"` + name + `"}`, WebhookSecret: &secret}
	if err := st.Tenants().CreateItem(context.Background(), slug, it, 0, nil); err != nil {
		t.Fatal(err)
	}
	return it
}

// TestWebhookSecretsAreSealedAtRest: with a secrets key, the database
// holds no webhook secret in plaintext, on create, on update and after a
// rotation of the secret, while LoadCatalogue (what signs deliveries)
// reads the plaintext back.
func TestWebhookSecretsAreSealedAtRest(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			ctx := context.Background()
			url := d.New(t)
			st := acmeStore(t, url, true)
			const first = "whsec_first-secret-0123456789"
			it := addTool(t, st, "acme", "order", first)
			if *it.WebhookSecret != first {
				t.Fatalf("the caller's item changed: %q", *it.WebhookSecret)
			}
			raw := storedSecret(t, url, it.ID)
			if !store.Sealed(raw) || strings.Contains(raw, first) {
				t.Fatalf("stored after create: %q", raw)
			}
			if got := secretOf(t, st, "acme", "order"); got != first {
				t.Fatalf("loaded %q", got)
			}

			// An update that leaves the secret alone keeps it readable.
			if _, err := st.Tenants().UpdateItem(ctx, "acme", "tool", "order", 0, func(it *store.Item) error { it.Spec = `{"name":"order","x":1}`; return nil }, nil); err != nil {
				t.Fatal(err)
			}
			if got := secretOf(t, st, "acme", "order"); got != first {
				t.Fatalf("after an update: %q", got)
			}
			// A rotated secret is sealed too.
			const second = "whsec_second-secret-9876543210"
			if _, err := st.Tenants().UpdateItem(ctx, "acme", "tool", "order", 0, func(it *store.Item) error { s := second; it.WebhookSecret = &s; return nil }, nil); err != nil {
				t.Fatal(err)
			}
			if raw := storedSecret(t, url, it.ID); !store.Sealed(raw) || strings.Contains(raw, second) {
				t.Fatalf("stored after rotation: %q", raw)
			}
			if got := secretOf(t, st, "acme", "order"); got != second {
				t.Fatalf("after rotation: %q", got)
			}
		})
	}
}

// TestSecretsWrittenBeforeAKeyAreSealedAndKeysRotate: secrets stored in
// plaintext before a key was configured are sealed by SealStoredSecrets;
// with a new key first and the old one after, they are resealed under the
// new key, and once the old key is dropped they still open.
func TestSecretsWrittenBeforeAKeyAreSealedAndKeysRotate(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) { secretsWrittenBeforeAKey(t, d.New(t)) })
	}
}

func secretsWrittenBeforeAKey(t *testing.T, url string) {
	ctx := context.Background()
	st := acmeStore(t, url, false)
	const secret = "whsec_legacy-plaintext-secret"
	it := addTool(t, st, "acme", "order", secret)
	if raw := storedSecret(t, url, it.ID); raw != secret {
		t.Fatalf("without a key the secret is stored as is: %q", raw)
	}

	old, _ := store.NewSecretBox(key(1))
	st.SealSecretsWith(old)
	if r, err := st.Tenants().SealStoredSecrets(ctx); err != nil || r.Resealed != 1 || r.Unreadable != 0 {
		t.Fatalf("sealing the legacy secret: %+v %v", r, err)
	}
	sealedOld := storedSecret(t, url, it.ID)
	if !store.Sealed(sealedOld) || secretOf(t, st, "acme", "order") != secret {
		t.Fatalf("after sealing: %q", sealedOld)
	}
	if r, _ := st.Tenants().SealStoredSecrets(ctx); r.Resealed != 0 {
		t.Fatalf("a second pass resealed %d", r.Resealed)
	}

	rotated, _ := store.NewSecretBox(key(2), key(1))
	st.SealSecretsWith(rotated)
	if got := secretOf(t, st, "acme", "order"); got != secret {
		t.Fatalf("the old key no longer opens: %q", got)
	}
	if r, err := st.Tenants().SealStoredSecrets(ctx); err != nil || r.Resealed != 1 {
		t.Fatalf("resealing under the new key: %+v %v", r, err)
	}
	newOnly, _ := store.NewSecretBox(key(2))
	st.SealSecretsWith(newOnly)
	if got := secretOf(t, st, "acme", "order"); got != secret {
		t.Fatalf("under the new key alone: %q", got)
	}

	// An update that read a value under the old key (a reseal came in
	// between) writes it back under the new one.
	platformtest.SQL(t, url).Exec(t, "UPDATE catalogue_items SET webhook_secret = ? WHERE id = ?", sealedOld, it.ID)
	st.SealSecretsWith(rotated)
	if _, err := st.Tenants().UpdateItem(ctx, "acme", "tool", "order", 0, func(it *store.Item) error { it.Spec = `{"name":"order","y":2}`; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	st.SealSecretsWith(newOnly)
	if got := secretOf(t, st, "acme", "order"); got != secret {
		t.Fatalf("after an update of an old-key value: %q", got)
	}
}

// TestSealingTheSameSecretTwiceDiffers: every seal takes a fresh nonce,
// so equal secrets do not show as equal values in the database.
func TestSealingTheSameSecretTwiceDiffers(t *testing.T) {
	ctx := context.Background()
	url := platformtest.SQLiteURL(t)
	st := acmeStore(t, url, true)
	a := addTool(t, st, "acme", "alpha", "whsec_same")
	first := storedSecret(t, url, a.ID)
	if _, err := st.Tenants().UpdateItem(ctx, "acme", "tool", "alpha", 0, func(it *store.Item) error { s := "whsec_same"; it.WebhookSecret = &s; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	if second := storedSecret(t, url, a.ID); second == first {
		t.Fatalf("the same secret sealed twice for one item gave the same value %q", first)
	}
}

// TestASecretThatCannotBeOpenedFailsTheLoadWithoutShowingIt: under the
// wrong key, with no key at all, or copied into another item's row, a
// sealed secret fails the catalogue load (the tenant fails closed) with
// an error naming the item and never the value.
func TestASecretThatCannotBeOpenedFailsTheLoadWithoutShowingIt(t *testing.T) {
	ctx := context.Background()
	url := platformtest.SQLiteURL(t)
	st := acmeStore(t, url, true)
	a := addTool(t, st, "acme", "alpha", "whsec_alpha")
	b := addTool(t, st, "acme", "beta", "whsec_beta")

	check := func(what string) {
		t.Helper()
		_, err := st.Tenants().LoadCatalogue(ctx, "acme")
		if !errors.Is(err, store.ErrSecretUnreadable) {
			t.Fatalf("%s: %v", what, err)
		}
		if strings.Contains(err.Error(), "sealed:v1:") || strings.Contains(err.Error(), "whsec_") {
			t.Fatalf("%s: the error shows the secret: %v", what, err)
		}
	}
	wrong, _ := store.NewSecretBox(key(9))
	st.SealSecretsWith(wrong)
	check("under another key")
	if r, err := st.Tenants().SealStoredSecrets(ctx); err != nil || r.Unreadable != 2 || r.Resealed != 0 {
		t.Fatalf("a reseal under another key: %+v %v", r, err)
	}
	st.SealSecretsWith(nil)
	check("with no key")

	box, _ := store.NewSecretBox(key(1)) // acmeStore's key
	st.SealSecretsWith(box)
	moved := storedSecret(t, url, a.ID)
	platformtest.SQL(t, url).Exec(t, "UPDATE catalogue_items SET webhook_secret = ? WHERE id = ?", moved, b.ID)
	check("copied into another row")
}

func TestSecretBoxRefusesShortKeys(t *testing.T) {
	if _, err := store.NewSecretBox(make([]byte, 31)); err == nil {
		t.Fatal("a 31-byte key was accepted")
	}
	if _, err := store.NewSecretBox(); err == nil {
		t.Fatal("no key was accepted")
	}
}
