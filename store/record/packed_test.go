package record

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
)

// TestRoundsDictionaryIsPinned: a history packed against the
// dictionary needs it, as it was, to be read: a changed byte of it
// makes every stored history unreadable. A better dictionary is a new
// variant, the old one kept for reading; this test fails on any edit of
// it.
func TestRoundsDictionaryIsPinned(t *testing.T) {
	const pinned = "8cc6b99fa3f6fcd08c20a779dbe6b2d31fc889c323b45fff7d4bb95cb86dab11"
	d := sha256.Sum256(roundsDict().Bytes())
	if got := hex.EncodeToString(d[:]); got != pinned || packDict != 1 {
		t.Fatalf("the dictionary of variant %d is %s, pinned %s: stored histories need it as it was", packDict, got, pinned)
	}
}

// TestPackedRoundsReadBackAsWritten packs histories of every shape a
// flow's rounds take (none, one, several, large questions, text JSON
// escapes, non-ASCII) and unpacks each byte for byte; a packed one is
// smaller than its JSON but for the smallest.
func TestPackedRoundsReadBackAsWritten(t *testing.T) {
	two := `[{"n":1,"arrivedAt":"2026-12-05T17:18:11.005369Z","endedAt":"2026-12-05T17:18:11.005369Z","serverUs":120,` +
		`"clientWaitUs":0,"resultType":"input_required","keyOut":"acme-3","replica":"platform-0",` +
		`"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","spanId":"00f067aa0ba902b7",` +
		`"asked":[{"key":"env","kind":"form","params":{"mode":"form","message":"Which environment?"}}],` +
		`"principal":{"issuer":"https://id.example.com","subject":"user-4711"},"client":{"name":"claude","version":"1.4.2"}},` +
		`{"n":2,"arrivedAt":"2026-12-05T17:18:11.045369Z","endedAt":"2026-12-05T17:18:11.045369Z","serverUs":310,` +
		`"clientWaitUs":40000,"resultType":"complete","stateIn":"valid","keyIn":"acme-3",` +
		`"webhook":{"kind":"tool","outcome":"ok","status":200,"durationMs":1,"durationUs":1830}}]`
	for _, c := range []struct {
		name, plain string
		smaller     bool
	}{
		{"none", `[]`, false},
		{"one tiny", `[{"n":1}]`, false},
		{"two rounds", two, true},
		{"escapes and non-ASCII", `[{"n":1,"message":"it's \"quoted\" \\ tab\t ünïcødé ✓ 日本 \u0000"}]`, false},
		{"a large question", `[{"n":1,"asked":[{"message":"` + strings.Repeat("deploy to production? ", 20_000) + `"}]}]`, true},
		{"many rounds", "[" + strings.Repeat(two[1:len(two)-1]+",", 200) + `{"n":3}]`, true},
		{"past the dictionary's reach", "[" + strings.Repeat(two[1:len(two)-1]+",", 2000) + `{"n":3}]`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			packed := packRounds([]byte("kept"), []byte(c.plain))
			if !bytes.HasPrefix(packed, []byte("kept")) {
				t.Fatalf("packRounds did not append to dst: %q", packed[:min(8, len(packed))])
			}
			packed = packed[4:]
			want := byte(packDict)
			if len(c.plain) > maxDictPacked {
				want = packPlain
			}
			if packed[0] != packMagic || packed[1] != want {
				t.Fatalf("packed history starts %x, want %x then variant %d", packed[:2], packMagic, want)
			}
			if c.smaller && len(packed) >= len(c.plain)/2 {
				t.Errorf("packed to %d bytes of %d", len(packed), len(c.plain))
			}
			got, err := unpackRounds(packed)
			if err != nil || string(got) != c.plain {
				t.Fatalf("unpacked %d bytes (%v), want the %d written", len(got), err, len(c.plain))
			}
		})
	}
}

// TestUnpackReadsAJSONHistoryAsItIs: rows written before packing, and
// PostgreSQL's, hold the JSON array itself; it reads back unchanged,
// whatever it holds.
func TestUnpackReadsAJSONHistoryAsItIs(t *testing.T) {
	for _, plain := range []string{`[]`, `[{"n":1}]`, `[{"n":1,"message":"\u00ff"}]`, ` [{"n":1}]`, ``} {
		got, err := unpackRounds([]byte(plain))
		if err != nil || string(got) != plain {
			t.Errorf("%q read back as %q (%v)", plain, got, err)
		}
	}
}

// TestADamagedPackedHistoryIsAnError: a packed history cut short,
// changed anywhere (its checksum, its length, its block), read as
// another variant or stating a huge length gives an error, never a
// panic, a huge allocation or made-up rounds.
func TestADamagedPackedHistoryIsAnError(t *testing.T) {
	plain := []byte(`[{"n":1,"resultType":"complete","message":"` + strings.Repeat("ok ", 500) + `"}]`)
	good := packRounds(nil, plain)
	damaged := map[string][]byte{"magic only": {packMagic}, "header only": good[:packHeader]}
	for _, n := range []int{packHeader + 1, len(good) / 2, len(good) - 1} {
		damaged["cut to "+strconv.Itoa(n)] = good[:n]
	}
	for _, at := range []int{2, 5, packHeader, packHeader + 1, len(good) / 2, len(good) - 1} {
		b := bytes.Clone(good)
		b[at] ^= 0x5A
		damaged["byte "+strconv.Itoa(at)+" changed"] = b
	}
	for _, v := range []byte{0, packPlain, 3, 0xFF} {
		b := bytes.Clone(good)
		b[1] = v
		damaged["read as variant "+strconv.Itoa(int(v))] = b
	}
	// Lengths stated in the block's header: 1 GiB, past maxUnpacked
	// though s2 itself would take it, and 2^40 bytes, past s2's own.
	damaged["a length past maxUnpacked"] = append(bytes.Clone(good[:packHeader]), 0x80, 0x80, 0x80, 0x80, 0x04, 0)
	damaged["a huge length"] = append(bytes.Clone(good[:packHeader]), 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0)
	for name, b := range damaged {
		if got, err := unpackRounds(b); err == nil {
			t.Errorf("%s: read back %d bytes with no error", name, len(got))
		}
	}
	// Refused for its length, before a gibibyte is allocated for it.
	if _, err := unpackRounds(damaged["a length past maxUnpacked"]); err == nil || !strings.Contains(err.Error(), "length") {
		t.Errorf("a length past maxUnpacked: %v, want it refused for its length", err)
	}
}
