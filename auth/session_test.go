package auth_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/auth"
)

func signer(t *testing.T, key []byte) *auth.Signer {
	t.Helper()
	s, err := auth.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type payload struct {
	Who  string `json:"who"`
	Role string `json:"role"`
}

func TestSignedValuesOpenOnlyUnchangedUnderTheirKeyAndPurpose(t *testing.T) {
	key := bytes.Repeat([]byte{1}, 32)
	s := signer(t, key)
	v, err := s.Sign("session", payload{"alice", "viewer"})
	if err != nil {
		t.Fatal(err)
	}
	var got payload
	if err := s.Open("session", v, &got); err != nil || got != (payload{"alice", "viewer"}) {
		t.Fatalf("Open = %+v, %v", got, err)
	}
	// The same key, as replicas share it, opens it too.
	if err := signer(t, bytes.Repeat([]byte{1}, 32)).Open("session", v, &got); err != nil {
		t.Fatalf("another signer with the same key: %v", err)
	}

	body, sig, _ := strings.Cut(v, ".")
	other, _ := s.Sign("session", payload{"mallory", "platform-admin"})
	otherBody, otherSig, _ := strings.Cut(other, ".")
	promoted := base64.RawURLEncoding.EncodeToString([]byte(`{"who":"alice","role":"platform-admin"}`))
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	for name, tampered := range map[string]string{
		"body edited":               promoted + "." + sig,
		"a body character changed":  flip(body, 3) + "." + sig,
		"a signature byte changed":  body + "." + flip(sig, 5),
		"signature cut short":       body + "." + sig[:len(sig)-2],
		"signature of another body": body + "." + otherSig,
		"body of another signature": otherBody + "." + sig,
		"no signature":              body + ".",
		"no separator":              body + sig,
		"empty":                     "",
		"signature not base64":      body + ".!!!",
		"body not base64":           "!!!." + sig,
		"extra part":                v + ".x",
	} {
		var p payload
		if err := s.Open("session", tampered, &p); err == nil {
			t.Errorf("%s: opened as %+v", name, p)
		}
	}
	// A value signed for one purpose is not accepted for another.
	if err := s.Open("opsmcp_login", v, &got); err == nil {
		t.Error("a session value opened as a login value")
	}
	// Another key does not open it.
	if err := signer(t, bytes.Repeat([]byte{2}, 32)).Open("session", v, &got); err == nil {
		t.Error("another key opened the value")
	}
	// The signer keeps its own copy of the key.
	k := bytes.Repeat([]byte{3}, 32)
	s3 := signer(t, k)
	v3, _ := s3.Sign("session", payload{"alice", "viewer"})
	k[0] ^= 0xff
	if err := s3.Open("session", v3, &got); err != nil {
		t.Errorf("changing the caller's key slice changed the signer: %v", err)
	}
}

func TestSignerKeys(t *testing.T) {
	if _, err := auth.NewSigner(bytes.Repeat([]byte{1}, 31)); err == nil || !strings.Contains(err.Error(), "at least 32 bytes") {
		t.Fatalf("a 31-byte key: %v", err)
	}
	// No key: a random one per signer, so nothing one signs opens under
	// the other (a restart signs everyone out).
	a, b := signer(t, nil), signer(t, []byte{})
	v, _ := a.Sign("session", payload{"alice", "viewer"})
	var p payload
	if err := a.Open("session", v, &p); err != nil {
		t.Fatalf("random-key signer cannot open its own value: %v", err)
	}
	if err := b.Open("session", v, &p); err == nil {
		t.Fatal("two random-key signers share a key")
	}
	// A value that cannot be encoded is an error, not a panic.
	if _, err := a.Sign("session", func() {}); err == nil {
		t.Fatal("signed a function")
	}
}

// requestWith is a request carrying the session cookie value.
func requestWith(value string) *http.Request {
	r := httptest.NewRequest("GET", "/api/v1/me", nil)
	if value != "" {
		r.AddCookie(&http.Cookie{Name: auth.SessionCookie, Value: value})
	}
	return r
}

func TestSessionCookiesAreVerifiedAndExpire(t *testing.T) {
	s := signer(t, bytes.Repeat([]byte{4}, 32))
	sess := auth.Session{ID: "s1", Issuer: "https://id.example", Subject: "alice", Name: "Alice", Roles: []string{"viewer", "tenant-admin:acme"},
		Expires: time.Now().Add(time.Hour).Truncate(time.Second)}
	v, err := s.Sign(auth.SessionCookie, sess)
	if err != nil {
		t.Fatal(err)
	}
	got, err := auth.SessionFrom(requestWith(v), s, false)
	if err != nil || got.Subject != "alice" || got.Issuer != sess.Issuer || got.Name != "Alice" ||
		!slices.Equal(got.Roles, sess.Roles) || !got.Expires.Equal(sess.Expires) {
		t.Fatalf("SessionFrom = %+v, %v", got, err)
	}

	expired := sess
	expired.Expires = time.Now().Add(-time.Second)
	ev, _ := s.Sign(auth.SessionCookie, expired)
	forLogin, _ := s.Sign("opsmcp_login", sess)
	otherKey, _ := signer(t, bytes.Repeat([]byte{5}, 32)).Sign(auth.SessionCookie, sess)
	body, sig, _ := strings.Cut(v, ".")
	// A role added to the body, keeping the signature.
	promoted := strings.Replace(string(mustDecode(t, body)), `"viewer"`, `"platform-admin"`, 1)
	for name, value := range map[string]string{
		"no cookie":           "",
		"expired":             ev,
		"signed for login":    forLogin,
		"another key":         otherKey,
		"role added":          base64.RawURLEncoding.EncodeToString([]byte(promoted)) + "." + sig,
		"garbage":             "not-a-session",
		"signature only":      "." + sig,
		"signed but not JSON": signedRaw(t, s, "[1,2]"),
	} {
		if got, err := auth.SessionFrom(requestWith(value), s, false); err == nil || got != nil {
			t.Errorf("%s: accepted as %+v", name, got)
		}
	}
}

func mustDecode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signedRaw signs a JSON text as is (a json.RawMessage marshals to
// itself).
func signedRaw(t *testing.T, s *auth.Signer, raw string) string {
	t.Helper()
	v, err := s.Sign(auth.SessionCookie, rawJSON(raw))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }
