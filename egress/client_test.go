package egress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/opsmcp/platform/egress"
)

// target is a loopback HTTP server that counts every request reaching
// it, listening on 127.0.0.1 and, where the machine has IPv6 loopback, on
// [::1] at the same port, so a guard that let an IPv6 spelling through
// would be seen reaching it.
type target struct {
	port int
	hits atomic.Int64
	v6   bool
}

func startTarget(t *testing.T) *target {
	t.Helper()
	tg := &target{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg.hits.Add(1)
		io.WriteString(w, "reached")
	})
	ln4, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tg.port = ln4.Addr().(*net.TCPAddr).Port
	serve(t, ln4, h)
	if ln6, err := net.Listen("tcp6", "[::1]:"+strconv.Itoa(tg.port)); err == nil {
		tg.v6 = true
		serve(t, ln6, h)
	}
	return tg
}

func serve(t *testing.T, ln net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// dnsServer is a real DNS server on loopback UDP answering A and AAAA
// queries from a table, so tests can make any name resolve to any
// address. The resolver it returns asks only it.
func dnsServer(t *testing.T, records map[string][]netip.Addr) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp, err := answerDNS(buf[:n], records); err == nil {
				_, _ = pc.WriteTo(resp, from)
			}
		}
	}()
	addr := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp4", addr)
	}}
}

func answerDNS(req []byte, records map[string][]netip.Addr) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(req)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	name := strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
	addrs, known := records[name]
	rcode := dnsmessage.RCodeSuccess
	if !known {
		rcode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RCode: rcode})
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	for _, a := range addrs {
		rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}
		switch {
		case q.Type == dnsmessage.TypeA && a.Is4():
			rh.Type = dnsmessage.TypeA
			err = b.AResource(rh, dnsmessage.AResource{A: a.As4()})
		case q.Type == dnsmessage.TypeAAAA && a.Is6():
			rh.Type = dnsmessage.TypeAAAA
			err = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: a.As16()})
		}
		if err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

