package record_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/internal/jsontext"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/store/record"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// round is a recorded round n of flow id leaving it in state.
func round(id string, n int, state string, at time.Time) record.RoundWrite {
	exp := at.Add(10 * time.Minute)
	w := record.RoundWrite{
		Flow: record.Flow{ID: id, TenantID: "t1", TenantSlug: "acme", Method: "tools/call", Target: "deploy",
			State: state, StartedAt: at.Add(-time.Duration(n) * time.Minute), UpdatedAt: at, KeyID: fmt.Sprintf("k%d", n)},
		Round: record.Round{N: n, ArrivedAt: at, EndedAt: at, ServerUS: 1500, ClientWaitUS: 2_000_000},
	}
	if state == record.AwaitingInput {
		w.Flow.WaitingSince, w.Flow.StateExpiresAt, w.Flow.PendingKinds = &at, &exp, "form"
	}
	return w
}

func TestTheRecordKeepsAFlowsLatestStateWhateverOrderRoundsArriveIn(t *testing.T) {
	ctx := context.Background()
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			st := platformtest.Store(t, d.New(t)).Record()
			t0 := time.Now().UTC().Truncate(time.Millisecond)
			// Round 2 (completing) is written before round 1 (asking), as a
			// faster replica's batch might be.
			if _, err := st.WriteRounds(ctx, []record.RoundWrite{round("fl_a", 2, record.Completed, t0.Add(time.Second))}); err != nil {
				t.Fatal(err)
			}
			n, err := st.WriteRounds(ctx, []record.RoundWrite{round("fl_a", 1, record.AwaitingInput, t0)})
			if err != nil || n != 1 {
				t.Fatalf("write: %v, %d changes", err, n)
			}
			f, rounds, err := st.Get(ctx, "fl_a")
			if err != nil {
				t.Fatal(err)
			}
			if f.State != record.Completed || f.Rounds != 2 || f.KeyID != "k2" || len(rounds) != 2 {
				t.Fatalf("flow after out-of-order rounds: state %s, rounds %d, key %s, %d rows", f.State, f.Rounds, f.KeyID, len(rounds))
			}
			if f.ServerUS != 3000 || f.ClientWaitUS != 4_000_000 || !f.StartedAt.Equal(t0.Add(time.Second-2*time.Minute)) {
				t.Fatalf("accumulated times: server %d µs, wait %d µs, started %v", f.ServerUS, f.ClientWaitUS, f.StartedAt)
			}
			// A cancelled flow stays cancelled whatever round comes next.
			if _, err := st.WriteRounds(ctx, []record.RoundWrite{round("fl_b", 1, record.AwaitingInput, t0)}); err != nil {
				t.Fatal(err)
			}
			if ch, err := st.Cancel(ctx, []string{"fl_b", "fl_a", "fl_none"}, "why", "alice"); err != nil || len(ch) != 1 {
				t.Fatalf("cancel: %v, %v (only the waiting flow changes)", err, ch)
			}
			if _, err := st.WriteRounds(ctx, []record.RoundWrite{round("fl_b", 2, record.Rejected, t0.Add(time.Second))}); err != nil {
				t.Fatal(err)
			}
			if f, _, _ := st.Get(ctx, "fl_b"); f.State != record.Cancelled || f.CancelReason != "why" || f.CancelledBy != "alice" || f.Rounds != 2 {
				t.Fatalf("cancelled flow after a later round: %+v", f)
			}
			if _, _, err := st.Get(ctx, "fl_none"); err != store.ErrNotFound {
				t.Fatalf("unknown flow: %v", err)
			}
		})
	}
}

func TestChangesAreNumberedInCommitOrderAcrossWriters(t *testing.T) {
	ctx := context.Background()
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			url := d.New(t)
			st := platformtest.Store(t, url).Record()
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
					s = other.Record()
				}
				go func() {
					_, err := s.WriteRounds(ctx, []record.RoundWrite{round(fmt.Sprintf("fl_%02d", i), 1, record.AwaitingInput, t0)})
					errs <- err
				}()
			}
			for range 20 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			flows, err := st.ChangedAfter(ctx, 0, 100)
			if err != nil || len(flows) != 20 {
				t.Fatalf("%d changes, %v", len(flows), err)
			}
			for i, f := range flows {
				if f.Seq != int64(i+1) {
					t.Fatalf("change %d has seq %d: seqs have gaps or repeats", i, f.Seq)
				}
			}
			if last, _ := st.LastChange(ctx); last != 20 {
				t.Fatalf("last change %d", last)
			}
			if after, _ := st.ChangedAfter(ctx, 15, 100); len(after) != 5 || after[0].Seq != 16 {
				t.Fatalf("changes after 15: %d", len(after))
			}
		})
	}
}

