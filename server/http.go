package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/opsmcp/platform/auth"
)

// bodyDeadline bounds how long a request's body may take to arrive,
// counted from the end of its headers: a body still trickling in then
// fails to read, and the connection is closed. http.Server's ReadTimeout
// would bound the body too, but its deadline stays on the connection
// while the response is written, and the server's background read (that
// notices a client going away) then fails and cancels the request's
// context: every stream (subscriptions/listen, progress) would end at
// that deadline. So the deadline is set per request that has a body, and
// lifted as soon as the body has been read to its end.
func bodyDeadline(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			// A writer without a connection (an in-process test): nothing
			// to bound.
			next.ServeHTTP(w, r)
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the connection's read deadline once the body has
// been read to its end. A body not read to its end keeps the deadline,
// which then also bounds the server's discarding of the rest.
type deadlineBody struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.once.Do(b.lift)
	}
	return n, err
}

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
	newServer := func(handler http.Handler) *http.Server {
		return &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: h.ReadHeaderTimeout,
			IdleTimeout:       h.IdleTimeout,
			BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		}
	}
	type served struct {
		hs *http.Server
		ln net.Listener
	}
	all := []served{{newServer(s.handler), ln}}
	if s.metricsLn != nil {
		all = append(all, served{newServer(s.metricsHandler), s.metricsLn})
		s.metricsLn = nil // Serve owns it now: Shutdown closes it
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
	s.registry.Close() // ends long-lived subscription streams so they drain
	var errs []error
	for _, sv := range all {
		if err := sv.hs.Shutdown(sctx); errors.Is(err, context.DeadlineExceeded) {
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
