package main

import (
	"bytes"
	"html"
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkScale/tenants=1000000
BenchmarkScale/tenants=1000000/flows=1
    scale_bench_test.go:114: 1000000 tenants (10000 loaded): seeded in 48.7s
BenchmarkScale/tenants=1000000/flows=1-2 	    2000	    182186 ns/op	         9.000 KB/tenant	         2.309 change-p50-ms	       157.4 cpu-µs/round	        19.24 idle-cpu-ms/s
BenchmarkScale/tenants=100/flows=10-2 	    2000	    180308 ns/op	       165.3 cpu-µs/round
ok  	github.com/opsmcp/platform/endpoint	75.035s
`

// TestParseReadsEveryResultLineAndOnlyThose: result lines give their
// tenants, flows and every metric; log lines, headers and the bare
// parent benchmark are skipped.
func TestParseReadsEveryResultLineAndOnlyThose(t *testing.T) {
	rs, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("%d results: %+v", len(rs), rs)
	}
	if r := rs[0]; r.Tenants != 1_000_000 || r.Flows != 1 || r.Metrics["idle-cpu-ms/s"] != 19.24 || r.Metrics["cpu-µs/round"] != 157.4 || r.Metrics["ns/op"] != 182186 {
		t.Fatalf("first result: %+v", r)
	}
	if r := rs[1]; r.Tenants != 100 || r.Flows != 10 || len(r.Metrics) != 2 {
		t.Fatalf("second result: %+v", r)
	}
}

// TestParseRefusesAMangledResultLine: a result line whose name, count
// or values do not read is an error naming the line, not a silent gap
// in the chart.
func TestParseRefusesAMangledResultLine(t *testing.T) {
	for _, line := range []string{
		"BenchmarkScale/tenants=x/flows=1-2 2000 1 ns/op",
		"BenchmarkScale/tenants=10/flows=-2 2000 1 ns/op",
		"BenchmarkScale/tenants=10/flows=1-2 2000 abc ns/op",
		"BenchmarkScale/tenants=10/flows=1-2 2000 1",
		"BenchmarkScale/tenants=0/flows=1-2 2000 1 ns/op",
	} {
		if _, err := Parse(strings.NewReader(line + "\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%q: %v", line, err)
		}
	}
}

// TestDrawPlotsEachSeriesOnEveryPanelItHasValuesFor: every panel has
// its title, every series a line where it has values (and none where it
// has not), each point its value, the legend every label, escaped.
func TestDrawPlotsEachSeriesOnEveryPanelItHasValuesFor(t *testing.T) {
	a, _ := Parse(strings.NewReader(sample))
	series := []Series{
		{Label: "PostgreSQL <10k loaded>", Results: a[:1]},
		{Label: "SQLite", Results: []Result{
			{Tenants: 100, Flows: 1, Metrics: map[string]float64{"idle-cpu-ms/s": 2, "cpu-µs/round": 208}},
			{Tenants: 100000, Flows: 1, Metrics: map[string]float64{"idle-cpu-ms/s": 194, "cpu-µs/round": 270}},
		}},
	}
	var buf bytes.Buffer
	if err := Draw(&buf, series, Panels); err != nil {
		t.Fatal(err)
	}
	svg := buf.String()
	for _, p := range Panels {
		if !strings.Contains(svg, ">"+html.EscapeString(p.Title)+"<") {
			t.Errorf("no panel titled %q", p.Title)
		}
	}
	// SQLite has two panels' values, PostgreSQL three: five lines.
	if n := strings.Count(svg, "<path "); n != 5 {
		t.Errorf("%d lines drawn, want 5", n)
	}
	for _, want := range []string{">194<", ">19.2<", ">2.31<", ">1M<", ">100k<", "PostgreSQL &lt;10k loaded&gt;"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart lacks %q", want)
		}
	}
	if strings.Contains(svg, "<10k") {
		t.Error("a label went into the SVG unescaped")
	}
}
