// Package memlimit tunes Go's garbage collector to a replica's memory
// limit.
//
// Go's collector, by default, runs whenever the heap has grown by what is
// live (GOGC=100). A replica under load keeps little live and allocates
// fast, so it collects about ten times a second while its heap stays far
// below the memory it is given; collecting a quarter as often took about
// a tenth off a flow's CPU (docs/performance.md, "The collector tuned to
// the memory limit"). So when a replica knows its memory limit it lets
// the heap grow by four times what is live, but never past nine tenths
// of the limit: the tenth left is for what Go does not count (SQLite's
// page cache, the binary's pages). docs/operating.md ("Sizing a
// replica") is the policy as operators read it.
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

// cgroupFiles are where the kernel states a container's memory limit:
// cgroup v2, then v1.
var cgroupFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// noLimitFrom is where a cgroup v1 limit means none: v1 says "no limit"
// with a number near 2^63 (its page counter's maximum), not "max".
const noLimitFrom = 1 << 62

// Plan is what a replica does to Go's collector.
type Plan struct {
	// GCPercent is the GOGC to set, 0 for none; HeapLimit the soft
	// memory limit to set, 0 for none. Why says why either is 0.
	GCPercent int
	HeapLimit int64
	Why       string
	// Limit is the replica's memory limit and Source where it was found
	// (memory-limit-bytes or a cgroup file), 0 and "" when none is known.
	Limit  int64
	Source string
}

// Decide plans the collector for a replica configured with limit (0:
// none), from the environment and the cgroup files. The smaller of the
// setting and the cgroup's limit counts: a setting left larger than the
// container (copied, or stale after a resize) must not let the heap past
// what the kernel allows.
//
// The operator's own settings win, each for what it sets: with GOGC set
// the replica still keeps the heap under the limit (as GOMEMLIMIT from
// the Helm chart did before), and with GOMEMLIMIT set it changes
// nothing, since collecting less often against the operator's limit
// could leave no room for what Go does not count.
func Decide(limit int64, getenv func(string) string, readFile func(string) ([]byte, error), files []string) Plan {
	p := Plan{Limit: limit, Source: "memory-limit-bytes"}
	if limit <= 0 {
		p.Limit, p.Source = 0, ""
	}
	if cg, file := cgroupLimit(readFile, files); cg > 0 && (p.Limit == 0 || cg < p.Limit) {
		p.Limit, p.Source = cg, file
	}
	switch {
	case getenv("GOMEMLIMIT") != "":
		p.Why = "GOMEMLIMIT is set"
	case p.Limit == 0:
		p.Why = "no memory limit is known"
	case getenv("GOGC") != "":
		p.HeapLimit, p.Why = p.Limit/10*heapTenths, "GOGC is set"
	default:
		p.HeapLimit, p.GCPercent = p.Limit/10*heapTenths, GCPercent
	}
	return p
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
	p := Decide(limit, os.Getenv, os.ReadFile, cgroupFiles)
	if p.GCPercent > 0 {
		debug.SetGCPercent(p.GCPercent)
	}
	if p.HeapLimit > 0 {
		debug.SetMemoryLimit(p.HeapLimit)
	}
	if p.HeapLimit == 0 {
		log.Info("garbage collector: Go's settings", "why", p.Why)
		return p
	}
	args := []any{"memory_limit", p.Limit, "limit_from", p.Source, "heap_limit", p.HeapLimit}
	if p.GCPercent > 0 {
		args = append(args, "gogc", p.GCPercent)
	} else {
		args = append(args, "gogc_kept", p.Why)
	}
	log.Info("garbage collector: tuned to the memory limit", args...)
	return p
}
