package platformtest

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"

	"github.com/opsmcp/platform/store"
)

// DB is a plain database/sql connection to a test's database, apart from
// the platform's store (which lends its connection to no one), for tests
// that must read or change raw rows: to prove a secret is stored sealed,
// or to corrupt a row on purpose.
type DB struct {
	db       *sql.DB
	postgres bool
}

// SQL connects to the database at rawURL (a store URL: sqlite:PATH or
// postgres://…) as the store connects (store.OpenSQL); the connection is
// closed when the test ends.
func SQL(t testing.TB, rawURL string) *DB {
	t.Helper()
	db, err := store.OpenSQL(rawURL)
	if err != nil {
		t.Fatalf("open %s: %v", rawURL, err)
	}
	t.Cleanup(func() { db.Close() })
	postgres := store.DialectOf(rawURL) == store.Postgres
	return &DB{db: db, postgres: postgres}
}

// bind rewrites q's ? placeholders as PostgreSQL's $1, $2, … (SQLite
// takes ? as it is). Queries here hold no literal question mark.
func (d *DB) bind(q string) string {
	if !d.postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Exec runs a statement and returns the rows it affected.
func (d *DB) Exec(t testing.TB, q string, args ...any) int64 {
	t.Helper()
	res, err := d.db.ExecContext(context.Background(), d.bind(q), args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	n, _ := res.RowsAffected()
	return n
}

// Rows runs a query and returns every row, column name to value.
func (d *DB) Rows(t testing.TB, q string, args ...any) []map[string]any {
	t.Helper()
	rows, err := d.db.QueryContext(context.Background(), d.bind(q), args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		row := make(map[string]any, len(cols))
		for i, c := range cols {
			if b, ok := vals[i].([]byte); ok {
				vals[i] = string(b)
			}
			row[c] = vals[i]
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// Strings runs a query and returns its first column, as text.
func (d *DB) Strings(t testing.TB, q string, args ...any) []string {
	t.Helper()
	rows, err := d.db.QueryContext(context.Background(), d.bind(q), args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s sql.NullString
		if err := rows.Scan(&s); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out = append(out, s.String)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}
