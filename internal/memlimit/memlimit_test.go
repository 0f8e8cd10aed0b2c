package memlimit_test

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/opsmcp/platform/internal/memlimit"
)

// TestTheCollectorIsTunedOnlyUnderAKnownLimitTheOperatorLeftToUs: a
// replica lets Go's heap grow five times what is live, kept under nine
// tenths of its memory limit (the smaller of its setting and its
// cgroup's), only when it knows that limit; GOGC set by the operator
// keeps their GOGC under the limit, GOMEMLIMIT set keeps everything
// theirs; and however a cgroup spells "no limit", or spells a limit
// badly, no limit is made up.
func TestTheCollectorIsTunedOnlyUnderAKnownLimitTheOperatorLeftToUs(t *testing.T) {
	const v2, v1 = "/cg/memory.max", "/cg/memory/memory.limit_in_bytes"
	files := []string{v2, v1}
	none := memlimit.Plan{Why: "no memory limit is known"}
	for _, tc := range []struct {
		name       string
		configured int64
		env        map[string]string
		cgroup     map[string]string
		want       memlimit.Plan
	}{
		{name: "the setting", configured: 1 << 30,
			want: memlimit.Plan{GCPercent: 400, HeapLimit: 966367638, Limit: 1 << 30, Source: "memory-limit-bytes"}},
		{name: "the setting, smaller than the cgroup's", configured: 1 << 30, cgroup: map[string]string{v2: "2147483648\n"},
			want: memlimit.Plan{GCPercent: 400, HeapLimit: 966367638, Limit: 1 << 30, Source: "memory-limit-bytes"}},
		{name: "the cgroup's, smaller than the setting", configured: 1 << 30, cgroup: map[string]string{v2: "536870912\n"},
			want: memlimit.Plan{GCPercent: 400, HeapLimit: 483183819, Limit: 512 << 20, Source: v2}},
		{name: "cgroup v2", cgroup: map[string]string{v2: "536870912\n"},
			want: memlimit.Plan{GCPercent: 400, HeapLimit: 483183819, Limit: 512 << 20, Source: v2}},
		{name: "cgroup v1", cgroup: map[string]string{v1: "268435456\n"},
			want: memlimit.Plan{GCPercent: 400, HeapLimit: 241591905, Limit: 256 << 20, Source: v1}},
		{name: "cgroup v2 without a limit", cgroup: map[string]string{v2: "max\n", v1: "268435456"}, want: none},
		{name: "cgroup v1 without a limit", cgroup: map[string]string{v1: "9223372036854771712\n"}, want: none},
		{name: "no cgroup files", want: none},
		{name: "cgroup says nothing", cgroup: map[string]string{v2: ""}, want: none},
		{name: "cgroup says zero", cgroup: map[string]string{v2: "0"}, want: none},
		{name: "cgroup says a negative", cgroup: map[string]string{v2: "-4096"}, want: none},
		{name: "cgroup says it with units", cgroup: map[string]string{v2: "512M"}, want: none},
		{name: "cgroup says it in hex", cgroup: map[string]string{v2: "0x20000000"}, want: none},
		{name: "cgroup says it as a float", cgroup: map[string]string{v2: "5.36870912e8"}, want: none},
		{name: "cgroup overflows", cgroup: map[string]string{v2: "99999999999999999999"}, want: none},
		{name: "a setting is not overruled by a cgroup without a limit", configured: 1 << 30, cgroup: map[string]string{v2: "max"},
			want: memlimit.Plan{GCPercent: 400, HeapLimit: 966367638, Limit: 1 << 30, Source: "memory-limit-bytes"}},
		{name: "GOGC set: the limit still holds", configured: 1 << 30, env: map[string]string{"GOGC": "150"},
			want: memlimit.Plan{HeapLimit: 966367638, Limit: 1 << 30, Source: "memory-limit-bytes", Why: "GOGC is set"}},
		{name: "GOGC off: the limit still holds", cgroup: map[string]string{v2: "536870912"}, env: map[string]string{"GOGC": "off"},
			want: memlimit.Plan{HeapLimit: 483183819, Limit: 512 << 20, Source: v2, Why: "GOGC is set"}},
		{name: "GOGC set, no limit known", env: map[string]string{"GOGC": "150"}, want: none},
		{name: "GOMEMLIMIT set", configured: 1 << 30, env: map[string]string{"GOMEMLIMIT": "400MiB"},
			want: memlimit.Plan{Limit: 1 << 30, Source: "memory-limit-bytes", Why: "GOMEMLIMIT is set"}},
		{name: "both set", cgroup: map[string]string{v2: "536870912"}, env: map[string]string{"GOMEMLIMIT": "400MiB", "GOGC": "200"},
			want: memlimit.Plan{Limit: 512 << 20, Source: v2, Why: "GOMEMLIMIT is set"}},
		{name: "empty GOGC and GOMEMLIMIT are unset, as Go reads them", configured: 1 << 30, env: map[string]string{"GOGC": "", "GOMEMLIMIT": ""},
			want: memlimit.Plan{GCPercent: 400, HeapLimit: 966367638, Limit: 1 << 30, Source: "memory-limit-bytes"}},
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
	// A v2 file that cannot be read falls through to v1; one that cannot
	// be read at all is no limit, not a failure.
	noEnv := func(string) string { return "" }
	denied := func(name string) ([]byte, error) {
		if name == v1 {
			return []byte("268435456"), nil
		}
		return nil, errors.New("permission denied")
	}
	if got := memlimit.Decide(0, noEnv, denied, files); got.Limit != 256<<20 || got.Source != v1 {
		t.Fatalf("an unreadable v2 file with a readable v1: %+v", got)
	}
	unreadable := func(string) ([]byte, error) { return nil, errors.New("permission denied") }
	if got := memlimit.Decide(0, noEnv, unreadable, files); got != none {
		t.Fatalf("unreadable cgroup files gave %+v", got)
	}
}
