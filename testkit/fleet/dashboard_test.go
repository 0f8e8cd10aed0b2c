package fleet

import (
	"encoding/json"
	"testing"
)

// TestFillReplacesEveryVariableSpelling: a dashboard query refers to a
// variable as $name or ${name}, and Grafana's own $__rate_interval; each
// is replaced, and a variable the check does not know is named rather
// than left in the query (Prometheus would reject the $, or worse, a
// regex would match it literally).
func TestFillReplacesEveryVariableSpelling(t *testing.T) {
	vars := map[string]string{"job": "opsmcp", "tenant": ".*", "__rate_interval": "1m"}
	for _, tc := range []struct{ in, want, missing string }{
		{`up{job=~"$job"}`, `up{job=~"opsmcp"}`, ""},
		{`up{job=~"${job}"}`, `up{job=~"opsmcp"}`, ""},
		{`rate(x{job=~"$job", opsmcp_tenant=~"$tenant"}[$__rate_interval])`, `rate(x{job=~"opsmcp", opsmcp_tenant=~".*"}[1m])`, ""},
		{`rate(x[$__interval])`, `rate(x[])`, "__interval"},
		{`x{a="$job",b="$region"}`, `x{a="opsmcp",b=""}`, "region"},
		{`count(up == 1)`, `count(up == 1)`, ""},
	} {
		got, missing := fill(tc.in, vars)
		if got != tc.want || missing != tc.missing {
			t.Errorf("fill(%s) = %s, missing %q; want %s, missing %q", tc.in, got, missing, tc.want, tc.missing)
		}
	}
}

// TestVariableQueryReadsBothForms: Grafana writes a query variable's
// query as a string (older) or an object (newer); both are read, and a
// label_values query splits into its selector and label.
func TestVariableQueryReadsBothForms(t *testing.T) {
	for _, raw := range []string{
		`"label_values(up{job=~\"$job\"}, opsmcp_tenant)"`,
		`{"query": "label_values(up{job=~\"$job\"}, opsmcp_tenant)", "refId": "A"}`,
	} {
		q := variableQuery(json.RawMessage(raw))
		m := labelValues.FindStringSubmatch(q)
		if m == nil || m[1] != `up{job=~"$job"}` || m[2] != "opsmcp_tenant" {
			t.Errorf("%s: query %q, parts %q", raw, q, m)
		}
	}
	if m := labelValues.FindStringSubmatch("query_result(up)"); m != nil {
		t.Errorf("query_result read as label_values: %q", m)
	}
}
