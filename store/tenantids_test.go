package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// TestMigrationBindsExistingGrantsAndEntriesToTenantIDs: rows written
// before migration 0007 named tenants by slug. The migration grants each
// token the tenant holding the slug now only if that tenant already
// existed when the token was made, and attributes each audit entry to it
// only if the entry is not older than it: a deleted tenant's token and
// history never pass to the new tenant that took its slug. Slugs that are
// prefixes or suffixes of others do not match each other.
func TestMigrationBindsExistingGrantsAndEntriesToTenantIDs(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := d.New(t)
			st, err := store.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if _, err := st.MigrateTo(ctx, 6); err != nil {
				t.Fatal(err)
			}
			db := platformtest.SQL(t, url)
			base := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
			at := func(min int) time.Time { return base.Add(time.Duration(min) * time.Minute) }
			exec := func(sql string, args ...any) {
				t.Helper()
				db.Exec(t, sql, args...)
			}
			tenant := func(id, slug string, created time.Time) {
				exec(`INSERT INTO tenants (id, slug, display_name, settings, version, catalogue_version, created_at, updated_at) VALUES (?, ?, ?, '{}', 1, 1, ?, ?)`, id, slug, slug, created, created)
			}
			token := func(id, role, tenants string, created time.Time) {
				exec(`INSERT INTO api_tokens (id, name, hash, role, tenants, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, 'test', ?, ?)`,
					id, id, "hash-"+id, role, tenants, created, created.Add(24*time.Hour))
			}
			entry := func(id, slug string, when time.Time) {
				exec(`INSERT INTO audit_log (id, at, actor, action, tenant_slug, object, remote_addr, detail) VALUES (?, ?, 'test', 'PATCH', ?, '', '127.0.0.1', '{}')`, id, when, slug)
			}

			tenant("tn_beta", "beta", at(0))
			tenant("tn_acme2", "acme-2", at(0))
			tenant("tn_cme", "cme", at(0))
			// The first acme (tn_old) had a token and history, and was deleted.
			token("tok_old", "tenant-admin", `["acme"]`, at(2))
			entry("au_old", "acme", at(3))
			exec(`INSERT INTO retired_slugs (slug, retired_at) VALUES ('acme', ?)`, at(4))
			// A new acme took the slug.
			tenant("tn_new", "acme", at(5))
			token("tok_new", "tenant-admin", `["acme","beta"]`, at(6))
			token("tok_suffix", "tenant-admin", `["acme-2"]`, at(6))
			token("tok_admin", "platform-admin", `[]`, at(6))
			entry("au_new", "acme", at(7))
			entry("au_gone", "gone", at(7))
			entry("au_none", "", at(7))

			if n, err := st.MigrateTo(ctx, 7); err != nil || n != 1 {
				t.Fatalf("migrate: %d applied, %v", n, err)
			}
			want := map[string][]string{"tok_old": nil, "tok_new": {"tn_beta", "tn_new"}, "tok_suffix": {"tn_acme2"}, "tok_admin": nil}
			for id, ids := range want {
				tok, err := st.Credentials().APITokenByHash(ctx, "hash-"+id)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(tok.TenantIDs, ids) {
					t.Errorf("%s granted %v, want %v", id, tok.TenantIDs, ids)
				}
			}
			entries, err := st.Audit().List(ctx, "", time.Time{}, 100)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, e := range entries {
				got[e.ID] = e.TenantID
				if e.TenantSlug == "" && e.ID != "au_none" {
					t.Errorf("%s lost its slug", e.ID)
				}
			}
			for id, tenantID := range map[string]string{"au_old": "", "au_new": "tn_new", "au_gone": "", "au_none": ""} {
				if got[id] != tenantID {
					t.Errorf("%s attributed to %q, want %q", id, got[id], tenantID)
				}
			}
			newAcme, err := st.Audit().List(ctx, "tn_new", time.Time{}, 100)
			if err != nil || len(newAcme) != 1 || newAcme[0].ID != "au_new" {
				t.Fatalf("the new acme's log: %+v %v", newAcme, err)
			}
		})
	}
}

// TestDeletingATenantRevokesItsTokenGrants: a token's grant goes with its
// tenant, so the token does not reach a new tenant given the slug, on
// both databases.
func TestDeletingATenantRevokesItsTokenGrants(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := platformtest.Store(t, d.New(t))
			old := &store.Tenant{Slug: "acme", DisplayName: "Old"}
			if err := st.Tenants().Create(ctx, old, false); err != nil {
				t.Fatal(err)
			}
			tok := &store.APIToken{Name: "t", Hash: "h", Role: "tenant-admin", Tenants: `["acme"]`, CreatedBy: "test", ExpiresAt: time.Now().Add(time.Hour)}
			if err := st.Credentials().CreateAPIToken(ctx, tok, []string{"acme"}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(tok.TenantIDs, []string{old.ID}) {
				t.Fatalf("granted %v", tok.TenantIDs)
			}
			if err := st.Tenants().Delete(ctx, "acme", 0); err != nil {
				t.Fatal(err)
			}
			if err := st.Tenants().Create(ctx, &store.Tenant{Slug: "acme", DisplayName: "New"}, true); err != nil {
				t.Fatal(err)
			}
			got, err := st.Credentials().APITokenByHash(ctx, "h")
			if err != nil {
				t.Fatal(err)
			}
			if len(got.TenantIDs) != 0 {
				t.Fatalf("the token still holds %v after its tenant was deleted", got.TenantIDs)
			}
		})
	}
}
