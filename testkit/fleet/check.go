package fleet

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/opsmcp/platform/mcp"
)

// Causes of a clean failure the fleet accepts. Any other failure fails
// the run.
const (
	// CauseKill: the failing round was in flight on the replica that was
	// SIGKILLed, or sent to it before HAProxy saw it gone (over a
	// connection HAProxy had kept open to it: a new connection is refused
	// and HAProxy sends the request to another replica): it ended after
	// the kill and began before the replica was back, and HAProxy names
	// that replica, or none (a connection closed without an answer names
	// none), as its server.
	CauseKill = "kill"
	// CausePG: the failing round overlapped the PostgreSQL outage (from
	// the stop to pgGrace after the start), or HAProxy answered it itself
	// for want of a ready replica (every replica's /readyz fails while
	// the database is down, and HAProxy may take them all out of
	// rotation) before its checks could have seen them ready again
	// (lbGrace after the start).
	CausePG = "pg-outage"
)

// noServer is what HAProxy names as the server of a request it answered
// itself because no server was up.
const noServer = "<NOSRV>"

// lbGrace is how long after PostgreSQL is back HAProxy may still have
// every replica out of rotation: two of its check intervals.
const lbGrace = 2 * haproxyCheckInterval

// cause names the fault that explains a round's clean failure, or ""
// when none does.
func (t *timeline) cause(r *Round) string {
	for _, k := range t.kills {
		if r.Start.Before(k.back) && !r.End.Before(k.at) && (r.Replica == k.replica || r.Replica == "") {
			return CauseKill
		}
	}
	for _, w := range t.pgOutages {
		grace := pgGrace
		if r.Replica == noServer {
			grace = lbGrace
		}
		if r.Start.Before(w.to.Add(grace)) && r.End.After(w.from) {
			return CausePG
		}
	}
	return ""
}

// lost reports whether a round of f was answered by a replica shortly
// before it was killed: such a round's record and span may have died in
// the replica's unwritten batches. The driver may read such an answer a
// little after it sent the signal (the replica wrote it first, and died
// before its batch), so the window reaches killRead past the kill too.
func (t *timeline) lost(f *Flow) bool {
	for _, r := range f.Rounds {
		for _, k := range t.kills {
			if r.answered() && r.Replica == k.replica && r.End.Before(k.at.Add(killRead)) && r.End.After(k.at.Add(-lossWindow)) {
				return true
			}
		}
	}
	return false
}

// assertion is one named check and what broke it.
type assertion struct {
	name     string
	failures []string
	checked  int
}

func (a *assertion) fail(format string, args ...any) {
	a.failures = append(a.failures, fmt.Sprintf(format, args...))
}

func (a *assertion) String() string {
	if len(a.failures) == 0 {
		return fmt.Sprintf("ok   %s (%d checked)", a.name, a.checked)
	}
	ex := a.failures
	if len(ex) > 5 {
		ex = append(ex[:5:5], fmt.Sprintf("… and %d more", len(a.failures)-5))
	}
	return fmt.Sprintf("FAIL %s (%d of %d): %s", a.name, len(a.failures), a.checked, strings.Join(ex, "; "))
}

