package store_test

import (
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/opsmcp/platform/store"
)

// TestADatabaseWrittenByTheEarlierSQLiteDriverReadsTheSame opens a
// database that the store wrote through its earlier driver
// (glebarez/go-sqlite, modernc.org/sqlite's SQLite 3.41.2; the fixture
// was made by the store at 867eae4 and holds what it wrote: a tenant, a
// key schedule due at 05:06:07.5, audit entries at 03:04:05, .5,
// .123456789 and 03:04:06, a revocation expiring at 08:09:10.25). Every
// time reads back as written, and compares, as text, in order with the
// times this driver binds and writes: an upgraded replica must neither
// fail to read its rows nor misorder them.
func TestADatabaseWrittenByTheEarlierSQLiteDriverReadsTheSame(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	unpack(t, "testdata/sqlite-3.41-glebarez.db.gz", path)
	st, err := store.Open(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ten, err := st.Tenants().Get(ctx, "acme")
	if err != nil || ten.DisplayName != "Acme" || ten.CreatedAt.Before(time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("tenant: %+v %v", ten, err)
	}
	at := func(sec, nsec int) time.Time { return time.Date(2026, 1, 2, 3, 4, sec, nsec, time.UTC) }
	due := time.Date(2026, 3, 4, 5, 6, 7, 500_000_000, time.UTC)
	for _, c := range []struct {
		now  time.Time
		want int
	}{{due.Add(-time.Nanosecond), 0}, {due.Add(-50 * time.Millisecond), 0}, {due.Truncate(time.Second), 0}, {due, 1}, {due.Add(time.Microsecond), 1}} {
		if got, err := st.Tenants().KeysDue(ctx, c.now, 10); err != nil || len(got) != c.want {
			t.Errorf("keys due at %s: %d (%v), want %d", c.now.Format(time.RFC3339Nano), len(got), err, c.want)
		}
	}
	// A row this driver writes among the old ones.
	if err := st.Audit().Write(ctx, store.AuditEntry{At: at(5, 300_000_000), Actor: "admin", Action: "new", TenantID: ten.ID}, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		before time.Time
		want   []time.Time
	}{
		{time.Time{}, []time.Time{at(6, 0), at(5, 500_000_000), at(5, 300_000_000), at(5, 123_456_789), at(5, 0)}},
		{at(5, 500_000_000), []time.Time{at(5, 300_000_000), at(5, 123_456_789), at(5, 0)}},
		{at(5, 123_456_790), []time.Time{at(5, 123_456_789), at(5, 0)}},
		{at(5, 123_456_789), []time.Time{at(5, 0)}},
		{at(5, 0), nil},
	} {
		got, err := st.Audit().List(ctx, ten.ID, c.before, 10)
		if err != nil {
			t.Fatal(err)
		}
		var times []time.Time
		for _, e := range got {
			times = append(times, e.At)
		}
		if len(times) != len(c.want) {
			t.Fatalf("audit before %s: %v, want %v", c.before.Format(time.RFC3339Nano), times, c.want)
		}
		for i := range times {
			if !times[i].Equal(c.want[i]) {
				t.Fatalf("audit before %s: %v, want %v", c.before.Format(time.RFC3339Nano), times, c.want)
			}
		}
	}
	revoked, err := st.Revocations().RevokedFlows(ctx)
	if err != nil || len(revoked) != 1 || revoked[0].FlowID != "fl_fixture" ||
		!revoked[0].ExpiresAt.Equal(time.Date(2030, 6, 7, 8, 9, 10, 250_000_000, time.UTC)) {
		t.Fatalf("revoked flows: %+v %v", revoked, err)
	}
}

// unpack writes the gzipped file src to dst.
func unpack(t *testing.T, src, dst string) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
