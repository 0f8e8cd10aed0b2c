package chartcheck

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// dashboardMetrics are the Prometheus names of the platform's metrics
// (README, Observability) and the panels that must chart each.
var dashboardMetrics = []string{
	"mcp_server_operation_duration_seconds",
	"opsmcp_mrtr_rounds_total",
	"opsmcp_flow_duration_seconds",
	"opsmcp_flow_rounds",
	"opsmcp_flows_awaiting_input",
	"opsmcp_state_rejections_total",
	"opsmcp_webhook_duration_seconds",
	"opsmcp_webhook_failures_total",
	"opsmcp_keys_ring_age_seconds",
	"opsmcp_keys_rotation_phase",
	"opsmcp_keys_ring_keys",
}

// pendingMetrics are charted before the platform defines them: another
// change adds them. The test says so instead of failing. (None now: the
// fleet test runs every query against the platform's own metrics.)
var pendingMetrics = map[string]bool{}

func dashboardJSON(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "opsmcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		GridPos struct{ H, W, X, Y int }
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

var (
	metricRef = regexp.MustCompile(`\b((?:mcp|opsmcp)_[a-z_]+)`)
	labelRef  = regexp.MustCompile(`(?:by|without) \(([^)]*)\)|([a-z_]+)\s*(?:=~|!=|=)\s*"`)
	selector  = regexp.MustCompile(`\{[^}]*\}`)
	grouping  = regexp.MustCompile(`(?:by|without) \([^)]*\)`)
)

// TestDashboard checks the dashboard charts every platform metric, by the
// names and labels the platform exports: every metric it names maps to an
// instrument of telemetry/metrics.go and every label to an attribute the
// platform sets (dots become underscores in Prometheus).
func TestDashboard(t *testing.T) {
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(dashboardJSON(t))))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dashboards/opsmcp.json: %v", err)
	}
	if d.UID == "" || d.Title == "" {
		t.Error("the dashboard needs a uid and a title (the sidecar keys dashboards by uid)")
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	if !vars["datasource"] {
		t.Error("the dashboard must pick its Prometheus data source through a variable, not a fixed uid")
	}

	known := telemetryNames(t)
	used := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q overflows the grid", p.Title)
		}
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if !strings.Contains(tg.Expr, `job=~"$job"`) {
				t.Errorf("panel %q ignores the job variable: %s", p.Title, tg.Expr)
			}
			bare := grouping.ReplaceAllString(selector.ReplaceAllString(tg.Expr, ""), "")
			for _, m := range metricRef.FindAllStringSubmatch(bare, -1) {
				name := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m[1], "_bucket"), "_count"), "_sum")
				used[name] = true
				if !known.metric(name) && !pendingMetrics[name] {
					t.Errorf("panel %q queries %s, which the platform does not export", p.Title, name)
				}
			}
			for _, m := range labelRef.FindAllStringSubmatch(tg.Expr, -1) {
				for _, l := range strings.Split(m[1]+","+m[2], ",") {
					l = strings.TrimSpace(l)
					if l == "" || l == "le" || l == "job" || l == "instance" {
						continue
					}
					if !known.labels[l] {
						t.Errorf("panel %q uses label %s, which no platform metric carries", p.Title, l)
					}
				}
			}
		}
	}
	for _, m := range dashboardMetrics {
		if !used[m] {
			t.Errorf("no panel charts %s", m)
		}
		if pendingMetrics[m] && known.metric(m) {
			t.Logf("%s is now defined by the platform: drop it from pendingMetrics", m)
		}
	}
}

type names struct {
	metrics []string // Prometheus form, without unit or _total suffix
	labels  map[string]bool
}

// metric reports whether a Prometheus series name belongs to a platform
// instrument: its name with dots as underscores, plus the unit and
// counter suffixes the exporter appends.
func (n names) metric(prom string) bool {
	for _, m := range n.metrics {
		for _, suffix := range []string{"", "_total", "_seconds", "_seconds_total"} {
			if prom == m+suffix {
				return true
			}
		}
	}
	return false
}

// telemetryNames reads the instrument and attribute names from the
// platform's telemetry package, the one place they are defined.
func telemetryNames(t *testing.T) names {
	t.Helper()
	files, err := filepath.Glob("../../telemetry/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("cannot read the telemetry package: %v", err)
	}
	metricConst := regexp.MustCompile(`Metric[A-Za-z]+\s*=\s*"([a-z_.]+)"`)
	attrKey := regexp.MustCompile(`attribute\.Key\("([a-z_.]+)"\)`)
	n := names{labels: map[string]bool{}}
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range metricConst.FindAllStringSubmatch(string(src), -1) {
			p := strings.ReplaceAll(m[1], ".", "_")
			if !seen[p] {
				seen[p] = true
				n.metrics = append(n.metrics, p)
			}
		}
		for _, m := range attrKey.FindAllStringSubmatch(string(src), -1) {
			n.labels[strings.ReplaceAll(m[1], ".", "_")] = true
		}
	}
	sort.Strings(n.metrics)
	if len(n.metrics) < 10 {
		t.Fatalf("found only %d metric names in telemetry/: %v", len(n.metrics), n.metrics)
	}
	return n
}
