package config

import (
	"flag"
	"fmt"
	"net"
	"strings"
	"time"
)

// HTTPConfig is how a replica's listeners treat connections and the
// addresses they come from.
type HTTPConfig struct {
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, headers and body; a
	// body still arriving then is cut off and the connection closed.
	// Responses are not bounded by it, so streams outlive it.
	ReadTimeout time.Duration
	// IdleTimeout bounds how long a kept-alive connection waits for its
	// next request.
	IdleTimeout time.Duration
	// TrustedProxies is a comma-separated list of IP addresses and CIDR
	// prefixes of the proxies whose X-Forwarded-For the platform
	// believes; empty trusts none.
	TrustedProxies string
	// MetricsListen, when set, is a separate address serving /metrics
	// (and then the main listener does not).
	MetricsListen string
}

func httpFlags(fs *flag.FlagSet, h *HTTPConfig) {
	fs.DurationVar(&h.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "how long a client may take to send a request's headers")
	fs.DurationVar(&h.ReadTimeout, "read-timeout", 30*time.Second, "how long a client may take to send a whole request, headers and body; a slower body is cut off (responses and streams are not limited by it)")
	fs.DurationVar(&h.IdleTimeout, "idle-timeout", 2*time.Minute, "how long a kept-alive connection may wait for its next request")
	fs.StringVar(&h.TrustedProxies, "trusted-proxies", "", "comma-separated IP addresses or CIDR prefixes of reverse proxies whose X-Forwarded-For names the client (default: none; the connecting peer is the client)")
	fs.StringVar(&h.MetricsListen, "metrics-listen", "", "separate address (host:port) serving /metrics, e.g. 127.0.0.1:9090; when set, the main listener does not serve it")
}

func (h *HTTPConfig) validate() []error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"read-header-timeout", h.ReadHeaderTimeout}, {"read-timeout", h.ReadTimeout}, {"idle-timeout", h.IdleTimeout}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be a positive duration, like 30s", d.name))
		}
	}
	if h.ReadTimeout > 0 && h.ReadTimeout < h.ReadHeaderTimeout {
		errs = append(errs, fmt.Errorf("read-timeout (%s, the whole request) must not be shorter than read-header-timeout (%s)", h.ReadTimeout, h.ReadHeaderTimeout))
	}
	if _, err := h.Proxies(); err != nil {
		errs = append(errs, err)
	}
	if h.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(h.MetricsListen); err != nil {
			errs = append(errs, fmt.Errorf("metrics-listen must be host:port (like 127.0.0.1:9090 or :9090), not %q", h.MetricsListen))
		}
	}
	return errs
}

// Proxies parses --trusted-proxies into addresses and prefixes, in the
// form gin's SetTrustedProxies takes; nil when none are trusted.
func (h *HTTPConfig) Proxies() ([]string, error) {
	if strings.TrimSpace(h.TrustedProxies) == "" {
		return nil, nil
	}
	var out []string
	for _, p := range strings.Split(h.TrustedProxies, ",") {
		p = strings.TrimSpace(p)
		ok := false
		if strings.Contains(p, "/") {
			_, _, err := net.ParseCIDR(p)
			ok = err == nil
		} else {
			ok = net.ParseIP(p) != nil
		}
		if !ok {
			return nil, fmt.Errorf("trusted-proxies: %q is neither an IP address nor a CIDR prefix (like 10.0.0.0/8)", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// TrustsEveryone reports whether the trusted proxies cover every
// address, so any client can choose the address recorded for it.
func (h *HTTPConfig) TrustsEveryone() bool {
	ps, _ := h.Proxies()
	for _, p := range ps {
		if _, n, err := net.ParseCIDR(p); err == nil {
			if ones, _ := n.Mask.Size(); ones == 0 {
				return true
			}
		}
	}
	return false
}
