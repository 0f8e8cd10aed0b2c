package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/opsmcp/platform/client"

	"github.com/opsmcp/platform/mcp"
)

// drive runs Concurrency flows at a time, of every era, for the
// configured duration, while the faults of each cycle are applied in
// sequence; then it lets the flows in flight finish.
func (fl *fleet) drive(ctx context.Context) {
	cycles := max(1, int(fl.cfg.Duration/CycleLength))
	duration := max(fl.cfg.Duration, CycleLength)
	fl.logf("driving %d flows at a time for %s (%d fault cycle(s) of %s)", fl.cfg.Concurrency, duration, cycles, CycleLength)
	stop := make(chan struct{})
	var workers sync.WaitGroup
	fl.timeline.driveStart = time.Now()
	for w := 0; w < fl.cfg.Concurrency; w++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			fl.worker(ctx, w, stop)
		}()
	}
	for w := 0; w < taskWorkers; w++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			fl.tasks.worker(ctx, w, stop)
		}()
	}
	faultsDone := make(chan struct{})
	go func() {
		defer close(faultsDone)
		for c := 0; c < cycles; c++ {
			fl.cycle(ctx, c, fl.timeline.driveStart.Add(time.Duration(c)*CycleLength))
		}
	}()
	select {
	case <-ctx.Done():
	case <-time.After(duration):
	}
	<-faultsDone // a cycle's last fault may run past the duration
	close(stop)
	fl.timeline.driveEnd = time.Now()
	workers.Wait()
	fl.logf("drive over: %d flows, %d tasks", len(fl.flows), len(fl.tasks.runs()))
}

// worker runs flows one after another until stop.
func (fl *fleet) worker(ctx context.Context, w int, stop <-chan struct{}) {
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		era := fl.eras[(w+n)%len(fl.eras)]
		tool, extra := fl.pickTool()
		if tool == deployTool && era.Name() != mcp.Version {
			// A legacy call is one stream: a round refused for want of
			// its record (the database down) reaches the client as an
			// error in it, not as a 503 it can send again. The
			// destructive tool is driven in the 2026-07-28 era.
			tool = quickTool
		}
		f := fl.newFlow(era, tool)
		// A flow is never cut short by the end of the drive: it runs to
		// its end, each round bounded by the round timeout.
		era.Run(context.WithoutCancel(ctx), f)
		if extra != nil {
			extra.inFlight.Done()
		}
		fl.mu.Lock()
		fl.flows = append(fl.flows, f)
		fl.mu.Unlock()
	}
}

// pickTool chooses the next flow's tool: the three-round tool half the
// time, else the two-round one, or a catalogue fault's added tool while
// it is there.
func (fl *fleet) pickTool() (string, *extraItems) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	switch n := pick(5); {
	case n == 4 && fl.extra != nil:
		fl.extra.inFlight.Add(1)
		fl.extra.flows++
		return fl.extra.tool, fl.extra
	case n < 2:
		return orderTool, nil
	case n == 2:
		return deployTool, nil
	default:
		return quickTool, nil
	}
}

// cycle applies one cycle's faults in sequence, each at its offset from
// start (or at once, when the previous one ran late).
func (fl *fleet) cycle(ctx context.Context, c int, start time.Time) {
	at := func(offset time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Until(start.Add(offset))):
			return true
		}
	}
	victim := fl.replicas[(c+1)%len(fl.replicas)]
	var ts *tsCall
	steps := []struct {
		offset time.Duration
		name   string
		run    func(context.Context) error
	}{
		{3 * time.Second, "key rotation", fl.rotate},
		{9 * time.Second, "catalogue add", fl.catalogueAdd},
		{12500 * time.Millisecond, "a legacy client's question waits", func(ctx context.Context) error {
			var err error
			ts, err = fl.startTSCall(ctx, c+1)
			if ts != nil {
				fl.mu.Lock()
				fl.tsCalls = append(fl.tsCalls, ts)
				fl.mu.Unlock()
			}
			return err
		}},
		{15 * time.Second, "SIGKILL of a replica", func(ctx context.Context) error {
			// The replica holding the legacy client's stream, when known;
			// the client answers while it is down.
			v, why := victim, "the cycle's turn"
			if ts != nil {
				for _, r := range fl.replicas {
					if r.name == ts.holder {
						v, why, ts.killed = r, "it holds the legacy client's stream", true
					}
				}
				time.AfterFunc(tsAnswerAfter, ts.answer)
			}
			fl.logf("cycle %d: SIGKILL %s (%s)", c+1, v.name, why)
			return fl.killReplica(ctx, v)
		}},
		{24 * time.Second, "Vault outage", fl.vaultOutage},
		{33 * time.Second, "PostgreSQL outage", fl.pgOutage},
		{33 * time.Second, "a catalogue change as PostgreSQL comes back", func(ctx context.Context) error {
			return fl.changeAsDatabaseReturns(ctx, c, start.Add(CycleLength))
		}},
		{40 * time.Second, "catalogue remove", fl.catalogueRemove},
	}
	for _, s := range steps {
		if !at(s.offset) {
			return
		}
		fl.logf("cycle %d: %s", c+1, s.name)
		if err := s.run(ctx); err != nil {
			fl.note(fmt.Sprintf("cycle %d: %s: %v", c+1, s.name, err))
		}
	}
}

