package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/opsmcp/platform/client"
	"github.com/opsmcp/platform/mrtr"
)

// The Grafana dashboard (helm/opsmcp/dashboards) is proven against the
// fleet's own Prometheus: every query of every panel, with the
// dashboard's variables filled in as Grafana would, must parse and
// return series with a value for the traffic the run drove. The chart
// check (helm/chartcheck) only knows the names the queries use; this
// knows they answer.

// rateInterval stands for Grafana's $__rate_interval: the last minute,
// which holds the end of the drive and the failures driven for the
// failure panels (at one scrape a second, far over Grafana's floor of
// four scrapes).
const rateInterval = "1m"

// dashboardFile is what the check reads of a dashboard.
type dashboardFile struct {
	Templating struct {
		List []struct {
			Name     string          `json:"name"`
			Type     string          `json:"type"`
			Query    json.RawMessage `json:"query"`
			AllValue string          `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// labelValues is a query variable's only form in the dashboard:
// label_values(selector, label).
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// variableRef is a reference to a dashboard variable, $name or ${name}.
var variableRef = regexp.MustCompile(`\$\{?([a-zA-Z_][a-zA-Z0-9_]*)\}?`)

// checkDashboard drives the failures the dashboard's failure panels
// chart, waits for Prometheus to scrape them, then checks each variable
// and each query.
func (fl *fleet) checkDashboard(ctx context.Context, a *assertion) {
	raw, err := os.ReadFile(fl.cfg.Dashboard)
	if err != nil {
		a.fail("%v", err)
		return
	}
	var d dashboardFile
	if err := json.Unmarshal(raw, &d); err != nil {
		a.fail("%s: %v", fl.cfg.Dashboard, err)
		return
	}
	if err := fl.driveFailures(ctx); err != nil {
		a.fail("driving the failures the dashboard charts: %v", err)
		return
	}
	time.Sleep(3*scrapeInterval + time.Second)
	at := time.Now()
	prom := &promAPI{base: fl.prom.URL(), http: &http.Client{Timeout: 10 * time.Second}}

	// The variables: each query variable lists values, and the fleet's
	// job and tenant among them. The queries then run with the variables
	// as a user picks them: the fleet's tenant, and All.
	chosen := map[string]string{"job": prometheusJob, "tenant": tenantSlug, "__rate_interval": rateInterval}
	all := map[string]string{}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		a.checked++
		q := variableQuery(v.Query)
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			a.fail("variable %s: %q is not label_values(selector, label)", v.Name, q)
			continue
		}
		selector, missing := fill(m[1], chosen)
		if missing != "" {
			a.fail("variable %s: %q refers to $%s, which the check does not know", v.Name, q, missing)
			continue
		}
		values, err := prom.labelValues(ctx, m[2], selector, at)
		if err != nil {
			a.fail("variable %s (%s): %v", v.Name, q, err)
			continue
		}
		if want, ok := chosen[v.Name]; ok && !slices.Contains(values, want) {
			a.fail("variable %s (%s) lists %v, not the fleet's %q", v.Name, q, values, want)
		}
		if v.AllValue != "" {
			all[v.Name] = v.AllValue
		}
	}
	withAll := maps.Clone(chosen)
	maps.Copy(withAll, all)
	settings := []struct {
		name string
		vars map[string]string
	}{{"tenant " + tenantSlug, chosen}, {"All", withAll}}
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			for _, s := range settings {
				a.checked++
				expr, missing := fill(t.Expr, s.vars)
				if missing != "" {
					a.fail("panel %q (%s): $%s is not a variable of the dashboard: %s", p.Title, s.name, missing, t.Expr)
					continue
				}
				n, err := prom.series(ctx, expr, at)
				switch {
				case err != nil:
					a.fail("panel %q (%s): %v: %s", p.Title, s.name, err, expr)
				case n == 0:
					a.fail("panel %q (%s): no series with a value: %s", p.Title, s.name, expr)
				}
			}
		}
	}
}

// driveFailures makes, for a few seconds, the failures the failure
// panels chart: a call of a tool the tenant lacks (an MCP error), a call
// of a tool whose webhook refuses connections (a webhook failure), and a
// round whose request state was altered (a state rejection). The drive's
// faults may or may not have made them.
func (fl *fleet) driveFailures(ctx context.Context) error {
	port, err := freePort() // nothing listens on it
	if err != nil {
		return err
	}
	def := toolDefinition(deadTool, fmt.Sprintf("http://127.0.0.1:%d/hook", port))
	if err := fl.addTool(ctx, def); err != nil {
		return err
	}
	committed := time.Now()
	if err := fl.servedEverywhere(ctx, "tool "+deadTool+" added", committed, committed.Add(30*time.Second), listed(deadTool)); err != nil {
		return err
	}
	m, err := newModernEra(fl.endpoint(), 2, fl.cfg.RoundTimeout, 0)
	if err != nil {
		return err
	}
	args := map[string]any{"ref": "dashboard"}
	var missing, dead, rejected int
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if _, err := m.c.CallTool(ctx, "fleet_missing", args, client.Manual()); err != nil {
			missing++
		}
		if res, err := m.c.CallTool(ctx, deadTool, args, client.Manual()); err != nil || res.IsError {
			dead++
		}
		res, err := m.c.CallTool(ctx, orderTool, args, client.Manual())
		if err != nil || res.InputRequired == nil {
			return fmt.Errorf("%s's first round did not ask: %v", orderTool, err)
		}
		// Another base64url letter in the middle: well formed, no
		// longer sealed by the platform.
		state := append(json.RawMessage(nil), res.InputRequired.RequestState...)
		if i := len(state) / 2; state[i] == 'A' {
			state[i] = 'B'
		} else {
			state[i] = 'A'
		}
		responses, err := answers(res.InputRequired, &Flow{Who: "dashboard"})
		if err != nil {
			return err
		}
		if _, err := m.c.CallTool(ctx, orderTool, args, client.Manual(),
			client.WithSeed(mrtr.Seed{InputResponses: responses, RequestState: state})); err != nil {
			rejected++
		}
	}
	if missing == 0 || dead == 0 || rejected == 0 {
		return fmt.Errorf("failures made: %d unknown tool, %d dead webhook, %d altered state; want some of each", missing, dead, rejected)
	}
	fl.logf("failures for the dashboard: %d unknown tool, %d dead webhook, %d altered state", missing, dead, rejected)
	return nil
}

// deadTool's webhook refuses connections.
const deadTool = "fleet_dead"

// fill replaces the variables of s with vars' values; it returns the
// first variable vars lacks.
func fill(s string, vars map[string]string) (string, string) {
	missing := ""
	out := variableRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := variableRef.FindStringSubmatch(ref)[1]
		v, ok := vars[name]
		if !ok && missing == "" {
			missing = name
		}
		return v
	})
	return out, missing
}

// variableQuery is a query variable's query: a string, or an object
// holding it (Grafana's newer form).
func variableQuery(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(raw, &o)
	return o.Query
}

// promAPI is Prometheus's HTTP API.
type promAPI struct {
	base string
	http *http.Client
}

// get calls path with q and decodes the answer's data into out.
func (p *promAPI) get(ctx context.Context, path string, q url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, trim(string(body), 200))
	}
	if r.Status != "success" {
		return fmt.Errorf("prometheus: %s", r.Error)
	}
	return json.Unmarshal(r.Data, out)
}

// labelValues lists label's values on the series selector matches.
func (p *promAPI) labelValues(ctx context.Context, label, selector string, at time.Time) ([]string, error) {
	var values []string
	q := url.Values{"match[]": {selector}, "start": {unix(at.Add(-10 * time.Minute))}, "end": {unix(at)}}
	err := p.get(ctx, "/api/v1/label/"+label+"/values", q, &values)
	return values, err
}

// series evaluates expr at at and counts the series whose value is a
// number (a quantile of no observations is NaN: the panel would be
// empty).
func (p *promAPI) series(ctx context.Context, expr string, at time.Time) (int, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.get(ctx, "/api/v1/query", url.Values{"query": {expr}, "time": {unix(at)}}, &data); err != nil {
		return 0, err
	}
	var values [][2]any
	switch data.ResultType {
	case "vector":
		var v []struct {
			Value [2]any `json:"value"`
		}
		if err := json.Unmarshal(data.Result, &v); err != nil {
			return 0, err
		}
		for _, s := range v {
			values = append(values, s.Value)
		}
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(data.Result, &v); err != nil {
			return 0, err
		}
		values = append(values, v)
	default:
		return 0, fmt.Errorf("a %s, where a panel charts an instant vector", data.ResultType)
	}
	n := 0
	for _, v := range values {
		s, _ := v[1].(string)
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			n++
		}
	}
	return n, nil
}

func unix(t time.Time) string { return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64) }
