package testwait

import (
	"fmt"
	"testing"
	"time"
)

// nearDeadline is a test whose binary is about to be stopped: it records
// the failure instead of ending the goroutine.
type nearDeadline struct {
	*testing.T
	failed string
}

func (n *nearDeadline) Deadline() (time.Time, bool) { return time.Now(), true }
func (n *nearDeadline) Fatalf(format string, args ...any) {
	n.failed = fmt.Sprintf(format, args...)
}

func TestRecvReturnsTheValueSent(t *testing.T) {
	ch := make(chan int, 1)
	go func() { ch <- 42 }()
	if got := Recv(t, ch, "the answer"); got != 42 {
		t.Fatalf("Recv = %d", got)
	}
}

func TestUntilPollsUntilTheConditionHolds(t *testing.T) {
	calls := 0
	Until(t, "the third call", func() bool { calls++; return calls == 3 })
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3", calls)
	}
}

func TestWaitsThatCannotEndFailNamingWhatWasAwaited(t *testing.T) {
	n := &nearDeadline{T: t}
	if got := Recv(n, make(chan int), "a value nobody sends"); got != 0 || n.failed != "gave up waiting for a value nobody sends" {
		t.Fatalf("Recv = %d, failure %q", got, n.failed)
	}
	n.failed = ""
	Until(n, "never", func() bool { return false })
	if n.failed != "gave up waiting until never" {
		t.Fatalf("Until failure %q", n.failed)
	}
}
