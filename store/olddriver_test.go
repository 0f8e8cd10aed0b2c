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
	"github.com/opsmcp/platform/testkit/platformtest"
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
			if !times[i].Equal(c.want[i]) || times[i].Location() != time.UTC {
				t.Fatalf("audit before %s: %v, want %v", c.before.Format(time.RFC3339Nano), times, c.want)
			}
		}
	}
	revoked, err := st.Revocations().RevokedFlows(ctx)
	if err != nil || len(revoked) != 1 || revoked[0].FlowID != "fl_fixture" ||
		revoked[0].ExpiresAt != time.Date(2030, 6, 7, 8, 9, 10, 250_000_000, time.UTC) {
		t.Fatalf("revoked flows: %+v %v", revoked, err)
	}
}

// TestSQLiteReadsEveryTimeInUTCAndEverySpellingOfOne: a time column
// reads as a time in UTC (equal with ==, not only Equal) whatever wrote
// it: the store, or a person or tool with SQL, in SQLite's own
// datetime('now') spelling, RFC 3339, with or without a zone, to the
// minute or the day. Text that spells no time fails the read, as it did.
func TestSQLiteReadsEveryTimeInUTCAndEverySpellingOfOne(t *testing.T) {
	ctx := context.Background()
	url := "sqlite:" + filepath.Join(t.TempDir(), "t.db")
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	db := platformtest.SQL(t, url)
	for _, c := range []struct {
		text string
		want time.Time
	}{
		{"2026-01-02 03:04:05.123456789+00:00", time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)},
		{"2026-01-02 03:04:05+02:00", time.Date(2026, 1, 2, 1, 4, 5, 0, time.UTC)},
		{"2026-01-02 03:04:05Z", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		{"2026-01-02T03:04:05.5Z", time.Date(2026, 1, 2, 3, 4, 5, 500_000_000, time.UTC)},
		{"2026-01-02T03:04:05-05:00", time.Date(2026, 1, 2, 8, 4, 5, 0, time.UTC)},
		{"2026-01-02 03:04:05", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		{"2026-01-02T03:04:05.25", time.Date(2026, 1, 2, 3, 4, 5, 250_000_000, time.UTC)},
		{"2026-01-02 03:04:05.5 +0000 UTC", time.Date(2026, 1, 2, 3, 4, 5, 500_000_000, time.UTC)},
		{"2026-01-02 03:04", time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)},
		{"2026-01-02", time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)},
	} {
		db.Exec(t, "DELETE FROM audit_log")
		db.Exec(t, "INSERT INTO audit_log (id, at, actor, action) VALUES ('au_1', ?, 'a', 'x')", c.text)
		got, err := st.Audit().List(ctx, "", time.Time{}, 1)
		if err != nil || len(got) != 1 || got[0].At != c.want {
			t.Errorf("%q read as %v (%v), want %v in UTC", c.text, got, err, c.want)
		}
	}
	// Written by the store in a zone of its own, read in UTC.
	db.Exec(t, "DELETE FROM audit_log")
	at := time.Date(2026, 7, 1, 12, 0, 0, 0, time.FixedZone("", 3600))
	if err := st.Audit().Write(ctx, store.AuditEntry{At: at, Actor: "a", Action: "x"}, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Audit().List(ctx, "", time.Time{}, 1); err != nil || len(got) != 1 || got[0].At != at.UTC() {
		t.Errorf("a time written at +01:00 read as %v (%v), want %v", got, err, at.UTC())
	}
	db.Exec(t, "UPDATE audit_log SET at = 'soon'")
	if got, err := st.Audit().List(ctx, "", time.Time{}, 1); err == nil {
		t.Errorf("text that spells no time read as %v", got)
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
