package store_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opsmcp/platform/store"
)

// TestSQLiteKeepsTemporaryDataInMemoryUnlessTheURLSaysOtherwise: the
// store keeps SQLite's statement journals and temporary tables in memory
// (temp_store 2), and a database URL that names its own temp_store, in
// either spelling and any case, keeps it.
func TestSQLiteKeepsTemporaryDataInMemoryUnlessTheURLSaysOtherwise(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		pragma string
		want   int
	}{
		{"", 2},
		{"temp_store(FILE)", 1},
		{"temp_store(DEFAULT)", 0},
		{"TEMP_STORE(1)", 1},
		{" temp_store = 0", 0},
		{"cache_size(-4000)", 2},
	} {
		t.Run(c.pragma, func(t *testing.T) {
			u := "sqlite:" + filepath.Join(t.TempDir(), "p.db")
			if c.pragma != "" {
				u += "?" + url.Values{"_pragma": {c.pragma}}.Encode()
			}
			st, err := store.Open(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if got, err := st.Pragma(ctx, "temp_store"); err != nil || got != c.want {
				t.Fatalf("temp_store = %d (%v), want %d", got, err, c.want)
			}
		})
	}
}

// TestSQLitePathsKeepTheCharactersAFileURIReadsOtherwise: the store
// opens SQLite through a file: URI, where % starts an escape and #
// a fragment; a path holding them still names the file it says.
func TestSQLitePathsKeepTheCharactersAFileURIReadsOtherwise(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"a%25b.db", "a%b.db", "a#b.db", "a b.db", "a&_txlock=x.db", "a=b;c.db"} {
		dir := t.TempDir()
		st, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, err = st.Migrate(ctx)
		st.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: the database is not at the path named: %v", name, err)
		}
	}
}

// TestSQLiteInMemoryIsRefusedBeforeAnythingIsCreated: an in-memory
// SQLite database is one per connection, so the store's pool would see
// several empty ones; every spelling of it is refused with a message
// that says why, and nothing is created.
func TestSQLiteInMemoryIsRefusedBeforeAnythingIsCreated(t *testing.T) {
	dir := t.TempDir()
	for _, u := range []string{
		"sqlite::memory:", "sqlite://:memory:", ":memory:", "sqlite::memory:?_pragma=foreign_keys(1)",
		"sqlite:" + filepath.Join(dir, "sub", "m.db") + "?mode=memory",
		"sqlite:" + filepath.Join(dir, "sub", "m.db") + "?cache=shared&mode=memory",
	} {
		st, err := store.Open(context.Background(), u)
		if err == nil {
			st.Close()
			t.Errorf("%s: opened", u)
			continue
		}
		if !strings.Contains(err.Error(), "in-memory SQLite database") {
			t.Errorf("%s: %v", u, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "sub")); !os.IsNotExist(err) {
		t.Errorf("a refused URL created its directory: %v", err)
	}
	if _, err := os.Stat(":memory:"); !os.IsNotExist(err) {
		t.Errorf("a refused URL created a file named :memory: (%v)", err)
	}
}
