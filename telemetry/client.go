package telemetry

import (
	"context"
	"encoding/hex"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// StartClient starts a CLIENT span for an outbound call (a Vault read, a
// JWKS fetch, a database query) as a child of the request span in ctx,
// from that span's own provider, so no global state is needed and two
// platforms in one process never mix their spans. Work done before the
// request span exists (the tenant lookup, the bearer check) is recorded
// and replayed under it once it starts (see WithPending). With no request
// at all the global provider is used.
//
// Record only what is safe to export: never a token, a secret, a key, a
// requestState or an answer. End the span with End.
func StartClient(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return start(ctx, name, trace.SpanKindClient, attrs, true)
}

// End ends span; a non-nil err sets error.type to errType (or to the
// error's Go type when errType is empty) and the status to Error. The
// error's text is not recorded: it may quote what it failed on.
func End(span trace.Span, err error, errType ...string) {
	if err != nil {
		et := ""
		if len(errType) > 0 {
			et = errType[0]
		}
		if et == "" {
			et = "_OTHER"
		}
		span.SetAttributes(AttrErrorType.String(et))
		span.SetStatus(codes.Error, et)
	}
	span.End()
}

// start is StartClient for any kind; background says whether to fall
// back to the global provider when there is no request at all (database
// polling does not, or every poll would be a trace).
func start(ctx context.Context, name string, kind trace.SpanKind, attrs []attribute.KeyValue, background bool) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if parent.IsRecording() {
		return parent.TracerProvider().Tracer(ScopeName).Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	}
	if p, ok := ctx.Value(pendingKey{}).(*Pending); ok {
		s := &pendingSpan{name: name, kind: kind, attrs: append([]attribute.KeyValue(nil), attrs...), start: time.Now()}
		p.add(s)
		return ctx, s
	}
	if !background {
		return ctx, tracenoop.Span{}
	}
	return otel.GetTracerProvider().Tracer(ScopeName).Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// Transport wraps base (nil means http.DefaultTransport) so every request
// made inside a request is a CLIENT span named after its method, with the
// server address and the response status, and carries the W3C
// traceparent. Requests outside any request (background refreshes) are
// not traced, as with the database plugin, or every poll would be a
// trace. The URL's path and query are not recorded: they can hold
// secrets (Vault paths are safe, webhook-style URLs with tokens in them
// are not). The Vault client and the OIDC/JWKS fetcher use it.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base}
}

type transport struct{ base http.RoundTripper }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	attrs := []attribute.KeyValue{AttrHTTPMethod.String(req.Method)}
	attrs = append(attrs, serverAddr(req.URL.Host, req.URL.Scheme)...)
	ctx, span := start(req.Context(), req.Method, trace.SpanKindClient, attrs, false)
	if sc := span.SpanContext(); sc.IsValid() {
		req = req.Clone(ctx)
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		End(span, err, "transport")
		return nil, err
	}
	span.SetAttributes(AttrHTTPStatus.Int(resp.StatusCode))
	if resp.StatusCode >= 400 {
		End(span, errStatus, strconv.Itoa(resp.StatusCode))
	} else {
		span.End()
	}
	return resp, nil
}

type statusError struct{}

func (statusError) Error() string { return "HTTP error status" }

var errStatus error = statusError{}

// serverAddr is server.address and server.port of a URL host.
func serverAddr(host, scheme string) []attribute.KeyValue {
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		h = host
		switch scheme {
		case "https":
			p = "443"
		case "http":
			p = "80"
		}
	}
	out := []attribute.KeyValue{AttrServerAddress.String(h)}
	if n, err := strconv.Atoi(p); err == nil {
		out = append(out, AttrServerPort.Int(n))
	}
	return out
}

// ServerAddr is serverAddr for other packages' spans.
func ServerAddr(host, scheme string) []attribute.KeyValue { return serverAddr(host, scheme) }

