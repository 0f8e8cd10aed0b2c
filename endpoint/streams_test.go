package endpoint_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
)

// mintingIssuer is an OpenID issuer on loopback that serves discovery and
// its JWKS and signs whatever access tokens a test asks for. The real
// provider of oidctest cannot stand in here: its tokens always live five
// minutes, and these tests need tokens that expire in seconds.
type mintingIssuer struct {
	URL string
	key *rsa.PrivateKey
}

func startMintingIssuer(t *testing.T) *mintingIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	is := &mintingIssuer{URL: "http://" + ln.Addr().String(), key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(obj{"issuer": is.URL, "jwks_uri": is.URL + "/keys",
			"authorization_endpoint": is.URL + "/auth", "token_endpoint": is.URL + "/token",
			"response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return is
}

// token signs an access token for subject, issued to client "app",
// expiring at exp.
func (is *mintingIssuer) token(t *testing.T, subject string, exp time.Time) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: is.key}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(obj{"iss": is.URL, "sub": subject, "aud": "app", "azp": "app", "client_id": "app",
		"iat": time.Now().Unix(), "exp": exp.Unix()})
	sig, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := sig.CompactSerialize()
	return s
}

// trustingTenant creates a tenant trusting issuer for audience "app".
func trustingTenant(t *testing.T, p *platformtest.Platform, slug, issuer string) {
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants", obj{"slug": slug, "displayName": slug, "settings": obj{"auth": obj{
		"issuers": []obj{{"issuer": issuer, "audiences": []string{"app"}}}}}})
}

// stream is an open subscriptions/listen request.
type stream struct {
	Status int
	Body   string // the answer, when it was not a stream
	ack    map[string]any
	events chan map[string]any
	stop   context.CancelFunc
}

// openStream sends subscriptions/listen for tool list changes with token
// (none when empty). A refused request returns its status and body; an
// accepted one has its first event, the acknowledgement, read already.
func openStream(t *testing.T, base, slug, token string) *stream {
	t.Helper()
	return openListen(t, base, slug, token, obj{"toolsListChanged": true}, nil)
}

// openListen opens a subscriptions/listen stream asking for
// notifications, from a client declaring caps.
func openListen(t *testing.T, base, slug, token string, notifications, caps obj) *stream {
	t.Helper()
	body, _ := json.Marshal(obj{"jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen",
		"params": obj{"notifications": notifications, "_meta": platformtest.Meta(caps)}})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/t/"+slug+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	s := &stream{Status: resp.StatusCode, stop: cancel}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		s.Body = b.String()
		return s
	}
	s.events = make(chan map[string]any, 16)
	go func() {
		defer close(s.events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(data), &m) == nil {
				s.events <- m
			}
		}
	}()
	if s.ack = s.next(t); s.ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first event %v", s.ack)
	}
	return s
}

func (s *stream) next(t *testing.T) map[string]any {
	t.Helper()
	m := testwait.Recv(t, s.events, "the next event")
	if m == nil {
		t.Fatal("the stream ended")
	}
	return m
}

// ends asserts the stream's next event is the listen request's final,
// complete result, and that the stream closes after it.
func (s *stream) ends(t *testing.T) {
	t.Helper()
	for {
		m := testwait.Recv(t, s.events, "the stream's end")
		if m == nil {
			t.Fatal("the stream closed without a final result")
		}
		if _, isNote := m["method"]; isNote {
			continue // list changes announced on the way out are fine
		}
		res, _ := m["result"].(map[string]any)
		if m["id"] != "sub-1" || res["resultType"] != "complete" {
			t.Fatalf("the stream ended with %v, want the listen request's complete result", m)
		}
		break
	}
	if m := testwait.Recv(t, s.events, "the stream to close"); m != nil {
		t.Fatal("events after the final result")
	}
}

