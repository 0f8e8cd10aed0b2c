package auth

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsmcp/platform/testkit/oidctest"
)

// The sign-in runs against a real OpenID Provider on loopback
// (testkit/oidctest), which checks PKCE and issues real ID tokens.

var loginClients atomic.Int32

// loginRig is an AdminLogin served on a test server, with a provider.
type loginRig struct {
	t      *testing.T
	op     *oidctest.Provider
	login  *AdminLogin
	srv    *httptest.Server
	logs   *bytes.Buffer
	signer *Signer
}

func newLoginRig(t *testing.T) *loginRig {
	op := oidctest.Start(t)
	oidctest.SetRoles("id1", "platform-admin", "viewer")
	oidctest.SetRoles("id2") // no role
	signer, err := NewSigner(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	r := &loginRig{t: t, op: op, logs: &bytes.Buffer{}, signer: signer}
	mux := http.NewServeMux()
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	id := "admin-ui-" + string(rune('a'+loginClients.Add(1)))
	r.login = &AdminLogin{Issuer: op.Issuer, ClientID: id, ClientSecret: "s3cret", RedirectURL: r.srv.URL + "/admin/callback", PublicOrigin: r.srv.URL,
		AfterLogin: "/done", Signer: signer, SessionTTL: time.Hour, Logger: slog.New(slog.NewJSONHandler(r.logs, nil))}
	oidctest.RegisterWebClient(id, "s3cret", r.login.RedirectURL)
	mux.HandleFunc("/admin/login", r.login.Start)
	mux.HandleFunc("/admin/callback", r.login.Callback)
	mux.HandleFunc("/admin/logout", r.login.Logout)
	mux.HandleFunc("/done", func(w http.ResponseWriter, req *http.Request) {
		if _, err := SessionFrom(req, signer, false); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
		}
	})
	return r
}

// client is a browser that stops at the platform's callback, so a test
// can look at (and tamper with) what it would send.
func (r *loginRig) client() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == "/admin/callback" && strings.HasPrefix(req.URL.String(), r.srv.URL) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
}

// begin signs user in at the provider and returns the callback URL the
// provider sends the browser to.
func (r *loginRig) begin(c *http.Client, user string) *url.URL {
	r.t.Helper()
	resp, err := c.Get(r.srv.URL + "/admin/login")
	if err != nil {
		r.t.Fatal(err)
	}
	resp.Body.Close()
	authID := resp.Request.URL.Query().Get("authRequestID")
	if authID == "" {
		r.t.Fatalf("did not reach the provider's login page: %s", resp.Request.URL)
	}
	resp, err = c.PostForm(r.op.Issuer+"/login/username", url.Values{"id": {authID}, "username": {user}, "password": {oidctest.Password}})
	if err != nil {
		r.t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil || loc.Path != "/admin/callback" {
		r.t.Fatalf("the provider did not send the browser back: %d %v %v", resp.StatusCode, loc, err)
	}
	return loc
}

// finish follows the callback and returns the answer.
func (r *loginRig) finish(c *http.Client, callback *url.URL) (int, string) {
	r.t.Helper()
	resp, err := c.Get(callback.String())
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 200 && resp.Request.URL.Path != "/done" {
		r.t.Fatalf("ended at %s", resp.Request.URL)
	}
	return resp.StatusCode, string(body)
}

func (r *loginRig) cookie(c *http.Client, path, name string) *http.Cookie {
	u, _ := url.Parse(r.srv.URL + path)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == name {
			return ck
		}
	}
	return nil
}

// loginState reads the state the browser carries in its login cookie.
func (r *loginRig) loginState(c *http.Client) loginState {
	r.t.Helper()
	ck := r.cookie(c, "/admin/", loginCookie)
	if ck == nil {
		r.t.Fatal("no login cookie")
	}
	var st loginState
	if err := r.signer.Open(loginCookie, ck.Value, &st); err != nil {
		r.t.Fatalf("login cookie: %v", err)
	}
	return st
}

// setLoginState replaces the browser's login cookie with st, signed.
func (r *loginRig) setLoginState(c *http.Client, st loginState) {
	r.t.Helper()
	v, err := r.signer.Sign(loginCookie, st)
	if err != nil {
		r.t.Fatal(err)
	}
	u, _ := url.Parse(r.srv.URL + "/admin/")
	c.Jar.SetCookies(u, []*http.Cookie{{Name: loginCookie, Value: v, Path: "/admin/"}})
}

