package endpoint

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	neturl "net/url"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/opsmcp/platform/egress"
	"github.com/opsmcp/platform/internal/bounded"
	"github.com/opsmcp/platform/telemetry"
	"github.com/opsmcp/platform/webhook"
)

// WebhookError is a failed delivery, classified so the tool error the
// model reads, the log and the metrics all say what failed.
type WebhookError struct {
	// Class is one of timeout, connect, refused_address, status,
	// invalid_json, contract, oversize, canceled.
	Class string
	// Detail is what the client is told (it names no address).
	Detail string
	// Cause is what the operator is told, in the flow record: the
	// transport's own words ("connect: connection refused"), the status,
	// where JSON broke. It is bounded, and holds no request content; ""
	// means Detail says it all.
	Cause string
	// Body is how a failed answer's body starts, as one line: told to
	// operators only of tenants that record content (a backend's error
	// page may echo what the call carried).
	Body string
}

// Why is the failure as an operator reads it, with the start of the
// backend's body when body is true.
func (e *WebhookError) Why(body bool) string {
	why := e.Cause
	if why == "" {
		why = e.Detail
	}
	if body && e.Body != "" {
		why += ", body starts " + strconv.Quote(e.Body)
	}
	return why
}

func (e *WebhookError) Error() string { return "webhook " + e.Class + ": " + e.Detail }

// webhookClient delivers signed requests to tenants' backends.
type webhookClient struct {
	http        *http.Client
	maxResponse int64
	now         func() time.Time
	tel         *telemetry.Telemetry
	addrMu      sync.RWMutex
	addrs       map[string][]attribute.KeyValue // webhook URL -> server.address, server.port
	names       map[[2]string]string            // kind, target -> span name
}

func newWebhookClient(allowPrivate bool, maxResponse int64, tel *telemetry.Telemetry) *webhookClient {
	// Every connection, redirects aside (never followed), dials through the
	// egress policy: it checks the address actually dialled, after DNS.
	policy := &egress.Policy{AllowPrivate: allowPrivate}
	tr := policy.Transport()
	// Many tenants often share one backend host, whose deliveries in
	// flight are then the flows of all of them: fewer idle connections
	// kept per host than that turns each delivery past it into a dial
	// (BenchmarkScale, 800 in flight, 32 per host: 0.9 dials a flow and
	// about a seventh of the CPU). Idle connections still close after the
	// transport's idle timeout.
	tr.MaxIdleConns = 2048
	tr.MaxIdleConnsPerHost = 1024
	tr.ResponseHeaderTimeout = 0 // bounded by the per-tool deadline
	// No Accept-Encoding: gzip. Answers are small JSON from backends near
	// the platform; compressing them costs both sides CPU for little, and
	// the response limit then counts bytes as sent.
	tr.DisableCompression = true
	return &webhookClient{
		http: &http.Client{
			Transport: tr,
			// A redirect would let a tenant's backend point the platform at
			// any address; deliveries never follow one.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		maxResponse: maxResponse,
		now:         time.Now,
		tel:         tel,
	}
}

// streamSink receives progress and log events while a delivery streams.
type streamSink interface {
	progress(ev *webhook.Event)
	log(ev *webhook.Event)
}

// deliver POSTs req to url, signed with secret, within timeout, and
// returns the backend's response and its HTTP status (0 when none came).
// Every failure is a *WebhookError. The delivery is a CLIENT span whose
// context the backend receives (in the trace header and req.Trace).
func (c *webhookClient) deliver(ctx context.Context, url, secret string, timeout time.Duration, req *webhook.Request, sink streamSink) (*webhook.Response, int, error) {
	var span trace.Span
	if c.tel.Tracing() {
		ctx, span = c.tel.Tracer().Start(ctx, c.spanName(req.Kind, req.Name), clientKind)
	} else {
		span = trace.SpanFromContext(ctx) // the caller's context, if any, still reaches the backend
	}
	if sc := span.SpanContext(); sc.IsValid() {
		req.Trace = &webhook.Trace{Traceparent: telemetry.Traceparent(sc), Tracestate: sc.TraceState().String()}
	}
	var status int
	resp, err := c.post(ctx, url, secret, timeout, req, sink, &status)
	if span.IsRecording() {
		// Set once, at the end (the span sizes its storage once). Tenant,
		// flow, round and target are on the parent span, kind and target
		// in the name; a failure's class is error.type, and success needs
		// no more than the status: each attribute costs on export.
		buf := attrPool.Get().(*[]attribute.KeyValue)
		end := append((*buf)[:0], telemetry.AttrHTTPMethod.String(http.MethodPost))
		end = append(end, c.serverAttrs(url)...)
		if status != 0 {
			end = append(end, telemetry.AttrHTTPStatus.Int(status))
		}
		var we *WebhookError
		if errors.As(err, &we) {
			end = append(end, telemetry.AttrErrorType.String(we.Class))
			span.SetStatus(codes.Error, we.Class)
		}
		span.SetAttributes(end...)
		putAttrs(buf, end)
		span.End()
	}
	return resp, status, err
}

// spanName is "webhook {kind} {target}", built once per target.
func (c *webhookClient) spanName(kind, name string) string {
	k := [2]string{kind, name}
	c.addrMu.RLock()
	n, ok := c.names[k]
	c.addrMu.RUnlock()
	if ok {
		return n
	}
	n = "webhook " + kind + " " + name
	c.addrMu.Lock()
	if c.names == nil || len(c.names) >= 4096 {
		c.names = map[[2]string]string{}
	}
	c.names[k] = n
	c.addrMu.Unlock()
	return n
}

// serverAttrs are server.address and server.port of a webhook URL,
// parsed once per URL (a bounded set: the catalogue's handlers).
func (c *webhookClient) serverAttrs(url string) []attribute.KeyValue {
	c.addrMu.RLock()
	kv, ok := c.addrs[url]
	c.addrMu.RUnlock()
	if ok {
		return kv
	}
	if u, err := neturl.Parse(url); err == nil {
		kv = telemetry.ServerAddr(u.Host, u.Scheme)
	}
	c.addrMu.Lock()
	if c.addrs == nil || len(c.addrs) >= 4096 {
		c.addrs = map[string][]attribute.KeyValue{}
	}
	c.addrs[url] = kv
	c.addrMu.Unlock()
	return kv
}

// post is one delivery, untraced; it sets *status to the backend's HTTP
// status when there is one.
func (c *webhookClient) post(ctx context.Context, url, secret string, timeout time.Duration, req *webhook.Request, sink streamSink, status *int) (*webhook.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hreq, err := c.request(ctx, url, secret, req)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return nil, classify(ctx, err, timeout)
	}
	*status = resp.StatusCode
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, statusError(resp)
	}
	limited := io.LimitReader(resp.Body, c.maxResponse+1)
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var out *webhook.Response
	if mt == "application/x-ndjson" {
		out, err = c.readStream(ctx, limited, sink, timeout)
	} else {
		out, err = c.readOne(ctx, limited, timeout)
	}
	if err != nil {
		return nil, err
	}
	if err := checkResponse(out, req.Task != nil); err != nil {
		return nil, err
	}
	return out, nil
}

