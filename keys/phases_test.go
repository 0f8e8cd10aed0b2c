package keys

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func aesKey(t *testing.T, at time.Time) Key {
	t.Helper()
	s := make([]byte, 32)
	rand.Read(s)
	id, err := aesKeyID(s)
	if err != nil {
		t.Fatal(err)
	}
	return Key{ID: id, Kind: KindAES, Secret: s, Created: at}
}

func TestRotationPhasesAndDueTimes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tm := timing{margin: 6 * time.Second, ttl: 600 * time.Second}
	k1 := aesKey(t, t0)
	r := newRecord("tn_1", KindAES, "", k1, t0, 30*24*time.Hour)
	if err := r.validate("tn_1"); err != nil {
		t.Fatal(err)
	}
	tr, at := r.due(tm)
	if tr != Stage || !at.Equal(t0.Add(30*24*time.Hour)) {
		t.Fatalf("steady: next %s at %s", tr, at)
	}

	// Stage: [k1, k2], k2 verify-only; promotion waits out the margin.
	t1 := at
	k2 := aesKey(t, t1)
	s := stage(r, k2, t1, tm)
	if err := s.validate("tn_1"); err != nil {
		t.Fatal(err)
	}
	if s.Keys[0].ID != k1.ID || s.Keys[1].ID != k2.ID || s.Keys[1].State != StateStaged || s.Phase != PhaseStaged {
		t.Fatalf("staged ring %+v", keyIDs(s))
	}
	if len(r.Keys) != 1 {
		t.Fatal("stage mutated its input")
	}
	tr, at = s.due(tm)
	if tr != Promote || !at.Equal(t1.Add(tm.margin)) {
		t.Fatalf("staged: next %s at %s", tr, at)
	}

	// Promote: [k2, k1]; retirement after TTL + margin.
	t2 := at
	p := promote(s, t2, tm)
	if err := p.validate("tn_1"); err != nil {
		t.Fatal(err)
	}
	if p.Keys[0].ID != k2.ID || p.Keys[0].State != StateActive || p.Keys[1].State != StateRetiring || p.Phase != PhasePromoted {
		t.Fatalf("promoted ring %v", keyIDs(p))
	}
	tr, at = p.due(tm)
	if tr != Retire || !at.Equal(t2.Add(tm.ttl+tm.margin)) {
		t.Fatalf("promoted: next %s at %s", tr, at)
	}
	// A TTL raised since the promotion delays retirement; a lowered one
	// does not hasten it.
	if _, at2 := p.due(timing{margin: tm.margin, ttl: 2 * tm.ttl}); !at2.Equal(t2.Add(2*tm.ttl + tm.margin)) {
		t.Fatalf("raised TTL: retire at %s", at2)
	}
	if _, at2 := p.due(timing{margin: tm.margin, ttl: time.Second}); !at2.Equal(at) {
		t.Fatalf("lowered TTL: retire at %s, want %s", at2, at)
	}

	// Retire: [k2]; the next staging one period after k2 was created.
	t3 := at
	q := retire(p, t3)
	if err := q.validate("tn_1"); err != nil {
		t.Fatal(err)
	}
	if len(q.Keys) != 1 || q.Keys[0].ID != k2.ID || q.Phase != PhaseSteady {
		t.Fatalf("retired ring %v", keyIDs(q))
	}
	if tr, at = q.due(tm); tr != Stage || !at.Equal(t1.Add(30*24*time.Hour)) {
		t.Fatalf("steady again: next %s at %s", tr, at)
	}
}

func TestRevoke(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tm := timing{margin: time.Second, ttl: time.Minute}
	fresh := func() (Key, error) { return aesKey(t, t0.Add(time.Hour)), nil }
	k1, k2 := aesKey(t, t0), aesKey(t, t0)
	steady := newRecord("tn_1", KindAES, "", k1, t0, time.Hour)
	staged := stage(steady, k2, t0, tm)
	promoted := promote(staged, t0, tm)

	for _, tc := range []struct {
		name   string
		r      *Record
		key    string
		phase  Phase
		active string // "" means a fresh key
		n      int
	}{
		{"only key", steady, k1.ID, PhaseSteady, "", 1},
		{"active while staged: the staged key mints", staged, k1.ID, PhaseSteady, k2.ID, 1},
		{"staged key", staged, k2.ID, PhaseSteady, k1.ID, 1},
		{"new active while promoted", promoted, k2.ID, PhasePromoted, "", 2},
		{"retiring key", promoted, k1.ID, PhaseSteady, k2.ID, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := revoke(tc.r, tc.key, t0.Add(time.Hour), fresh)
			if err != nil {
				t.Fatal(err)
			}
			if err := n.validate("tn_1"); err != nil {
				t.Fatal(err)
			}
			if n.Phase != tc.phase || len(n.Keys) != tc.n {
				t.Fatalf("after revoking: %s %v", n.Phase, keyIDs(n))
			}
			for _, k := range n.Keys {
				if k.ID == tc.key {
					t.Fatalf("revoked key still in the ring: %v", keyIDs(n))
				}
			}
			if tc.active != "" && n.Keys[0].ID != tc.active {
				t.Fatalf("minter %s, want %s", n.Keys[0].ID, tc.active)
			}
			if tc.active == "" && (n.Keys[0].ID == k1.ID || n.Keys[0].ID == k2.ID) {
				t.Fatalf("minter should be a fresh key: %v", keyIDs(n))
			}
		})
	}
	if _, err := revoke(steady, "nope", t0, fresh); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("unknown key: %v", err)
	}
}

func TestRecordValidationRefusesForeignAndMalformed(t *testing.T) {
	t0 := time.Now()
	good := newRecord("tn_a", KindAES, "", aesKey(t, t0), t0, time.Hour)
	raw, _ := json.Marshal(good)
	if _, err := decodeRecord(raw, "tn_a"); err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(m map[string]any)) []byte {
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	for name, b := range map[string][]byte{
		"other tenant":   raw, // decoded for tn_b below
		"not json":       []byte("{"),
		"foreign format": mutate(func(m map[string]any) { m["format"] = "acme.keys/v9" }),
		"no keys":        mutate(func(m map[string]any) { m["keys"] = []any{} }),
		"short secret": mutate(func(m map[string]any) {
			m["keys"].([]any)[0].(map[string]any)["secret"] = "c2hvcnQ="
		}),
		"id not matching secret": mutate(func(m map[string]any) { m["keys"].([]any)[0].(map[string]any)["id"] = "00000000" }),
		"bad phase":              mutate(func(m map[string]any) { m["phase"] = "staged" }),
		"bad custody":            mutate(func(m map[string]any) { m["custody"] = "hsm" }),
		"no period":              mutate(func(m map[string]any) { m["periodSeconds"] = 0 }),
	} {
		tenant := "tn_a"
		if name == "other tenant" {
			tenant = "tn_b"
		}
		if _, err := decodeRecord(b, tenant); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

func TestSetPeriod(t *testing.T) {
	t0 := time.Now()
	r := newRecord("tn_a", KindAES, "", aesKey(t, t0), t0, time.Hour)
	n, err := setPeriod(r, 2*time.Hour)
	if err != nil || !n.NextAt.Equal(t0.Add(2*time.Hour)) || n.PeriodSeconds != 7200 {
		t.Fatalf("%v %v", n, err)
	}
	if _, err := setPeriod(r, 0); !errors.Is(err, ErrBadPeriod) || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("zero period: %v", err)
	}
}