func get(c *http.Client, url string) (*http.Response, error) {
	resp, err := c.Get(url)
	if err == nil {
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// Every spelling of a loopback (or otherwise refused) host in a URL fails
// before anything is sent, with a real server listening where a missed
// spelling would land. IP literals must be refused by the policy. Names
// (decimal, octal and hex forms among them) go through the system's own
// resolution: whatever it makes of them, either it finds no address or
// the address it finds is refused; which one happened is logged.
func TestGuardedClientRefusesEverySpellingOfAPrivateHost(t *testing.T) {
	tg := startTarget(t)
	c := egress.NewClient(&egress.Policy{}, egress.ClientOptions{})
	port := strconv.Itoa(tg.port)
	literals := []string{
		"127.0.0.1", "127.0.0.2", "[::1]", "[::1%25lo]", "[::1%251]", "[0:0:0:0:0:0:0:1]", "[::ffff:127.0.0.1]",
		"[::ffff:7f00:1]", "[::127.0.0.1]", "[64:ff9b::7f00:1]", "[2002:7f00:1::]", "[fe80::1%25lo]",
		"0.0.0.0", "[::]", "[::ffff:0.0.0.0]", "169.254.169.254", "100.64.0.1", "10.0.0.1", "[fd00:ec2::254]",
	}
	for _, host := range literals {
		_, err := get(c, "http://"+host+":"+port+"/")
		if !errors.Is(err, egress.ErrRefused) {
			t.Errorf("%s: %v, want ErrRefused", host, err)
		}
	}
	names := []string{
		"localhost", "LOCALHOST", "localhost.", "2130706433", "0x7f.1", "0x7f000001", "017700000001",
		"0177.0.0.1", "127.1", "0", "127.0.0.1.", "ip6-localhost",
	}
	for _, host := range names {
		_, err := get(c, "http://"+host+":"+port+"/")
		var dnsErr *net.DNSError
		switch {
		case errors.Is(err, egress.ErrRefused):
			t.Logf("%s: resolved, and the address was refused", host)
		case errors.As(err, &dnsErr):
			t.Logf("%s: the resolver found no address (%v)", host, dnsErr.Err)
		default:
			t.Errorf("%s: %v, want ErrRefused or a resolution failure", host, err)
		}
	}
	if n := tg.hits.Load(); n != 0 {
		t.Fatalf("the loopback server was reached %d times", n)
	}
	// Control: the same server is reachable when the policy allows it, so
	// the refusals above are the policy's, not a dead server's.
	open := egress.NewClient(&egress.Policy{AllowPrivate: true}, egress.ClientOptions{})
	if resp, err := get(open, "http://127.0.0.1:"+port+"/"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("with AllowPrivate: %v", err)
	}
	if tg.v6 {
		if resp, err := get(open, "http://[::1%25lo]:"+port+"/"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("with AllowPrivate over IPv6: %v", err)
		}
	}
}

// Names that resolve to refused addresses are refused on the address,
// whatever the name looks like: the check runs after DNS. A real DNS
// server answers here, as an attacker's would.
func TestNamesResolvingToRefusedAddressesAreRefused(t *testing.T) {
	tg := startTarget(t)
	lo4, lo6 := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")
	res := dnsServer(t, map[string][]netip.Addr{
		"loop.attacker.test":   {lo4},
		"loop6.attacker.test":  {lo6},
		"both.attacker.test":   {lo4, lo6},
		"mapped.attacker.test": {netip.MustParseAddr("::ffff:127.0.0.1")},
		"nat64.attacker.test":  {netip.MustParseAddr("64:ff9b::7f00:1")},
		"meta.attacker.test":   {netip.MustParseAddr("169.254.169.254")},
		"2130706433":           {lo4},
		"0x7f.1":               {lo4},
		"017700000001":         {lo4},
		// A public answer first does not smuggle the private one through:
		// every address the dialer tries is checked.
		"mixed.attacker.test": {netip.MustParseAddr("192.0.2.1"), lo4},
	})
	c := egress.NewClient(&egress.Policy{}, egress.ClientOptions{Resolver: res})
	port := strconv.Itoa(tg.port)
	for _, host := range []string{"loop.attacker.test", "loop6.attacker.test", "both.attacker.test", "mapped.attacker.test",
		"nat64.attacker.test", "meta.attacker.test", "0x7f.1", "mixed.attacker.test"} {
		if _, err := get(c, "http://"+host+":"+port+"/"); !errors.Is(err, egress.ErrRefused) {
			t.Errorf("%s: %v, want ErrRefused", host, err)
		}
	}
	// Go's resolver does not look up all-digit names at all; a resolver
	// that did would hand the dialer 127.0.0.1, which is refused.
	for _, host := range []string{"2130706433", "017700000001"} {
		_, err := get(c, "http://"+host+":"+port+"/")
		var dnsErr *net.DNSError
		if !errors.Is(err, egress.ErrRefused) && !errors.As(err, &dnsErr) {
			t.Errorf("%s: %v, want ErrRefused or a resolution failure", host, err)
		}
	}
	if n := tg.hits.Load(); n != 0 {
		t.Fatalf("the loopback server was reached %d times", n)
	}
	// Control: with the loopback port allowed, the same name reaches it.
	ok := egress.NewClient(&egress.Policy{Allow: []netip.AddrPort{netip.AddrPortFrom(lo4, uint16(tg.port))}},
		egress.ClientOptions{Resolver: res})
	if resp, err := get(ok, "http://loop.attacker.test:"+port+"/"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("allowed port through the test resolver: %v", err)
	}
}

// A redirect from an allowed server to a refused address fails, and the
// refused server is never reached. The first hop is a loopback server
// allowed by exact address and port (the allow-list exists for this), so
// every other loopback port stays refused exactly as in production:
// AllowPrivate would have let the second hop through and proved nothing.
func TestRedirectsToRefusedAddressesFail(t *testing.T) {
	refusedTarget := startTarget(t)
	rport := strconv.Itoa(refusedTarget.port)
	var redirectTo atomic.Value
	var firstHits atomic.Int64
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		firstHits.Add(1)
		if r.URL.Path == "/final" {
			io.WriteString(w, "final")
			return
		}
		http.Redirect(w, r, redirectTo.Load().(string), http.StatusFound)
	}))
	defer first.Close()
	allowed := netip.MustParseAddrPort(first.Listener.Addr().String())
	policy := &egress.Policy{Allow: []netip.AddrPort{allowed}}
	c := egress.NewClient(policy, egress.ClientOptions{MaxRedirects: 3})

	// Control: a redirect within the allowed server is followed.
	redirectTo.Store(first.URL + "/final")
	resp, err := get(c, first.URL+"/start")
	if err != nil || resp.StatusCode != 200 || resp.Request.URL.Path != "/final" {
		t.Fatalf("redirect within the allowed server: %v", err)
	}
	for _, to := range []string{
		"http://127.0.0.1:" + rport + "/", "http://localhost:" + rport + "/", "http://[::1]:" + rport + "/",
		"http://[::1%25lo]:" + rport + "/", "http://[::ffff:127.0.0.1]:" + rport + "/", "http://0.0.0.0:" + rport + "/",
		"http://169.254.169.254/latest/meta-data/", "http://[64:ff9b::a9fe:a9fe]/",
	} {
		redirectTo.Store(to)
		before := firstHits.Load()
		_, err := get(c, first.URL+"/start")
		if !errors.Is(err, egress.ErrRefused) {
			t.Errorf("redirect to %s: %v, want ErrRefused", to, err)
		}
		if firstHits.Load() != before+1 {
			t.Errorf("redirect to %s: the first hop was not made", to)
		}
	}
	if n := refusedTarget.hits.Load(); n != 0 {
		t.Fatalf("the refused server was reached %d times through redirects", n)
	}
	// With redirects refused, the 3xx itself is the answer.
	noFollow := egress.NewClient(policy, egress.ClientOptions{})
	redirectTo.Store("http://127.0.0.1:" + rport + "/")
	if resp, err := get(noFollow, first.URL+"/start"); err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("MaxRedirects 0: %v, status %v", err, resp)
	}
	if n := refusedTarget.hits.Load(); n != 0 {
		t.Fatalf("the refused server was reached %d times", n)
	}
}

