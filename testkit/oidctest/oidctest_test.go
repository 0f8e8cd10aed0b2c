package oidctest

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

func claims(t *testing.T, jwt string) map[string]any {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", jwt)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func TestProviderIssuesSignedJWTAccessTokens(t *testing.T) {
	p := Start(t)
	u := claims(t, p.UserToken(t, ClientA, p.UserName(1)))
	if u["iss"] != p.Issuer || u["sub"] != "id1" {
		t.Fatalf("user token claims %v", u)
	}
	c := claims(t, p.ClientToken(t))
	if c["sub"] != ServiceClient {
		t.Fatalf("client token claims %v", c)
	}
	t.Logf("user %v\nclient %v", u, c)
}
