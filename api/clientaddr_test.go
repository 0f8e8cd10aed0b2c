package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// forwardingHeaders are the spellings clients and proxies use to claim
// an address. Only X-Forwarded-For is ever believed, and only from a
// trusted proxy.
var forwardingHeaders = []string{"X-Forwarded-For", "X-Real-IP", "Forwarded", "True-Client-IP", "CF-Connecting-IP",
	"X-Client-IP", "X-Cluster-Client-IP", "Fastly-Client-IP", "X-Appengine-Remote-Addr", "X-Original-Forwarded-For"}

// auditedAddress makes one audited change (a rename of acme) from peer
// (host:port; "" sends it over the platform's real listener) with the
// given headers, and returns the address its audit entry records.
func auditedAddress(t *testing.T, p *platformtest.Platform, tenantID, peer string, header http.Header) string {
	t.Helper()
	ctx := context.Background()
	before, err := p.Server.Store().Audit().List(ctx, tenantID, time.Time{}, 500)
	if err != nil {
		t.Fatal(err)
	}
	h := header.Clone()
	h.Set("Authorization", "Bearer "+platformtest.AdminToken)
	h.Set("Content-Type", "application/json")
	body := `{"displayName":"renamed"}`
	if peer == "" {
		if r := platformtest.Do(t, "PATCH", p.URL+"/api/v1/tenants/acme", h, []byte(body)); r.Status != 200 {
			t.Fatalf("rename: %d %s", r.Status, r.Body)
		}
	} else {
		req := httptest.NewRequest("PATCH", "/api/v1/tenants/acme", strings.NewReader(body))
		req.RemoteAddr = peer
		for k, vs := range h {
			req.Header[k] = vs
		}
		rec := httptest.NewRecorder()
		p.Server.Handler().ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("rename: %d %s", rec.Code, rec.Body)
		}
	}
	after, err := p.Server.Store().Audit().List(ctx, tenantID, time.Time{}, 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before)+1 {
		t.Fatalf("%d new audit entries, want 1", len(after)-len(before))
	}
	seen := map[string]bool{}
	for _, e := range before {
		seen[e.ID] = true
	}
	for _, e := range after {
		if !seen[e.ID] {
			return e.RemoteAddr
		}
	}
	t.Fatal("no new audit entry")
	return ""
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// TestForwardingHeadersAreIgnoredWithoutTrustedProxies: with no trusted
// proxy configured (the default), the audit log records the connecting
// peer whatever address the request claims, in any header, any number of
// times, over IPv4 and IPv6.
func TestForwardingHeadersAreIgnoredWithoutTrustedProxies(t *testing.T) {
	eachDialect(t, func(t *testing.T, p *platformtest.Platform) {
		id := p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "Acme"})["id"].(string)
		claims := []string{"203.0.113.7", "for=203.0.113.7", "for=\"[2001:db8::7]\";proto=https", "2001:db8::7", "203.0.113.7, 198.51.100.1", "127.0.0.1", "unknown"}
		for _, name := range forwardingHeaders {
			for _, claim := range claims {
				h := hdr(name, claim, name, "192.0.2.99")
				if got := auditedAddress(t, p, id, "", h); got != "127.0.0.1" {
					t.Errorf("%s: %q over the real listener recorded %q, want the peer 127.0.0.1", name, claim, got)
				}
				for _, peer := range []struct{ addr, want string }{
					{"192.0.2.10:4711", "192.0.2.10"}, {"[2001:db8::1]:4711", "2001:db8::1"}, {"[::ffff:192.0.2.10]:80", "192.0.2.10"},
				} {
					if got := auditedAddress(t, p, id, peer.addr, h); got != peer.want {
						t.Errorf("%s: %q from %s recorded %q, want %q", name, claim, peer.addr, got, peer.want)
					}
				}
			}
		}
	})
}