// check runs every assertion after the drive, stops the fleet (flushing
// the replicas' telemetry), prints the summary line, and returns an error
// naming each failed assertion.
func (fl *fleet) check(ctx context.Context) error {
	fl.mu.Lock()
	flows := append([]*Flow(nil), fl.flows...)
	tl := fl.timeline
	fl.mu.Unlock()

	wrong := &assertion{name: "no-round-wrongly-rejected"}
	clean := &assertion{name: "failures-clean-and-explained"}
	record := &assertion{name: "flow-record-complete"}
	traces := &assertion{name: "traces-link-every-round"}
	faults := &assertion{name: "faults-applied"}
	spread := &assertion{name: "rounds-spread-over-replicas"}
	panics := &assertion{name: "no-panic-clean-exit"}
	tasks := &assertion{name: "tasks-survive-faults"}
	deploys := &assertion{name: "destructive-rounds-recorded"}
	dashboard := &assertion{name: "dashboard-queries-answer"}
	legacyKill := &assertion{name: "legacy-stream-survives-kill"}
	delivered := &assertion{name: "catalogue-changes-delivered"}

	// Rounds and failures, from the client's side: every failed attempt
	// must be clean and explained by a fault; a flow that failed after
	// the driver acted on a clean failure (sent the round again) failed
	// with the second attempt's class.
	var completed, exempt, traced []*Flow
	causes := map[string]int{}
	examples := map[string]int{} // the first failure of each kind is logged
	retried, recovered := 0, 0
	failed := 0
	for _, f := range flows {
		wrong.checked++
		clean.checked++
		for i := range f.Rounds {
			r := &f.Rounds[i]
			if r.Err == nil {
				continue
			}
			switch {
			case r.Class == ClassRejected && f.Tool == deployTool && consumedBefore(f, i):
				// A destructive round sent again after an attempt that
				// reached a replica lost to a fault: that attempt consumed
				// its state, so the platform refuses to run it twice. The
				// record must say it ran (destructive-rounds-recorded).
				causes["consumed by a lost attempt"]++
			case !actionable(r.Class):
				clean.fail("%s", f.describe(r))
				causes[r.Class]++
			default:
				c := tl.cause(r)
				if c == "" {
					clean.fail("%s, during no fault that explains it", f.describe(r))
					c = "unexplained"
				} else if examples[c+r.Class+r.Detail]++; examples[c+r.Class+r.Detail] == 1 {
					fmt.Fprintf(fl.cfg.Log, "fleet: explained by %s: %s (%s)\n", c, f.describe(r), f.Era)
				}
				causes[c]++
			}
			// A round that failed and was sent again: counted once, as
			// answered in the end or not.
			if i+1 < len(f.Rounds) && f.Rounds[i+1].N == r.N && (i == 0 || f.Rounds[i-1].N != r.N || f.Rounds[i-1].answered()) {
				retried++
				for _, later := range f.Rounds[i+1:] {
					if later.N == r.N && later.answered() {
						recovered++
						break
					}
				}
			}
		}
		switch {
		case f.Completed && tl.lost(f) && f.Tool != deployTool:
			// Completed, but the killed replica may have taken its
			// record and spans with it: not checked for those.
			exempt = append(exempt, f)
		case f.Completed:
			// A destructive tool's rounds are recorded before they are
			// answered: no exemption from the record, only from traces
			// (spans leave a replica in batches).
			completed = append(completed, f)
			if !tl.lost(f) {
				traced = append(traced, f)
			}
		case f.Failure == nil:
			wrong.fail("%s flow %s ended neither completed nor failed", f.Tool, f.Ref)
		default:
			failed++
			if last := f.Rounds[len(f.Rounds)-1]; last.Err == nil {
				// Failed on an answer: a tool error or a wrong result.
				wrong.fail("%s flow %s round %d on %q: %s: %s", f.Tool, f.Ref, last.N, last.Replica, f.Failure.Class, f.Failure.Detail)
				causes[f.Failure.Class]++
			}
		}
	}

	fl.checkFaults(faults, tl)
	fl.checkSpread(spread, flows)
	// The record is read while the replicas run.
	time.Sleep(time.Second) // the recorders' last batches (100 ms each)
	fl.checkRecords(ctx, record, completed)
	fl.checkDeploys(ctx, deploys, flows)
	// What the killed replica took with it, for the summary: the
	// exempt flows checked the same way, their failures only counted.
	lostRecord := &assertion{name: "lost-record"}
	fl.checkRecords(ctx, lostRecord, exempt)
	// While the replicas serve and Prometheus scrapes them.
	fl.checkDashboard(ctx, dashboard)
	tsFigures := fl.checkTSCalls(legacyKill)
	// Stopping the replicas flushes their spans to the receiver.
	for _, r := range fl.replicas {
		panics.checked++
		if err := r.stop(); err != nil {
			panics.fail("%s: %v", r.name, err)
		}
		for _, l := range r.panics() {
			panics.fail("%s log: %s", r.name, trim(l, 300))
		}
	}
	fl.checkTraces(traces, traced)
	lostTraces := &assertion{name: "lost-traces"}
	fl.checkTraces(lostTraces, exempt)
	loss := fmt.Sprintf("%d flows exempt from record/trace checks (a round answered ≤%s before a SIGKILL), of which %d miss rounds in the record and %d in the traces",
		len(exempt), lossWindow, len(lostRecord.failures), len(lostTraces.failures))
	for _, l := range append(lostRecord.failures, lostTraces.failures...) {
		fmt.Fprintln(fl.cfg.Log, "fleet: lost with the killed replica:", l)
	}

	loss += "; " + fl.checkTasks(tasks, tl) + "; " + tsFigures

	fl.checkDelivered(delivered, tl)
	all := []*assertion{wrong, clean, record, traces, faults, spread, panics, tasks, deploys, dashboard, legacyKill, delivered}
	var failedNames []string
	for _, a := range all {
		fmt.Fprintln(fl.cfg.Log, "fleet:", a)
		if len(a.failures) > 0 {
			failedNames = append(failedNames, a.name)
		}
	}
	fl.summary(flows, failed, loss, causes, retried, recovered, tl, failedNames)
	if len(failedNames) > 0 {
		return fmt.Errorf("%d assertion(s) failed: %s", len(failedNames), strings.Join(failedNames, ", "))
	}
	return nil
}