// request is req as a signed POST to url.
func (c *webhookClient) request(ctx context.Context, url, secret string, req *webhook.Request) (*http.Request, error) {
	// Deliveries carry user text verbatim: no HTML escaping of <, > and &.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(req)
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if err != nil {
		return nil, &WebhookError{Class: "contract", Detail: "the request could not be encoded"}
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, &WebhookError{Class: "connect", Detail: "the webhook URL is not usable"}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json, application/x-ndjson")
	hreq.Header.Set("User-Agent", "opsmcp-platform/1")
	hreq.Header.Set(webhook.SignatureHeader, webhook.Sign(secret, c.now(), body))
	delivery := req.Flow.ID + "/" + strconv.Itoa(req.Flow.Round)
	if req.Kind == webhook.KindTaskInput || req.Kind == webhook.KindTaskCancel {
		delivery = req.Task.ID + "/" + req.Kind
	}
	hreq.Header.Set(webhook.DeliveryHeader, delivery)
	if req.Trace != nil && req.Trace.Traceparent != "" {
		// Canonical keys set directly: no per-request canonicalisation.
		hreq.Header["Traceparent"] = []string{req.Trace.Traceparent}
		if req.Trace.Tracestate != "" {
			hreq.Header["Tracestate"] = []string{req.Trace.Tracestate}
		}
	}
	return hreq, nil
}

// notify delivers a task's news to its backend (the client's answers, a
// cancel), traced like any delivery: the backend acknowledges it with
// any 2xx, and its body is not read.
func (c *webhookClient) notify(ctx context.Context, url, secret string, timeout time.Duration, req *webhook.Request) (int, *WebhookError) {
	var span trace.Span
	if c.tel.Tracing() {
		ctx, span = c.tel.Tracer().Start(ctx, c.spanName(req.Kind, req.Name), clientKind)
		defer span.End()
	} else {
		span = trace.SpanFromContext(ctx)
	}
	if sc := span.SpanContext(); sc.IsValid() {
		req.Trace = &webhook.Trace{Traceparent: telemetry.Traceparent(sc), Tracestate: sc.TraceState().String()}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hreq, err := c.request(ctx, url, secret, req)
	if err != nil {
		we := err.(*WebhookError)
		span.SetStatus(codes.Error, we.Class)
		return 0, we
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		we := classify(ctx, err, timeout).(*WebhookError)
		span.SetStatus(codes.Error, we.Class)
		return 0, we
	}
	defer resp.Body.Close()
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrHTTPStatus.Int(resp.StatusCode))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		span.SetStatus(codes.Error, "status")
		return resp.StatusCode, statusError(resp)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

func (c *webhookClient) readOne(ctx context.Context, r io.Reader, timeout time.Duration) (*webhook.Response, error) {
	body, err := io.ReadAll(r)
	if err != nil {
		return nil, classify(ctx, err, timeout)
	}
	if int64(len(body)) > c.maxResponse {
		return nil, &WebhookError{Class: "oversize", Detail: fmt.Sprintf("the answer exceeds %d bytes", c.maxResponse)}
	}
	var out webhook.Response
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, &WebhookError{Class: "invalid_json", Detail: "the answer is not a JSON object of the webhook contract", Cause: jsonCause(err, 0)}
	}
	return &out, nil
}

func (c *webhookClient) readStream(ctx context.Context, r io.Reader, sink streamSink, timeout time.Duration) (*webhook.Response, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), int(c.maxResponse)+1)
	var read int64
	for sc.Scan() {
		line := sc.Bytes()
		read += int64(len(line)) + 1
		if read > c.maxResponse {
			return nil, &WebhookError{Class: "oversize", Detail: fmt.Sprintf("the answer exceeds %d bytes", c.maxResponse)}
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ev webhook.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, &WebhookError{Class: "invalid_json", Detail: "a streamed line is not a JSON event",
				Cause: jsonCause(err, read-int64(len(line))-1)}
		}
		switch ev.Type {
		case "progress":
			if sink != nil {
				sink.progress(&ev)
			}
		case "log":
			if sink != nil {
				sink.log(&ev)
			}
		case "response":
			if ev.Response == nil {
				return nil, &WebhookError{Class: "contract", Detail: "a response event has no response"}
			}
			return ev.Response, nil
		default:
			return nil, &WebhookError{Class: "contract", Detail: fmt.Sprintf("unknown stream event type %q", bounded.String(ev.Type, 40))}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &WebhookError{Class: "oversize", Detail: fmt.Sprintf("the answer exceeds %d bytes", c.maxResponse)}
		}
		return nil, classify(ctx, err, timeout)
	}
	if read > c.maxResponse {
		return nil, &WebhookError{Class: "oversize", Detail: fmt.Sprintf("the answer exceeds %d bytes", c.maxResponse)}
	}
	return nil, &WebhookError{Class: "contract", Detail: "the stream ended without a response event"}
}

