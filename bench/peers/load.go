package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"
)

// trialResult is one target's figures for one trial.
type trialResult struct {
	Target  string  `json:"target"`
	Round   int     `json:"round"` // 0 for warm-up and profiling trials
	Flows   int     `json:"flows"`
	Errors  int     `json:"errors"`
	Seconds float64 `json:"seconds"`
	// FlowsPerSec counts completed, validated flows only.
	FlowsPerSec float64 `json:"flowsPerSec"`
	// Per completed flow, in µs of CPU (user + system): the target's
	// server process, the platform's webhook process, and the load
	// client (this process).
	ServerCPU  float64 `json:"serverCpuUsPerFlow"`
	WebhookCPU float64 `json:"webhookCpuUsPerFlow,omitempty"`
	ClientCPU  float64 `json:"clientCpuUsPerFlow"`
	// OthersCores is the CPU the machine's other processes used during
	// the trial, in cores: what shared the machine with the benchmark.
	OthersCores float64 `json:"othersCores"`
	P50         float64 `json:"roundP50Us"`
	P99         float64 `json:"roundP99Us"`
	FirstError  string  `json:"firstError,omitempty"`

	lat []time.Duration
}

// trial drives t's workers for d, each running whole flows back to back,
// and reads the CPU the processes involved used meanwhile.
func trial(ctx context.Context, t *target, d time.Duration) (trialResult, error) {
	pids := []string{"self", t.serverPID}
	if t.hookPID != "" {
		pids = append(pids, t.hookPID)
	}
	cpu0, busy0, err := readCPU(pids)
	if err != nil {
		return trialResult{}, err
	}
	for _, w := range t.workers {
		w.lat, w.flows, w.errs, w.firstErr = w.lat[:0], 0, 0, nil
	}
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for _, w := range t.workers {
		wg.Go(func() {
			// Every worker runs at least one flow, however late it is
			// scheduled; the rate divides by the time all took.
			for first := true; first || ctx.Err() == nil && time.Now().Before(deadline); first = false {
				if err := w.flow(&w.lat); err != nil {
					w.errs++
					if w.firstErr == nil {
						w.firstErr = err
					}
					// A failing target must not turn the client into a
					// busy loop.
					time.Sleep(10 * time.Millisecond)
					continue
				}
				w.flows++
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, busy1, err := readCPU(pids)
	if err != nil {
		return trialResult{}, err
	}
	r := trialResult{Target: t.Name, Seconds: elapsed.Seconds()}
	for _, w := range t.workers {
		r.Flows += w.flows
		r.Errors += w.errs
		if r.FirstError == "" && w.firstErr != nil {
			r.FirstError = w.firstErr.Error()
		}
		r.lat = append(r.lat, w.lat...)
	}
	r.FlowsPerSec = float64(r.Flows) / elapsed.Seconds()
	var ours time.Duration
	for i := range pids {
		ours += cpu1[i] - cpu0[i]
	}
	r.OthersCores = max(0, (busy1-busy0-ours).Seconds()/elapsed.Seconds())
	if r.Flows > 0 {
		per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(r.Flows) }
		r.ClientCPU = per(cpu1[0] - cpu0[0])
		r.ServerCPU = per(cpu1[1] - cpu0[1])
		if t.hookPID != "" {
			r.WebhookCPU = per(cpu1[2] - cpu0[2])
		}
	}
	r.P50, r.P99 = percentiles(r.lat)
	return r, ctx.Err()
}

func readCPU(pids []string) ([]time.Duration, time.Duration, error) {
	out := make([]time.Duration, len(pids))
	for i, p := range pids {
		var err error
		if out[i], err = procCPU(p); err != nil {
			return nil, 0, fmt.Errorf("reading CPU time: %w", err)
		}
	}
	busy, err := machineBusy()
	return out, busy, err
}

// percentiles are the 50th and 99th percentiles of lat, in µs.
func percentiles(lat []time.Duration) (p50, p99 float64) {
	if len(lat) == 0 {
		return 0, 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	at := func(q float64) float64 { return float64(s[int(q*float64(len(s)-1))].Nanoseconds()) / 1e3 }
	return at(0.50), at(0.99)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// profileTrial runs one more trial of t while its server's pprof
// listener records a CPU profile of it, and writes the profile to path.
func profileTrial(ctx context.Context, t *target, d time.Duration, path string) (trialResult, error) {
	secs := max(1, int(d.Seconds()))
	type got struct {
		body []byte
		err  error
	}
	done := make(chan got, 1)
	go func() {
		resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", t.pprofAddr, secs))
		if err != nil {
			done <- got{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("pprof: HTTP %d: %s", resp.StatusCode, snippet(b))
		}
		done <- got{b, err}
	}()
	r, err := trial(ctx, t, time.Duration(secs)*time.Second)
	if err != nil {
		return r, err
	}
	g := <-done
	if g.err != nil {
		return r, g.err
	}
	return r, os.WriteFile(path, g.body, 0o644)
}
