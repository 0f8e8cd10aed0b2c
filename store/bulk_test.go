package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// TestCreateCataloguesInsertsTenantsAndItemsInBatches: more tenants than
// one INSERT carries, each with its items, read back as CreateTenant and
// CreateItem would have left them (secrets sealed at rest, opened on
// load); a taken or retired slug anywhere in the call inserts nothing.
func TestCreateCataloguesInsertsTenantsAndItemsInBatches(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := d.New(t)
			st := acmeStore(t, url, true)
			seed := func(prefix string, n int) []store.Catalogue {
				cs := make([]store.Catalogue, n)
				for i := range cs {
					secret := fmt.Sprintf("whsec_%s%d", prefix, i)
					cs[i] = store.Catalogue{
						Tenant: store.Tenant{Slug: fmt.Sprintf("%s%04d", prefix, i), DisplayName: "T"},
						Items: []store.Item{
							{Kind: "tool", Name: "a", Spec: `{"name":"a"}`, WebhookSecret: &secret},
							{Kind: "tool", Name: "b", Spec: `{"name":"b"}`},
						},
					}
				}
				return cs
			}
			cs := seed("t", 450)
			if err := st.Tenants().CreateCatalogues(ctx, cs); err != nil {
				t.Fatal(err)
			}
			for _, i := range []int{0, 199, 200, 449} {
				got, err := st.Tenants().LoadCatalogue(ctx, cs[i].Tenant.Slug)
				if err != nil {
					t.Fatal(err)
				}
				if got.Tenant.ID != cs[i].Tenant.ID || got.Tenant.CatalogueVersion != 1 || got.Tenant.Settings != "{}" || len(got.Items) != 2 {
					t.Fatalf("tenant %d: %+v", i, got)
				}
				a := got.Items[0]
				if a.Name != "a" || a.TenantID != cs[i].Tenant.ID || a.Version != 1 || a.WebhookSecret == nil || *a.WebhookSecret != fmt.Sprintf("whsec_t%d", i) {
					t.Fatalf("tenant %d item a: %+v", i, a)
				}
				if stored := storedSecret(t, url, a.ID); !store.Sealed(stored) {
					t.Fatalf("tenant %d: secret stored as %q", i, stored)
				}
				if got.Items[1].WebhookSecret != nil {
					t.Fatalf("tenant %d: item b has a secret", i)
				}
			}
			slugs := []string{"nobody"}
			for _, c := range cs {
				slugs = append(slugs, c.Tenant.Slug)
			}
			vs, err := st.Tenants().VersionsOf(ctx, slugs) // more than one statement's worth
			if err != nil || len(vs) != 450 {
				t.Fatalf("%d tenants, %v", len(vs), err)
			}
			ids := map[string]string{}
			for _, v := range vs {
				if v.CatalogueVersion != 1 {
					t.Fatalf("version %+v", v)
				}
				ids[v.Slug] = v.ID
			}
			for _, c := range cs {
				if ids[c.Tenant.Slug] != c.Tenant.ID {
					t.Fatalf("%s: id %q, want %q", c.Tenant.Slug, ids[c.Tenant.Slug], c.Tenant.ID)
				}
			}

			// acme is taken: the call fails whole, u0000 included.
			taken := append(seed("u", 300), store.Catalogue{Tenant: store.Tenant{Slug: "acme", DisplayName: "A"}})
			if err := st.Tenants().CreateCatalogues(ctx, taken); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("taken slug: %v", err)
			}
			if _, err := st.Tenants().Get(ctx, "u0000"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("u0000 after a failed call: %v", err)
			}
			if err := st.Tenants().Delete(ctx, "t0449", 0); err != nil {
				t.Fatal(err)
			}
			retired := append(seed("v", 300), store.Catalogue{Tenant: store.Tenant{Slug: "t0449", DisplayName: "A"}})
			if err := st.Tenants().CreateCatalogues(ctx, retired); !errors.Is(err, store.ErrSlugRetired) {
				t.Fatalf("retired slug: %v", err)
			}
			if _, err := st.Tenants().Get(ctx, "v0000"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("v0000 after a failed call: %v", err)
			}
		})
	}
}