// TestTrustedProxiesNameTheClient: behind proxies the operator trusts,
// the recorded address is the rightmost X-Forwarded-For entry that is not
// itself a trusted proxy, so entries a client prepends are ignored; a
// malformed chain falls back to the peer; other headers are never
// believed; an untrusted peer's headers are ignored.
func TestTrustedProxiesNameTheClient(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			p := platformtest.Start(t, d.New(t), platformtest.WithConfig(func(c *config.Config) {
				c.HTTP.TrustedProxies = "127.0.0.1, 10.0.0.0/8,2001:db8:a::/48"
			}))
			id := p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "Acme"})["id"].(string)
			for _, c := range []struct {
				name, peer string
				h          http.Header
				want       string
			}{
				{"real listener, one proxy", "", hdr("X-Forwarded-For", "203.0.113.7"), "203.0.113.7"},
				{"real listener, spoofed leftmost", "", hdr("X-Forwarded-For", "6.6.6.6, 203.0.113.7"), "203.0.113.7"},
				{"real listener, no header", "", hdr(), "127.0.0.1"},
				{"one proxy", "10.0.0.5:5555", hdr("X-Forwarded-For", "203.0.113.7"), "203.0.113.7"},
				{"spoofed leftmost entries", "10.0.0.5:5555", hdr("X-Forwarded-For", "6.6.6.6, 7.7.7.7,203.0.113.7"), "203.0.113.7"},
				{"a chain of trusted proxies", "10.0.0.5:5555", hdr("X-Forwarded-For", "6.6.6.6, 203.0.113.7, 10.0.0.9, 10.1.2.3"), "203.0.113.7"},
				{"the header twice", "10.0.0.5:5555", hdr("X-Forwarded-For", "6.6.6.6", "X-Forwarded-For", "203.0.113.7"), "203.0.113.7"},
				{"an IPv6 client", "10.0.0.5:5555", hdr("X-Forwarded-For", "2001:db8:ffff::9"), "2001:db8:ffff::9"},
				{"an IPv6 proxy", "[2001:db8:a::1]:443", hdr("X-Forwarded-For", "6.6.6.6, 203.0.113.7, 2001:db8:a::2"), "203.0.113.7"},
				{"a v4-mapped proxy", "[::ffff:10.0.0.5]:443", hdr("X-Forwarded-For", "203.0.113.7"), "203.0.113.7"},
				{"garbage", "10.0.0.5:5555", hdr("X-Forwarded-For", "garbage"), "10.0.0.5"},
				{"garbage after the client", "10.0.0.5:5555", hdr("X-Forwarded-For", "203.0.113.7, garbage"), "10.0.0.5"},
				{"an address with a port", "10.0.0.5:5555", hdr("X-Forwarded-For", "203.0.113.7:4711"), "10.0.0.5"},
				{"a bracketed IPv6 address", "10.0.0.5:5555", hdr("X-Forwarded-For", "[2001:db8::7]"), "10.0.0.5"},
				{"an empty header", "10.0.0.5:5555", hdr("X-Forwarded-For", ""), "10.0.0.5"},
				{"commas only", "10.0.0.5:5555", hdr("X-Forwarded-For", ", ,"), "10.0.0.5"},
				{"X-Real-IP from a trusted proxy", "10.0.0.5:5555", hdr("X-Real-IP", "6.6.6.6"), "10.0.0.5"},
				{"Forwarded from a trusted proxy", "10.0.0.5:5555", hdr("Forwarded", "for=6.6.6.6"), "10.0.0.5"},
				{"True-Client-IP from a trusted proxy", "10.0.0.5:5555", hdr("True-Client-IP", "6.6.6.6"), "10.0.0.5"},
				{"an untrusted peer", "192.0.2.1:5555", hdr("X-Forwarded-For", "203.0.113.7"), "192.0.2.1"},
				{"an untrusted IPv6 peer", "[2001:db8:b::1]:5555", hdr("X-Forwarded-For", "203.0.113.7"), "2001:db8:b::1"},
				{"an untrusted peer naming a trusted one", "192.0.2.1:5555", hdr("X-Forwarded-For", "10.0.0.5"), "192.0.2.1"},
			} {
				if got := auditedAddress(t, p, id, c.peer, c.h); got != c.want {
					t.Errorf("%s: recorded %q, want %q", c.name, got, c.want)
				}
			}
		})
	}
}

// refusals are the "admin request refused" lines logged so far.
func refusals(t *testing.T, p *platformtest.Platform) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(p.Logs.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "admin request refused" {
			out = append(out, m)
		}
	}
	return out
}

// TestRefusedAdminRequestsAreLogged: every refusal (no credential, a bad
// one, a role that may not, a tenant out of scope) is logged with its
// reason, status and the client's address (a spoofed X-Forwarded-For
// from an untrusted peer is not believed); no credential ever reaches
// the log.
func TestRefusedAdminRequestsAreLogged(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "acme", "displayName": "Acme"})
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants", map[string]any{"slug": "beta", "displayName": "Beta"})
	viewer := mintToken(t, p, "viewer")
	ta := mintToken(t, p, "tenant-admin", "acme")
	wrong := "pat_" + strings.Repeat("x", 43)
	spoof := http.Header{"X-Forwarded-For": {"203.0.113.66"}, "Content-Type": {"application/json"}}
	with := func(kv ...string) http.Header {
		h := spoof.Clone()
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	for _, c := range []struct {
		method, path string
		h            http.Header
		status       int
		reason       string
	}{
		{"GET", "/api/v1/tenants", with(), 401, "no_credential"},
		{"GET", "/api/v1/tenants", with("Authorization", "Bearer "+wrong), 401, "bad_credential"},
		{"GET", "/api/v1/tenants", with("Authorization", "Basic "+wrong), 401, "bad_credential"},
		{"GET", "/api/v1/tenants", with("Cookie", "opsmcp_admin="+wrong), 401, "bad_credential"},
		{"PATCH", "/api/v1/tenants/acme", with("Authorization", "Bearer "+viewer), 403, "role"},
		{"POST", "/api/v1/tokens", with("Authorization", "Bearer "+ta), 403, "role"},
		{"GET", "/api/v1/tenants/beta", with("Authorization", "Bearer "+ta), 404, "out_of_scope"},
		{"GET", "/api/v1/tenants/nope", with("Authorization", "Bearer "+ta), 404, "out_of_scope"},
		{"GET", "/api/v1/audit?tenant=beta", with("Authorization", "Bearer "+ta), 404, "out_of_scope"},
	} {
		n := len(refusals(t, p))
		r := platformtest.Do(t, c.method, p.URL+c.path, c.h, []byte(`{"displayName":"x"}`))
		if r.Status != c.status {
			t.Fatalf("%s %s: %d, want %d", c.method, c.path, r.Status, c.status)
		}
		got := refusals(t, p)
		if len(got) != n+1 {
			t.Fatalf("%s %s (%s): %d refusal lines logged, want 1", c.method, c.path, c.reason, len(got)-n)
		}
		line := got[n]
		if line["reason"] != c.reason || line["status"] != float64(c.status) || line["client"] != "127.0.0.1" || line["path"] != strings.Split(c.path, "?")[0] {
			t.Errorf("%s %s: logged %v", c.method, c.path, line)
		}
	}
	logs := p.Logs.String()
	for _, secret := range []string{wrong, viewer, ta, platformtest.AdminToken} {
		if strings.Contains(logs, secret) {
			t.Fatal("a credential reached the log")
		}
	}
}