func TestABatchMergesRoundsOfOneFlowIntoOneChange(t *testing.T) {
	ctx := context.Background()
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			st := platformtest.Store(t, d.New(t)).Record()
			t0 := time.Now().UTC().Truncate(time.Millisecond)
			running := round("fl_m", 2, record.Running, t0.Add(time.Second))
			running.Running = true
			batch := []record.RoundWrite{
				round("fl_m", 1, record.AwaitingInput, t0),
				round("fl_other", 1, record.AwaitingInput, t0),
				running,
				round("fl_m", 2, record.Completed, t0.Add(2*time.Second)),
			}
			n, err := st.WriteRounds(ctx, batch)
			if err != nil || n != 2 {
				t.Fatalf("write: %d changes, %v; want one per flow", n, err)
			}
			f, rounds, err := st.Get(ctx, "fl_m")
			if err != nil {
				t.Fatal(err)
			}
			if f.State != record.Completed || f.Rounds != 2 || len(rounds) != 2 || rounds[0].N != 1 || rounds[1].N != 2 {
				t.Fatalf("merged flow: state %s, rounds %d, %d rows", f.State, f.Rounds, len(rounds))
			}
			if f.ServerUS != 3000 || !f.UpdatedAt.Equal(t0.Add(2*time.Second)) || !f.StartedAt.Equal(t0.Add(-2*time.Minute+time.Second)) {
				t.Fatalf("merged times: server %d µs, updated %v, started %v", f.ServerUS, f.UpdatedAt, f.StartedAt)
			}
		})
	}
}

// TestAFlowsValuesComeFromItsNewestRounds writes one batch holding
// several rounds of two flows, one of them out of order, and checks each
// value of the flows' rows against the rule a batch is merged by (as if
// each round were written on its own): state and waiting from the newest
// round, the key and the trace from the last round that took over and
// had one, the client from the last round naming one, the first round's
// identity, times summed and bounded, changes numbered by each flow's
// first round in the batch, and where each flow's rounds are.
func TestAFlowsValuesComeFromItsNewestRounds(t *testing.T) {
	ctx := context.Background()
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			st := platformtest.Store(t, d.New(t)).Record()
			// Before PostgreSQL's zero time (2000), to the microsecond.
			t0 := time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC)
			ask := round("fl_k", 1, record.AwaitingInput, t0)
			ask.Flow.KeyID, ask.Flow.TraceID, ask.Flow.ClientName, ask.Flow.ClientVersion = "k1", "trace-1", "cli", "1.0"
			running := round("fl_k", 2, record.Running, time.Time{})
			running.Running, running.Flow.KeyID, running.Flow.StartedAt = true, "", t0
			done := round("fl_k", 2, record.Completed, t0.Add(time.Second))
			done.Flow.KeyID, done.Flow.TraceID, done.Flow.Replica = "", "trace-2", "replica-b"
			late3 := round("fl_o", 3, record.Failed, t0.Add(3*time.Second))
			late3.Flow.Detail = "tool_error"
			late2 := round("fl_o", 2, record.AwaitingInput, t0.Add(2*time.Second))
			late2.Flow.ClientName, late2.Flow.ClientVersion = "other", "2.0"
			// A flow with only a running mark in this batch: no rounds row,
			// and the flows after it numbered all the same.
			mark := round("fl_m", 4, record.Running, t0)
			mark.Running = true
			// A refused round 3 (no key) takes over; round 2, late, with a
			// key of its own, moves nothing, as in a batch of its own.
			r1 := round("fl_r", 1, record.AwaitingInput, t0)
			r3 := round("fl_r", 3, record.Rejected, t0.Add(3*time.Second))
			r3.Flow.KeyID, r3.Flow.Detail = "", "expired"
			r2 := round("fl_r", 2, record.AwaitingInput, t0.Add(2*time.Second))
			// A flow whose stored row is at round 4 (key kB, trace tB):
			// this batch brings round 3 late (its own key and trace) and a
			// refused round 5 with neither. Written one by one, round 3
			// moves nothing and round 5 leaves the key and trace as stored.
			x4 := round("fl_x", 4, record.AwaitingInput, t0)
			x4.Flow.KeyID, x4.Flow.TraceID = "kB", "tB"
			if _, err := st.WriteRounds(ctx, []record.RoundWrite{x4}); err != nil {
				t.Fatal(err)
			}
			x3 := round("fl_x", 3, record.AwaitingInput, t0)
			x3.Flow.KeyID, x3.Flow.TraceID = "kA", "tA"
			x5 := round("fl_x", 5, record.Rejected, t0.Add(5*time.Second))
			x5.Flow.KeyID = ""
			last, err := st.LastChange(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := st.WriteRounds(ctx, []record.RoundWrite{ask, late3, mark, running, r1, late2, r3, done, r2, x3, x5}); err != nil || n != 5 {
				t.Fatalf("write: %d changes, %v; want one per flow", n, err)
			}
			k, kr, err := st.Get(ctx, "fl_k")
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				what      string
				got, want any
			}{
				{"state", k.State, record.Completed}, {"rounds", k.Rounds, 2}, {"round rows", len(kr), 2},
				{"key (the newest round that has one)", k.KeyID, "k1"}, {"trace", k.TraceID, "trace-2"},
				{"client", k.ClientName + "/" + k.ClientVersion, "cli/1.0"}, {"replica", k.Replica, "replica-b"},
				{"waiting", k.WaitingSince == nil && k.StateExpiresAt == nil, true}, {"pending", k.PendingKinds, ""},
				{"server time, the running mark's left out", k.ServerUS, int64(3000)},
				{"started (the earliest)", stamp(k.StartedAt), stamp(t0.Add(time.Second - 2*time.Minute))},
				{"updated (the latest)", stamp(k.UpdatedAt), stamp(t0.Add(time.Second))},
				{"first round's arrival, read back", stamp(kr[0].ArrivedAt), stamp(t0)},
				{"change", k.Seq, last + 1},
			} {
				if c.got != c.want {
					t.Errorf("fl_k %s: %v, want %v", c.what, c.got, c.want)
				}
			}
			o, _, err := st.Get(ctx, "fl_o")
			if err != nil {
				t.Fatal(err)
			}
			if o.State != record.Failed || o.Detail != "tool_error" || o.Rounds != 3 || o.KeyID != "k3" || o.ClientName != "other" ||
				o.Seq != last+2 || !o.StartedAt.Equal(t0.Add(3*time.Second-3*time.Minute)) {
				t.Errorf("fl_o, its rounds out of order: %+v", *o)
			}
			if r, _, err := st.Get(ctx, "fl_r"); err != nil || r.State != record.Rejected || r.KeyID != "k1" || r.Detail != "expired" || r.Rounds != 3 {
				t.Errorf("fl_r, a late round with a key behind a refused one: %v %+v", err, r)
			}
			if x, _, err := st.Get(ctx, "fl_x"); err != nil || x.State != record.Rejected || x.KeyID != "kB" || x.TraceID != "tB" || x.Rounds != 5 {
				t.Errorf("fl_x, a late round with a key first in its batch: %v %+v", err, x)
			}
			if m, _, err := st.Get(ctx, "fl_m"); err != nil || m.State != record.Running || m.Seq != last+3 {
				t.Errorf("fl_m, a running mark alone: %v %+v", err, m)
			}
			// On SQLite a new flow's rounds are in its row, and a flow
			// recorded before has the batch's in a rounds row; on
			// PostgreSQL every batch's are in a rounds row. A rounds row
			// carries its flow's change (fl_x is the batch's fifth flow).
			type rows struct {
				row  int
				seqs []int64
			}
			want := map[string]rows{"fl_k": {2, nil}, "fl_o": {2, nil}, "fl_m": {-1, nil}, "fl_r": {3, nil}, "fl_x": {1, []int64{last + 5}}}
			if d.Name == "postgres" {
				want = map[string]rows{"fl_k": {-1, []int64{last + 1}}, "fl_o": {-1, []int64{last + 2}}, "fl_m": {-1, nil},
					"fl_r": {-1, []int64{last + 4}}, "fl_x": {-1, []int64{last, last + 5}}}
			}
			for id, want := range want {
				if got, err := st.RowRounds(ctx, id); err != nil || got != want.row {
					t.Errorf("%s: %d rounds in its row (%v), want %d", id, got, err, want.row)
				}
				if got, err := st.RoundSeqs(ctx, id); err != nil || !slices.Equal(got, want.seqs) {
					t.Errorf("%s: rounds rows at changes %v (%v), want %v", id, got, err, want.seqs)
				}
			}
			if _, xr, err := st.Get(ctx, "fl_x"); err != nil || len(xr) != 3 || xr[0].N != 3 || xr[1].N != 4 || xr[2].N != 5 {
				t.Errorf("fl_x's rounds, from its row and a rounds row, in order: %v %+v", err, xr)
			}
		})
	}
}

