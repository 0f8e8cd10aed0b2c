package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/config"
)

// metricsAuth serves the Prometheus exposition, behind a bearer token
// when one is configured (tenant slugs are labels).
func metricsAuth(token string, h http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" {
			tok, _ := auth.BearerToken(r.Header)
			got := sha256.Sum256([]byte(tok))
			if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// metricsOnly is the handler of the separate metrics listener: /metrics
// and nothing else.
func metricsOnly(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	return mux
}

// MetricsAddr is the address of the separate metrics listener
// (--metrics-listen), nil when metrics are served on the main listener
// or not at all.
func (s *Server) MetricsAddr() net.Addr {
	if s.metricsLn == nil {
		return nil
	}
	return s.metricsLn.Addr()
}

// Serve answers on ln, and on the metrics listener when one is
// configured, until ctx is done; then it stops accepting on both, drains
// in-flight requests for up to the shutdown timeout, and returns. If
// either listener fails, the other is shut down too and the error
// returned.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	h := s.cfg.HTTP
	// Connections that have not sent a request yet (a browser opens some
	// ahead of need) hold nothing to drain, but http.Server.Shutdown
	// waits up to five seconds for each to speak, as long as the whole
	// shutdown timeout by default: at shutdown they are closed instead.
	var fresh sync.Map // net.Conn -> struct{}
	connState := func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			fresh.Store(c, struct{}{})
		} else {
			fresh.Delete(c)
		}
	}
	newServer := func(handler http.Handler) *http.Server {
		return &http.Server{
			ConnState:         connState,
			Handler:           handler,
			ReadHeaderTimeout: h.ReadHeaderTimeout,
			// ReadTimeout bounds reading the whole request, so a body
			// trickling in is cut off. It does not bound the response: the
			// server lifts the read deadline once the body has been read
			// to its end (to watch for the client leaving), so streams
			// outlive it (TestTheReadDeadlineEndsWithTheBody). There is no
			// WriteTimeout for the same reason: it would end every stream.
			ReadTimeout: h.ReadTimeout,
			IdleTimeout: h.IdleTimeout,
			BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		}
	}
	type served struct {
		hs *http.Server
		ln net.Listener
	}
	all := []served{{newServer(s.handler), ln}}
	if s.metricsLn != nil {
		all = append(all, served{newServer(s.metricsHandler), s.metricsLn})
	}
	errc := make(chan error, len(all))
	for _, sv := range all {
		go func() { errc <- sv.hs.Serve(sv.ln) }()
	}
	attrs := []any{"addr", ln.Addr().String(), "public_url", strings.TrimSuffix(s.cfg.PublicURL, "/")}
	if len(all) > 1 {
		attrs = append(attrs, "metrics_addr", all[1].ln.Addr().String())
	}
	s.log.Info("serving", attrs...)
	var failed error
	select {
	case failed = <-errc:
		s.log.Error("listener failed: shutting down", "err", failed)
	case <-ctx.Done():
		s.log.Info("shutting down: draining in-flight requests", "timeout", s.cfg.ShutdownTimeout)
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	s.endpoint.Close() // ends long-lived subscription streams so they drain
	s.flows.stop()     // and the admin API's live flow streams
	var errs []error
	for _, sv := range all {
		// Stop accepting first, so no fresh connection arrives after
		// those closed below.
		_ = sv.ln.Close()
	}
	fresh.Range(func(c, _ any) bool {
		_ = c.(net.Conn).Close()
		return true
	})
	for _, sv := range all {
		if err := sv.hs.Shutdown(sctx); errors.Is(err, net.ErrClosed) {
			// The listener, closed above.
		} else if errors.Is(err, context.DeadlineExceeded) {
			errs = append(errs, fmt.Errorf("shutdown: requests still running after %s", s.cfg.ShutdownTimeout))
		} else if err != nil {
			errs = append(errs, err)
		}
	}
	if failed != nil {
		return failed
	}
	return errors.Join(errs...)
}

// Run is a replica's life as `platform serve` lives it: New, a listener
// on cfg.Listen, Serve until ctx ends, then Close. Errors name the step
// that failed.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger, version string) error {
	srv, err := New(ctx, cfg, log, version)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	if err := srv.Serve(ctx, ln); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
