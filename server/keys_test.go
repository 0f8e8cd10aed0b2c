package server

import (
	"testing"

	"github.com/opsmcp/platform/keys"
	"github.com/opsmcp/platform/telemetry"
)

// TestRotationPhaseGaugeValues: each of the keys package's phases has its
// documented gauge value, and anything unknown reads as steady.
func TestRotationPhaseGaugeValues(t *testing.T) {
	for _, c := range []struct {
		phase keys.Phase
		want  telemetry.RotationPhase
	}{
		{keys.PhaseSteady, 0},
		{keys.PhaseStaged, 1},
		{keys.PhasePromoted, 2},
		{"", 0},
	} {
		if got := rotationPhase(c.phase); got != c.want {
			t.Errorf("rotationPhase(%q) = %d, want %d", c.phase, got, c.want)
		}
	}
}
