// Package oidctest runs a real OpenID Provider for tests: the op package
// of github.com/zitadel/oidc/v3 with its example in-memory storage and
// login page, serving discovery, JWKS, the authorization code flow with
// PKCE and client credentials. Only the access-token type is adjusted,
// so access tokens are signed JWTs a resource server can verify.
package oidctest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Users of the example storage (password "verysecure").
const (
	Password = "verysecure"
	// ServiceClient and ServiceSecret get client-credentials tokens.
	ServiceClient = "sid1"
	ServiceSecret = "verysecret"
)

// Provider is a running OpenID Provider.
type Provider struct {
	Issuer string
	srv    *http.Server
}

var registerOnce sync.Once

// Clients registered with every provider (the example storage keeps them
// in a package-level map): two public PKCE clients whose tokens carry
// their id as audience, and redirect to RedirectURI.
const (
	ClientA     = "mcp-client-a"
	ClientB     = "mcp-client-b"
	RedirectURI = "http://127.0.0.1/callback"
)

// Start runs a provider on a free loopback port until the test ends.
func Start(t testing.TB, extraClients ...*storage.Client) *Provider {
	t.Helper()
	registerOnce.Do(func() {
		storage.RegisterClients(
			storage.NativeClient(ClientA, RedirectURI),
			storage.NativeClient(ClientB, RedirectURI),
		)
	})
	if len(extraClients) > 0 {
		storage.RegisterClients(extraClients...)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()
	st := &jwtStorage{Storage: storage.NewStorage(storage.NewUserStore(issuer))}
	router := exampleop.SetupServer(issuer, st, nil, false)
	p := &Provider{Issuer: issuer, srv: &http.Server{Handler: router}}
	go func() { _ = p.srv.Serve(ln) }()
	t.Cleanup(func() { _ = p.srv.Close() })
	return p
}

// Stop takes the provider down (its keys stay cached by verifiers).
func (p *Provider) Stop() { _ = p.srv.Close() }

// jwtStorage is the example storage with every client issuing JWT access
// tokens instead of opaque ones, and ID tokens carrying the users' roles.
type jwtStorage struct{ *storage.Storage }

type jwtClient struct{ op.Client }

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }

// IDTokenUserinfoClaimsAssertion puts the user's claims (roles among
// them) into the ID token itself.
func (jwtClient) IDTokenUserinfoClaimsAssertion() bool { return true }

// Roles are the "roles" claim values of the example users, by user id
// ("id1" and "id2").
var Roles = struct {
	sync.Mutex
	m map[string][]string
}{m: map[string][]string{}}

// SetRoles sets a user's roles claim.
func SetRoles(userID string, roles ...string) {
	Roles.Lock()
	defer Roles.Unlock()
	Roles.m[userID] = roles
}

func addRoles(info *oidc.UserInfo, userID string) {
	Roles.Lock()
	defer Roles.Unlock()
	if r, ok := Roles.m[userID]; ok {
		info.AppendClaims("roles", r)
	}
}

func (s *jwtStorage) SetUserinfoFromScopes(ctx context.Context, info *oidc.UserInfo, userID, clientID string, scopes []string) error {
	if err := s.Storage.SetUserinfoFromScopes(ctx, info, userID, clientID, scopes); err != nil {
		return err
	}
	addRoles(info, userID)
	return nil
}

func (s *jwtStorage) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, req, scopes); err != nil {
		return err
	}
	addRoles(info, req.GetSubject())
	return nil
}

// RegisterWebClient registers a confidential client (for a relying party
// whose redirect URI is known only once it listens).
func RegisterWebClient(id, secret, redirectURI string) {
	storage.RegisterClients(storage.WebClient(id, secret, redirectURI))
}

func (s *jwtStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return jwtClient{c}, nil
}

func (s *jwtStorage) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	c, err := s.Storage.ClientCredentials(ctx, id, secret)
	if err != nil {
		return nil, err
	}
	return jwtClient{c}, nil
}

// UserName is the login of the example storage's users: "test-user@<host>"
// (id1) and "test-user2" (id2).
func (p *Provider) UserName(n int) string {
	if n == 2 {
		return "test-user2"
	}
	u, _ := url.Parse(p.Issuer)
	return "test-user@" + u.Hostname()
}

// UserToken walks the real authorization code flow with PKCE for a user
// of the example storage, through the provider's login page, and returns
// the access token.
func (p *Provider) UserToken(t testing.TB, clientID, username string) string {
	t.Helper()
	tok, err := p.userToken(clientID, username, "openid profile")
	if err != nil {
		t.Fatalf("user token: %v", err)
	}
	return tok
}

func (p *Provider) userToken(clientID, username, scope string) (string, error) {
	verifier := randomString()
	sum := sha256.Sum256([]byte(verifier))
	challenge := base64.RawURLEncoding.EncodeToString(sum[:])
	state := randomString()
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), RedirectURI) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	q := url.Values{"client_id": {clientID}, "redirect_uri": {RedirectURI}, "response_type": {"code"},
		"scope": {scope}, "state": {state}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	resp, err := client.Get(p.Issuer + "/auth?" + q.Encode())
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	authID := resp.Request.URL.Query().Get("authRequestID")
	if authID == "" {
		return "", fmt.Errorf("no login page: ended at %s", resp.Request.URL)
	}
	resp, err = client.PostForm(p.Issuer+"/login/username", url.Values{"id": {authID}, "username": {username}, "password": {Password}})
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		return "", fmt.Errorf("login did not redirect back (status %d)", resp.StatusCode)
	}
	if loc.Query().Get("state") != state {
		return "", errors.New("state mismatch")
	}
	code := loc.Query().Get("code")
	if code == "" {
		return "", fmt.Errorf("no code in %s", loc)
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {RedirectURI},
		"client_id": {clientID}, "code_verifier": {verifier}}
	return p.token(form, "", "")
}

// ClientToken gets a client-credentials (machine) access token.
func (p *Provider) ClientToken(t testing.TB) string {
	t.Helper()
	tok, err := p.token(url.Values{"grant_type": {"client_credentials"}, "scope": {"openid"}}, ServiceClient, ServiceSecret)
	if err != nil {
		t.Fatalf("client token: %v", err)
	}
	return tok
}

func (p *Provider) token(form url.Values, user, pass string) (string, error) {
	req, _ := http.NewRequest("POST", p.Issuer+"/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &out) != nil || out.AccessToken == "" {
		return "", fmt.Errorf("token endpoint: HTTP %d: %s", resp.StatusCode, body)
	}
	return out.AccessToken, nil
}

func randomString() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
