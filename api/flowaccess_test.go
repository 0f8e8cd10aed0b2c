package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/testkit/oidctest"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
)

// streamUntilEnd opens the flow stream with do's credential and reports,
// on the returned channel, when the server ends it (closed without the
// client's doing).
func streamUntilEnd(t *testing.T, p *platformtest.Platform, do func(*http.Request) (*http.Response, error)) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", p.URL+"/api/v1/flows/stream", nil)
	resp, err := do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
		}
	}()
	return ended
}

func bearer(token string) func(*http.Request) (*http.Response, error) {
	return func(r *http.Request) (*http.Response, error) {
		r.Header.Set("Authorization", "Bearer "+token)
		return http.DefaultClient.Do(r)
	}
}

// ended waits, within a few seconds, for the server to end a stream.
func ended(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("the stream outlived its credential: %s", what)
	}
}

func TestALiveStreamEndsWithItsCredential(t *testing.T) {
	op := oidctest.Start(t)
	oidctest.SetRoles("id1", "platform-admin")
	clientID := "platform-admin-" + strings.ToLower(t.Name()[len(t.Name())-6:])
	p := platformtest.Start(t, platformtest.SQLiteURL(t), platformtest.WithConfig(func(c *config.Config) {
		c.AdminIssuer, c.AdminClientID, c.AdminClientSecret = op.Issuer, clientID, "s3cret"
		c.KeepBootstrapToken = true
	}))
	oidctest.RegisterWebClient(clientID, "s3cret", p.URL+"/admin/callback")
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "Acme"})

	// Revoked tokens, of each role.
	for _, role := range []string{"viewer", "tenant-admin", "platform-admin"} {
		var tenants []string
		if role == "tenant-admin" {
			tenants = []string{"acme"}
		}
		m := p.MustAdmin(t, 201, "POST", "/api/v1/tokens", map[string]any{"name": role, "role": role, "tenants": tenants})
		tok, id := m["token"].(string), m["id"].(string)
		live := streamUntilEnd(t, p, bearer(tok))
		held := streamUntilEnd(t, p, bearer(platformtest.AdminToken)) // another credential's stream
		p.MustAdmin(t, 204, "DELETE", "/api/v1/tokens/"+id, nil)
		ended(t, "a revoked "+role+" token", live)
		select {
		case <-held:
			t.Fatal("revoking one token ended another credential's stream")
		default:
		}
		if r := as(t, p, tok, "GET", "/api/v1/flows/stream", nil); r.Status != 401 {
			t.Fatalf("a revoked token reopened the stream: %d", r.Status)
		}
	}

	// A signed-out session, and the same session's cookie replayed.
	c, resp := signIn(t, p, op, op.UserName(1))
	resp.Body.Close()
	live := streamUntilEnd(t, p, c.Do)
	r, err := c.Get(p.URL + "/api/v1/me")
	if err != nil {
		t.Fatal(err)
	}
	var me struct {
		CSRF string `json:"csrfToken"`
	}
	if err := json.Unmarshal([]byte(readAll(t, r)), &me); err != nil || me.CSRF == "" {
		t.Fatalf("me: %v %+v", err, me)
	}
	csrf := me.CSRF
	req, _ := http.NewRequest("POST", p.URL+"/admin/logout", nil)
	req.Header.Set("Origin", p.URL)
	req.Header.Set("X-CSRF-Token", csrf)
	if r, err := c.Do(req); err != nil || r.StatusCode != 204 {
		t.Fatalf("sign-out: %v %v", r, err)
	}
	ended(t, "a signed-out session", live)
}

func readAll(t *testing.T, r *http.Response) string {
	t.Helper()
	defer r.Body.Close()
	var sb strings.Builder
	sc := bufio.NewScanner(r.Body)
	for sc.Scan() {
		sb.WriteString(sc.Text())
	}
	return sb.String()
}