func TestStartSendsTheBrowserWithStateNonceAndAnS256Challenge(t *testing.T) {
	r := newLoginRig(t)
	r.login.Secure = true
	start := func() (*http.Response, loginState) {
		rec := httptest.NewRecorder()
		r.login.Start(rec, httptest.NewRequest("GET", "/admin/login", nil))
		resp := rec.Result()
		var ck *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == loginCookie {
				ck = c
			}
		}
		if ck == nil || !ck.HttpOnly || !ck.Secure || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/admin/" || ck.MaxAge != 600 {
			t.Fatalf("login cookie %+v", ck)
		}
		var st loginState
		if err := r.signer.Open(loginCookie, ck.Value, &st); err != nil {
			t.Fatal(err)
		}
		return resp, st
	}
	resp, st := start()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("status %d", resp.StatusCode)
	}
	loc, _ := resp.Location()
	q := loc.Query()
	sum := sha256.Sum256([]byte(st.Verifier))
	if !strings.HasPrefix(loc.String(), r.op.Issuer) || q.Get("response_type") != "code" || q.Get("client_id") != r.login.ClientID ||
		q.Get("redirect_uri") != r.login.RedirectURL || !slices.Contains(strings.Fields(q.Get("scope")), "openid") ||
		q.Get("state") != st.State || q.Get("nonce") != st.Nonce || q.Get("code_challenge_method") != "S256" ||
		q.Get("code_challenge") != base64.RawURLEncoding.EncodeToString(sum[:]) {
		t.Fatalf("authorization request %s for state %+v", loc, st)
	}
	// The verifier itself never leaves in the URL; RFC 7636 wants 43 to
	// 128 characters; the state and nonce are unguessable.
	if strings.Contains(loc.String(), st.Verifier) || len(st.Verifier) < 43 || len(st.Verifier) > 128 || len(st.State) < 32 || len(st.Nonce) < 32 {
		t.Fatalf("state %+v in %s", st, loc)
	}
	if d := time.Until(st.Expires); d <= 0 || d > 10*time.Minute {
		t.Fatalf("login state expires in %s", d)
	}
	// Every sign-in starts afresh.
	_, st2 := start()
	if st2.State == st.State || st2.Nonce == st.Nonce || st2.Verifier == st.Verifier {
		t.Fatalf("two sign-ins share values: %+v %+v", st, st2)
	}
}

func TestASignInEndsInASignedSessionOfTheAdminsRoles(t *testing.T) {
	r := newLoginRig(t)
	c := r.client()
	cb := r.begin(c, r.op.UserName(1))
	if status, body := r.finish(c, cb); status != 200 {
		t.Fatalf("sign-in: %d %s", status, body)
	}
	ck := r.cookie(c, "/", SessionCookie)
	if ck == nil {
		t.Fatal("no session cookie")
	}
	sess, err := SessionFrom(requestWithCookie(ck), r.signer, false)
	if err != nil || sess.Subject != "id1" || sess.Issuer != r.op.Issuer || !slices.Equal(sess.Roles, []string{"platform-admin", "viewer"}) {
		t.Fatalf("session %+v, %v", sess, err)
	}
	if d := time.Until(sess.Expires); d <= 0 || d > time.Hour {
		t.Fatalf("session expires in %s, want within the hour's TTL", d)
	}
	if r.cookie(c, "/admin/", loginCookie) != nil {
		t.Fatal("the login cookie outlived the sign-in")
	}
	// The same callback again, without the login cookie: no sign-in in
	// progress.
	if status, body := r.finish(c, cb); status != http.StatusBadRequest || !strings.Contains(body, "no sign-in in progress") {
		t.Fatalf("callback replayed: %d %s", status, body)
	}
	// Sign-out (a POST from the platform's own origin with the session's
	// CSRF token) clears the session cookie.
	rec := httptest.NewRecorder()
	out := httptest.NewRequest("POST", "/admin/logout", nil)
	out.AddCookie(ck)
	out.Header.Set("Origin", r.login.PublicOrigin)
	out.Header.Set("X-CSRF-Token", r.signer.CSRFToken(sess))
	r.login.Logout(rec, out)
	cleared := rec.Result().Cookies()
	if rec.Code != http.StatusNoContent || len(cleared) != 1 || cleared[0].Name != SessionCookie || cleared[0].MaxAge >= 0 || cleared[0].Value != "" {
		t.Fatalf("logout: %d %+v", rec.Code, cleared)
	}
	if strings.Contains(r.logs.String(), ck.Value) {
		t.Fatal("the session value reached the log")
	}
}

func requestWithCookie(ck *http.Cookie) *http.Request {
	req := httptest.NewRequest("GET", "/", nil)
	req.AddCookie(ck)
	return req
}

