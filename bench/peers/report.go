package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// report is a run's results.
type report struct {
	Machine      machine `json:"machine"`
	Concurrency  int     `json:"concurrency"`
	Rounds       int     `json:"rounds"`
	TrialSeconds float64 `json:"trialSeconds"`
	ClockTicks   int64   `json:"clockTicksPerSecond"`
	Profiled     bool    `json:"profiledVariant"`
	// MemoryLimit is the platform targets' PLATFORM_MEMORY_LIMIT_BYTES
	// (0: none), which decides how Go's collector runs in them.
	MemoryLimit int64         `json:"platformMemoryLimitBytes"`
	Targets     []summary     `json:"targets"`
	Ratios      []ratio       `json:"ratios"`
	Trials      []trialResult `json:"trials"`
	Profiles    []profile     `json:"profiles,omitempty"`
}

// summary is one target's figures over all its trials: medians of the
// per-trial figures, latency percentiles over every round of every trial.
type summary struct {
	Target         string  `json:"target"`
	Note           string  `json:"note"`
	FlowsPerSec    float64 `json:"flowsPerSec"`
	MinFlowsPerSec float64 `json:"minFlowsPerSec"`
	MaxFlowsPerSec float64 `json:"maxFlowsPerSec"`
	P50            float64 `json:"roundP50Us"`
	P99            float64 `json:"roundP99Us"`
	ServerCPU      float64 `json:"serverCpuUsPerFlow"`
	WebhookCPU     float64 `json:"webhookCpuUsPerFlow,omitempty"`
	ClientCPU      float64 `json:"clientCpuUsPerFlow"`
	OthersCores    float64 `json:"othersCores"`
	// TotalCPU is all the benchmark's CPU per flow (server, webhook and
	// client; median of the trials' sums): what a flow costs the machine.
	TotalCPU float64 `json:"totalCpuUsPerFlow"`
	// PeakRSS is the server process's largest resident set over the
	// whole run (warm-up included), in bytes; 0 when unread.
	PeakRSS    int64  `json:"serverPeakRssBytes"`
	Flows      int    `json:"flows"`
	Errors     int    `json:"errors"`
	FirstError string `json:"firstError,omitempty"`
}

// ratio compares two targets' flows/s: the ratio of their medians, and
// the median and range of the ratios paired round by round.
type ratio struct {
	Name      string  `json:"name"`
	Of        string  `json:"of"`
	To        string  `json:"to"`
	Value     float64 `json:"value"`
	PairedMed float64 `json:"pairedMedian"`
	PairedMin float64 `json:"pairedMin"`
	PairedMax float64 `json:"pairedMax"`
	// ByCPU is the ratio of the flows the two would serve per second of
	// the benchmark's own CPU (the inverse ratio of their TotalCPU): what
	// the flows/s ratio tends to however busy the machine's other
	// processes keep it, since all of the benchmark's processes share
	// its cores.
	ByCPU    float64 `json:"byCpu"`
	Goal     float64 `json:"goal,omitempty"`
	Met      *bool   `json:"met,omitempty"`
	MetByCPU *bool   `json:"metByCpu,omitempty"`
}

type profile struct {
	Target      string  `json:"target"`
	Path        string  `json:"path"`
	FlowsPerSec float64 `json:"flowsPerSec"`
	ServerCPU   float64 `json:"serverCpuUsPerFlow"`
}

