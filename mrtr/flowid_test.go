package mrtr

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFlowIDsAreValidAndDistinct(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewFlowID()
		if !ValidFlowID(id) {
			t.Fatalf("NewFlowID() = %q, which ValidFlowID refuses", id)
		}
		if len(id) != len("fl_")+6+16 {
			t.Fatalf("NewFlowID() = %q: %d characters, want 25", id, len(id))
		}
		if seen[id] {
			t.Fatalf("flow id %q minted twice", id)
		}
		seen[id] = true
	}
}

// Ids minted in later seconds sort after earlier ones, byte by byte (as
// an index on them orders them), across every digit's carry; ids of one
// second share their first nine characters.
func TestFlowIDsSortByTheSecondTheyWereMinted(t *testing.T) {
	base := time.Date(2026, 12, 4, 23, 59, 0, 0, time.UTC)
	var ids []string
	for _, step := range []time.Duration{0, time.Second, 63 * time.Second, 64 * time.Second, 4095 * time.Second,
		4096 * time.Second, 24 * time.Hour, 365 * 24 * time.Hour, 250 * 365 * 24 * time.Hour} {
		ids = append(ids, newFlowID(base.Add(step)))
	}
	if !slices.IsSorted(ids) {
		t.Errorf("ids minted in order do not sort in order: %q", ids)
	}
	a, b := newFlowID(base.Add(300*time.Millisecond)), newFlowID(base.Add(900*time.Millisecond))
	if a[:9] != b[:9] || a[9:] == b[9:] {
		t.Errorf("ids of one second %q and %q: want the same time part and distinct random parts", a, b)
	}
	// Before 1970 (a clock gone wrong) is second 0, still a valid id.
	if id := newFlowID(time.Unix(-5, 0)); id[:9] != "fl_------" || !ValidFlowID(id) {
		t.Errorf("an id minted before 1970 is %q", id)
	}
}

func TestValidFlowIDRefusesOtherShapes(t *testing.T) {
	for _, s := range []string{
		"", "fl_", "fl_AAAAAAAAAAAAAAA", "fl_AAAAAAAAAAAAAAAAA", "FL_AAAAAAAAAAAAAAAA", "xx_AAAAAAAAAAAAAAAA",
		"fl_AAAAAAAAAAAAAAA=", "fl_AAAAAAAAAAAAAAA+", "fl_AAAAAAAAAAAAAAA/", "fl_AAAAAAAA AAAAAAA",
		"fl_AAAAAAAAAAAAAAAé", " fl_AAAAAAAAAAAAAAAA", "fl_" + strings.Repeat("A", 1000),
		// The current length's neighbours and its characters.
		"fl_" + strings.Repeat("A", 21), "fl_" + strings.Repeat("A", 23), "FL_" + strings.Repeat("A", 22),
		"fl_" + strings.Repeat("A", 21) + "=", "fl_" + strings.Repeat("A", 21) + "/", "fl_" + strings.Repeat("A", 21) + ".",
		"fl_" + strings.Repeat("A", 20) + "é", "fl_" + strings.Repeat("A", 21) + "\x00", "fl_" + strings.Repeat("A", 21) + "\n",
	} {
		if ValidFlowID(s) {
			t.Errorf("ValidFlowID(%q) = true", s)
		}
	}
	for _, s := range []string{"fl_Az09-_Az09-_Az09", "fl_Az09-_Az09-_Az09-_Az09"} {
		if !ValidFlowID(s) {
			t.Errorf("%q, of every allowed character, is refused", s)
		}
	}
}
