// Package memlimit tunes Go's garbage collector to a replica's memory
// limit.
//
// Go's collector, by default, runs whenever the heap has grown by what is
// live (GOGC=100). A replica under load keeps little live and allocates
// fast, so it collects several times a second while its heap stays far
// below the memory it is given; collecting a quarter as often took about
// a tenth off a flow's CPU (docs/performance.md, "The collector tuned to
// the memory limit"). So when a replica knows its memory limit it lets
// the heap grow by four times what is live, but never past nine tenths
// of the limit: the tenth left is for what Go does not count (SQLite's
// page cache, the binary's pages). An operator who sets GOGC or
// GOMEMLIMIT tunes the collector, and this package stays out.
package memlimit

import (
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

const (
	// GCPercent is GOGC under a known limit.
	GCPercent = 400
	// heapTenths is the share of the limit the heap may take, in tenths.
	heapTenths = 9
)

// CgroupFiles are where the kernel states a container's memory limit:
// cgroup v2, then v1.
var CgroupFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// noLimitFrom is where a cgroup v1 limit means none: v1 says "no limit"
// with a number near 2^63 (its page counter's maximum), not "max".
const noLimitFrom = 1 << 62

// Plan is what a replica does to Go's collector.
type Plan struct {
	// Tune is false when the collector keeps Go's defaults or the
	// operator's GOGC and GOMEMLIMIT; Why then says which.
	Tune bool
	Why  string
	// Limit is the replica's memory limit and Source where it was found
	// (memory-limit-bytes, or a cgroup file); HeapLimit is the soft
	// limit given to the collector.
	Limit, HeapLimit int64
	Source           string
}

// Decide plans the collector for a replica configured with limit (0:
// none), from the environment and the cgroup files.
func Decide(limit int64, getenv func(string) string, readFile func(string) ([]byte, error), files []string) Plan {
	for _, v := range []string{"GOGC", "GOMEMLIMIT"} {
		if getenv(v) != "" {
			return Plan{Why: v + " is set"}
		}
	}
	source := "memory-limit-bytes"
	if limit <= 0 {
		limit, source = cgroupLimit(readFile, files)
	}
	if limit <= 0 {
		return Plan{Why: "no memory limit is known"}
	}
	return Plan{Tune: true, Limit: limit, Source: source, HeapLimit: limit / 10 * heapTenths}
}

// cgroupLimit is the limit the first readable cgroup file states, and
// that file; 0 when it states none, or nothing this can read as bytes.
func cgroupLimit(readFile func(string) ([]byte, error), files []string) (int64, string) {
	for _, f := range files {
		b, err := readFile(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n <= 0 || n >= noLimitFrom {
			return 0, "" // "max", or a limit stated in a way no kernel does
		}
		return n, f
	}
	return 0, ""
}

// Tune applies the plan for a replica configured with limit, and logs
// what it chose.
func Tune(limit int64, log *slog.Logger) Plan {
	p := Decide(limit, os.Getenv, os.ReadFile, CgroupFiles)
	if !p.Tune {
		log.Info("garbage collector: Go's settings", "why", p.Why)
		return p
	}
	debug.SetGCPercent(GCPercent)
	debug.SetMemoryLimit(p.HeapLimit)
	log.Info("garbage collector: tuned to the memory limit", "gogc", GCPercent,
		"memory_limit", p.Limit, "limit_from", p.Source, "heap_limit", p.HeapLimit)
	return p
}