// describe names a failed attempt: its flow, when it ran, on which
// replica, and what came back.
func (f *Flow) describe(r *Round) string {
	return fmt.Sprintf("%s flow %s round %d (%s–%s on %q): %s: %s", f.Tool, f.Ref, r.N,
		r.Start.Format("15:04:05.000"), r.End.Format("15:04:05.000"), r.Replica, r.Class, r.Detail)
}

func trim(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// checkFaults asserts every planned fault happened: each rotation went
// through its three phases and retired the old key; each killed replica
// came back; each outage ended with the server back; each catalogue
// item was added, served by every replica, used, and removed everywhere.
func (fl *fleet) checkFaults(a *assertion, tl timeline) {
	for _, n := range tl.notes {
		a.checked++
		a.fail("%s", n)
	}
	cycles := max(1, int(fl.cfg.Duration/CycleLength))
	for what, got := range map[string]int{"rotations": len(tl.rotations), "kills": len(tl.kills), "Vault outages": len(tl.vaultOutages),
		"PostgreSQL outages": len(tl.pgOutages), "catalogue changes": len(tl.catalogue)} {
		a.checked++
		if got != cycles {
			a.fail("%d %s in %d cycle(s)", got, what, cycles)
		}
	}
	for _, r := range tl.rotations {
		a.checked++
		phases := strings.Join(r.phases, "→")
		if r.done.IsZero() || r.newMinter == r.oldMinter || r.oldRemaining || !strings.Contains(phases, "staged") || !strings.Contains(phases, "promoted") {
			a.fail("rotation at %s: phases %s, minter %s → %s, old key still in the ring: %v", r.at.Format("15:04:05"), phases, r.oldMinter, r.newMinter, r.oldRemaining)
		}
	}
	for _, c := range tl.catalogue {
		a.checked++
		if c.visible.IsZero() || c.gone.IsZero() || c.flows == 0 {
			a.fail("catalogue item %s: visible everywhere %v, gone everywhere %v, %d flows used it", c.name, !c.visible.IsZero(), !c.gone.IsZero(), c.flows)
		}
	}
}

// checkDelivered asserts that the catalogue change each cycle made as
// PostgreSQL came back (its notification likely lost to the replicas'
// reconnecting listeners) was served by every replica before the cycle
// ended.
func (fl *fleet) checkDelivered(a *assertion, tl timeline) {
	cycles := max(1, int(fl.cfg.Duration/CycleLength))
	a.checked++
	if len(tl.restartChanges) != cycles {
		a.fail("%d catalogue changes made as PostgreSQL came back, in %d cycle(s)", len(tl.restartChanges), cycles)
	}
	for _, c := range tl.restartChanges {
		a.checked++
		if !c.delivered {
			a.fail("cycle %d: the change made as PostgreSQL came back: %s", c.cycle, c.err)
		}
	}
}

// checkSpread asserts the balancer spread the work: every replica
// answered rounds; at least half of the completed 2026-07-28 flows had
// rounds on two replicas or more (so their state really crossed
// replicas; with round-robin and concurrent flows, a flow's rounds land
// on one replica only by chance); and at least a third of the legacy
// answers were posted to a replica other than the one holding their call
// (so the relay between replicas carried them).
func (fl *fleet) checkSpread(a *assertion, flows []*Flow) {
	per := map[string]int{}
	var modern, crossed int
	for _, f := range flows {
		seen := map[string]bool{}
		for _, r := range f.answeredRounds() {
			per[r.Replica]++
			seen[r.Replica] = true
		}
		if f.Completed && f.Era == mcp.Version {
			modern++
			if len(seen) > 1 {
				crossed++
			}
		}
	}
	for _, r := range fl.replicas {
		a.checked++
		if per[r.name] == 0 {
			a.fail("%s answered no round", r.name)
		}
	}
	a.checked++
	if modern == 0 || crossed*2 < modern {
		a.fail("only %d of %d completed %s flows had rounds on more than one replica", crossed, modern, mcp.Version)
	}
	for _, e := range fl.eras {
		if le, ok := e.(*legacyEra); ok {
			a.checked++
			if n, r := le.answers.Load(), le.relayed.Load(); n == 0 || r*3 < n {
				a.fail("only %d of %d legacy answers were posted to a replica other than their call's", r, n)
			}
		}
	}
}

// checkRecords asserts the flow record (GET /tenants/fleet/flows/{id})
// shows every completed flow as completed, with every round, each naming
// the replica HAProxy says answered it.
// consumedBefore reports whether an earlier attempt of f's round i
// failed in a way that may have reached a replica: for a destructive
// tool, that attempt may have consumed the round's state.
func consumedBefore(f *Flow, i int) bool {
	for _, r := range f.Rounds[:i] {
		if r.N == f.Rounds[i].N && r.Err != nil && actionable(r.Class) {
			return true
		}
	}
	return false
}

// checkDeploys asks the record about every deploy the backend saw
// confirmed but the client did not see complete (a SIGKILL, a refused
// retry): the record must know it ran, as running at its confirmed round
// or past it. Completed deploys are checked with every completed flow,
// with no exemption.
func (fl *fleet) checkDeploys(ctx context.Context, a *assertion, flows []*Flow) {
	for _, f := range flows {
		if f.Tool != deployTool {
			continue
		}
		a.checked++
		id := fl.hook.deployed(f.Ref)
		if f.Completed || id == "" {
			continue
		}
		var rec flowRecord
		if _, err := fl.admin.call(ctx, "GET", "/tenants/"+tenantSlug+"/flows/"+id, nil, &rec); err != nil {
			a.fail("%s %s: the backend ran it, the record has %v", f.Tool, id, err)
			continue
		}
		if rec.Flow.Rounds < 2 || (rec.Flow.State != "running" && rec.Flow.State != "completed" && rec.Flow.State != "failed") {
			a.fail("%s %s: the backend ran it, the record says %s at round %d", f.Tool, id, rec.Flow.State, rec.Flow.Rounds)
		}
	}
}

func (fl *fleet) checkRecords(ctx context.Context, a *assertion, flows []*Flow) {
	var mu sync.Mutex
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, f := range flows {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			problem := fl.recordProblem(ctx, f)
			mu.Lock()
			defer mu.Unlock()
			a.checked++
			if problem != "" {
				a.fail("%s %s (%s): %s", f.Tool, f.FlowID, f.Rounds[0].Start.Format("15:04:05.000"), problem)
			}
		}()
	}
	wg.Wait()
}

