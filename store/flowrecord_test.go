package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/opsmcp/platform/internal/platformtest"
	"github.com/opsmcp/platform/store"
)

// round is a recorded round n of flow id leaving it in state.
func round(id string, n int, state string, at time.Time) store.RoundWrite {
	exp := at.Add(10 * time.Minute)
	w := store.RoundWrite{
		Flow: store.Flow{ID: id, TenantID: "t1", TenantSlug: "acme", Method: "tools/call", Target: "deploy",
			State: state, StartedAt: at.Add(-time.Duration(n) * time.Minute), UpdatedAt: at, KeyID: fmt.Sprintf("k%d", n)},
		Round: store.FlowRound{FlowID: id, N: n, TenantID: "t1", ArrivedAt: at, EndedAt: at, ServerUS: 1500, ClientWaitUS: 2_000_000},
	}
	if state == store.FlowAwaitingInput {
		w.Flow.WaitingSince, w.Flow.StateExpiresAt, w.Flow.PendingKinds = &at, &exp, "form"
	}
	return w
}

func TestTheRecordKeepsAFlowsLatestStateWhateverOrderRoundsArriveIn(t *testing.T) {
	ctx := context.Background()
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			st := acmeStore(t, d.New(t), false)
			t0 := time.Now().UTC().Truncate(time.Millisecond)
			// Round 2 (completing) is written before round 1 (asking), as a
			// faster replica's batch might be.
			if _, err := st.WriteRounds(ctx, []store.RoundWrite{round("fl_a", 2, store.FlowCompleted, t0.Add(time.Second))}); err != nil {
				t.Fatal(err)
			}
			evs, err := st.WriteRounds(ctx, []store.RoundWrite{round("fl_a", 1, store.FlowAwaitingInput, t0)})
			if err != nil || len(evs) != 1 {
				t.Fatalf("write: %v, %d events", err, len(evs))
			}
			f, rounds, err := st.GetFlow(ctx, "fl_a")
			if err != nil {
				t.Fatal(err)
			}
			if f.State != store.FlowCompleted || f.Rounds != 2 || f.KeyID != "k2" || len(rounds) != 2 {
				t.Fatalf("flow after out-of-order rounds: state %s, rounds %d, key %s, %d rows", f.State, f.Rounds, f.KeyID, len(rounds))
			}
			if f.ServerUS != 3000 || f.ClientWaitUS != 4_000_000 || !f.StartedAt.Equal(t0.Add(time.Second-2*time.Minute)) {
				t.Fatalf("accumulated times: server %d µs, wait %d µs, started %v", f.ServerUS, f.ClientWaitUS, f.StartedAt)
			}
			// A cancelled flow stays cancelled whatever round comes next.
			if _, err := st.WriteRounds(ctx, []store.RoundWrite{round("fl_b", 1, store.FlowAwaitingInput, t0)}); err != nil {
				t.Fatal(err)
			}
			if evs, err := st.CancelFlows(ctx, []string{"fl_b", "fl_a", "fl_none"}, "why", "alice"); err != nil || len(evs) != 1 || evs[0].FlowID != "fl_b" {
				t.Fatalf("cancel: %v, %v (only the waiting flow changes)", err, evs)
			}
			if _, err := st.WriteRounds(ctx, []store.RoundWrite{round("fl_b", 2, store.FlowRejected, t0.Add(time.Second))}); err != nil {
				t.Fatal(err)
			}
			if f, _, _ := st.GetFlow(ctx, "fl_b"); f.State != store.FlowCancelled || f.CancelReason != "why" || f.CancelledBy != "alice" || f.Rounds != 2 {
				t.Fatalf("cancelled flow after a later round: %+v", f)
			}
			if _, _, err := st.GetFlow(ctx, "fl_none"); err != store.ErrNotFound {
				t.Fatalf("unknown flow: %v", err)
			}
		})
	}
}

func TestEventsAreNumberedInCommitOrderAcrossWriters(t *testing.T) {
	ctx := context.Background()
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			url := d.New(t)
			st := acmeStore(t, url, false)
			other, err := store.Open(ctx, url) // a second replica's connection pool
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			t0 := time.Now().UTC()
			errs := make(chan error, 20)
			for i := range 20 {
				s := st
				if i%2 == 1 {
					s = other
				}
				go func() {
					_, err := s.WriteRounds(ctx, []store.RoundWrite{round(fmt.Sprintf("fl_%02d", i), 1, store.FlowAwaitingInput, t0)})
					errs <- err
				}()
			}
			for range 20 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			evs, err := st.FlowEventsAfter(ctx, 0, 100)
			if err != nil || len(evs) != 20 {
				t.Fatalf("%d events, %v", len(evs), err)
			}
			for i, e := range evs {
				if e.ID != int64(i+1) {
					t.Fatalf("event %d has id %d: ids have gaps or repeats", i, e.ID)
				}
			}
			if last, _ := st.LastFlowEvent(ctx); last != 20 {
				t.Fatalf("last event %d", last)
			}
		})
	}
}

func TestExpiryAndRetention(t *testing.T) {
	ctx := context.Background()
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			st := acmeStore(t, d.New(t), false)
			now := time.Now().UTC()
			old := now.Add(-30 * time.Minute) // its state expired 20 minutes ago
			writes := []store.RoundWrite{
				round("fl_waiting", 1, store.FlowAwaitingInput, now),
				round("fl_expired", 1, store.FlowAwaitingInput, old),
				round("fl_done", 1, store.FlowCompleted, old),
			}
			if _, err := st.WriteRounds(ctx, writes); err != nil {
				t.Fatal(err)
			}
			evs, err := st.ExpireFlows(ctx, now)
			if err != nil || len(evs) != 1 || evs[0].FlowID != "fl_expired" {
				t.Fatalf("expire: %v, %v", err, evs)
			}
			counts, _ := st.CountFlows(ctx, store.FlowFilter{})
			if counts[store.FlowExpired] != 1 || counts[store.FlowAwaitingInput] != 1 || counts[store.FlowCompleted] != 1 {
				t.Fatalf("counts %v", counts)
			}
			if again, _ := st.ExpireFlows(ctx, now); len(again) != 0 {
				t.Fatalf("expired twice: %v", again)
			}
			if aw, _ := st.CountAwaiting(ctx); aw["acme"] != 1 {
				t.Fatalf("awaiting %v", aw)
			}
			// Retention: flows unchanged for longer go, with their rounds
			// (expiring a flow changed it).
			n, err := st.PruneFlows(ctx, now.Add(-10*time.Minute), now.Add(-time.Hour))
			if err != nil || n != 1 {
				t.Fatalf("pruned %d, %v", n, err)
			}
			if _, _, err := st.GetFlow(ctx, "fl_done"); err != store.ErrNotFound {
				t.Fatalf("a pruned flow is still there: %v", err)
			}
			if f, rounds, err := st.GetFlow(ctx, "fl_waiting"); err != nil || f == nil || len(rounds) != 1 {
				t.Fatalf("a recent flow was pruned: %v", err)
			}
		})
	}
}