// summarize computes the targets' figures and the ratios; peak is
// each target's server's largest resident set, by target.
func (r *report) summarize(order []string, peak map[string]int64) {
	byRound := map[string]map[int]float64{}
	for _, name := range order {
		s := summary{Target: name, Note: noteOf(name)}
		var fps, srv, hook, cli, oth, tot []float64
		var lat []time.Duration
		byRound[name] = map[int]float64{}
		for _, t := range r.Trials {
			if t.Target != name {
				continue
			}
			fps, srv, hook, cli, oth = append(fps, t.FlowsPerSec), append(srv, t.ServerCPU), append(hook, t.WebhookCPU), append(cli, t.ClientCPU), append(oth, t.OthersCores)
			tot = append(tot, t.ServerCPU+t.WebhookCPU+t.ClientCPU)
			lat = append(lat, t.lat...)
			s.Flows += t.Flows
			s.Errors += t.Errors
			if s.FirstError == "" {
				s.FirstError = t.FirstError
			}
			if s.MinFlowsPerSec == 0 || t.FlowsPerSec < s.MinFlowsPerSec {
				s.MinFlowsPerSec = t.FlowsPerSec
			}
			s.MaxFlowsPerSec = max(s.MaxFlowsPerSec, t.FlowsPerSec)
			byRound[name][t.Round] = t.FlowsPerSec
		}
		s.FlowsPerSec, s.ServerCPU, s.WebhookCPU, s.ClientCPU, s.OthersCores = median(fps), median(srv), median(hook), median(cli), median(oth)
		s.TotalCPU = median(tot)
		s.P50, s.P99 = percentiles(lat)
		s.PeakRSS = peak[name]
		r.Targets = append(r.Targets, s)
	}
	med, cpu := map[string]float64{}, map[string]float64{}
	for _, s := range r.Targets {
		med[s.Target], cpu[s.Target] = s.FlowsPerSec, s.TotalCPU
	}
	for _, c := range []struct {
		of, to string
		goal   float64
	}{
		{targetBearer, targetSDK, 3},
		{targetPublic, targetEcho, 0.5},
		{targetPublic, targetEchoHook, 0},
		{targetEchoHook, targetEcho, 0},
		{targetPublic, targetSDK, 0},
		{targetBearer, targetPublic, 0},
		{targetPublic, targetPublic + beforeSuffix, 0},
		{targetBearer, targetBearer + beforeSuffix, 0},
		{targetBearer + beforeSuffix, targetSDK, 0},
		{targetPublic + beforeSuffix, targetEcho, 0},
	} {
		if _, ok := byRound[c.of]; !ok || med[c.to] == 0 {
			continue
		}
		if _, ok := byRound[c.to]; !ok {
			continue
		}
		q := ratio{Name: c.of + " / " + c.to, Of: c.of, To: c.to, Value: med[c.of] / med[c.to], Goal: c.goal}
		if cpu[c.of] > 0 {
			q.ByCPU = cpu[c.to] / cpu[c.of]
		}
		var paired []float64
		for round, v := range byRound[c.of] {
			if w := byRound[c.to][round]; w > 0 {
				paired = append(paired, v/w)
			}
		}
		q.PairedMed = median(paired)
		for i, p := range paired {
			if i == 0 || p < q.PairedMin {
				q.PairedMin = p
			}
			q.PairedMax = max(q.PairedMax, p)
		}
		if c.goal > 0 {
			met, metByCPU := q.Value >= c.goal, q.ByCPU >= c.goal
			q.Met, q.MetByCPU = &met, &metByCPU
		}
		r.Ratios = append(r.Ratios, q)
	}
}

// noteOf says what the target name runs.
func noteOf(name string) string {
	if n, ok := strings.CutSuffix(name, beforeSuffix); ok {
		return "as " + n + ", the platform built from -before's checkout"
	}
	return notes[name]
}