func (fl *fleet) recordProblem(ctx context.Context, f *Flow) string {
	var rec flowRecord
	var err error
	// The admin API goes through HAProxy too; a read that fails (not one
	// that answers) is retried.
	for attempt := 0; attempt < 3; attempt++ {
		var status int
		status, err = fl.admin.call(ctx, "GET", "/tenants/"+tenantSlug+"/flows/"+f.FlowID, nil, &rec)
		if err == nil || status == 404 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		return err.Error()
	}
	answered := f.answeredRounds()
	retried := len(answered) < len(f.Rounds)
	var p []string
	if rec.Flow.State != "completed" {
		p = append(p, "state "+rec.Flow.State)
	}
	last := answered[len(answered)-1].N
	if rec.Flow.Rounds != last {
		p = append(p, fmt.Sprintf("%d rounds, the flow's last was round %d", rec.Flow.Rounds, last))
	}
	// Each answered round is recorded with the replica that answered it.
	// An attempt that failed when its replica was killed may have left a
	// record of its own (its start), so a retried flow may list more.
	for _, r := range answered {
		if !slices.ContainsFunc(rec.Rounds, func(x recordRound) bool { return x.N == r.N && x.Replica == r.Replica }) {
			var got []string
			for _, x := range rec.Rounds {
				got = append(got, fmt.Sprintf("%d@%s", x.N, x.Replica))
			}
			p = append(p, fmt.Sprintf("round %d answered by %q is not in the record (%s)", r.N, r.Replica, strings.Join(got, " ")))
		}
	}
	if len(rec.Rounds) < len(answered) || (!retried && len(rec.Rounds) != len(answered)) {
		p = append(p, fmt.Sprintf("%d rounds listed for %d answered", len(rec.Rounds), len(answered)))
	}
	return strings.Join(p, ", ")
}

