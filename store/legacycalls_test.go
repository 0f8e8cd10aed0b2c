package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// TestALegacyCallIsHeldByOneProcessAtATime: only the holder writes a
// call's events, checkpoint and answers; a lease that ran out is taken
// by exactly one of many takers, after which the old holder's writes
// fail with ErrNotHeld; a call's events keep their bound; expired calls
// go with their events. On both databases.
func TestALegacyCallIsHeldByOneProcessAtATime(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			ctx := context.Background()
			st := acmeStore(t, d.New(t), false)
			acme, err := st.Tenants().Get(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			ls := st.Legacy()
			now := time.Now()
			call := &store.LegacyCall{ID: "c1", TenantID: acme.ID, SessionID: "ls_1", Request: `{"id":1}`, Holder: "a",
				HeldUntil: now.Add(time.Minute), NextSeq: 1, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
			// The first write inserts the row with its first event and the
			// questions it waits on.
			if err := ls.WriteCall(ctx, "c1", "a", store.CallWrite{Open: call, First: 1, Bodies: []string{`{"n":1}`}, Keep: 4,
				Checkpoint: &store.Checkpoint{State: "st1", Legs: `[{"id":"q"}]`}}); err != nil {
				t.Fatal(err)
			}
			for i := int64(2); i <= 10; i++ {
				if err := ls.WriteCall(ctx, "c1", "a", store.CallWrite{First: i, Bodies: []string{fmt.Sprintf(`{"n":%d}`, i)}, Keep: 4}); err != nil {
					t.Fatal(err)
				}
			}
			if err := ls.SaveAnswers(ctx, "c1", "a", `{"q":{"action":"accept"}}`, true); err != nil {
				t.Fatal(err)
			}
			if got, err := ls.Call(ctx, acme.ID, "ls_1", "c1"); err != nil || got.State != "st1" || got.Legs != `[{"id":"q"}]` ||
				got.Answers != `{"q":{"action":"accept"}}` || !got.Running || got.Request != `{"id":1}` || got.NextSeq != 11 {
				t.Fatalf("the call reads back %+v (%v)", got, err)
			}
			// Out of order (a stale sequence) or by another: refused.
			if err := ls.WriteCall(ctx, "c1", "a", store.CallWrite{First: 5, Bodies: []string{`{}`}, Keep: 4}); !errors.Is(err, store.ErrNotHeld) {
				t.Fatalf("a stale sequence was appended: %v", err)
			}
			if err := ls.WriteCall(ctx, "c1", "b", store.CallWrite{First: 11, Bodies: []string{`{}`}, Keep: 4}); !errors.Is(err, store.ErrNotHeld) {
				t.Fatalf("another process appended: %v", err)
			}
			evs, err := ls.CallEvents(ctx, "c1", 0, 100)
			if err != nil || len(evs) == 0 || evs[len(evs)-1].Seq != 10 || len(evs) > 4+4 {
				t.Fatalf("kept events %v (%v): the bound of 4 (pruned in steps of 4) is not kept", evs, err)
			}
			// Another session, or tenant, has no such call.
			if _, err := ls.Call(ctx, acme.ID, "ls_2", "c1"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("another session read the call: %v", err)
			}
			// While a's lease runs, nobody takes the call over.
			if err := ls.TakeOver(ctx, "c1", "a", "b", now, now.Add(time.Minute)); !errors.Is(err, store.ErrNotHeld) {
				t.Fatalf("a live lease was taken: %v", err)
			}
			// Once it ran out, one taker of many wins.
			later := now.Add(2 * time.Minute)
			var wins int
			var mu sync.Mutex
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := ls.TakeOver(ctx, "c1", "a", fmt.Sprintf("t%d", i), later, later.Add(time.Minute))
					if err == nil {
						mu.Lock()
						wins++
						mu.Unlock()
					} else if !errors.Is(err, store.ErrNotHeld) {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if wins != 1 {
				t.Fatalf("%d takers won", wins)
			}
			// The old holder is fenced out of every write.
			for name, err := range map[string]error{
				"append":     ls.WriteCall(ctx, "c1", "a", store.CallWrite{First: 11, Bodies: []string{`{}`}}),
				"checkpoint": ls.WriteCall(ctx, "c1", "a", store.CallWrite{First: 11, Checkpoint: &store.Checkpoint{State: "st"}}),
				"answers":    ls.SaveAnswers(ctx, "c1", "a", "{}", false),
				"release":    ls.ReleaseCall(ctx, "c1", "a"),
				"end":        ls.EndCall(ctx, "c1", "a", now),
			} {
				if !errors.Is(err, store.ErrNotHeld) {
					t.Errorf("the old holder's %s: %v", name, err)
				}
			}
			if n, err := ls.RenewCalls(ctx, "a", []string{"c1"}, later.Add(time.Hour)); err != nil || n != 0 {
				t.Fatalf("the old holder renewed %d calls (%v)", n, err)
			}
			// The response ends it: done, kept until its expiry, then gone
			// with its events.
			got, err := ls.Call(ctx, acme.ID, "ls_1", "c1")
			if err != nil {
				t.Fatal(err)
			}
			if err := ls.WriteCall(ctx, "c1", got.Holder, store.CallWrite{First: 11, Bodies: []string{`{"result":{}}`}, Keep: 4, Final: true, Expires: now.Add(-time.Second)}); err != nil {
				t.Fatal(err)
			}
			if got, _ = ls.Call(ctx, acme.ID, "ls_1", "c1"); !got.Done || got.NextSeq != 12 {
				t.Fatalf("after the response: %+v", got)
			}
			if err := ls.TakeOver(ctx, "c1", got.Holder, "z", later.Add(time.Hour), later.Add(2*time.Hour)); !errors.Is(err, store.ErrNotHeld) {
				t.Fatalf("a done call was taken over: %v", err)
			}
			if n, err := ls.PruneCalls(ctx); err != nil || n != 1 {
				t.Fatalf("pruned %d calls (%v)", n, err)
			}
			if evs, _ := ls.CallEvents(ctx, "c1", 0, 100); len(evs) != 0 {
				t.Fatalf("a pruned call's events stayed: %v", evs)
			}
		})
	}
}

