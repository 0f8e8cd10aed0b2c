// Command scalechart draws how BenchmarkScale's figures grow with the
// tenants registered, as an SVG of small panels, one per figure, one line
// per series, from the benchmark's own output (go test -bench
// BenchmarkScale: its result lines). It is how docs/scale.svg is made:
//
//	go run ./bench/scalechart -o docs/scale.svg \
//	    'SQLite, every tenant loaded=docs/scale/sqlite.txt' \
//	    'PostgreSQL, 10,000 loaded=docs/scale/postgres-100k.txt,docs/scale/postgres-1m.txt'
//
// Each argument is a series: its label, "=", and the files holding its
// results. A panel's x axis is the tenants registered, logarithmic; its
// y axis starts at zero.
package main

import (
	"bufio"
	"flag"
	"io"
	"log"
	"os"
	"strings"
)

func main() {
	out := flag.String("o", "-", "the SVG to write (- for standard output)")
	flag.Parse()
	var series []Series
	for _, arg := range flag.Args() {
		label, files, ok := strings.Cut(arg, "=")
		if !ok || label == "" || files == "" {
			log.Fatalf("scalechart: a series is LABEL=FILE[,FILE…], not %q", arg)
		}
		s := Series{Label: label}
		for _, f := range strings.Split(files, ",") {
			r, err := os.Open(f)
			if err != nil {
				log.Fatal(err)
			}
			rs, err := Parse(r)
			r.Close()
			if err != nil {
				log.Fatalf("scalechart: %s: %v", f, err)
			}
			s.Results = append(s.Results, rs...)
		}
		if len(s.Results) == 0 {
			log.Fatalf("scalechart: no BenchmarkScale result in %s", files)
		}
		series = append(series, s)
	}
	if len(series) == 0 {
		log.Fatal("scalechart: no series given")
	}
	var w io.Writer = os.Stdout
	if *out != "-" {
		f, err := os.Create(*out)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	if err := Draw(bw, series, Panels); err != nil {
		log.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		log.Fatal(err)
	}
}

// Series is one line on every panel: results of one setup.
type Series struct {
	Label   string
	Results []Result
}

// Result is one BenchmarkScale result line.
type Result struct {
	Tenants, Flows int
	Metrics        map[string]float64
}

// Panel is one figure drawn against the tenants, from the results at
// Flows flows per tenant.
type Panel struct {
	Title, Metric string
	Flows         int
}

// Panels are the figures docs/performance.md#scale quotes.
var Panels = []Panel{
	{"Idle CPU, ms per second", "idle-cpu-ms/s", 1},
	{"CPU per round, µs", "cpu-µs/round", 1},
	{"Heap in use, MB", "heap-MB", 1},
	{"A tenant's first load, CPU-µs", "load-cpu-µs", 1},
	{"Change served after commit, ms (p50)", "change-p50-ms", 1},
}