// TestStreamsEndWhenTheirReasonDoes: a subscription stream is held by a
// caller for a tenant; it ends, with its final result, once the tenant is
// disabled or deleted (on this replica or another), the caller's issuer
// is no longer trusted, the caller's token expires, or it reaches its
// maximum lifetime. Changes that take none of that away leave it open.
func TestStreamsEndWhenTheirReasonDoes(t *testing.T) {
	is := startMintingIssuer(t)
	longLived := func(t *testing.T) string { return is.token(t, "alice", time.Now().Add(time.Hour)) }
	cases := []struct {
		name   string
		opts   []platformtest.Option
		token  func(t *testing.T) string
		change func(t *testing.T, p *platformtest.Platform) // through the replica holding the stream
	}{
		{name: "tenant disabled", token: longLived, change: func(t *testing.T, p *platformtest.Platform) {
			p.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", obj{"disabled": true})
		}},
		{name: "tenant deleted", token: longLived, change: func(t *testing.T, p *platformtest.Platform) {
			p.MustAdmin(t, 204, "DELETE", "/api/v1/tenants/acme", nil)
		}},
		{name: "issuer removed", token: longLived, change: func(t *testing.T, p *platformtest.Platform) {
			p.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", obj{"settings": obj{"auth": obj{
				"issuers": []obj{{"issuer": "https://other.example", "audiences": []string{"app"}}}}}})
		}},
		{name: "issuer's audience changed", token: longLived, change: func(t *testing.T, p *platformtest.Platform) {
			p.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", obj{"settings": obj{"auth": obj{
				"issuers": []obj{{"issuer": is.URL, "audiences": []string{"another-app"}}}}}})
		}},
		{name: "token expires", token: func(t *testing.T) string { return is.token(t, "alice", time.Now().Add(2*time.Second)) }},
		{name: "maximum lifetime", token: longLived,
			opts: []platformtest.Option{platformtest.WithConfig(func(c *config.Config) { c.Limits.StreamMaxLifetime = time.Second })}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := platformtest.Start(t, platformtest.SQLiteURL(t), tc.opts...)
			trustingTenant(t, p, "acme", is.URL)
			h := newHook(t, replyText("x"))
			s := openStream(t, p.URL, "acme", tc.token(t))
			if s.Status != 200 {
				t.Fatalf("listen: HTTP %d %s", s.Status, s.Body)
			}
			if tc.change != nil {
				// A change that leaves the stream its reason: it stays,
				// and hears of it. (Not for the cases that end by the
				// clock, which could end first.)
				p.Tool(t, "acme", echoTool("added", h.URL))
				if ev := s.next(t); ev["method"] != "notifications/tools/list_changed" {
					t.Fatalf("after a tool was added: %v", ev)
				}
				tc.change(t, p)
			}
			s.ends(t)
		})
	}

	t.Run("tenant disabled through another replica", func(t *testing.T) {
		db := platformtest.PostgresSchemaURL(t)
		a, b := platformtest.Start(t, db), platformtest.Start(t, db)
		trustingTenant(t, a, "acme", is.URL)
		s := openStream(t, b.URL, "acme", longLived(t))
		if s.Status != 200 {
			t.Fatalf("listen: HTTP %d %s", s.Status, s.Body)
		}
		// Another issuer trusted beside the caller's keeps the stream.
		a.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", obj{"settings": obj{"auth": obj{"issuers": []obj{
			{"issuer": is.URL, "audiences": []string{"app"}}, {"issuer": "https://other.example", "audiences": []string{"app"}}}}}})
		a.Tool(t, "acme", echoTool("added", "http://127.0.0.1:1/hook"))
		if ev := s.next(t); ev["method"] != "notifications/tools/list_changed" {
			t.Fatalf("after a tool was added: %v", ev)
		}
		a.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", obj{"disabled": true})
		s.ends(t)
	})
}

