// Package testwait waits in tests for something to happen. A wait is
// bounded only by the test binary's own deadline (go test -timeout), not
// by a guess at how fast the machine is: a slow machine makes a test
// slower, never wrong, and a wait that never ends fails with a message
// naming what was awaited instead of a bare timeout panic.
package testwait

import (
	"testing"
	"time"
)

// deadliner is implemented by *testing.T.
type deadliner interface {
	Deadline() (time.Time, bool)
}

// giveUp returns a channel that fires shortly before the test binary's
// deadline, leaving it time to report; nil (never) without a deadline.
func giveUp(t testing.TB) (<-chan time.Time, func()) {
	d, ok := t.(deadliner)
	if !ok {
		return nil, func() {}
	}
	end, ok := d.Deadline()
	if !ok {
		return nil, func() {}
	}
	left := time.Until(end)
	left -= min(left/10, 10*time.Second)
	timer := time.NewTimer(max(left, 0))
	return timer.C, func() { timer.Stop() }
}

// Recv returns the next value received from ch. The test fails, naming
// what, if none comes before the test binary would be stopped.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	c, stop := giveUp(t)
	defer stop()
	select {
	case v := <-ch:
		return v
	case <-c:
		t.Fatalf("gave up waiting for %s", what)
		var zero T
		return zero
	}
}

// Until polls cond until it holds. The test fails, naming what, if it
// does not hold before the test binary would be stopped.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	c, stop := giveUp(t)
	defer stop()
	pause := time.Millisecond
	for !cond() {
		select {
		case <-time.After(pause):
		case <-c:
			t.Fatalf("gave up waiting until %s", what)
			return
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}
