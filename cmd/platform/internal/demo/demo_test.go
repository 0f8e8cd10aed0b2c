package demo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsmcp/platform/client"
	"github.com/opsmcp/platform/cmd/platform/internal/demo"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/webhook"
)

// setup registers the demo catalogue on a real platform, answered by the
// demo backend on its own loopback server, with the secrets the admin
// API returned.
func setup(t *testing.T) (*platformtest.Platform, *demo.Backend) {
	t.Helper()
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.Tenant(t, demo.Slug)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	b, err := demo.New(srv.URL+"/dev/demo", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/dev/demo/", b)
	var secrets []string
	for _, it := range demo.Catalogue(b.HookURL()) {
		m := p.MustAdmin(t, 201, "POST", "/api/v1/tenants/"+demo.Slug+"/"+it.Collection, it.Definition)
		if s, ok := m["webhookSecret"].(string); ok {
			secrets = append(secrets, s)
		}
	}
	b.SetSecrets(secrets)
	return p, b
}

// answers is a client's side of the questions: what it was asked, and
// the answers it gives by key.
type answers struct {
	mu     sync.Mutex
	asked  []string
	form   map[string]client.ElicitResult
	sample string
	roots  []client.Root
}

func (a *answers) note(key, what string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, key+": "+what)
}

func (a *answers) client(t *testing.T, url string) *client.Client {
	t.Helper()
	elicit := func(_ context.Context, req *client.ElicitRequest) (*client.ElicitResult, error) {
		a.note(req.Key, req.Message+" "+req.URL)
		r, ok := a.form[req.Key]
		if !ok {
			return &client.ElicitResult{Action: "cancel"}, nil
		}
		return &r, nil
	}
	c, err := client.New(url, client.Options{
		ElicitForm: elicit, ElicitURL: elicit,
		Sample: func(_ context.Context, req *client.SamplingRequest) (*client.SamplingResult, error) {
			a.note(req.Key, req.SystemPrompt+" "+req.Messages[0].Content[0].Text)
			return &client.SamplingResult{Role: "assistant", Content: client.TextContent(a.sample), Model: "test-model"}, nil
		},
		Roots: func(context.Context) ([]client.Root, error) { a.note("roots", ""); return a.roots, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func accept(content map[string]any) client.ElicitResult {
	return client.ElicitResult{Action: "accept", Content: content}
}

func text(r *client.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

// TestEveryDemoFlowCompletes drives each demo item through a real
// platform with the Go client: the questions asked in each round, and
// the result each path ends in (accepted, declined).
func TestEveryDemoFlowCompletes(t *testing.T) {
	p, _ := setup(t)
	url := p.URL + "/t/" + demo.Slug + "/mcp"
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		a     *answers
		call  func(c *client.Client) (string, error)
		asked []string // substrings of each question, in order
		want  []string
	}{
		{"provision", &answers{form: map[string]client.ElicitResult{
			"region": accept(map[string]any{"region": "eu-west-1"}), "confirm": accept(map[string]any{"confirm": true})}},
			func(c *client.Client) (string, error) {
				r, err := c.CallTool(ctx, "provision", map[string]any{"service": "checkout", "size": "medium"})
				if err != nil {
					return "", err
				}
				return text(r) + string(r.StructuredContent), nil
			},
			[]string{"region: Which region should the checkout database run in?", "confirm: Create the PostgreSQL 17 database for checkout now?"},
			[]string{"a medium PostgreSQL 17 database for checkout in eu-west-1", `"status":"creating"`, `"host":"checkout-db.eu-west-1.demo.internal"`}},
		{"provision declined", &answers{form: map[string]client.ElicitResult{
			"region": accept(map[string]any{"region": "us-east-1"}), "confirm": {Action: "decline"}}},
			func(c *client.Client) (string, error) {
				r, err := c.CallTool(ctx, "provision", map[string]any{"service": "checkout"})
				if err != nil {
					return "", err
				}
				return text(r) + string(r.StructuredContent), nil
			},
			[]string{"region:", "confirm:"}, []string{"Nothing was created", `"status":"cancelled"`}},
		{"deploy to production", &answers{form: map[string]client.ElicitResult{
			"wh.confirm": accept(map[string]any{"confirm": true}), "wh.review": {Action: "accept"}}},
			func(c *client.Client) (string, error) {
				r, err := c.CallTool(ctx, "deploy", map[string]any{"service": "checkout", "version": "1.4.2"})
				if err != nil {
					return "", err
				}
				return text(r), nil
			},
			[]string{"wh.confirm: Deploy checkout 1.4.2 to production?", "wh.review: Production deploys need a reviewed change request"},
			[]string{"Deployed checkout 1.4.2 to production under change CHG-", "requested by an anonymous caller"}},
		{"deploy to staging", &answers{form: map[string]client.ElicitResult{"wh.confirm": accept(map[string]any{"confirm": true})}},
			func(c *client.Client) (string, error) {
				r, err := c.CallTool(ctx, "deploy", map[string]any{"service": "search", "version": "2.0.0", "environment": "staging"})
				if err != nil {
					return "", err
				}
				return text(r), nil
			},
			[]string{"wh.confirm: Deploy search 2.0.0 to staging?"}, []string{"Deployed search 2.0.0 to staging"}},
		{"deploy not reviewed", &answers{form: map[string]client.ElicitResult{
			"wh.confirm": accept(map[string]any{"confirm": true}), "wh.review": {Action: "decline"}}},
			func(c *client.Client) (string, error) {
				r, err := c.CallTool(ctx, "deploy", map[string]any{"service": "checkout", "version": "1.4.2"})
				if err != nil {
					return "", err
				}
				return text(r), nil
			},
			[]string{"wh.confirm:", "wh.review:"}, []string{"Deployment cancelled: nothing changed."}},
		{"summarize", &answers{sample: "Card payments failed for 39 minutes."},
			func(c *client.Client) (string, error) {
				r, err := c.CallTool(ctx, "summarize", map[string]any{"incident": "INC-2041"})
				if err != nil {
					return "", err
				}
				return text(r) + string(r.StructuredContent), nil
			},
			[]string{"wh.summary: You write incident summaries for a public status page"},
			[]string{"Summary of INC-2041, written by test-model:\n\nCard payments failed for 39 minutes.", `"model":"test-model"`}},
		{"workspace", &answers{roots: []client.Root{{URI: "file:///home/me/src/billing", Name: "billing"}, {URI: "file:///home/me/src/checkout", Name: "checkout"}}},
			func(c *client.Client) (string, error) {
				r, err := c.CallTool(ctx, "workspace", map[string]any{"service": "checkout"})
				if err != nil {
					return "", err
				}
				return text(r), nil
			},
			[]string{"roots:"}, []string{"shares 2 folder(s)", "Put checkout's configuration in file:///home/me/src/checkout/deploy/opsmcp.yaml."}},
		{"incident_update prompt", &answers{form: map[string]client.ElicitResult{"audience": accept(map[string]any{"audience": "customers"})}},
			func(c *client.Client) (string, error) {
				r, err := c.GetPrompt(ctx, "incident_update", map[string]string{"incident": "INC-2042"})
				if err != nil {
					return "", err
				}
				return r.Description + " " + r.Messages[0].Content.Text, nil
			},
			[]string{"audience: Who is the update about INC-2042 for?"},
			[]string{"Status update about INC-2042 for customers", "Write a status update about INC-2042 (Delayed order emails", "plain language"}},
		{"customer record", &answers{form: map[string]client.ElicitResult{"access": accept(map[string]any{"reason": "ticket 4411"})}},
			func(c *client.Client) (string, error) {
				r, err := c.ReadResource(ctx, "demo://customers/cus_1002")
				if err != nil {
					return "", err
				}
				return r.Contents[0].MimeType + " " + r.Contents[0].Text, nil
			},
			[]string{"access: Open customer cus_1002's record?"}, []string{"application/json", `"name": "Grace Hopper"`}},
		{"customer record refused", &answers{form: map[string]client.ElicitResult{"access": {Action: "decline"}}},
			func(c *client.Client) (string, error) {
				r, err := c.ReadResource(ctx, "demo://customers/cus_1002")
				if err != nil {
					return "", err
				}
				return r.Contents[0].Text, nil
			},
			[]string{"access:"}, []string{"Not opened"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.call(c.a.client(t, url))
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("result %q lacks %q", got, w)
				}
			}
			if len(c.a.asked) != len(c.asked) {
				t.Fatalf("asked %q, want %d questions", c.a.asked, len(c.asked))
			}
			for i, w := range c.asked {
				if !strings.Contains(c.a.asked[i], w) {
					t.Errorf("question %d %q lacks %q", i+1, c.a.asked[i], w)
				}
			}
			if strings.Contains(got, "Grace") && strings.Contains(strings.Join(c.a.asked, " "), "Grace") {
				t.Error("a question carried the record's personal data")
			}
		})
	}
}

// TestTheBackendAnswersOnlySignedDeliveries: a delivery without a
// signature, signed with another secret, replayed from long ago, or
// changed after signing is refused with 401 before anything runs; the
// same delivery signed now with a current secret is answered.
func TestTheBackendAnswersOnlySignedDeliveries(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	srv.Start()
	defer srv.Close()
	b, err := demo.New(srv.URL+"/dev/demo", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = b
	b.SetSecrets([]string{"whsec_current"})
	body, _ := json.Marshal(webhook.Request{Version: webhook.Version, Kind: webhook.KindTool, Name: "provision",
		Arguments: json.RawMessage(`{"service":"checkout"}`), Flow: webhook.Flow{ID: "fl_1", Round: 1}})
	post := func(sig string, body []byte) int {
		req, _ := http.NewRequest("POST", b.HookURL(), bytes.NewReader(body))
		if sig != "" {
			req.Header.Set(webhook.SignatureHeader, sig)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	now := time.Now()
	for name, c := range map[string]struct {
		sig  string
		body []byte
	}{
		"no signature":      {"", body},
		"garbage":           {"v1=abc", body},
		"another secret":    {webhook.Sign("whsec_other", now, body), body},
		"an hour old":       {webhook.Sign("whsec_current", now.Add(-time.Hour), body), body},
		"from the future":   {webhook.Sign("whsec_current", now.Add(time.Hour), body), body},
		"changed body":      {webhook.Sign("whsec_current", now, body), bytes.Replace(body, []byte("checkout"), []byte("payments"), 1)},
		"timestamp swapped": {strings.Replace(webhook.Sign("whsec_current", now, body), "t=", "t=1", 1), body},
	} {
		if got := post(c.sig, c.body); got != http.StatusUnauthorized {
			t.Errorf("%s: HTTP %d, want 401", name, got)
		}
	}
	if got := post(webhook.Sign("whsec_current", now, body), body); got != http.StatusOK {
		t.Fatalf("a good delivery: HTTP %d", got)
	}
}

// TestTheMigrationRunsAsATaskAndAsksMidway: migrate becomes a task for a
// client that follows tasks; the Go client sees its progress, answers
// the cut-over question midway, and gets the result; declined, the task
// completes without the cut-over; a client that cannot follow tasks is
// refused with -32021.
func TestTheMigrationRunsAsATaskAndAsksMidway(t *testing.T) {
	defer demo.SetMigrationStep(50 * time.Millisecond)()
	p, _ := setup(t)
	url := p.URL + "/t/" + demo.Slug + "/mcp"
	ctx := context.Background()
	for _, tc := range []struct {
		cutover bool
		want    string
	}{{true, "Migrated checkout to schema v3"}, {false, "stopped before the cut-over"}} {
		a := &answers{form: map[string]client.ElicitResult{"cutover": accept(map[string]any{"cutover": tc.cutover})}}
		var mu sync.Mutex
		var statuses, messages []string
		c, err := client.New(url, client.Options{
			ElicitForm: func(_ context.Context, req *client.ElicitRequest) (*client.ElicitResult, error) {
				a.note(req.Key, req.Message)
				r := a.form[req.Key]
				return &r, nil
			},
			OnTask: func(task *client.Task) {
				mu.Lock()
				defer mu.Unlock()
				if len(statuses) == 0 || statuses[len(statuses)-1] != task.Status {
					statuses = append(statuses, task.Status)
				}
				messages = append(messages, task.StatusMessage)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.CallTool(ctx, "migrate", map[string]any{"service": "checkout", "to": "v3"})
		if err != nil {
			t.Fatal(err)
		}
		if r.Task == nil || r.Task.Status != client.TaskCompleted || !strings.Contains(text(r), tc.want) {
			t.Fatalf("cut-over %v: %+v %q", tc.cutover, r.Task, text(r))
		}
		mu.Lock()
		got := strings.Join(statuses, " ")
		all := strings.Join(messages, "\n")
		mu.Unlock()
		// The task works again between the answer and the end, which a poll
		// may or may not catch.
		if !strings.HasPrefix(got, "working input_required ") || !strings.HasSuffix(got, " completed") ||
			!strings.Contains(all, "Waiting for the cut-over confirmation") || !strings.Contains(all, "queued") {
			t.Fatalf("cut-over %v: statuses %q, messages:\n%s", tc.cutover, got, all)
		}
		if len(a.asked) != 1 || !strings.Contains(a.asked[0], "Cut over to v3 now?") {
			t.Fatalf("asked %v", a.asked)
		}
	}
	c, err := client.New(url, client.Options{NoTasks: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallTool(ctx, "migrate", map[string]any{"service": "checkout"}); !client.IsCode(err, -32021) {
		t.Fatalf("a client that cannot follow tasks: %v", err)
	}
}
