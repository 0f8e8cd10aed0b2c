package platformtest

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Sample is one line of a Prometheus text exposition.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples is a scraped exposition.
type Samples []Sample

var (
	sampleLine  = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
	sampleLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// Scrape GETs url/metrics (with token as a bearer when not empty) and
// parses the text exposition.
func Scrape(t testing.TB, url, token string) Samples {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	r := Do(t, "GET", url+"/metrics", h, nil)
	if r.Status != 200 {
		t.Fatalf("GET /metrics: %d", r.Status)
	}
	var out Samples
	for _, l := range strings.Split(string(r.Body), "\n") {
		m := sampleLine.FindStringSubmatch(l)
		if m == nil || strings.HasPrefix(l, "#") {
			continue
		}
		s := Sample{Name: m[1], Labels: map[string]string{}}
		for _, lm := range sampleLabel.FindAllStringSubmatch(m[2], -1) {
			s.Labels[lm[1]] = lm[2]
		}
		s.Value, _ = strconv.ParseFloat(m[3], 64)
		out = append(out, s)
	}
	return out
}

// Value sums the samples named name whose labels include want; ok is
// false when there is none.
func (ss Samples) Value(name string, want map[string]string) (sum float64, ok bool) {
next:
	for _, s := range ss {
		if s.Name != name {
			continue
		}
		for k, v := range want {
			if s.Labels[k] != v {
				continue next
			}
		}
		sum += s.Value
		ok = true
	}
	return sum, ok
}