func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func (r *report) writeText(w io.Writer) {
	m := r.Machine
	fmt.Fprintf(w, "peer benchmark: two-round flows (tools/call → InputRequiredResult → answered retry → result), %d concurrent, %d rounds × %s per target, targets taking turns\n",
		r.Concurrency, r.Rounds, time.Duration(r.TrialSeconds*float64(time.Second)))
	fmt.Fprintf(w, "date %s · nproc %d · %s · Linux %s · %s · platform %s\n", m.Date, m.CPUs, m.CPUModel, m.Kernel, m.Go, m.Commit)
	if m.Before != "" {
		fmt.Fprintf(w, "before (NAME%s): platform %s\n", beforeSuffix, m.Before)
	}
	fmt.Fprintf(w, "load average before %s, after %s\n", m.LoadBefore, m.LoadAfter)
	if r.MemoryLimit > 0 {
		fmt.Fprintf(w, "platform memory limit %d MiB (PLATFORM_MEMORY_LIMIT_BYTES; the Helm chart gives its own limit the same way)\n", r.MemoryLimit>>20)
	} else {
		fmt.Fprintln(w, "platform memory limit: not given (-memory-limit 0; a platform still reads its cgroup's, if any)")
	}
	if r.Profiled {
		fmt.Fprintln(w, "NOTE: -cpuprofile: every server served net/http/pprof on another port, the platform as the pprof variant (cmd/platform-pprof: the same server package)")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tflows/s\t(min–max)\tround p50\tround p99\tserver CPU/flow\twebhook CPU/flow\tclient CPU/flow\tall CPU/flow\tserver peak RSS\tothers' CPU\tflows\terrors\t")
	for _, s := range r.Targets {
		hook, rss := "–", "–"
		if s.WebhookCPU > 0 {
			hook = fmt.Sprintf("%.0f µs", s.WebhookCPU)
		}
		if s.PeakRSS > 0 {
			rss = fmt.Sprintf("%d MiB", s.PeakRSS>>20)
		}
		fmt.Fprintf(tw, "%s\t%s\t(%s–%s)\t%s\t%s\t%.0f µs\t%s\t%.0f µs\t%.0f µs\t%s\t%.2f cores\t%d\t%d\t\n",
			s.Target, thousands(s.FlowsPerSec), thousands(s.MinFlowsPerSec), thousands(s.MaxFlowsPerSec),
			ms(s.P50), ms(s.P99), s.ServerCPU, hook, s.ClientCPU, s.TotalCPU, rss, s.OthersCores, s.Flows, s.Errors)
	}
	tw.Flush()
	fmt.Fprintln(w, "(flows/s and CPU: medians of the trials; round latency: over every round of every trial; all CPU: server + webhook + client;")
	fmt.Fprintln(w, " others' CPU: what the machine's other processes used meanwhile, of its cores)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "flows/s by round:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "round\t")
	for _, s := range r.Targets {
		fmt.Fprintf(tw, "%s\t", s.Target)
	}
	fmt.Fprintln(tw)
	for round := 1; round <= r.Rounds; round++ {
		fmt.Fprintf(tw, "%d\t", round)
		for _, s := range r.Targets {
			for _, t := range r.Trials {
				if t.Target == s.Target && t.Round == round {
					fmt.Fprintf(tw, "%s\t", thousands(t.FlowsPerSec))
				}
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if len(r.Ratios) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "ratios of flows/s: of the medians; paired round by round (median, range); by CPU: the inverse ratio of all CPU per flow,")
		fmt.Fprintln(w, "which is what the flows/s ratio comes to while the benchmark's processes, sharing the cores, are CPU-bound, whatever share other processes take:")
		verdict := func(met *bool) string {
			if *met {
				return "MET"
			}
			return "NOT MET"
		}
		for _, q := range r.Ratios {
			goal := ""
			if q.Met != nil {
				goal = fmt.Sprintf("  goal ≥ %.1f×: %s (by CPU: %s)", q.Goal, verdict(q.Met), verdict(q.MetByCPU))
			}
			fmt.Fprintf(w, "  %-44s %5.2f×  (paired %.2f×, %.2f–%.2f; by CPU %.2f×)%s\n", q.Name, q.Value, q.PairedMed, q.PairedMin, q.PairedMax, q.ByCPU, goal)
		}
	}
	for _, s := range r.Targets {
		if s.Errors > 0 {
			fmt.Fprintf(w, "\n%s: %d failed flows (not counted); the first: %s\n", s.Target, s.Errors, s.FirstError)
		}
	}
	if len(r.Profiles) > 0 {
		fmt.Fprintln(w, "\nCPU profiles (one more trial each; read with go tool pprof -top FILE):")
		for _, p := range r.Profiles {
			fmt.Fprintf(w, "  %s  %s  (%s flows/s, %.0f µs/flow while profiled)\n", p.Target, p.Path, thousands(p.FlowsPerSec), p.ServerCPU)
		}
	}
	fmt.Fprintln(w, "\ntargets:")
	for _, s := range r.Targets {
		fmt.Fprintf(w, "  %s: %s\n", s.Target, s.Note)
	}
}

// thousands formats a rate rounded to a whole number with thousands
// separators.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// ms formats µs as milliseconds.
func ms(us float64) string {
	if us < 10000 {
		return fmt.Sprintf("%.2f ms", us/1e3)
	}
	return fmt.Sprintf("%.1f ms", us/1e3)
}