// TestStreamsAreCappedPerTenantAndPerPrincipal: a caller at its limit of
// open streams, or a tenant at its, is refused with 429 before any stream
// opens; closing a stream frees its place.
func TestStreamsAreCappedPerTenantAndPerPrincipal(t *testing.T) {
	is := startMintingIssuer(t)
	p := platformtest.Start(t, platformtest.SQLiteURL(t), platformtest.WithConfig(func(c *config.Config) {
		c.Limits.StreamsPerTenant, c.Limits.StreamsPerPrincipal = 3, 2
	}))
	trustingTenant(t, p, "acme", is.URL)
	trustingTenant(t, p, "other", is.URL)
	p.Tenant(t, "open") // public
	exp := time.Now().Add(time.Hour)
	alice, bob := is.token(t, "alice", exp), is.token(t, "bob", exp)

	refused := func(s *stream, whose string) {
		t.Helper()
		if s.Status != http.StatusTooManyRequests || !strings.Contains(s.Body, "too many open streams for this "+whose) {
			t.Fatalf("want 429 for the %s, got HTTP %d %s", whose, s.Status, s.Body)
		}
		var m map[string]any
		if json.Unmarshal([]byte(s.Body), &m) != nil || m["error"] == nil {
			t.Fatalf("the refusal is not a JSON-RPC error: %s", s.Body)
		}
	}
	open := func(base, slug, token string) *stream {
		t.Helper()
		s := openStream(t, base, slug, token)
		if s.Status != 200 {
			t.Fatalf("%s: HTTP %d %s", slug, s.Status, s.Body)
		}
		return s
	}
	a1 := open(p.URL, "acme", alice)
	open(p.URL, "acme", alice)
	refused(openStream(t, p.URL, "acme", alice), "principal")
	// The same caller's limit is per tenant: another tenant is its own.
	open(p.URL, "other", alice)
	open(p.URL, "acme", bob)
	refused(openStream(t, p.URL, "acme", bob), "tenant")

	// Closing one of alice's frees a place for bob once its handler has
	// let go of it.
	a1.stop()
	testwait.Until(t, "a closed stream frees its place", func() bool {
		s := openStream(t, p.URL, "acme", bob)
		return s.Status == 200
	})

	// Anonymous callers of a public tenant share the tenant's limit.
	for i := 0; i < 3; i++ {
		open(p.URL, "open", "")
	}
	refused(openStream(t, p.URL, "open", ""), "tenant")
}

// TestCatalogueItemsAreCappedPerTenant: a tenant at max-catalogue-items
// (tools, prompts, resources and templates together) cannot add more,
// concurrent creations included, on both databases; deleting one makes
// room; other tenants are unaffected.
func TestCatalogueItemsAreCappedPerTenant(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			p := platformtest.Start(t, d.New(t), platformtest.WithConfig(func(c *config.Config) { c.Limits.CatalogueItems = 5 }))
			p.Tenant(t, "acme")
			p.Tenant(t, "other")
			hook := "http://127.0.0.1:1/hook"
			p.Tool(t, "acme", echoTool("t1", hook))
			p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/prompts", obj{"name": "p1", "description": "x",
				"handler": obj{"url": hook}})
			var mu sync.Mutex
			var wg sync.WaitGroup
			statuses := map[int]int{}
			var problem map[string]any
			for i := 0; i < 12; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := p.Admin(t, "POST", "/api/v1/tenants/acme/tools", echoTool("c"+string(rune('a'+i)), hook))
					mu.Lock()
					defer mu.Unlock()
					statuses[r.Status]++
					if r.Status == 409 {
						problem = r.JSON(t)
					}
				}()
			}
			wg.Wait()
			if statuses[201] != 3 || statuses[409] != 9 {
				t.Fatalf("12 concurrent creations beside 2 items under a limit of 5: %v, want 3×201 and 9×409", statuses)
			}
			if problem["type"] == nil || !strings.HasSuffix(problem["type"].(string), "quota-exceeded") ||
				!strings.Contains(problem["detail"].(string), "max-catalogue-items") {
				t.Fatalf("the refusal: %v", problem)
			}
			list := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/tools", nil)
			items, _ := list["items"].([]any)
			if len(items) != 4 {
				t.Fatalf("%d tools listed, want 4 (the limit is tools and prompts together)", len(items))
			}
			if r := p.Admin(t, "POST", "/api/v1/tenants/acme/resources", obj{"name": "x", "uri": "docs://x", "mimeType": "text/plain", "text": "hello"}); r.Status != 409 {
				t.Fatalf("a resource past the limit: HTTP %d %s", r.Status, r.Body)
			}
			p.Tool(t, "other", echoTool("t1", hook)) // another tenant has its own limit
			name := items[0].(map[string]any)["name"].(string)
			p.MustAdmin(t, 204, "DELETE", "/api/v1/tenants/acme/tools/"+name, nil)
			p.Tool(t, "acme", echoTool("after-delete", hook))
		})
	}
}