// answeredRounds are the rounds that got a result, in order.
func (f *Flow) answeredRounds() []*Round {
	var out []*Round
	for i := range f.Rounds {
		if f.Rounds[i].answered() {
			out = append(out, &f.Rounds[i])
		}
	}
	return out
}

// checkTraces asserts the OTLP receiver got a SERVER span for every round
// of every completed flow: a child of the client's span for that round,
// in the flow's trace, naming the flow and the round, exported by the
// replica that answered, linked to the previous round's span (the link
// the sealed state carries across replicas); and one flow span linked to
// the final round.
func (fl *fleet) checkTraces(a *assertion, flows []*Flow) {
	for _, f := range flows {
		a.checked++
		var prev spanFacts
		var p []string
		answered := f.answeredRounds()
		for i, r := range answered {
			// A 2026-07-28 round has a client span of its own; the rounds
			// of a legacy call all have the call's.
			var spans []spanFacts
			for _, s := range fl.spans.round(r.ClientSpan) {
				if s.Round == int64(r.N) || s.Round == 0 {
					spans = append(spans, s)
				}
			}
			if len(spans) != 1 {
				p = append(p, fmt.Sprintf("round %d: %d spans", r.N, len(spans)))
				prev = spanFacts{}
				continue
			}
			s := spans[0]
			if s.TraceID != f.TraceID || s.FlowID != f.FlowID || s.Round != int64(r.N) || s.Replica != r.Replica {
				p = append(p, fmt.Sprintf("round %d: span in trace %s, flow %s, round %d, from %s", r.N, s.TraceID, s.FlowID, s.Round, s.Replica))
			}
			if i > 0 && prev.SpanID != "" && !s.linksTo(prev) {
				p = append(p, fmt.Sprintf("round %d: no link to round %d's span", r.N, answered[i-1].N))
			}
			prev = s
		}
		fs := fl.spans.flow(f.FlowID)
		switch {
		case len(fs) != 1:
			p = append(p, fmt.Sprintf("%d flow spans", len(fs)))
		case prev.SpanID != "" && !fs[0].linksTo(prev):
			p = append(p, "flow span not linked to the final round")
		case fs[0].Rounds != int64(answered[len(answered)-1].N):
			p = append(p, fmt.Sprintf("flow span says %d rounds", fs[0].Rounds))
		}
		if len(p) > 0 {
			a.fail("%s %s: %s", f.Tool, f.FlowID, strings.Join(p, ", "))
		}
	}
}

// percentile returns the p-th percentile (0–100) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p / 100 * float64(len(sorted)-1))
	return sorted[i]
}