// TestASessionSelectsExactlyItsFlows records bridged flows of two
// legacy sessions and a stateless flow, and checks that a session
// filter lists and counts exactly the session's flows: a flow whose
// first recorded round names no session (a task's lifecycle event,
// written first) takes the session of the first round that names one;
// no later round moves it; and no spelling of a session selects
// another's flows or every flow.
func TestASessionSelectsExactlyItsFlows(t *testing.T) {
	ctx := context.Background()
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			st := platformtest.Store(t, d.New(t)).Record()
			t0 := time.Now().UTC().Truncate(time.Millisecond)
			in := func(w record.RoundWrite, session string) record.RoundWrite {
				w.Flow.SessionID, w.Flow.Kind = session, record.KindLegacy
				return w
			}
			// fl_b's first write names no session; its next batch does,
			// then a round naming another (which must not move it).
			batches := [][]record.RoundWrite{
				{in(round("fl_a", 1, record.AwaitingInput, t0), "s-a"), in(round("fl_b", 1, record.AwaitingInput, t0), ""),
					round("fl_c", 1, record.Completed, t0), in(round("fl_d", 1, record.AwaitingInput, t0), "s-b")},
				{in(round("fl_a", 2, record.Completed, t0.Add(time.Second)), "s-a"), in(round("fl_b", 2, record.AwaitingInput, t0.Add(time.Second)), ""),
					in(round("fl_b", 3, record.AwaitingInput, t0.Add(2*time.Second)), "s-a")},
				{in(round("fl_b", 4, record.Completed, t0.Add(3*time.Second)), "s-b"), in(round("fl_e", 1, record.Completed, t0), "s-a")},
			}
			for _, b := range batches {
				if _, err := st.WriteRounds(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range []struct {
				session string
				want    []string
			}{
				{"s-a", []string{"fl_a", "fl_b", "fl_e"}},
				{"s-b", []string{"fl_d"}},
				{"", []string{"fl_a", "fl_b", "fl_c", "fl_d", "fl_e"}}, // no filter
				{"s-", nil}, {"S-A", nil}, {"s-a ", nil}, {"s-a' OR '1'='1", nil}, {"%", nil}, {"s-_", nil},
			} {
				page, err := st.List(ctx, record.Filter{Session: c.session}, record.SortUpdated, nil, 100)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, f := range page.Flows {
					got = append(got, f.ID)
				}
				slices.Sort(got)
				if !slices.Equal(got, c.want) {
					t.Errorf("session %q lists %v, want %v", c.session, got, c.want)
				}
				counts, err := st.Count(ctx, record.Filter{Session: c.session})
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, k := range counts {
					n += int(k)
				}
				if n != len(c.want) {
					t.Errorf("session %q counts %d flows, want %d", c.session, n, len(c.want))
				}
			}
			if b, _, err := st.Get(ctx, "fl_b"); err != nil || b.SessionID != "s-a" {
				t.Errorf("fl_b's session: %v %+v, want s-a (the first round naming one)", err, b)
			}
			other, err := st.List(ctx, record.Filter{Session: "s-a", TenantIDs: []string{"t2"}}, record.SortUpdated, nil, 100)
			if err != nil || len(other.Flows) != 0 {
				t.Errorf("session s-a in another tenant lists %v (%v), want none", other.Flows, err)
			}
		})
	}
}