func TestCallbacksThatDoNotMatchTheSignInAreRefused(t *testing.T) {
	r := newLoginRig(t)
	for _, tc := range []struct {
		name   string
		tamper func(c *http.Client, cb *url.URL)
		status int
		says   string
	}{
		{"another state", func(c *http.Client, cb *url.URL) {
			q := cb.Query()
			q.Set("state", "forged")
			cb.RawQuery = q.Encode()
		}, http.StatusBadRequest, "state mismatch"},
		{"no state", func(c *http.Client, cb *url.URL) {
			q := cb.Query()
			q.Del("state")
			cb.RawQuery = q.Encode()
		}, http.StatusBadRequest, "state mismatch"},
		{"another nonce", func(c *http.Client, cb *url.URL) {
			st := r.loginState(c)
			st.Nonce = random()
			r.setLoginState(c, st)
		}, http.StatusForbidden, "nonce mismatch"},
		// The provider checks the verifier against the challenge it was
		// sent: a code is worth nothing without the browser's verifier.
		{"another PKCE verifier", func(c *http.Client, cb *url.URL) {
			st := r.loginState(c)
			st.Verifier = random() + random()
			r.setLoginState(c, st)
		}, http.StatusBadGateway, "the code could not be exchanged"},
		{"another code", func(c *http.Client, cb *url.URL) {
			q := cb.Query()
			q.Set("code", "forged")
			cb.RawQuery = q.Encode()
		}, http.StatusBadGateway, "the code could not be exchanged"},
		{"an expired sign-in", func(c *http.Client, cb *url.URL) {
			st := r.loginState(c)
			st.Expires = time.Now().Add(-time.Second)
			r.setLoginState(c, st)
		}, http.StatusBadRequest, "no sign-in in progress"},
		{"no login cookie", func(c *http.Client, cb *url.URL) {
			u, _ := url.Parse(r.srv.URL + "/admin/")
			c.Jar.SetCookies(u, []*http.Cookie{{Name: loginCookie, Path: "/admin/", MaxAge: -1}})
		}, http.StatusBadRequest, "no sign-in in progress"},
		{"a tampered login cookie", func(c *http.Client, cb *url.URL) {
			ck := r.cookie(c, "/admin/", loginCookie)
			u, _ := url.Parse(r.srv.URL + "/admin/")
			c.Jar.SetCookies(u, []*http.Cookie{{Name: loginCookie, Value: "x" + ck.Value[1:], Path: "/admin/"}})
		}, http.StatusBadRequest, "no sign-in in progress"},
		{"a login cookie from another key", func(c *http.Client, cb *url.URL) {
			other, _ := NewSigner(bytes.Repeat([]byte{8}, 32))
			v, _ := other.Sign(loginCookie, r.loginState(c))
			u, _ := url.Parse(r.srv.URL + "/admin/")
			c.Jar.SetCookies(u, []*http.Cookie{{Name: loginCookie, Value: v, Path: "/admin/"}})
		}, http.StatusBadRequest, "no sign-in in progress"},
		{"a session cookie as the login cookie", func(c *http.Client, cb *url.URL) {
			v, _ := r.signer.Sign(SessionCookie, r.loginState(c))
			u, _ := url.Parse(r.srv.URL + "/admin/")
			c.Jar.SetCookies(u, []*http.Cookie{{Name: loginCookie, Value: v, Path: "/admin/"}})
		}, http.StatusBadRequest, "no sign-in in progress"},
		{"the provider's refusal", func(c *http.Client, cb *url.URL) {
			cb.RawQuery = url.Values{"error": {"access_denied"}, "state": {cb.Query().Get("state")}}.Encode()
		}, http.StatusForbidden, "the provider refused: access_denied"},
	} {
		c := r.client()
		cb := r.begin(c, r.op.UserName(1))
		tc.tamper(c, cb)
		status, body := r.finish(c, cb)
		if status != tc.status || !strings.Contains(body, tc.says) {
			t.Errorf("%s: %d %q, want %d saying %q", tc.name, status, body, tc.status, tc.says)
		}
		if r.cookie(c, "/", SessionCookie) != nil {
			t.Errorf("%s: a session was set", tc.name)
		}
	}
	// A user the provider knows but who holds no admin role.
	c := r.client()
	if status, body := r.finish(c, r.begin(c, r.op.UserName(2))); status != http.StatusForbidden || !strings.Contains(body, `no admin role (claim "roles")`) {
		t.Fatalf("no role: %d %s", status, body)
	}
	// Roles read from another claim: the user's roles are not there.
	r.login.RolesClaim = "groups"
	c = r.client()
	if status, body := r.finish(c, r.begin(c, r.op.UserName(1))); status != http.StatusForbidden || !strings.Contains(body, `claim "groups"`) {
		t.Fatalf("roles claim groups: %d %s", status, body)
	}
}

func TestAProviderThatCannotBeReachedIsABadGateway(t *testing.T) {
	r := newLoginRig(t)
	r.op.Stop()
	rec := httptest.NewRecorder()
	r.login.Start(rec, httptest.NewRequest("GET", "/admin/login", nil))
	if rec.Code != http.StatusBadGateway || len(rec.Result().Cookies()) != 0 {
		t.Fatalf("provider down: %d %v", rec.Code, rec.Result().Cookies())
	}
}