// summary prints the one line of figures.
func (fl *fleet) summary(flows []*Flow, failed int, loss string, causes map[string]int, retried, recovered int, tl timeline, failedNames []string) {
	secs := tl.driveEnd.Sub(tl.driveStart).Seconds()
	per := map[string]int{}
	var lat []time.Duration
	rounds := 0
	for _, f := range flows {
		for _, r := range f.answeredRounds() {
			rounds++
			per[r.Replica]++
			lat = append(lat, r.End.Sub(r.Start))
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	byEra := map[string][]time.Duration{}
	for _, f := range flows {
		for _, r := range f.answeredRounds() {
			byEra[f.Era] = append(byEra[f.Era], r.End.Sub(r.Start))
		}
	}
	var eraLat []string
	for _, e := range fl.eras {
		l := byEra[e.Name()]
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		eraLat = append(eraLat, fmt.Sprintf("%s %s/%s", e.Name(), ms(percentile(l, 50)), ms(percentile(l, 99))))
	}
	var rep []string
	for _, r := range fl.replicas {
		rep = append(rep, fmt.Sprintf("%s %.0f/s", r.name, float64(per[r.name])/secs))
	}
	var fc []string
	for c, n := range causes {
		fc = append(fc, fmt.Sprintf("%s %d", c, n))
	}
	sort.Strings(fc)
	if len(fc) == 0 {
		fc = []string{"none"}
	}
	result := "PASS"
	if len(failedNames) > 0 {
		result = "FAIL (" + strings.Join(failedNames, ", ") + ")"
	}
	var eraFigures []string
	for _, e := range fl.eras {
		if fe, ok := e.(interface{ figures() string }); ok {
			eraFigures = append(eraFigures, fe.figures())
		}
	}
	// A legacy round after the first: its answer handed over in process
	// (posted to the replica holding the call) or relayed.
	var direct, relayed []time.Duration
	for _, f := range flows {
		if f.Era != legacyVersion {
			continue
		}
		for _, r := range f.answeredRounds() {
			switch {
			case r.N == 1:
			case r.Relayed:
				relayed = append(relayed, r.End.Sub(r.Start))
			default:
				direct = append(direct, r.End.Sub(r.Start))
			}
		}
	}
	if len(direct)+len(relayed) > 0 {
		slices.Sort(direct)
		slices.Sort(relayed)
		eraFigures = append(eraFigures, fmt.Sprintf("legacy rounds after an answer, p50/p99: handed over %s/%s, relayed %s/%s",
			ms(percentile(direct, 50)), ms(percentile(direct, 99)), ms(percentile(relayed, 50)), ms(percentile(relayed, 99))))
	}
	if len(eraFigures) > 0 {
		loss += "; " + strings.Join(eraFigures, "; ")
	}
	line := fmt.Sprintf("fleet %s, %s: %.0f s, %d flows at a time (think %s), eras %s: %d flows (%d completed, %d failed), %d rounds answered (%.0f/s; %s), round latency p50 %s p99 %s (%s); failed rounds by cause: %s (%d rounds sent again after failing, %d of them answered in the end); %s; faults: %d rotation(s), %d SIGKILL(s), %d Vault and %d PostgreSQL outage(s) of %s, %d catalogue add/remove; %s; %d spans received; %s",
		time.Now().UTC().Format("2006-01-02 15:04Z"), fl.cfg.Machine, secs, fl.cfg.Concurrency, fl.cfg.Think, fl.eraNames(),
		len(flows), len(flows)-failed, failed, rounds, float64(rounds)/secs, strings.Join(rep, ", "),
		ms(percentile(lat, 50)), ms(percentile(lat, 99)), strings.Join(eraLat, ", "), strings.Join(fc, ", "), retried, recovered, loss,
		len(tl.rotations), len(tl.kills), len(tl.vaultOutages), len(tl.pgOutages), fl.cfg.Outage, len(tl.catalogue), propagationFigures(tl), fl.spans.count(), result)
	if fl.cfg.Summary != nil {
		fmt.Fprintln(fl.cfg.Summary, line)
	}
}

// propagationFigures sums up how long catalogue changes took to be
// served by each replica, from their commit.
func propagationFigures(tl timeline) string {
	ds := slices.Clone(tl.propagation)
	if len(ds) == 0 {
		return "no catalogue change measured"
	}
	slices.Sort(ds)
	return fmt.Sprintf("catalogue changes served by every replica %s (p50) %s (p99) after their commit, of %d (change, replica) pairs",
		ms(percentile(ds, 50)), ms(percentile(ds, 99)), len(ds))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