func TestExpiryAndRetention(t *testing.T) {
	ctx := context.Background()
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			st := platformtest.Store(t, d.New(t)).Record()
			now := time.Now().UTC()
			old := now.Add(-30 * time.Minute) // its state expired 20 minutes ago
			writes := []record.RoundWrite{
				round("fl_waiting", 1, record.AwaitingInput, now),
				round("fl_expired", 1, record.AwaitingInput, old),
				round("fl_done", 1, record.Completed, old),
			}
			if _, err := st.WriteRounds(ctx, writes); err != nil {
				t.Fatal(err)
			}
			ch, err := st.Expire(ctx, now)
			if err != nil || len(ch) != 1 {
				t.Fatalf("expire: %v, %v", err, ch)
			}
			if f, _, _ := st.Get(ctx, "fl_expired"); f.State != record.Expired || f.Seq != ch[0].ID {
				t.Fatalf("expired flow: %+v", f)
			}
			counts, _ := st.Count(ctx, record.Filter{})
			if counts[record.Expired] != 1 || counts[record.AwaitingInput] != 1 || counts[record.Completed] != 1 {
				t.Fatalf("counts %v", counts)
			}
			if again, _ := st.Expire(ctx, now); len(again) != 0 {
				t.Fatalf("expired twice: %v", again)
			}
			if aw, _ := st.CountAwaiting(ctx); aw["acme"] != 1 {
				t.Fatalf("awaiting %v", aw)
			}
			// Retention: flows unchanged for longer go, with their rounds
			// (expiring a flow changed it).
			n, err := st.Prune(ctx, now.Add(-10*time.Minute), nil)
			if err != nil || n != 1 {
				t.Fatalf("pruned %d, %v", n, err)
			}
			if _, _, err := st.Get(ctx, "fl_done"); err != store.ErrNotFound {
				t.Fatalf("a pruned flow is still there: %v", err)
			}
			if f, rounds, err := st.Get(ctx, "fl_waiting"); err != nil || f == nil || len(rounds) != 1 {
				t.Fatalf("a recent flow was pruned: %v", err)
			}
		})
	}
}