func TestABulkCancelIsAuditedAgainstEveryTenantItTouched(t *testing.T) {
	eachDialect(t, func(t *testing.T, p *platformtest.Platform) {
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"type":"input_required","inputRequests":{"ok":{"method":"elicitation/create","params":{"mode":"form","message":"Sure?","requestedSchema":{"type":"object","properties":{}}}}},"state":"s"}`)
		}))
		t.Cleanup(hook.Close)
		for _, slug := range []string{"alpha", "beta", "gamma"} {
			p.Tenant(t, slug)
			p.Tool(t, slug, map[string]any{"name": "deploy", "inputSchema": map[string]any{"type": "object"}, "handler": map[string]any{"url": hook.URL}})
		}
		meta := platformtest.Meta(map[string]any{"elicitation": map[string]any{"form": map[string]any{}}})
		for _, slug := range []string{"alpha", "beta", "beta"} {
			r := platformtest.Result(t, p.MCP(t, slug, "tools/call", map[string]any{"name": "deploy", "arguments": map[string]any{}, "_meta": meta}))
			if r["resultType"] != "input_required" {
				t.Fatalf("%s: %v", slug, r)
			}
		}
		testwait.Until(t, "flows not recorded", func() bool {
			return p.MustAdmin(t, 200, "GET", "/api/v1/flows?state=awaiting_input", nil)["counts"].(map[string]any)["awaiting_input"] == 3.0
		})
		filter := map[string]any{"target": "deploy"}
		p.MustAdmin(t, 200, "POST", "/api/v1/flows/cancel", map[string]any{"filter": filter, "preview": true})
		done := p.MustAdmin(t, 200, "POST", "/api/v1/flows/cancel", map[string]any{"filter": filter, "expect": 3, "reason": "freeze"})
		if done["cancelled"] != 3.0 {
			t.Fatalf("cancelled %v", done)
		}
		// The whole action: one entry of no tenant, with the filter.
		var whole map[string]any
		for _, it := range p.MustAdmin(t, 200, "GET", "/api/v1/audit", nil)["items"].([]any) {
			if e := it.(map[string]any); e["action"] == "POST /api/v1/flows/cancel" && e["tenantId"] == nil {
				if whole != nil {
					t.Fatalf("two entries of no tenant for one bulk cancel (its preview audited?): %v and %v", whole, e)
				}
				whole = e
			}
		}
		if d, _ := whole["detail"].(map[string]any); d["matched"] != 3.0 || d["tenants"] != 2.0 || d["filter"] == nil {
			t.Fatalf("the bulk cancel's own entry: %v", whole)
		}
		for slug, want := range map[string]float64{"alpha": 1, "beta": 2, "gamma": 0} {
			items := p.MustAdmin(t, 200, "GET", "/api/v1/audit?tenant="+slug, nil)["items"].([]any)
			var got []map[string]any
			for _, it := range items {
				if e := it.(map[string]any); e["action"] == "POST /api/v1/flows/cancel" {
					got = append(got, e)
				}
			}
			if want == 0 {
				if len(got) != 0 {
					t.Fatalf("%s's audit log shows a cancel that touched none of its flows: %v", slug, got)
				}
				continue
			}
			if len(got) != 1 {
				t.Fatalf("%s's audit log: %d bulk cancels; want 1 (%v)", slug, len(got), items)
			}
			d, _ := got[0]["detail"].(map[string]any)
			if d["matched"] != want || d["reason"] != "freeze" || got[0]["tenant"] != slug {
				t.Fatalf("%s's entry: %v", slug, got[0])
			}
			// Nothing of the other tenants, nor the filter, which may name
			// them.
			if d["filter"] != nil || d["tenants"] != nil || len(d) != 2 {
				t.Fatalf("%s's entry says more than its own flows: %v", slug, d)
			}
		}
	})
}

func TestTheFleetsKeyRingsCountFlowsInFlightUnderEachKeyForThoseWhoMaySee(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t), platformtest.WithConfig(func(c *config.Config) {
		c.Keys.Provider, c.Keys.MasterKey = "local", "b3BzbWNwLXRlc3QtbWFzdGVyLWtleS0wMDAwMDAwMDE="
	}))
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"input_required","inputRequests":{"ok":{"method":"elicitation/create","params":{"mode":"form","message":"Sure?","requestedSchema":{"type":"object","properties":{}}}}},"state":"s"}`)
	}))
	t.Cleanup(hook.Close)
	meta := platformtest.Meta(map[string]any{"elicitation": map[string]any{"form": map[string]any{}}})
	for slug, n := range map[string]int{"alpha": 2, "beta": 1} {
		p.Tenant(t, slug)
		p.Tool(t, slug, map[string]any{"name": "deploy", "inputSchema": map[string]any{"type": "object"}, "handler": map[string]any{"url": hook.URL}})
		for range n {
			platformtest.Result(t, p.MCP(t, slug, "tools/call", map[string]any{"name": "deploy", "arguments": map[string]any{}, "_meta": meta}))
		}
	}
	rings := func(token string) map[string]map[string]any {
		r := as(t, p, token, "GET", "/api/v1/keys", nil)
		if r.Status != 200 {
			t.Fatalf("GET /keys: %d %s", r.Status, r.Body)
		}
		out := map[string]map[string]any{}
		for _, it := range r.JSON(t)["items"].([]any) {
			m := it.(map[string]any)
			out[m["tenant"].(string)] = m
		}
		return out
	}
	var all map[string]map[string]any
	testwait.Until(t, "the flows in flight are not counted under their keys", func() bool {
		all = rings(platformtest.AdminToken)
		total := func(slug string) (n float64) {
			for _, v := range all[slug]["inFlight"].(map[string]any) {
				n += v.(float64)
			}
			return n
		}
		return total("alpha") == 2 && total("beta") == 1
	})
	for _, slug := range []string{"alpha", "beta"} {
		ring, _ := all[slug]["ring"].(map[string]any)
		keysOf, _ := ring["keys"].([]any)
		if len(keysOf) == 0 || ring["phase"] == nil {
			t.Fatalf("%s's ring: %v", slug, all[slug])
		}
		current := keysOf[0].(map[string]any)["id"].(string)
		if all[slug]["inFlight"].(map[string]any)[current] == nil {
			t.Fatalf("%s's flows are not under its key %s: %v", slug, current, all[slug]["inFlight"])
		}
	}
	// A tenant admin sees its own tenant's ring only; a viewer sees all.
	if mine := rings(mintToken(t, p, "tenant-admin", "beta")); len(mine) != 1 || mine["beta"] == nil {
		t.Fatalf("a tenant admin of beta sees rings of %v", mine)
	}
	if seen := rings(mintToken(t, p, "viewer")); len(seen) != 2 {
		t.Fatalf("a viewer sees rings of %v", seen)
	}
}
