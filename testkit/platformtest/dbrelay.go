package platformtest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// DBRelay forwards TCP connections to the test PostgreSQL server and can
// cut them all and refuse new ones: the database as one replica sees it
// when it is stopped, restarts or fails over. (The shared server cannot
// be stopped under the other tests; scripts/fleet stops a server of its
// own.)
type DBRelay struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
}

// PostgresThroughRelay returns the URL of dbURL (a PostgreSQL URL of the
// test server, such as PostgresSchemaURL returns) routed through a relay
// of its own, and the relay. The relay stops when the test ends.
func PostgresThroughRelay(t testing.TB, dbURL string) (string, *DBRelay) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &DBRelay{ln: ln, target: u.Host}
	t.Cleanup(func() { ln.Close(); r.Cut() })
	go r.serve()
	u.Host = ln.Addr().String()
	return u.String(), r
}

func (r *DBRelay) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		if r.down {
			r.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", r.target)
		if err != nil {
			r.mu.Unlock()
			c.Close()
			continue
		}
		r.conns = append(r.conns, c, up)
		r.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		go func() { _, _ = io.Copy(c, up); c.Close() }()
	}
}

// Cut closes every relayed connection and refuses new ones until
// Restore.
func (r *DBRelay) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = true
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

// Restore lets connections through again.
func (r *DBRelay) Restore() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = false
}
