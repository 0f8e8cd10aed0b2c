package main

import (
	"bufio"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/testkit/testwait"
)

// TestServeTunesTheCollectorToItsMemoryLimit runs `platform serve` with
// a memory limit and reads what Go's collector was set to from the
// replica's own metrics: GOGC 400 and nine tenths of the limit; the
// operator's GOGC under nine tenths of the limit; the operator's
// GOMEMLIMIT and Go's GOGC.
func TestServeTunesTheCollectorToItsMemoryLimit(t *testing.T) {
	// A small limit, under any machine's cgroup limit: the smaller counts.
	for _, tc := range []struct {
		name             string
		env              []string
		gogc, heapLimit  float64
		logWhy, logLimit string
	}{
		{"the setting", []string{"PLATFORM_MEMORY_LIMIT_BYTES=268435456"}, 400, 241591905, "", `"heap_limit":241591905`},
		{"GOGC set by the operator", []string{"PLATFORM_MEMORY_LIMIT_BYTES=268435456", "GOGC=150"}, 150, 241591905, `"gogc_kept":"GOGC is set"`, `"heap_limit":241591905`},
		{"GOMEMLIMIT set by the operator", []string{"PLATFORM_MEMORY_LIMIT_BYTES=268435456", "GOMEMLIMIT=700MiB"}, 100, 700 << 20, `"why":"GOMEMLIMIT is set"`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := freeAddr(t)
			cmd := platformCmd("serve")
			cmd.Env = append(cmd.Env, "PLATFORM_LISTEN="+addr, "PLATFORM_DATABASE_URL=sqlite:"+filepath.Join(t.TempDir(), "p.db"),
				"PLATFORM_LOG_FORMAT=json", "GOMEMLIMIT=", "GOGC=")
			cmd.Env = append(cmd.Env, tc.env...)
			log := &lockedBuffer{}
			cmd.Stderr = log
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			var got map[string]float64
			testwait.Until(t, "the replica serves its metrics", func() bool {
				got = goMetrics(t, "http://"+addr+"/metrics")
				return got != nil
			})
			if got["go_gc_gogc_percent"] != tc.gogc || got["go_gc_gomemlimit_bytes"] != tc.heapLimit {
				t.Fatalf("GOGC %v, memory limit %v; want %v and %v", got["go_gc_gogc_percent"], got["go_gc_gomemlimit_bytes"], tc.gogc, tc.heapLimit)
			}
			for _, want := range []string{tc.logWhy, tc.logLimit} {
				if want != "" && !strings.Contains(log.String(), want) {
					t.Fatalf("the log does not say %s:\n%s", want, log.String())
				}
			}
		})
	}
}

// goMetrics reads the collector's two settings from a /metrics page; nil
// while it does not answer.
func goMetrics(t *testing.T, url string) map[string]float64 {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if ok && (name == "go_gc_gogc_percent" || name == "go_gc_gomemlimit_bytes") {
			f, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("%s: %v", sc.Text(), err)
			}
			out[name] = f
		}
	}
	if len(out) != 2 {
		t.Fatalf("/metrics lacks go_gc_gogc_percent or go_gc_gomemlimit_bytes: %v", out)
	}
	return out
}
