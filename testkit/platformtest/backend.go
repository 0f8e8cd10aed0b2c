package platformtest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/opsmcp/platform/webhook"
)

// Backend is a tenant's webhook in a test. Each delivery is read and its
// signature verified with one of the secrets set (401 otherwise, and
// counted as refused), then decoded (400 otherwise) and handed to serve,
// with the HTTP request it came in.
type Backend struct {
	*httptest.Server
	mu      sync.Mutex
	secrets []string
	refused int
}

// NewBackend starts a Backend, closed when the test ends.
func NewBackend(t testing.TB, serve func(w http.ResponseWriter, r *http.Request, req *webhook.Request)) *Backend {
	b := &Backend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !b.verified(r.Header.Get(webhook.SignatureHeader), body) {
			http.Error(w, "the signature does not verify", http.StatusUnauthorized)
			return
		}
		var req webhook.Request
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, "not a delivery", http.StatusBadRequest)
			return
		}
		serve(w, r, &req)
	}))
	t.Cleanup(b.Close)
	return b
}

// SetSecrets sets the secrets deliveries are verified with, replacing
// those set before.
func (b *Backend) SetSecrets(secrets ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.secrets = slices.Clone(secrets)
}

// AddSecret adds a secret deliveries are verified with (a backend of
// several tools).
func (b *Backend) AddSecret(secret string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.secrets = append(b.secrets, secret)
}

// Refused is how many deliveries did not verify.
func (b *Backend) Refused() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refused
}

func (b *Backend) verified(header string, body []byte) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.secrets {
		if webhook.Verify(s, header, body, time.Now(), webhook.DefaultTolerance) == nil {
			return true
		}
	}
	b.refused++
	return false
}
