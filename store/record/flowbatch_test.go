package record

import (
	"bytes"
	"strconv"
	"testing"
	"time"
)

// TestARecordHoldsEachValueUnderItsColumn encodes a round whose every
// value differs and reads each back by its column's name: EncodeRound's
// order and batchColumns' (which names flow_batch's columns and the
// flows columns they fill) cannot drift apart unseen.
func TestARecordHoldsEachValueUnderItsColumn(t *testing.T) {
	at := time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.UTC) // before 2000, cut to µs
	waiting, expires := at.Add(time.Second), at.Add(time.Hour)
	w := RoundWrite{
		Flow: Flow{ID: "fl_1", TenantID: "tn_2", TenantSlug: "acme", Method: "tools/call", Target: "deploy",
			PrincipalIssuer: "https://id", PrincipalSubject: "alice", PrincipalClient: "app", ClientName: "cli",
			ClientVersion: "1.2", SessionID: "s-9", Era: "2026-07-28", State: AwaitingInput, PendingKinds: "form", KeyID: "k7",
			Replica: "r-3", TraceID: "trace", Detail: "detail", StartedAt: at, UpdatedAt: at.Add(time.Minute),
			WaitingSince: &waiting, StateExpiresAt: &expires, Kind: KindTask, Message: "halfway"},
		Round: Round{N: 5, ServerUS: 1234, ClientWaitUS: 5678, ResultType: "input_required"},
	}
	rec := EncodeRound(nil, &w)
	var ix valueIndex
	if err := ix.index(rec); err != nil {
		t.Fatal(err)
	}
	us := func(t time.Time) string {
		return strconv.FormatInt(t.Truncate(time.Microsecond).UnixMicro()-pgEpoch, 10)
	}
	want := map[string]string{
		"id": "fl_1", "tenant_id": "tn_2", "tenant_slug": "acme", "method": "tools/call", "target": "deploy",
		"principal_issuer": "https://id", "principal_subject": "alice", "principal_client": "app", "client_name": "cli",
		"client_version": "1.2", "session_id": "s-9", "era": "2026-07-28", "state": AwaitingInput, "rounds": "5", "pending_kinds": "form",
		"key_id": "k7", "replica": "r-3", "trace_id": "trace", "detail": "detail", "started_at": us(at),
		"updated_at": us(at.Add(time.Minute)), "waiting_since": us(waiting), "state_expires_at": us(expires),
		"server_us": "1234", "client_wait_us": "5678", "kind": "task", "message": "halfway", "round": string(w.Round.appendJSON(nil)),
	}
	if len(want) != len(batchColumns) {
		t.Fatalf("the test knows %d columns, the record has %d", len(want), len(batchColumns))
	}
	for i, col := range batchColumns {
		v := value(rec, ix[i])
		got := string(v)
		if col.typ != colText {
			got = strconv.FormatInt(number(rec, ix[i]), 10)
		}
		if got != want[col.name] {
			t.Errorf("%s: %q, want %q", col.name, got, want[col.name])
		}
	}

	// A running mark: no round, no durations.
	w.Running = true
	rec = EncodeRound(nil, &w)
	if err := ix.index(rec); err != nil {
		t.Fatal(err)
	}
	if ix[vRound] != -1 || number(rec, ix[vServerUS]) != 0 || number(rec, ix[vClientWaitUS]) != 0 {
		t.Errorf("a running mark's round and durations: %v, %d, %d", ix[vRound], number(rec, ix[vServerUS]), number(rec, ix[vClientWaitUS]))
	}
}

// TestAMalformedRecordIsRefusedNotRead: a record cut short, grown, with
// a number of the wrong size or a null where none belongs is refused as
// a whole.
func TestAMalformedRecordIsRefusedNotRead(t *testing.T) {
	w := RoundWrite{Flow: Flow{ID: "fl_1", TenantID: "t", State: Completed, StartedAt: time.Now(), UpdatedAt: time.Now()},
		Round: Round{N: 2}}
	good := EncodeRound(nil, &w)
	bad := map[string][]byte{
		"empty":         nil,
		"cut short":     good[:len(good)-3],
		"one byte more": append(bytes.Clone(good), 0),
		"a long length": append([]byte{0x7f, 0xff, 0xff, 0xff}, good[4:]...),
		// the id ("fl_1") null, which EncodeRound never writes
		"a null id":         append([]byte{0xff, 0xff, 0xff, 0xff}, good[8:]...),
		"a length below -1": append([]byte{0xff, 0xff, 0xff, 0xfe}, good[8:]...),
		// rounds (an integer) claiming 4 bytes
		"a short number": func() []byte {
			var ix valueIndex
			_ = ix.index(good)
			b := bytes.Clone(good)
			b[ix[vRounds]-1] = 4
			return b
		}(),
	}
	for name, rec := range bad {
		var m batchMerge
		if err := m.run([][]byte{good, rec}); err != errBadRecord {
			t.Errorf("%s: %v, want errBadRecord", name, err)
		}
	}
}