// TestAFlowRowReadsBackExactlyAsWritten writes flows whose every column
// carries something awkward (quotes, backslashes, SQL, JSON and control
// characters, non-ASCII, nil and non-nil times with sub-second parts,
// large integers) and reads them back field for field, on both dialects:
// the rows travel by binary COPY (PostgreSQL) or as framed JSON rows
// the database takes apart (SQLite), the rounds beside them in the row
// or in flow_rounds, and no value may change on the way but a NUL or
// invalid UTF-8, which the databases do not keep.
func TestAFlowRowReadsBackExactlyAsWritten(t *testing.T) {
	ctx := context.Background()
	awkward := []string{
		`plain`, `it's "quoted"`, `back\slash\`, `'); DROP TABLE flows; --`, `{"json":[1,2]}`,
		"tab\tnew\nline\x01", "nul\x00byte", "ünïcødé ✓ 日本", `$[0]`, ``, "bad\xffutf-8\xc3\x28\xe2\x82",
	}
	// A question as deeply nested as a tenant may make it: the rounds
	// travel as bytes, stored as they are, so no database JSON parser
	// meets its depth.
	asked := json.RawMessage(strings.Repeat(`[`, 3000) + `"deep \"'"` + strings.Repeat(`]`, 3000))
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			st := platformtest.Store(t, d.New(t)).Record()
			// Nanoseconds past a microsecond: the record keeps microseconds
			// (PostgreSQL's precision), cut, on both dialects.
			t0 := time.Date(2026, 12, 3, 15, 4, 5, 123456999, time.UTC)
			var want []record.Flow
			var writes []record.RoundWrite
			var askedWant []json.RawMessage
			for i, s := range awkward {
				// A NUL, and each byte that is not UTF-8, is recorded as
				// U+FFFD: neither database keeps a NUL in text (PostgreSQL
				// refuses it, SQLite's C strings end there), nor PostgreSQL
				// invalid UTF-8.
				recorded := jsontext.Text(s)
				at := t0.Add(time.Duration(i) * time.Second)
				exp := at.Add(10*time.Minute + 7*time.Microsecond)
				flow := func(s string) record.Flow {
					f := record.Flow{ID: fmt.Sprintf("fl_%02d%s", i, s), TenantID: "t" + s, TenantSlug: s, Method: "tools/call" + s,
						Target: s, PrincipalIssuer: "https://id.example/" + s, PrincipalSubject: s, PrincipalClient: s,
						ClientName: s, ClientVersion: s, Era: s, State: record.AwaitingInput, PendingKinds: s, KeyID: s,
						Replica: s, TraceID: s, Detail: s, StartedAt: at.Add(-time.Second), UpdatedAt: at}
					if i%2 == 0 {
						f.WaitingSince, f.StateExpiresAt = &at, &exp
					} else {
						f.State = record.Completed
					}
					return f
				}
				// Odd flows ask a small question, so their round goes in
				// their row; even ones the deep one, which goes to
				// flow_rounds. Both carry the awkward text.
				q := asked
				if i%2 == 1 {
					q, _ = json.Marshal([]map[string]string{{"message": s}})
				}
				writes = append(writes, record.RoundWrite{Flow: flow(s),
					Round: record.Round{N: 3, ServerUS: 1<<40 + int64(i), ClientWaitUS: 1<<50 + int64(i), Asked: q, Message: s}})
				askedWant = append(askedWant, q)
				f := flow(recorded)
				f.Rounds, f.ServerUS, f.ClientWaitUS = 3, 1<<40+int64(i), 1<<50+int64(i)
				cut := func(t time.Time) time.Time { return t.Truncate(time.Microsecond) }
				f.StartedAt, f.UpdatedAt = cut(f.StartedAt), cut(f.UpdatedAt)
				if f.WaitingSince != nil {
					ws, se := cut(*f.WaitingSince), cut(*f.StateExpiresAt)
					f.WaitingSince, f.StateExpiresAt = &ws, &se
				}
				want = append(want, f)
			}
			if _, err := st.WriteRounds(ctx, writes); err != nil {
				t.Fatal(err)
			}
			for i, w := range want {
				got, rounds, err := st.Get(ctx, w.ID)
				if err != nil {
					t.Fatalf("%q: %v", w.ID, err)
				}
				w.Seq = got.Seq
				if !flowsEqual(*got, w) {
					t.Errorf("read back\n got %+v\nwant %+v", *got, w)
				}
				if len(rounds) != 1 || !bytes.Equal(rounds[0].Asked, askedWant[i]) || rounds[0].ServerUS != w.ServerUS ||
					rounds[0].Message != w.Detail {
					t.Errorf("%q: rounds read back wrong (%d rounds)", w.ID, len(rounds))
				}
			}
			// A second round to each flow, in a batch of its own, joins
			// the first: a flow is known as recorded whatever its id
			// holds (an id of invalid UTF-8 is kept cleaned).
			for i := range writes {
				writes[i].Round.N, writes[i].Flow.Rounds = 4, 4
				writes[i].Round.Message = "second " + writes[i].Round.Message
			}
			if _, err := st.WriteRounds(ctx, writes); err != nil {
				t.Fatal(err)
			}
			for i, w := range want {
				_, rounds, err := st.Get(ctx, w.ID)
				if err != nil || len(rounds) != 2 || !bytes.Equal(rounds[0].Asked, askedWant[i]) ||
					rounds[1].Message != "second "+w.Detail {
					t.Errorf("%q: after a second round, %d rounds read back (%v), want both", w.ID, len(rounds), err)
				}
			}
		})
	}
}

// stamp is t in UTC to the nanosecond, for comparing instants.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// flowsEqual compares flows, times by instant.
func flowsEqual(a, b record.Flow) bool {
	sameTime := func(x, y *time.Time) bool {
		return x == nil && y == nil || x != nil && y != nil && x.Equal(*y)
	}
	ok := sameTime(&a.StartedAt, &b.StartedAt) && sameTime(&a.UpdatedAt, &b.UpdatedAt) &&
		sameTime(a.WaitingSince, b.WaitingSince) && sameTime(a.StateExpiresAt, b.StateExpiresAt)
	a.StartedAt, a.UpdatedAt, a.WaitingSince, a.StateExpiresAt = time.Time{}, time.Time{}, nil, nil
	b.StartedAt, b.UpdatedAt, b.WaitingSince, b.StateExpiresAt = time.Time{}, time.Time{}, nil, nil
	return ok && a == b
}

// TestABatchOfLargeRoundsIsWrittenInSeveralStatements writes a batch
// whose rounds (questions of about 100 KiB each, full of what JSON
// escapes, each flow's its own, and random, so packing them on SQLite
// leaves them large) add up to several times the size one
// statement may carry (a quarter of the default here, so the test stays
// small), and reads every flow's rounds back whole and its own: a batch
// too large for one SQLite statement is split, never refused (which
// would drop every tenant's rounds in it); PostgreSQL's COPY streams it.
func TestABatchOfLargeRoundsIsWrittenInSeveralStatements(t *testing.T) {
	ctx := context.Background()
	defer record.SetMaxBatchDocument(256 << 10)()
	big := json.RawMessage(`{"message":"` + noise(96_000, 1) + `"}`)
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			st := platformtest.Store(t, d.New(t)).Record()
			var writes []record.RoundWrite
			for i := range 8 {
				w := round(fmt.Sprintf("fl_big%02d", i), 1, record.AwaitingInput, time.Now())
				w.Round.Asked = slices.Concat(json.RawMessage(fmt.Sprintf(`[%d,`, i)), big, json.RawMessage(`]`))
				writes = append(writes, w)
			}
			if n, err := record.BatchStatements(writes); err != nil || n < 3 {
				t.Fatalf("the batch went as %d statements (%v), want it split", n, err)
			}
			if _, err := st.WriteRounds(ctx, writes); err != nil {
				t.Fatal(err)
			}
			for _, w := range writes {
				_, rounds, err := st.Get(ctx, w.Flow.ID)
				if err != nil || len(rounds) != 1 || !bytes.Equal(rounds[0].Asked, w.Round.Asked) {
					t.Fatalf("%s: %v, %d rounds", w.Flow.ID, err, len(rounds))
				}
			}
		})
	}
}

