package mrtr

import (
	"strings"
	"testing"
)

func TestFlowIDsAreValidAndDistinct(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewFlowID()
		if !ValidFlowID(id) {
			t.Fatalf("NewFlowID() = %q, which ValidFlowID refuses", id)
		}
		if seen[id] {
			t.Fatalf("flow id %q minted twice", id)
		}
		seen[id] = true
	}
}

func TestValidFlowIDRefusesOtherShapes(t *testing.T) {
	for _, s := range []string{
		"", "fl_", "fl_AAAAAAAAAAAAAAA", "fl_AAAAAAAAAAAAAAAAA", "FL_AAAAAAAAAAAAAAAA", "xx_AAAAAAAAAAAAAAAA",
		"fl_AAAAAAAAAAAAAAA=", "fl_AAAAAAAAAAAAAAA+", "fl_AAAAAAAAAAAAAAA/", "fl_AAAAAAAA AAAAAAA",
		"fl_AAAAAAAAAAAAAAAé", " fl_AAAAAAAAAAAAAAAA", "fl_" + strings.Repeat("A", 1000),
	} {
		if ValidFlowID(s) {
			t.Errorf("ValidFlowID(%q) = true", s)
		}
	}
	if !ValidFlowID("fl_Az09-_Az09-_Az09") {
		t.Error("a flow id of every allowed character is refused")
	}
}
