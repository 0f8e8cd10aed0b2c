package server

import (
	"net/http"
	"strings"
)

// Mount serves h for every request whose path starts with prefix (which
// ends in "/"), ahead of the platform's own routes. `platform dev` mounts
// its development issuer and demo backend this way, so one loopback
// address serves everything; `platform serve` mounts nothing. Call it
// before Serve.
func (s *Server) Mount(prefix string, h http.Handler) {
	next := s.handler
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, prefix) {
			h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