// TestTheRecordIsWrittenInEveryPgxMode: a PostgreSQL URL may choose how
// pgx sends statements (default_query_exec_mode; simple_protocol or exec
// behind PgBouncer). The record's batch, its COPY and the statements that
// upsert it, must be written and read back the same in each.
func TestTheRecordIsWrittenInEveryPgxMode(t *testing.T) {
	ctx := context.Background()
	asked := json.RawMessage(`[{"key":"env","kind":"form","params":{"message":"Which \"one\"?"}}]`)
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			st := platformtest.Store(t, platformtest.PostgresSchemaURL(t)+"&default_query_exec_mode="+mode).Record()
			w1 := round("fl_mode", 1, record.AwaitingInput, time.Now())
			w1.Round.Asked = asked
			w2 := round("fl_mode", 2, record.Completed, time.Now())
			if _, err := st.WriteRounds(ctx, []record.RoundWrite{w1}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.WriteRounds(ctx, []record.RoundWrite{w2}); err != nil {
				t.Fatal(err)
			}
			f, rounds, err := st.Get(ctx, "fl_mode")
			if err != nil || f.State != record.Completed || f.Rounds != 2 || len(rounds) != 2 || !bytes.Equal(rounds[0].Asked, asked) {
				t.Fatalf("read back %v, %+v, %+v", err, f, rounds)
			}
		})
	}
}

func TestEachTenantKeepsItsCallsForItsOwnRetention(t *testing.T) {
	ctx := context.Background()
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			st := platformtest.Store(t, d.New(t)).Record()
			now := time.Now().UTC()
			var writes []record.RoundWrite
			// Each tenant has a call from 30 minutes ago and one from
			// 2 minutes ago, and its rounds.
			for _, tenant := range []string{"t-default", "t-longer", "t-shorter"} {
				for _, age := range []time.Duration{30 * time.Minute, 2 * time.Minute} {
					w := round(fmt.Sprintf("fl_%s_%d", tenant, int(age.Minutes())), 1, record.Completed, now.Add(-age))
					w.Flow.TenantID, w.Flow.Kind = tenant, record.KindCall
					writes = append(writes, w)
				}
			}
			// A flow the user is still answering, and one a task works on,
			// outlive a short retention (by a day).
			for _, state := range []string{record.AwaitingInput, record.Running} {
				w := round("fl_t-shorter_live_"+state, 1, state, now.Add(-30*time.Minute))
				w.Flow.TenantID = "t-shorter"
				writes = append(writes, w)
			}
			if _, err := st.WriteRounds(ctx, writes); err != nil {
				t.Fatal(err)
			}
			// The operator keeps 10 minutes; one tenant a day, another one
			// minute.
			n, err := st.Prune(ctx, now.Add(-10*time.Minute), map[string]time.Time{
				"t-longer": now.Add(-24 * time.Hour), "t-shorter": now.Add(-time.Minute),
			})
			if err != nil || n != 3 {
				t.Fatalf("pruned %d (%v); want 3", n, err)
			}
			for id, kept := range map[string]bool{
				"fl_t-default_30": false, "fl_t-default_2": true,
				"fl_t-longer_30": true, "fl_t-longer_2": true,
				"fl_t-shorter_30": false, "fl_t-shorter_2": false,
				"fl_t-shorter_live_awaiting_input": true, "fl_t-shorter_live_running": true,
			} {
				f, rounds, err := st.Get(ctx, id)
				if kept && (err != nil || len(rounds) != 1) || !kept && err != store.ErrNotFound {
					t.Errorf("%s: kept %v (%v, %d rounds); want kept %v", id, f != nil, err, len(rounds), kept)
				}
			}
		})
	}
}

func TestActivitySaysWhatEachTenantsCallsDidAndWhatWaits(t *testing.T) {
	ctx := context.Background()
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			st := platformtest.Store(t, d.New(t)).Record()
			now := time.Now().UTC().Truncate(time.Millisecond)
			var writes []record.RoundWrite
			add := func(id, tenant, state string, at time.Time, serverUS int64) {
				w := round(id, 1, state, at)
				w.Flow.TenantID, w.Round.ServerUS = tenant, serverUS
				writes = append(writes, w)
			}
			// t1: 20 calls in the hour, 1 to 20 ms each, 3 failed or refused,
			// 2 waiting (the oldest 40 minutes); one call from yesterday.
			for i := 1; i <= 20; i++ {
				state := record.Completed
				switch i {
				case 3, 7:
					state = record.Failed
				case 11:
					state = record.Rejected
				case 19, 20:
					state = record.AwaitingInput
				}
				at := now.Add(-time.Duration(i) * time.Minute)
				if i == 20 {
					at = now.Add(-40 * time.Minute)
				}
				add(fmt.Sprintf("fl_t1_%02d", i), "t1", state, at, int64(i)*1000)
			}
			add("fl_t1_old", "t1", record.Failed, now.Add(-24*time.Hour), 999_000)
			// t2: nothing recent.
			add("fl_t2_old", "t2", record.Completed, now.Add(-3*time.Hour), 5000)
			if _, err := st.WriteRounds(ctx, writes); err != nil {
				t.Fatal(err)
			}
			act, err := st.Activity(ctx, now.Add(-time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			a := act["t1"]
			if a == nil || a.Calls != 20 || a.Failed != 3 || a.Waiting != 2 || a.P95RoundUS != 19_000 {
				t.Fatalf("t1: %+v", a)
			}
			if a.OldestWaiting == nil || !a.OldestWaiting.Equal(now.Add(-40*time.Minute)) {
				t.Fatalf("t1's oldest wait %v; want %v", a.OldestWaiting, now.Add(-40*time.Minute))
			}
			if b := act["t2"]; b != nil && (b.Calls != 0 || b.Waiting != 0) {
				t.Fatalf("t2, quiet for hours: %+v", b)
			}
		})
	}
}

