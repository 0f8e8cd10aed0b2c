// Package demo is the demo tenant of `platform dev`: a catalogue that
// shows every kind of round a flow can take, and the backend that answers
// it over the real webhook contract (signed deliveries, verified with
// package webhook), exactly as a tenant's own server would.
//
// The catalogue mixes both ways of asking the user mid-call:
//
//   - declared inputs, gathered by the platform before the webhook is
//     called: provision (a form with an enum, then a confirmation that
//     depends on it), workspace (the client's roots), the incident_update
//     prompt (its audience) and the customer resource template (a reason
//     before reading);
//   - webhook-driven input, asked by the backend itself with its own
//     state between rounds: deploy (a confirmation, then a URL to review
//     the change) and summarize (a request to the client's model).
//
// And one long-running tool: migrate runs as a task (the Tasks
// extension) for about twenty seconds, reporting its progress and asking
// to confirm the cut-over midway (migrate.go).
//
// deploy has an interactive view (MCP Apps): rollout.html, the ui://
// resource ui://demo/rollout.html, which a host renders in a sandboxed
// frame with the deploy's result, and which refreshes itself through
// rollout_status, a tool only views call.
package demo

import (
	_ "embed"
)

// rolloutView is the rollout view's HTML.
//
//go:embed rollout.html
var rolloutView string

// RolloutURI is the rollout view's URI.
const RolloutURI = "ui://demo/rollout.html"

// Slug is the demo tenant's slug.
const Slug = "demo"

// Item is one catalogue entry, in the form the admin API takes.
type Item struct {
	// Collection is the admin API collection: tools, prompts, resources
	// or resource-templates.
	Collection string
	Name       string
	Definition map[string]any
}

type obj = map[string]any

// Incidents the demo knows, by id.
var incidents = map[string]incident{
	"INC-2041": {Title: "Checkout API errors", Window: "14:02–14:41 UTC", Timeline: `14:02 error rate on POST /checkout rises from 0.1% to 18%
14:05 on-call paged; the deploy of checkout 1.4.1 at 13:58 is the prime suspect
14:11 rollback of checkout to 1.4.0 started
14:19 rollback complete; errors fall to 4%: not the deploy
14:27 payments provider reports degraded card authorisations in eu-west-1
14:34 traffic shifted to the provider's us-east-1 endpoint
14:41 error rate back to 0.1%; incident resolved, provider confirms the fault`},
	"INC-2042": {Title: "Delayed order emails", Window: "09:15–10:05 UTC", Timeline: `09:15 order confirmation emails start queueing
09:22 mail queue depth alert fires at 5,000 messages
09:31 the email relay's TLS certificate found expired at 09:14
09:48 certificate renewed and relay restarted
10:05 queue drained; every delayed email delivered`},
}

type incident struct{ Title, Window, Timeline string }

// incidentIDs are the incidents' ids, in a stable order.
var incidentIDs = []string{"INC-2041", "INC-2042"}

// Customers the demo knows, by id.
var customers = map[string]obj{
	"cus_1001": {"id": "cus_1001", "name": "Ada Lovelace", "email": "ada@example.com", "plan": "business", "since": "2023-04-11"},
	"cus_1002": {"id": "cus_1002", "name": "Grace Hopper", "email": "grace@example.com", "plan": "starter", "since": "2024-09-02"},
	"cus_1003": {"id": "cus_1003", "name": "Alan Turing", "email": "alan@example.com", "plan": "enterprise", "since": "2022-01-20"},
}

// Regions a database can be provisioned in.
var regions = []string{"eu-west-1", "us-east-1", "ap-southeast-2"}

const servicePattern = "^[a-z][a-z0-9-]{1,30}$"