// Traceparent formats a span context as a W3C traceparent header value,
// or "" when it is not valid.
func Traceparent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	var b [55]byte
	copy(b[:], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// ParseTraceparent reads a W3C traceparent (and optional tracestate)
// into a remote span context; ok is false when it is not valid.
func ParseTraceparent(traceparent, tracestate string) (trace.SpanContext, bool) {
	if traceparent == "" {
		return trace.SpanContext{}, false
	}
	if tracestate == "" {
		// The common case, a version-00 header with no state (the one a
		// round seals for the next): read in place, without the
		// propagator's carrier map and context.
		if sc, ok := parseTraceparent00(traceparent); ok {
			return sc, true
		}
	}
	carrier := propagation.MapCarrier{"traceparent": traceparent}
	if tracestate != "" {
		carrier["tracestate"] = tracestate
	}
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
	return sc, sc.IsValid()
}

// parseTraceparent00 reads a well-formed version-00 traceparent as the
// propagator would: lowercase hex, ids not all zero, the sampled and
// random flags, remote. ok is false for anything else, which the caller
// hands to the propagator.
func parseTraceparent00(h string) (trace.SpanContext, bool) {
	if len(h) != 55 || h[:3] != "00-" || h[35] != '-' || h[52] != '-' {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	var flags [1]byte
	if !decodeLowerHex(tid[:], h[3:35]) || !decodeLowerHex(sid[:], h[36:52]) || !decodeLowerHex(flags[:], h[53:55]) || flags[0] > 3 {
		return trace.SpanContext{}, false // version 00 reserves the other flag bits
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: trace.TraceFlags(flags[0]) & (trace.FlagsSampled | trace.FlagsRandom), Remote: true})
	return sc, sc.IsValid()
}

// decodeLowerHex decodes src, which must be lowercase hex of exactly
// twice dst's length, into dst.
func decodeLowerHex(dst []byte, src string) bool {
	if len(src) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := lowerHexDigit(src[2*i])
		lo, ok2 := lowerHexDigit(src[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func lowerHexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// Pending holds spans of work done inside a request before the request's
// own span could start (its parent is only known once the body is
// parsed). Replay re-creates them, with their real timestamps, as
// children of the request span.
type Pending struct {
	mu    sync.Mutex
	spans []*pendingSpan
}

type pendingKey struct{}

// WithPending returns a context in which StartClient and the database
// plugin record spans into the returned Pending instead of dropping them.
func WithPending(ctx context.Context) (context.Context, *Pending) {
	p := &Pending{}
	return p.Into(ctx), p
}

// Into is WithPending for a Pending the caller holds (the zero value is
// ready to use).
func (p *Pending) Into(ctx context.Context) context.Context {
	return context.WithValue(ctx, pendingKey{}, p)
}

func (p *Pending) add(s *pendingSpan) {
	p.mu.Lock()
	p.spans = append(p.spans, s)
	p.mu.Unlock()
}

// Replay emits the recorded spans as children of the span in ctx and
// forgets them. Spans not yet ended end now.
func (p *Pending) Replay(ctx context.Context) {
	if p == nil {
		return
	}
	p.mu.Lock()
	spans := p.spans
	p.spans = nil
	p.mu.Unlock()
	parent := trace.SpanFromContext(ctx)
	if len(spans) == 0 || !parent.IsRecording() {
		return
	}
	tr := parent.TracerProvider().Tracer(ScopeName)
	now := time.Now()
	for _, s := range spans {
		s.mu.Lock()
		_, sp := tr.Start(ctx, s.name, trace.WithSpanKind(s.kind), trace.WithTimestamp(s.start), trace.WithAttributes(s.attrs...))
		for _, ev := range s.events {
			sp.AddEvent(ev.name, trace.WithTimestamp(ev.at), trace.WithAttributes(ev.attrs...))
		}
		if s.code != codes.Unset {
			sp.SetStatus(s.code, s.desc)
		}
		end := s.end
		if end.IsZero() {
			end = now
		}
		s.mu.Unlock()
		sp.End(trace.WithTimestamp(end))
	}
}

// pendingSpan records what is done to a span until it can be replayed.
type pendingSpan struct {
	tracenoop.Span
	mu     sync.Mutex
	name   string
	kind   trace.SpanKind
	attrs  []attribute.KeyValue
	events []pendingEvent
	code   codes.Code
	desc   string
	start  time.Time
	end    time.Time
}

type pendingEvent struct {
	name  string
	at    time.Time
	attrs []attribute.KeyValue
}

func (s *pendingSpan) IsRecording() bool { return true }

func (s *pendingSpan) SetName(name string) {
	s.mu.Lock()
	s.name = name
	s.mu.Unlock()
}

func (s *pendingSpan) SetAttributes(kv ...attribute.KeyValue) {
	s.mu.Lock()
	s.attrs = append(s.attrs, kv...)
	s.mu.Unlock()
}

func (s *pendingSpan) SetStatus(code codes.Code, desc string) {
	s.mu.Lock()
	s.code, s.desc = code, desc
	s.mu.Unlock()
}

func (s *pendingSpan) AddEvent(name string, opts ...trace.EventOption) {
	cfg := trace.NewEventConfig(opts...)
	s.mu.Lock()
	s.events = append(s.events, pendingEvent{name: name, at: cfg.Timestamp(), attrs: cfg.Attributes()})
	s.mu.Unlock()
}

func (s *pendingSpan) RecordError(err error, opts ...trace.EventOption) {
	if err == nil {
		return
	}
	s.AddEvent("exception", opts...)
}

func (s *pendingSpan) End(opts ...trace.SpanEndOption) {
	cfg := trace.NewSpanEndConfig(opts...)
	at := cfg.Timestamp()
	if at.IsZero() {
		at = time.Now()
	}
	s.mu.Lock()
	if s.end.IsZero() {
		s.end = at
	}
	s.mu.Unlock()
}
