package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// issuer is a minimal OpenID issuer on loopback: a discovery document and
// a JWKS holding one ES256 key, which the platform fetches over HTTP as it
// would a real provider's; tokens are minted in process with that key.
type issuer struct {
	URL    string
	srv    *http.Server
	signer jose.Signer
}

const issuerKeyID = "peers-es256"

func startIssuer() (*issuer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), issuerKeyID))
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	is := &issuer{URL: "http://" + ln.Addr().String(), signer: signer}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{
		Key: &key.PublicKey, KeyID: issuerKeyID, Algorithm: string(jose.ES256), Use: "sig"}}})
	discovery, _ := json.Marshal(map[string]any{
		"issuer":                                is.URL,
		"jwks_uri":                              is.URL + "/jwks",
		"authorization_endpoint":                is.URL + "/authorize",
		"token_endpoint":                        is.URL + "/token",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"ES256"},
	})
	mux := http.NewServeMux()
	serve := func(body []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body)
		}
	}
	mux.Handle("GET /.well-known/openid-configuration", serve(discovery))
	mux.Handle("GET /jwks", serve(jwks))
	is.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = is.srv.Serve(ln) }()
	return is, nil
}

// token mints an access token for subject, for the audience aud, valid
// for ttl.
func (is *issuer) token(subject, aud string, ttl time.Duration) (string, error) {
	now := time.Now()
	claims := struct {
		jwt.Claims
		AZP   string `json:"azp"`
		Scope string `json:"scope"`
	}{Claims: jwt.Claims{Issuer: is.URL, Subject: subject, Audience: jwt.Audience{aud},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)),
		Expiry: jwt.NewNumericDate(now.Add(ttl))}, AZP: "peers-bench", Scope: "mcp"}
	tok, err := jwt.Signed(is.signer).Claims(claims).Serialize()
	if err != nil {
		return "", fmt.Errorf("minting a token: %w", err)
	}
	return tok, nil
}

func (is *issuer) close() { _ = is.srv.Close() }
