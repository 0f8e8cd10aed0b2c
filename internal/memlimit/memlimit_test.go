package memlimit_test

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/opsmcp/platform/internal/memlimit"
)

// TestTheCollectorIsTunedOnlyUnderAKnownLimitTheOperatorLeftToUs: a
// replica lets Go's heap grow five times what is live, kept under nine
// tenths of its memory limit, only when it knows that limit (its setting,
// else the cgroup's) and the operator set neither GOGC nor GOMEMLIMIT;
// every other case, however the cgroup spells "no limit" or spells it
// badly, keeps Go's own settings.
func TestTheCollectorIsTunedOnlyUnderAKnownLimitTheOperatorLeftToUs(t *testing.T) {
	const v2, v1 = "/cg/memory.max", "/cg/memory/memory.limit_in_bytes"
	files := []string{v2, v1}
	for _, tc := range []struct {
		name       string
		configured int64
		env        map[string]string
		cgroup     map[string]string
		want       memlimit.Plan
	}{
		{name: "the setting", configured: 1 << 30,
			want: memlimit.Plan{Tune: true, Limit: 1 << 30, HeapLimit: 966367638, Source: "memory-limit-bytes"}},
		{name: "the setting wins over the cgroup", configured: 1 << 30, cgroup: map[string]string{v2: "536870912\n"},
			want: memlimit.Plan{Tune: true, Limit: 1 << 30, HeapLimit: 966367638, Source: "memory-limit-bytes"}},
		{name: "cgroup v2", cgroup: map[string]string{v2: "536870912\n"},
			want: memlimit.Plan{Tune: true, Limit: 512 << 20, HeapLimit: 483183819, Source: v2}},
		{name: "cgroup v1", cgroup: map[string]string{v1: "268435456\n"},
			want: memlimit.Plan{Tune: true, Limit: 256 << 20, HeapLimit: 241591905, Source: v1}},
		{name: "cgroup v2 without a limit", cgroup: map[string]string{v2: "max\n", v1: "268435456"},
			want: memlimit.Plan{Why: "no memory limit is known"}},
		{name: "cgroup v1 without a limit", cgroup: map[string]string{v1: "9223372036854771712\n"},
			want: memlimit.Plan{Why: "no memory limit is known"}},
		{name: "no cgroup files", want: memlimit.Plan{Why: "no memory limit is known"}},
		{name: "cgroup says nothing", cgroup: map[string]string{v2: ""}, want: memlimit.Plan{Why: "no memory limit is known"}},
		{name: "cgroup says zero", cgroup: map[string]string{v2: "0"}, want: memlimit.Plan{Why: "no memory limit is known"}},
		{name: "cgroup says a negative", cgroup: map[string]string{v2: "-4096"}, want: memlimit.Plan{Why: "no memory limit is known"}},
		{name: "cgroup says it with units", cgroup: map[string]string{v2: "512M"}, want: memlimit.Plan{Why: "no memory limit is known"}},
		{name: "cgroup says it in hex", cgroup: map[string]string{v2: "0x20000000"}, want: memlimit.Plan{Why: "no memory limit is known"}},
		{name: "cgroup says it as a float", cgroup: map[string]string{v2: "5.36870912e8"}, want: memlimit.Plan{Why: "no memory limit is known"}},
		{name: "cgroup overflows", cgroup: map[string]string{v2: "99999999999999999999"}, want: memlimit.Plan{Why: "no memory limit is known"}},
		{name: "GOGC set", configured: 1 << 30, env: map[string]string{"GOGC": "150"}, want: memlimit.Plan{Why: "GOGC is set"}},
		{name: "GOGC off", configured: 1 << 30, env: map[string]string{"GOGC": "off"}, want: memlimit.Plan{Why: "GOGC is set"}},
		{name: "GOMEMLIMIT set", cgroup: map[string]string{v2: "536870912"}, env: map[string]string{"GOMEMLIMIT": "400MiB"},
			want: memlimit.Plan{Why: "GOMEMLIMIT is set"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string { return tc.env[k] }
			read := func(name string) ([]byte, error) {
				if s, ok := tc.cgroup[name]; ok {
					return []byte(s), nil
				}
				return nil, fs.ErrNotExist
			}
			if got := memlimit.Decide(tc.configured, getenv, read, files); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	// An unreadable file is no limit, not a failure.
	unreadable := func(string) ([]byte, error) { return nil, errors.New("permission denied") }
	if got := memlimit.Decide(0, func(string) string { return "" }, unreadable, files); got.Tune {
		t.Fatalf("an unreadable cgroup file gave %+v", got)
	}
}