func TestPrefixSearchFindsExactlyWhatStartsWithIt(t *testing.T) {
	ctx := context.Background()
	targets := []string{"deploy", "deploy-eu", "de-x", "dep", "Dep", "déjà-vu", "de", "d", "zzz", "dep%", "dep_", "ü", "\U0001F680 launch"}
	for _, d := range platformtest.Dialects() {
		for _, byteOrder := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/byte-order-%v", d.Name, byteOrder), func(t *testing.T) {
				st := platformtest.Store(t, d.New(t)).Record()
				st.SetByteOrder(byteOrder)
				now := time.Now().UTC()
				var writes []record.RoundWrite
				for i, target := range targets {
					w := round(fmt.Sprintf("fl_%02d", i), 1, record.Completed, now)
					w.Flow.Target = target
					writes = append(writes, w)
				}
				if _, err := st.WriteRounds(ctx, writes); err != nil {
					t.Fatal(err)
				}
				for _, q := range []string{"dep", "de", "d", "deploy-", "Dep", "dé", "dep%", "dep_", "%", "_", "ü", "\U0001F680", "z", "fl_0", "fl_1", "zzzz"} {
					page, err := st.List(ctx, record.Filter{Prefix: q}, record.SortUpdated, nil, 100)
					if err != nil {
						t.Fatal(err)
					}
					var got, want []string
					for _, f := range page.Flows {
						got = append(got, f.ID)
					}
					for i, target := range targets {
						id := fmt.Sprintf("fl_%02d", i)
						// The round helper's principal and client are the same
						// for every flow; the id and target differ.
						if strings.HasPrefix(target, q) || strings.HasPrefix(id, q) {
							want = append(want, id)
						}
					}
					slices.Sort(got)
					slices.Sort(want)
					if !slices.Equal(got, want) {
						t.Errorf("prefix %q: %v; want %v", q, got, want)
					}
				}
			})
		}
	}
}

// TestAFlowsLargeFirstRoundsStayOutOfItsRow: a new flow's first rounds
// go in its row only when small. A large question stays in flow_rounds,
// which is never rewritten (the row is, at each change of the flow), and
// reads back in order with the rounds after it.
func TestAFlowsLargeFirstRoundsStayOutOfItsRow(t *testing.T) {
	ctx := context.Background()
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			st := platformtest.Store(t, d.New(t)).Record()
			t0 := time.Now().UTC().Truncate(time.Microsecond)
			big := round("fl_big", 1, record.AwaitingInput, t0)
			big.Round.Asked = json.RawMessage(`[{"kind":"form","key":"notes","message":"` + noise(8<<10, 2) + `"}]`)
			small := round("fl_small", 1, record.AwaitingInput, t0)
			if _, err := st.WriteRounds(ctx, []record.RoundWrite{big, small}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.WriteRounds(ctx, []record.RoundWrite{round("fl_big", 2, record.Completed, t0.Add(time.Second))}); err != nil {
				t.Fatal(err)
			}
			inRow := map[string]int{"fl_big": -1, "fl_small": 1}
			if d.Name == "postgres" {
				inRow["fl_small"] = -1
			}
			for id, want := range inRow {
				if got, err := st.RowRounds(ctx, id); err != nil || got != want {
					t.Errorf("%s: %d rounds in its row (%v), want %d", id, got, err, want)
				}
			}
			if seqs, err := st.RoundSeqs(ctx, "fl_big"); err != nil || len(seqs) != 2 {
				t.Errorf("fl_big's rounds rows: %v (%v); want one a batch", seqs, err)
			}
			_, rounds, err := st.Get(ctx, "fl_big")
			if err != nil || len(rounds) != 2 || rounds[0].N != 1 || rounds[1].N != 2 || len(rounds[0].Asked) < 8<<10 {
				t.Fatalf("fl_big read back: %v, %d rounds", err, len(rounds))
			}
		})
	}
}