// Catalogue is the demo tenant's catalogue; every handler posts to
// hookURL.
func Catalogue(hookURL string) []Item {
	handler := obj{"url": hookURL, "timeoutMs": 5000}
	no, yes := false, true
	return []Item{
		// Views first: a tool may link only to a view the tenant serves.
		{"resources", "rollout", obj{
			"name": "rollout", "title": "Rollout view", "uri": RolloutURI, "mimeType": "text/html;profile=mcp-app",
			"description": "deploy's interactive view: the instances of the rollout and their health, refreshed on request",
			"text":        rolloutView,
			"_meta":       obj{"ui": obj{"csp": obj{}, "prefersBorder": yes}},
		}},
		{"tools", "provision", obj{
			"name": "provision", "title": "Provision a database",
			"description": "Creates a managed PostgreSQL database for a service. The platform asks which region it should run in, then for a confirmation, before the backend sees the call (declared inputs).",
			"inputSchema": obj{"type": "object", "additionalProperties": false, "required": []string{"service"}, "properties": obj{
				"service": obj{"type": "string", "pattern": servicePattern, "description": "The service that will own the database, e.g. checkout"},
				"size":    obj{"type": "string", "enum": []string{"small", "medium", "large"}, "default": "small", "description": "small: 2 vCPU, 8 GB; medium: 4 vCPU, 16 GB; large: 8 vCPU, 32 GB"},
			}},
			"outputSchema": obj{"type": "object", "required": []string{"service", "status"}, "properties": obj{
				"id": obj{"type": "string"}, "service": obj{"type": "string"}, "region": obj{"type": "string"},
				"size": obj{"type": "string"}, "host": obj{"type": "string"}, "port": obj{"type": "integer"},
				"status": obj{"type": "string", "enum": []string{"creating", "cancelled"}},
			}},
			"annotations": obj{"destructiveHint": no, "idempotentHint": no, "openWorldHint": yes},
			"handler":     handler,
			"inputs": []obj{
				{"name": "region", "kind": "form", "message": "Which region should the {{args.service}} database run in?",
					"requestedSchema": obj{"type": "object", "required": []string{"region"}, "properties": obj{
						"region": obj{"type": "string", "title": "Region", "description": "Where the database and its backups live", "enum": regions}}}},
				{"name": "confirm", "kind": "form", "when": obj{"input": "region"},
					"message": "Create the PostgreSQL 17 database for {{args.service}} now? It is billed hourly until it is deleted.",
					"requestedSchema": obj{"type": "object", "required": []string{"confirm"}, "properties": obj{
						"confirm": obj{"type": "boolean", "title": "Create the database"}}}},
			},
		}},
		{"tools", "deploy", obj{
			"name": "deploy", "title": "Deploy a service",
			"description": "Rolls a version of a service out to an environment. The backend asks for a confirmation, then (for production) sends the user to review the change request, keeping its own state between rounds (webhook-driven input).",
			"inputSchema": obj{"type": "object", "additionalProperties": false, "required": []string{"service", "version"}, "properties": obj{
				"service":     obj{"type": "string", "pattern": servicePattern, "description": "The service to deploy, e.g. checkout"},
				"version":     obj{"type": "string", "pattern": `^[0-9]+\.[0-9]+\.[0-9]+$`, "description": "The version to roll out, e.g. 1.4.2"},
				"environment": obj{"type": "string", "enum": []string{"staging", "production"}, "default": "production"},
			}},
			"annotations": obj{"destructiveHint": yes, "idempotentHint": yes, "openWorldHint": yes},
			"handler":     handler,
			"_meta":       obj{"ui": obj{"resourceUri": RolloutURI}, "ui/resourceUri": RolloutURI},
		}},
		{"tools", "rollout_status", obj{
			"name": "rollout_status", "title": "Rollout status",
			"description": "The health of a service's instances, for deploy's rollout view (only views call it: hosts hide it from the model).",
			"inputSchema": obj{"type": "object", "additionalProperties": false, "required": []string{"service"}, "properties": obj{
				"service": obj{"type": "string", "pattern": servicePattern}}},
			"annotations": obj{"readOnlyHint": yes},
			"handler":     handler,
			"_meta":       obj{"ui": obj{"resourceUri": RolloutURI, "visibility": []string{"app"}}},
		}},
		{"tools", "migrate", obj{
			"name": "migrate", "title": "Migrate a service's database",
			"description": "Copies a service's database to a new schema version, as a task of about twenty seconds: it reports its progress, asks to confirm the cut-over midway, and finishes with a summary. Clients that cannot follow tasks are refused.",
			"inputSchema": obj{"type": "object", "additionalProperties": false, "required": []string{"service"}, "properties": obj{
				"service": obj{"type": "string", "pattern": servicePattern, "description": "The service whose database moves, e.g. checkout"},
				"to":      obj{"type": "string", "pattern": `^v[0-9]+$`, "default": "v2", "description": "The schema version to move to"},
			}},
			"annotations": obj{"openWorldHint": yes},
			"handler":     handler,
			"task":        obj{"mode": "must", "pollIntervalMs": 1000, "deadlineMs": 60_000, "ttlMs": 3_600_000},
		}},
		{"tools", "summarize", obj{
			"name": "summarize", "title": "Summarize an incident",
			"description": "Writes a status-page summary of an incident's timeline with the client's own model (sampling, asked by the backend).",
			"inputSchema": obj{"type": "object", "additionalProperties": false, "required": []string{"incident"}, "properties": obj{
				"incident": obj{"type": "string", "enum": incidentIDs, "description": "The incident, e.g. INC-2041"},
			}},
			"annotations": obj{"readOnlyHint": yes},
			"handler":     handler,
		}},
		{"tools", "workspace", obj{
			"name": "workspace", "title": "Place a service's configuration",
			"description": "Looks at the folders the client shares (its roots, gathered by the platform as a declared input) and says where the service's opsmcp configuration belongs.",
			"inputSchema": obj{"type": "object", "additionalProperties": false, "required": []string{"service"}, "properties": obj{
				"service": obj{"type": "string", "pattern": servicePattern},
			}},
			"annotations": obj{"readOnlyHint": yes},
			"handler":     handler,
			"inputs":      []obj{{"name": "workspace", "kind": "roots"}},
		}},
		{"prompts", "incident_update", obj{
			"name": "incident_update", "title": "Incident update",
			"description": "A status update about an incident, written for the audience the user picks (a declared input asked before the prompt is built).",
			"arguments":   []obj{{"name": "incident", "title": "Incident", "description": "The incident's id", "required": true, "completions": incidentIDs}},
			"handler":     handler,
			"inputs": []obj{{"name": "audience", "kind": "form", "message": "Who is the update about {{args.incident}} for?",
				"requestedSchema": obj{"type": "object", "required": []string{"audience"}, "properties": obj{
					"audience": obj{"type": "string", "title": "Audience", "enum": []string{"engineering", "support", "customers"}}}}}},
		}},
		{"resources", "deploy-runbook", obj{
			"name": "deploy-runbook", "title": "Deploy runbook", "uri": "demo://runbooks/deploy", "mimeType": "text/markdown",
			"description": "How the demo's deploys are rolled out and rolled back",
			"text":        runbook,
		}},
		{"resource-templates", "customer", obj{
			"name": "customer", "title": "Customer record", "uriTemplate": "demo://customers/{id}", "mimeType": "application/json",
			"description": "A customer's record. It holds personal data, so the platform asks for a reason before the backend reads it.",
			"completions": obj{"id": []string{"cus_1001", "cus_1002", "cus_1003"}},
			"handler":     handler,
			"inputs": []obj{{"name": "access", "kind": "form",
				"message": "Open customer {{args.id}}'s record? It holds personal data (name, email, plan), and the access is logged with your reason.",
				"requestedSchema": obj{"type": "object", "required": []string{"reason"}, "properties": obj{
					"reason": obj{"type": "string", "title": "Reason for access", "minLength": 5, "maxLength": 200}}}}},
		}},
	}
}

const runbook = `# Deploying a service

1. Deploy to staging: ` + "`deploy service=checkout version=1.4.2 environment=staging`" + `.
2. Watch the error rate for ten minutes.
3. Deploy to production; review the change request when asked.
4. To roll back, deploy the previous version the same way.
`