// note records a fault that could not be applied as planned: an
// assertion failure of its own.
func (fl *fleet) note(msg string) {
	fl.logf("FAULT NOT APPLIED: %s", msg)
	fl.mu.Lock()
	defer fl.mu.Unlock()
	fl.timeline.notes = append(fl.timeline.notes, msg)
}

// rotate starts a rotation through the admin API and follows the ring
// (in the background) through its three phases: staged (the new key
// verify-only), promoted (the new key mints), steady (the old key
// retired).
func (fl *fleet) rotate(ctx context.Context) error {
	var before keyRing
	if err := fl.admin.do(ctx, "GET", "/tenants/"+tenantSlug+"/keys", nil, &before); err != nil {
		return err
	}
	var after keyRing
	if err := fl.admin.do(ctx, "POST", "/tenants/"+tenantSlug+"/keys/rotate", nil, &after); err != nil {
		return err
	}
	rot := rotation{at: time.Now(), oldMinter: before.minter(), phases: []string{after.Phase}}
	fl.mu.Lock()
	fl.timeline.rotations = append(fl.timeline.rotations, rot)
	i := len(fl.timeline.rotations) - 1
	fl.mu.Unlock()
	go fl.followRotation(ctx, i)
	return nil
}

// followRotation polls the ring until the rotation is over (or a minute
// has passed), recording each phase it sees.
func (fl *fleet) followRotation(ctx context.Context, i int) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(250 * time.Millisecond)
		var ring keyRing
		// Errors are expected while PostgreSQL or Vault is down.
		if fl.admin.do(ctx, "GET", "/tenants/"+tenantSlug+"/keys", nil, &ring) != nil {
			continue
		}
		fl.mu.Lock()
		rot := &fl.timeline.rotations[i]
		if last := rot.phases[len(rot.phases)-1]; last != ring.Phase {
			rot.phases = append(rot.phases, ring.Phase)
		}
		rot.newMinter = ring.minter()
		rot.oldRemaining = false
		for _, id := range ring.ids() {
			if id == rot.oldMinter {
				rot.oldRemaining = true
			}
		}
		done := ring.Phase == "steady" && !rot.oldRemaining
		if done {
			rot.done = time.Now()
		}
		fl.mu.Unlock()
		if done {
			fl.logf("rotation over: %s → %s", rot.oldMinter, ring.minter())
			return
		}
	}
}

// catalogueAdd adds a tool, a prompt and a resource, waits until every
// replica lists the tool, then lets flows use it.
func (fl *fleet) catalogueAdd(ctx context.Context) error {
	fl.mu.Lock()
	fl.extras++
	n := fl.extras
	fl.mu.Unlock()
	x := &extraItems{
		tool:     fmt.Sprintf("%s%d", extraPrefix, n),
		prompt:   fmt.Sprintf("fleet_note_%d", n),
		resource: fmt.Sprintf("fleet_doc_%d", n),
	}
	ch := catalogueChange{name: x.tool, added: time.Now()}
	if err := fl.addTool(ctx, toolDefinition(x.tool, fl.hookURL)); err != nil {
		return err
	}
	committed := time.Now()
	if err := fl.admin.do(ctx, "POST", "/tenants/"+tenantSlug+"/prompts", map[string]any{
		"name": x.prompt, "description": "fleet test prompt",
		"messages": []map[string]any{{"role": "user", "content": map[string]any{"type": "text", "text": "note " + x.prompt}}},
	}, nil); err != nil {
		return err
	}
	if err := fl.admin.do(ctx, "POST", "/tenants/"+tenantSlug+"/resources", map[string]any{
		"uri": fmt.Sprintf("fleet://docs/%d", n), "name": x.resource, "mimeType": "text/plain", "text": "fleet note",
	}, nil); err != nil {
		return err
	}
	if err := fl.servedEverywhere(ctx, "tool "+x.tool+" added", committed, committed.Add(30*time.Second), listed(x.tool)); err != nil {
		return err
	}
	ch.visible = time.Now()
	fl.mu.Lock()
	fl.extra = x
	fl.timeline.catalogue = append(fl.timeline.catalogue, ch)
	fl.mu.Unlock()
	return nil
}