// checkResponse enforces the contract's shape; offered says the call was
// offered as a task, which the backend may accept.
func checkResponse(r *webhook.Response, offered bool) error {
	switch r.Type {
	case webhook.TypeAccepted:
		if !offered {
			return &WebhookError{Class: "contract", Detail: "the call was not offered as a task, so it cannot be accepted as one"}
		}
	case webhook.TypeComplete:
		if len(r.Result) == 0 || r.Result[0] != '{' {
			return &WebhookError{Class: "contract", Detail: "a complete answer needs a result object"}
		}
	case webhook.TypeInputRequired:
		if len(r.InputRequests) == 0 && r.State == "" {
			return &WebhookError{Class: "contract", Detail: "an input_required answer needs inputRequests or state"}
		}
	default:
		return &WebhookError{Class: "contract", Detail: fmt.Sprintf("type must be \"complete\" or \"input_required\", not %q", bounded.String(r.Type, 40))}
	}
	return nil
}

// classify turns a transport error into a WebhookError without echoing
// internals such as resolved addresses of private networks.
func classify(ctx context.Context, err error, timeout time.Duration) error {
	switch {
	case errors.Is(err, egress.ErrRefused):
		return &WebhookError{Class: "refused_address", Detail: "the webhook URL resolves to a private, loopback or link-local address, which this platform does not call"}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return timeoutError(timeout)
	case errors.Is(ctx.Err(), context.Canceled):
		return &WebhookError{Class: "canceled", Detail: "the client went away"}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return timeoutError(timeout)
	}
	return &WebhookError{Class: "connect", Detail: "the backend could not be reached", Cause: connectCause(err)}
}

func timeoutError(timeout time.Duration) *WebhookError {
	return &WebhookError{Class: "timeout", Detail: fmt.Sprintf("no complete answer within %s", timeout),
		Cause: "timeout after " + timeout.String()}
}
