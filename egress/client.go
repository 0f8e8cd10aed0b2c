package egress

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Transport returns an HTTP transport that dials only through the policy
// and never through a proxy. Callers may tune pool sizes and compression
// on the result before first use; they must not replace DialContext or
// Proxy, which carry the guarantee.
func (p *Policy) Transport() *http.Transport {
	return p.transport(nil)
}

func (p *Policy) transport(resolver *net.Resolver) *http.Transport {
	d := p.Dialer()
	d.Resolver = resolver
	return &http.Transport{
		Proxy:                  nil, // a proxy would dial where the hook cannot see
		DialContext:            d.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           64,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    5 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// ClientOptions shapes the client NewClient returns.
type ClientOptions struct {
	// Timeout bounds a whole exchange, redirects and body included; 0
	// leaves it to the request's context.
	Timeout time.Duration
	// MaxRedirects is how many redirects a request follows. 0 follows none:
	// the 3xx answer itself is returned. Every hop dials through the same
	// policy, so a redirect to a refused address fails like a direct
	// request to it; an https URL never redirects to plain http.
	MaxRedirects int
	// MaxResponseBytes caps a response body: reading past it fails with
	// ErrTooLarge, so a caller that reads to the end (io.ReadAll, a JSON
	// decoder) cannot be made to buffer more. 0 means no cap.
	MaxResponseBytes int64
	// Wrap, when set, wraps the transport (telemetry, for one). It sits
	// above the guarded transport and cannot bypass it.
	Wrap func(http.RoundTripper) http.RoundTripper
	// Resolver resolves host names; nil means net.DefaultResolver. Tests
	// point it at their own DNS server to make names resolve where they
	// need; the policy checks what the name resolved to either way.
	Resolver *net.Resolver
}

// NewClient returns an HTTP client for calls a tenant controls: guarded
// dials, no proxy, no cookies, redirects only as o allows, bounded bodies.
func NewClient(p *Policy, o ClientOptions) *http.Client {
	var rt http.RoundTripper = p.transport(o.Resolver)
	if o.MaxResponseBytes > 0 {
		rt = LimitResponses(rt, o.MaxResponseBytes)
	}
	if o.Wrap != nil {
		rt = o.Wrap(rt)
	}
	max := o.MaxRedirects
	return &http.Client{
		Transport: rt,
		Timeout:   o.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if max <= 0 {
				return http.ErrUseLastResponse
			}
			if len(via) > max {
				return fmt.Errorf("egress: more than %d redirects", max)
			}
			if prev := via[len(via)-1]; prev.URL.Scheme == "https" && req.URL.Scheme != "https" {
				return errors.New("egress: redirect from https to " + req.URL.Scheme)
			}
			return nil
		},
	}
}

// ErrTooLarge is returned when a response body exceeds its cap.
var ErrTooLarge = errors.New("egress: response body exceeds the size limit")

// LimitResponses wraps rt so every response body fails with ErrTooLarge
// once more than max bytes would be read. A declared Content-Length above
// max fails at once, before the body is read.
func LimitResponses(rt http.RoundTripper, max int64) http.RoundTripper {
	return &limitTransport{rt: rt, max: max}
}

type limitTransport struct {
	rt  http.RoundTripper
	max int64
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > t.max {
		resp.Body.Close()
		return nil, fmt.Errorf("%w (%d bytes declared, limit %d)", ErrTooLarge, resp.ContentLength, t.max)
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.max}
	return resp, nil
}

// limitedBody passes through at most left bytes, then fails if the body
// has more.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// At the cap: one more byte means the body is too large; EOF means
		// it was exactly the cap.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, ErrTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// ReadAll reads r to its end, failing with ErrTooLarge past max bytes.
func ReadAll(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, ErrTooLarge
	}
	return b, nil
}
