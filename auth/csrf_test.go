package auth

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestSessionCookiesAreHostPrefixedOverHTTPS(t *testing.T) {
	if SessionCookieName(true) != "__Host-"+SessionCookie || SessionCookieName(false) != SessionCookie {
		t.Fatalf("cookie names %q, %q", SessionCookieName(true), SessionCookieName(false))
	}
	s, _ := NewSigner(nil)
	sess := &Session{ID: "s1", Subject: "alice", Roles: []string{"viewer"}, Expires: time.Now().Add(time.Hour)}
	v, _ := s.Sign(SessionCookie, sess)
	// A session planted under the unprefixed name is not read over HTTPS.
	r := httptest.NewRequest("GET", "https://mcp.example/api/v1/me", nil)
	r.Header.Set("Cookie", SessionCookie+"="+v)
	if _, err := SessionFrom(r, s, true); err == nil {
		t.Fatal("an unprefixed cookie was read as the HTTPS session")
	}
	r.Header.Set("Cookie", SessionCookieName(true)+"="+v)
	if got, err := SessionFrom(r, s, true); err != nil || got.Subject != "alice" {
		t.Fatalf("prefixed session: %v, %v", got, err)
	}
	// A session without an id cannot be ended, so it is not accepted.
	noID, _ := s.Sign(SessionCookie, &Session{Subject: "alice", Expires: time.Now().Add(time.Hour)})
	r.Header.Set("Cookie", SessionCookieName(true)+"="+noID)
	if _, err := SessionFrom(r, s, true); err == nil {
		t.Fatal("a session without an id was accepted")
	}
}

func TestCSRFTokensBelongToOneSessionAndOneKey(t *testing.T) {
	s, _ := NewSigner(nil)
	other, _ := NewSigner(nil)
	a, b := &Session{ID: "a"}, &Session{ID: "b"}
	tok := s.CSRFToken(a)
	switch {
	case !s.CheckCSRF(a, tok):
		t.Fatal("a session's own token is refused")
	case s.CheckCSRF(b, tok):
		t.Fatal("one session's token works for another")
	case other.CheckCSRF(a, tok):
		t.Fatal("a token works under another signing key")
	case s.CheckCSRF(a, tok+"A"), s.CheckCSRF(a, ""), s.CheckCSRF(a, strings.ToUpper(tok)), s.CheckCSRF(&Session{}, s.CSRFToken(&Session{})):
		t.Fatal("a malformed token, or one for an id-less session, is accepted")
	}
}

func TestSignInReturnsOnlyToAdminPages(t *testing.T) {
	for next, want := range map[string]string{
		"/admin/flows?state=running":          "/admin/flows?state=running",
		"/admin/flows/acme/fl_x":              "/admin/flows/acme/fl_x",
		"https://evil.example/admin/":         "",
		"//evil.example/admin/":               "",
		"/admin//evil.example":                "/admin//evil.example",
		"/admin/../api/v1/tokens":             "",
		"/api/v1/tokens":                      "",
		"/admin/\\evil":                       "",
		"/admin/x\r\nSet-Cookie: a=b":         "",
		"":                                    "",
		"/admin/" + strings.Repeat("a", 2000): "",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}

func TestSameOriginReadsOriginThenReferer(t *testing.T) {
	const origin = "https://mcp.example"
	for _, tc := range []struct {
		origin, referer string
		want            bool
	}{
		{"https://mcp.example", "", true},
		{"https://MCP.example", "", true},
		{"https://mcp.example/", "", true},
		{"", "https://mcp.example/admin/flows", true},
		{"https://evil.example", "https://mcp.example/admin/", false},
		{"null", "https://mcp.example/admin/", false},
		{"http://mcp.example", "", false},
		{"https://mcp.example:444", "", false},
		{"https://mcp.example.evil.example", "", false},
		{"", "", false},
		{"", "not a url", false},
	} {
		r := httptest.NewRequest("POST", "https://mcp.example/api/v1/flows/cancel", nil)
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if tc.referer != "" {
			r.Header.Set("Referer", tc.referer)
		}
		if got := SameOrigin(r, origin); got != tc.want {
			t.Errorf("Origin %q, Referer %q: %v, want %v", tc.origin, tc.referer, got, tc.want)
		}
	}
}