// Redirect policy beyond addresses: a bounded count, and never from https
// down to http (the redirect function itself, since a TLS server this
// client trusts cannot be built without a test-only TLS setting).
func TestRedirectCountAndDowngrade(t *testing.T) {
	c := egress.NewClient(&egress.Policy{}, egress.ClientOptions{MaxRedirects: 2})
	req := func(u string) *http.Request { r, _ := http.NewRequest("GET", u, nil); return r }
	if err := c.CheckRedirect(req("http://b.example/"), []*http.Request{req("https://a.example/")}); err == nil {
		t.Error("https to http redirect followed")
	}
	if err := c.CheckRedirect(req("https://b.example/"), []*http.Request{req("https://a.example/")}); err != nil {
		t.Errorf("https to https: %v", err)
	}
	if err := c.CheckRedirect(req("https://c.example/"), []*http.Request{req("https://a.example/"), req("https://b.example/")}); err != nil {
		t.Errorf("second redirect: %v", err)
	}
	three := []*http.Request{req("https://a.example/"), req("https://b.example/"), req("https://c.example/")}
	if err := c.CheckRedirect(req("https://d.example/"), three); err == nil {
		t.Error("a third redirect was followed with MaxRedirects 2")
	}
}

func TestResponseBodiesAreCapped(t *testing.T) {
	const max = 1000
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if r.URL.Query().Get("chunked") == "" {
			w.Header().Set("Content-Length", strconv.Itoa(n))
		}
		w.Write([]byte(strings.Repeat("x", n)))
	}))
	defer srv.Close()
	c := egress.NewClient(&egress.Policy{AllowPrivate: true}, egress.ClientOptions{MaxResponseBytes: max})
	read := func(q string) (int, error) {
		resp, err := c.Get(srv.URL + "/?" + q)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return len(b), err
	}
	for _, chunked := range []string{"", "&chunked=1"} {
		if n, err := read(fmt.Sprintf("n=%d%s", max, chunked)); err != nil || n != max {
			t.Errorf("exactly the cap%s: %d bytes, %v", chunked, n, err)
		}
		if _, err := read(fmt.Sprintf("n=%d%s", max+1, chunked)); !errors.Is(err, egress.ErrTooLarge) {
			t.Errorf("one byte over%s: %v, want ErrTooLarge", chunked, err)
		}
		if _, err := read(fmt.Sprintf("n=%d%s", 50*max, chunked)); !errors.Is(err, egress.ErrTooLarge) {
			t.Errorf("far over%s: %v, want ErrTooLarge", chunked, err)
		}
	}
	if _, err := egress.ReadAll(strings.NewReader(strings.Repeat("x", 11)), 10); !errors.Is(err, egress.ErrTooLarge) {
		t.Errorf("ReadAll over the cap: %v", err)
	}
	if b, err := egress.ReadAll(strings.NewReader("0123456789"), 10); err != nil || len(b) != 10 {
		t.Errorf("ReadAll at the cap: %q, %v", b, err)
	}
}

// A proxy in the environment is never used: it would dial on the
// platform's behalf, where no hook sees the address. The client allows
// private targets here so that a proxy on loopback, if used, would be
// reached; the host does not resolve, so only a proxy could answer.
func TestEnvironmentProxiesAreIgnored(t *testing.T) {
	var proxied atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { proxied.Add(1) }))
	defer proxy.Close()
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	c := egress.NewClient(&egress.Policy{AllowPrivate: true}, egress.ClientOptions{})
	_, err := get(c, "http://nowhere.invalid/")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) {
		t.Errorf("%v, want a resolution failure", err)
	}
	if proxied.Load() != 0 {
		t.Fatal("the request went out through the environment's proxy")
	}
}
