package api_test

import (
	"encoding/json"
	"testing"

	"github.com/opsmcp/platform/testkit/platformtest"
)

// adminTables are the tables the admin API writes to.
var adminTables = []string{"tenants", "retired_slugs", "catalogue_items", "revoked_flows", "audit_log", "key_rings", "api_tokens", "api_token_tenants"}

// dbState is every row of the admin API's tables, as one comparable
// string: two equal states mean nothing was written in between.
func dbState(t testing.TB, db *platformtest.DB) string {
	t.Helper()
	all := map[string][]map[string]any{}
	for _, table := range adminTables {
		all[table] = db.Rows(t, "SELECT * FROM "+table+" ORDER BY 1")
	}
	b, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
