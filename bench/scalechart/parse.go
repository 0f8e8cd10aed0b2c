package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Parse reads BenchmarkScale's result lines from go test output, such as
//
//	BenchmarkScale/tenants=100000/flows=10-2  2000  182186 ns/op  157.4 cpu-µs/round  …
//
// and ignores every other line. A result line it cannot read is an error.
func Parse(r io.Reader) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !strings.HasPrefix(line, "BenchmarkScale/tenants=") || !strings.Contains(line, "/flows=") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) == 1 {
			continue // -v names a benchmark as it starts
		}
		if len(fields) < 4 || len(fields)%2 != 0 {
			return nil, fmt.Errorf("line %d: not a result line: %q", n, line)
		}
		res, err := parseName(fields[0])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		// fields[1] is the iteration count; then value, unit pairs.
		res.Metrics = map[string]float64{}
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: %s: %w", n, fields[i+1], err)
			}
			res.Metrics[fields[i+1]] = v
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

// parseName reads tenants and flows from a result's name,
// BenchmarkScale/tenants=N/flows=C[-P].
func parseName(name string) (Result, error) {
	var r Result
	parts := strings.Split(name, "/")
	if len(parts) != 3 {
		return r, fmt.Errorf("unexpected name %q", name)
	}
	t, ok := strings.CutPrefix(parts[1], "tenants=")
	f, ok2 := strings.CutPrefix(parts[2], "flows=")
	if !ok || !ok2 {
		return r, fmt.Errorf("unexpected name %q", name)
	}
	if i := strings.LastIndexByte(f, '-'); i > 0 {
		f = f[:i] // the GOMAXPROCS suffix
	}
	var err error
	if r.Tenants, err = strconv.Atoi(t); err != nil || r.Tenants <= 0 {
		return r, fmt.Errorf("tenants in %q", name)
	}
	if r.Flows, err = strconv.Atoi(f); err != nil || r.Flows <= 0 {
		return r, fmt.Errorf("flows in %q", name)
	}
	return r, nil
}
