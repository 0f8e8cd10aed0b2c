// Package chartcheck tests the opsmcp Helm chart without a cluster: every
// manifest the chart renders from its ci/ values files is decoded strictly
// into the Kubernetes API types (and the Prometheus Operator's, for the
// ServiceMonitor), then checked for what an operator relies on: probes,
// a locked-down security context, secrets only by reference, resources
// present exactly when enabled, the Vault token's audience. The values
// schema is tested by rendering bad values and reading Helm's refusal.
//
// It is a module of its own so the Kubernetes libraries stay out of the
// platform's module. scripts/helm-check builds the Helm CLI, renders the
// chart and runs these tests with OPSMCP_HELM_BIN and OPSMCP_HELM_RENDERED
// set; without them the tests fail and say so.
package chartcheck