// TestRequestsCarryingMoreAnswersThanAnyRoundAsksAreRefused: a request
// may carry at most twice mrtr.MaxInputs answers; more is invalid params,
// before any state is opened or webhook called.
func TestRequestsCarryingMoreAnswersThanAnyRoundAsksAreRefused(t *testing.T) {
	h := newHook(t, replyText("done"))
	p := setup(t, h)
	for _, n := range []int{65, 1000} {
		answers := obj{}
		for i := 0; i < n; i++ {
			answers["k"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+time.Duration(i).String()] = obj{"action": "decline"}
		}
		before := deliveries(h)
		code, msg, _ := platformtest.RPCError(t, p.MCP(t, "acme", "tools/call", obj{"name": "echo", "arguments": obj{}, "inputResponses": answers}))
		if code != -32602 || !strings.Contains(msg, "at most 64") {
			t.Fatalf("%d answers: %d %q", n, code, msg)
		}
		if deliveries(h) != before {
			t.Fatalf("%d answers reached the webhook", n)
		}
	}
	// 64 answers to nothing asked are not refused for their number.
	answers := obj{}
	for i := 0; i < 64; i++ {
		answers["k"+time.Duration(i).String()] = obj{"action": "decline"}
	}
	if res := platformtest.Result(t, p.MCP(t, "acme", "tools/call", obj{"name": "echo", "arguments": obj{}, "inputResponses": answers})); res["resultType"] != "complete" {
		t.Fatalf("64 answers: %v", res)
	}
}

func deliveries(h *hook) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.requests)
}

// openSessionStream opens a legacy session's GET stream and returns its
// status, and a channel closed when the stream ends.
func openSessionStream(t *testing.T, c *legacyClient) (int, <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	req.Header = c.header()
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
	}()
	return resp.StatusCode, done
}

// TestALegacySessionsStreamEndsWithItsReasonToo: the GET stream of an
// initialization-era session is held like subscriptions/listen: it ends
// when the caller's token expires or the tenant stops trusting its
// issuer, and counts against the caller's limit of streams.
func TestALegacySessionsStreamEndsWithItsReasonToo(t *testing.T) {
	is := startMintingIssuer(t)
	p := platformtest.Start(t, platformtest.SQLiteURL(t), platformtest.WithConfig(func(c *config.Config) {
		c.Limits.StreamsPerPrincipal = 2
	}))
	trustingTenant(t, p, "acme", is.URL)
	session := func(token string) *legacyClient {
		c := newLegacyClient(t, legacyURL(p, "acme"))
		c.token = token
		c.initialize("2025-11-25", obj{})
		return c
	}

	t.Run("token expires", func(t *testing.T) {
		status, done := openSessionStream(t, session(is.token(t, "alice", time.Now().Add(2*time.Second))))
		if status != 200 {
			t.Fatalf("GET: HTTP %d", status)
		}
		testwait.Recv(t, done, "the stream to end as the token expires")
	})
	t.Run("a second stream and a listen stream fill the caller's place", func(t *testing.T) {
		tok := is.token(t, "bob", time.Now().Add(time.Hour))
		c := session(tok)
		if status, _ := openSessionStream(t, c); status != 200 {
			t.Fatalf("GET: HTTP %d", status)
		}
		if s := openStream(t, p.URL, "acme", tok); s.Status != 200 {
			t.Fatalf("listen: HTTP %d %s", s.Status, s.Body)
		}
		if status, _ := openSessionStream(t, c); status != http.StatusTooManyRequests {
			t.Fatalf("a third stream of one caller: HTTP %d, want 429", status)
		}
	})
	t.Run("issuer removed", func(t *testing.T) {
		status, done := openSessionStream(t, session(is.token(t, "carol", time.Now().Add(time.Hour))))
		if status != 200 {
			t.Fatalf("GET: HTTP %d", status)
		}
		p.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", obj{"settings": obj{"auth": obj{
			"issuers": []obj{{"issuer": "https://other.example", "audiences": []string{"app"}}}}}})
		testwait.Recv(t, done, "the stream to end as its issuer is removed")
	})
}