// TestABatchSplitAcrossStatementsMixesNewAndRecordedFlows writes a batch
// split into many statements whose flows are, in turn, already recorded
// (their later rounds go to flow_rounds) and new (their rounds go in
// their rows): every flow ends in its state with all its rounds, and
// the batch's changes are numbered once each, without a gap or a repeat
// across the statements.
func TestABatchSplitAcrossStatementsMixesNewAndRecordedFlows(t *testing.T) {
	ctx := context.Background()
	defer record.SetMaxBatchDocument(2 << 10)()
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			st := platformtest.Store(t, d.New(t)).Record()
			t0 := time.Now().UTC().Truncate(time.Millisecond)
			const n = 60
			var first, batch []record.RoundWrite
			for i := range n {
				old, fresh := fmt.Sprintf("fl_old%03d", i), fmt.Sprintf("fl_new%03d", i)
				// Each round says whose and which it is, so one read back
				// from another flow's place shows.
				said := func(w record.RoundWrite) record.RoundWrite {
					w.Round.Message = fmt.Sprintf("%s/%d", w.Flow.ID, w.Round.N)
					return w
				}
				first = append(first, said(round(old, 1, record.AwaitingInput, t0)))
				batch = append(batch, said(round(old, 2, record.Completed, t0.Add(time.Second))),
					said(round(fresh, 1, record.AwaitingInput, t0.Add(time.Second))))
			}
			if _, err := st.WriteRounds(ctx, first); err != nil {
				t.Fatal(err)
			}
			if stmts, err := record.BatchStatements(batch); err != nil || stmts < 10 {
				t.Fatalf("the batch goes as %d statements (%v), want it split", stmts, err)
			}
			before, err := st.LastChange(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if changed, err := st.WriteRounds(ctx, batch); err != nil || changed != 2*n {
				t.Fatalf("wrote %d changes (%v), want %d", changed, err, 2*n)
			}
			changes, err := st.ChangedAfter(ctx, before, 10*n)
			if err != nil || len(changes) != 2*n {
				t.Fatalf("%d changes after %d (%v), want %d", len(changes), before, err, 2*n)
			}
			for i, f := range changes {
				if f.Seq != before+int64(i)+1 {
					t.Fatalf("change %d has seq %d, want %d: numbered with a gap or a repeat", i, f.Seq, before+int64(i)+1)
				}
			}
			for i := range n {
				for _, c := range []struct {
					id     string
					state  string
					rounds int
				}{{fmt.Sprintf("fl_old%03d", i), record.Completed, 2}, {fmt.Sprintf("fl_new%03d", i), record.AwaitingInput, 1}} {
					f, rounds, err := st.Get(ctx, c.id)
					if err != nil {
						t.Fatalf("%s: %v", c.id, err)
					}
					if f.State != c.state || len(rounds) != c.rounds {
						t.Fatalf("%s: state %s, %d rounds; want %s and %d", c.id, f.State, len(rounds), c.state, c.rounds)
					}
					for r, got := range rounds {
						if got.N != r+1 || got.Message != fmt.Sprintf("%s/%d", c.id, r+1) {
							t.Fatalf("%s: round %d is numbered %d and says %q", c.id, r+1, got.N, got.Message)
						}
					}
				}
			}
		})
	}
}

// noise is JSON string content of at least n bytes that no compressor
// shrinks much (SQLite's record packs rounds, packRounds), quotes and
// backslashes among it, escaped; the same for the same seed.
func noise(n int, seed uint64) string {
	const alphabet = `abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "\`
	r := rand.New(rand.NewPCG(seed, seed))
	var b strings.Builder
	for b.Len() < n {
		c := alphabet[r.IntN(len(alphabet))]
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// TestSQLiteKeepsRoundsPackedAndReadsJSONRoundsToo: on SQLite a flow's
// rounds are stored packed, in its row and in flow_rounds, and read back
// as written; rounds stored as JSON text (every row written before
// packing, and PostgreSQL's) read back the same.
func TestSQLiteKeepsRoundsPackedAndReadsJSONRoundsToo(t *testing.T) {
	ctx := context.Background()
	for _, d := range platformtest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			st := platformtest.Store(t, d.New(t)).Record()
			t0 := time.Now().UTC().Truncate(time.Millisecond)
			first := round("fl_packed", 1, record.AwaitingInput, t0)
			first.Round.Asked = json.RawMessage(`[{"key":"env","kind":"form","params":{"message":"Which environment?"}}]`)
			second := round("fl_packed", 2, record.Completed, t0.Add(time.Second))
			second.Round.Message = "deployed ✓"
			if _, err := st.WriteRounds(ctx, []record.RoundWrite{first}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.WriteRounds(ctx, []record.RoundWrite{second}); err != nil {
				t.Fatal(err)
			}
			stored, err := st.StoredRounds(ctx, "fl_packed")
			if err != nil || len(stored) != 2 {
				t.Fatalf("stored rounds: %d (%v), want the row's and one flow_rounds row", len(stored), err)
			}
			for i, b := range stored {
				if len(b) == 0 {
					t.Fatalf("stored rounds %d are empty", i)
				}
				packed := b[0] == 0xFF // never the first byte of JSON
				if packed != (d.Name == "sqlite") || (!packed && b[0] != '[') {
					t.Errorf("stored rounds %d start %q: packed %v on %s", i, b[:min(6, len(b))], packed, d.Name)
				}
			}
			check := func(when string) {
				t.Helper()
				_, rounds, err := st.Get(ctx, "fl_packed")
				if err != nil || len(rounds) != 2 || string(rounds[0].Asked) != string(first.Round.Asked) ||
					rounds[1].Message != "deployed ✓" || rounds[1].N != 2 {
					t.Fatalf("%s: read back %+v (%v)", when, rounds, err)
				}
			}
			check("as written")
			// The same rounds as JSON text, as a row written before
			// packing holds them.
			if err := st.UnpackStoredRounds(ctx, "fl_packed"); err != nil {
				t.Fatal(err)
			}
			check("stored as JSON text")
		})
	}
}
