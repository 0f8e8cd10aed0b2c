package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// Signer makes tamper-evident cookie values: JSON, then an HMAC-SHA256
// over it under a key shared by the replicas (or random per process when
// none is configured, which signs everyone out on restart).
type Signer struct{ key []byte }

// NewSigner returns a signer for key; an empty key means a random one.
func NewSigner(key []byte) (*Signer, error) {
	if len(key) == 0 {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	}
	if len(key) < 32 {
		return nil, errors.New("session key must be at least 32 bytes")
	}
	return &Signer{key: append([]byte(nil), key...)}, nil
}

// Sign encodes v with a purpose label, so a value signed for one cookie
// is never accepted as another.
func (s *Signer) Sign(purpose string, v any) (string, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	b := base64.RawURLEncoding.EncodeToString(body)
	return b + "." + base64.RawURLEncoding.EncodeToString(s.mac(purpose, b)), nil
}

// Open verifies and decodes a value signed for purpose.
func (s *Signer) Open(purpose, value string, v any) error {
	b, sig, ok := strings.Cut(value, ".")
	if !ok {
		return errors.New("malformed")
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(purpose, b)) {
		return errors.New("bad signature")
	}
	body, err := base64.RawURLEncoding.DecodeString(b)
	if err != nil {
		return errors.New("malformed")
	}
	return json.Unmarshal(body, v)
}

func (s *Signer) mac(purpose, b string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write([]byte(b))
	return m.Sum(nil)
}

// Session is a signed-in admin.
type Session struct {
	// ID names the session, so sign-out can end it on every replica and
	// its CSRF token is its own.
	ID      string    `json:"id"`
	Issuer  string    `json:"iss"`
	Subject string    `json:"sub"`
	Name    string    `json:"name,omitempty"`
	Roles   []string  `json:"roles"`
	Expires time.Time `json:"exp"`
	// Tenants maps each tenant slug the roles name to the id of the
	// tenant that held it at sign-in. Grants follow the id: when the
	// tenant is deleted and its slug given to a new one, this session
	// does not reach the new tenant (a fresh sign-in, whose claim names
	// the slug, does).
	Tenants map[string]string `json:"tenants,omitempty"`
}

// CSRFToken is the token a session's state-changing requests must carry
// (X-CSRF-Token): a MAC of the session id, so it is the session's own,
// unknowable without the signing key, and needs no storage.
func (s *Signer) CSRFToken(sess *Session) string {
	return base64.RawURLEncoding.EncodeToString(s.mac("csrf", sess.ID))
}

// CheckCSRF reports whether token is sess's CSRF token.
func (s *Signer) CheckCSRF(sess *Session, token string) bool {
	got, err := base64.RawURLEncoding.DecodeString(token)
	return err == nil && sess.ID != "" && hmac.Equal(got, s.mac("csrf", sess.ID))
}
