package platformtest

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/opsmcp/platform/store"
)

// Store opens the database at url and migrates it; it is closed when the
// test ends.
func Store(t testing.TB, url string) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

// CPUTime is the user and system CPU time this process has used, for
// benchmarks that report CPU per operation (steadier than wall time on a
// shared machine).
func CPUTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