// TestALegacyCallsContentIsSealedAtRest: with secrets keys, the call's
// request, state, questions, answers and events are stored sealed (none
// of their text in any column), bound to their call and place, and read
// back in the clear; on both databases.
func TestALegacyCallsContentIsSealedAtRest(t *testing.T) {
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			ctx := context.Background()
			url := d.New(t)
			st := acmeStore(t, url, true)
			acme, err := st.Tenants().Get(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			ls := st.Legacy()
			now := time.Now()
			call := &store.LegacyCall{ID: "c1", TenantID: acme.ID, SessionID: "ls_1", Request: `{"arguments":{"password":"hunter2-request"}}`,
				Holder: "a", HeldUntil: now.Add(time.Minute), NextSeq: 1, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
			err = ls.WriteCall(ctx, "c1", "a", store.CallWrite{Open: call, First: 1, Bodies: []string{`{"q":"hunter2-event"}`, `{"q":"hunter2-second"}`},
				Checkpoint: &store.Checkpoint{State: "hunter2-state", Legs: `[{"params":"hunter2-legs"}]`}})
			if err != nil {
				t.Fatal(err)
			}
			if err := ls.SaveAnswers(ctx, "c1", "a", `{"q":{"content":"hunter2-answer"}}`, false); err != nil {
				t.Fatal(err)
			}
			db := platformtest.SQL(t, url)
			for _, q := range []string{"SELECT request || state || legs || answers FROM legacy_calls", "SELECT body FROM legacy_events"} {
				for _, v := range db.Strings(t, q) {
					if strings.Contains(v, "hunter2") || !strings.HasPrefix(v, "sealed:v1:") {
						t.Fatalf("stored in the clear: %s", v)
					}
				}
			}
			got, err := ls.Call(ctx, acme.ID, "ls_1", "c1")
			if err != nil || !strings.Contains(got.Request, "hunter2-request") || got.State != "hunter2-state" ||
				!strings.Contains(got.Legs, "hunter2-legs") || !strings.Contains(got.Answers, "hunter2-answer") {
				t.Fatalf("read back %+v (%v)", got, err)
			}
			evs, err := ls.CallEvents(ctx, "c1", 0, 10)
			if err != nil || len(evs) != 2 || !strings.Contains(evs[1].Body, "hunter2-second") {
				t.Fatalf("events %v (%v)", evs, err)
			}
			// An event moved to another place no longer opens.
			db.Exec(t, "UPDATE legacy_events SET body = (SELECT body FROM legacy_events WHERE seq = 1) WHERE seq = 2")
			if _, err := ls.CallEvents(ctx, "c1", 1, 10); err == nil {
				t.Fatal("an event copied to another place was opened")
			}
		})
	}
}