// catalogueRemove stops new flows on the added tool, waits for those in
// flight, deletes the three items and waits until no replica lists the
// tool.
func (fl *fleet) catalogueRemove(ctx context.Context) error {
	fl.mu.Lock()
	x := fl.extra
	fl.extra = nil
	fl.mu.Unlock()
	if x == nil {
		return fmt.Errorf("nothing to remove: the add did not happen")
	}
	x.inFlight.Wait()
	removed := time.Now()
	for _, path := range []string{"/tools/" + x.tool, "/prompts/" + x.prompt, "/resources/" + x.resource} {
		if err := fl.admin.do(ctx, "DELETE", "/tenants/"+tenantSlug+path, nil, nil); err != nil {
			return err
		}
	}
	committed := time.Now()
	gone := func(tools []client.Tool) bool { return !listed(x.tool)(tools) }
	if err := fl.servedEverywhere(ctx, "tool "+x.tool+" removed", committed, committed.Add(30*time.Second), gone); err != nil {
		return err
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for i := range fl.timeline.catalogue {
		if fl.timeline.catalogue[i].name == x.tool {
			fl.timeline.catalogue[i].removed, fl.timeline.catalogue[i].gone, fl.timeline.catalogue[i].flows = removed, time.Now(), x.flows
		}
	}
	return nil
}

// changeAsDatabaseReturns changes the quick tool's description as soon
// as PostgreSQL accepts writes again, while the replicas' notification
// listeners are still reconnecting (so its notification may reach none
// of them), and waits until every replica serves it: each must catch up
// on the change feed, before the cycle ends.
func (fl *fleet) changeAsDatabaseReturns(ctx context.Context, c int, end time.Time) error {
	desc := fmt.Sprintf("fleet test tool, changed as PostgreSQL came back in cycle %d", c+1)
	def := toolDefinition(quickTool, fl.hookURL)
	def["description"] = desc
	rc := restartChange{cycle: c + 1}
	defer func() {
		fl.mu.Lock()
		fl.timeline.restartChanges = append(fl.timeline.restartChanges, rc)
		fl.mu.Unlock()
	}()
	for {
		err := fl.admin.do(ctx, "PUT", "/tenants/"+tenantSlug+"/tools/"+quickTool, def, nil)
		if err == nil {
			break
		}
		if time.Now().After(end) || ctx.Err() != nil {
			rc.err = fmt.Sprintf("the change was not accepted before the cycle ended: %v", err)
			return errors.New(rc.err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	rc.committed = time.Now()
	fl.logf("cycle %d: catalogue changed %s after PostgreSQL came back", c+1, rc.committed.Sub(fl.lastPGBack()).Round(time.Millisecond))
	err := fl.servedEverywhere(ctx, "the change made as PostgreSQL came back", rc.committed, end, func(tools []client.Tool) bool {
		return slices.ContainsFunc(tools, func(t client.Tool) bool { return t.Name == quickTool && t.Description == desc })
	})
	if err != nil {
		rc.err = err.Error()
		return err
	}
	rc.delivered = true
	return nil
}

// lastPGBack is when the last PostgreSQL outage ended.
func (fl *fleet) lastPGBack() time.Time {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if n := len(fl.timeline.pgOutages); n > 0 {
		return fl.timeline.pgOutages[n-1].to
	}
	return time.Time{}
}

// killReplica SIGKILLs a replica in the middle of the drive and starts
// it again two seconds later.
func (fl *fleet) killReplica(ctx context.Context, r *replica) error {
	k := kill{replica: r.name, at: time.Now()}
	if err := r.kill(); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	err := r.start(ctx, fl.cfg.Dir)
	k.back = time.Now()
	fl.mu.Lock()
	fl.timeline.kills = append(fl.timeline.kills, k)
	fl.mu.Unlock()
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	return nil
}

// vaultOutage stops Vault, keeps it down for the outage, and starts
// (and unseals) it again.
func (fl *fleet) vaultOutage(ctx context.Context) error {
	w := window{from: time.Now()}
	if err := fl.vault.stop(); err != nil {
		return err
	}
	fl.readinessDuring("Vault down")
	time.Sleep(fl.cfg.Outage)
	err := fl.vault.restart(ctx, fl.cfg.Dir)
	w.to = time.Now()
	fl.mu.Lock()
	fl.timeline.vaultOutages = append(fl.timeline.vaultOutages, w)
	fl.mu.Unlock()
	return err
}

// pgOutage stops PostgreSQL (fast: open transactions roll back, every
// connection closes), keeps it down for the outage, and starts it again.
func (fl *fleet) pgOutage(ctx context.Context) error {
	w := window{from: time.Now()}
	if err := fl.pg.stop(ctx, "fast"); err != nil {
		return err
	}
	fl.readinessDuring("PostgreSQL down")
	time.Sleep(fl.cfg.Outage)
	err := fl.pg.start(ctx)
	w.to = time.Now()
	fl.mu.Lock()
	fl.timeline.pgOutages = append(fl.timeline.pgOutages, w)
	fl.mu.Unlock()
	return err
}

// readinessDuring logs what each replica's /readyz says a second into an
// outage (for the log; HAProxy's checks decide on their own schedule).
func (fl *fleet) readinessDuring(what string) {
	time.Sleep(time.Second)
	c := &http.Client{Timeout: 3 * time.Second}
	for _, r := range fl.replicas {
		resp, err := c.Get(r.URL() + "/readyz")
		if err != nil {
			fl.logf("%s: %s /readyz: %v", what, r.name, err)
			continue
		}
		resp.Body.Close()
		fl.logf("%s: %s /readyz %d", what, r.name, resp.StatusCode)
	}
}
