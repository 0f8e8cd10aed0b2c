package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestHTTPSettingsHaveSafeDefaultsAndAreValidated: every connection
// timeout has a positive default and refuses zero, negative and garbage;
// trusted proxies accept IPs and CIDR prefixes (IPv4 and IPv6) and refuse
// anything else; the metrics listener needs host:port and metrics on.
func TestHTTPSettingsHaveSafeDefaultsAndAreValidated(t *testing.T) {
	c, err := load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.ReadHeaderTimeout != 10*time.Second || c.HTTP.ReadTimeout != 30*time.Second || c.HTTP.IdleTimeout != 2*time.Minute {
		t.Fatalf("defaults: %+v", c.HTTP)
	}
	if ps, _ := c.HTTP.Proxies(); ps != nil || c.HTTP.MetricsListen != "" {
		t.Fatalf("defaults trust %v, metrics on %q", ps, c.HTTP.MetricsListen)
	}
	for _, name := range []string{"READ_HEADER_TIMEOUT", "READ_TIMEOUT", "IDLE_TIMEOUT"} {
		for _, v := range []string{"0", "0s", "-1s", "soon", "10"} {
			if _, err := load(map[string]string{"PLATFORM_" + name: v}); err == nil {
				t.Errorf("PLATFORM_%s=%q accepted", name, v)
			}
		}
		if _, err := load(map[string]string{"PLATFORM_" + name: "10s"}); err != nil {
			t.Errorf("PLATFORM_%s=10s refused: %v", name, err)
		}
	}
	if _, err := load(map[string]string{"PLATFORM_READ_TIMEOUT": "5s", "PLATFORM_READ_HEADER_TIMEOUT": "6s"}); err == nil {
		t.Error("a whole-request timeout shorter than the header timeout accepted")
	}

	c, err = load(map[string]string{"PLATFORM_TRUSTED_PROXIES": " 10.0.0.0/8, 192.0.2.7 ,2001:db8::/32,::1"})
	if err != nil {
		t.Fatal(err)
	}
	if ps, _ := c.HTTP.Proxies(); !slices.Equal(ps, []string{"10.0.0.0/8", "192.0.2.7", "2001:db8::/32", "::1"}) {
		t.Fatalf("proxies %v", ps)
	}
	if c.HTTP.TrustsEveryone() {
		t.Fatal("a private range trusts everyone")
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0.1:80", "10.0.0.0/8,", "*", "fe80::1%eth0", "10.0.0.0/8;192.0.2.1"} {
		if _, err := load(map[string]string{"PLATFORM_TRUSTED_PROXIES": bad}); err == nil || !strings.Contains(err.Error(), "trusted-proxies") {
			t.Errorf("trusted-proxies %q: %v", bad, err)
		}
	}
	for _, all := range []string{"0.0.0.0/0", "::/0", "10.0.0.1, 0.0.0.0/0"} {
		c, err := load(map[string]string{"PLATFORM_TRUSTED_PROXIES": all})
		if err != nil || !c.HTTP.TrustsEveryone() {
			t.Errorf("%q: %v, trusts everyone %v", all, err, err == nil && c.HTTP.TrustsEveryone())
		}
	}

	for _, good := range []string{"127.0.0.1:9090", ":9090", "[::1]:9090"} {
		if _, err := load(map[string]string{"PLATFORM_METRICS_LISTEN": good}); err != nil {
			t.Errorf("metrics-listen %q: %v", good, err)
		}
	}
	for _, bad := range []string{"9090", "127.0.0.1", "http://127.0.0.1:9090"} {
		if _, err := load(map[string]string{"PLATFORM_METRICS_LISTEN": bad}); err == nil {
			t.Errorf("metrics-listen %q accepted", bad)
		}
	}
	if _, err := load(map[string]string{"PLATFORM_METRICS_LISTEN": ":9090", "PLATFORM_METRICS": "false"}); err == nil {
		t.Error("metrics-listen accepted with metrics off")
	}
}
