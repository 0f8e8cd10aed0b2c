package endpoint_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsmcp/platform/catalogue"
	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// BenchmarkScale is how the cost of serving grows with the tenants in
// the catalogue cache (100, 10,000, 100,000) and with the flows in
// flight (1, 10 and 100 per active tenant). Each tenant holds one tool
// with a declared form input, so a flow is two rounds, answered by one
// webhook server all tenants share. The tenants are written straight to
// the store in bulk, then every one is loaded into the cache through its
// endpoint (a tools/list), as a replica that has served them all holds
// them.
//
// Eight tenants are active at any moment, each with c flows in flight,
// but every flow draws its tenant at random from all N: nothing on the
// round path is per tenant except the tenant's snapshot (no lock, no
// limit), so c sets how many flows are in flight (8c), and drawing from
// all N makes each round read a snapshot the CPU caches likely lost,
// the worst case for the cache's breadth. BENCH_SCALE_PICK=hot keeps the
// same eight tenants instead; BENCH_SCALE_TENANTS narrows the sizes
// (comma-separated); BENCH_SCALE_DB=postgres runs on PostgreSQL;
// BENCH_SCALE_ACTIVE loads only that many tenants, the active set
// (scripts/bench-scale runs a million with 10,000 active).
//
// It reports CPU per round (the whole process: clients, platform,
// webhook, the record's writes and the background refresh), rounds/s,
// heap in use after a forced GC with the flows in flight (heap-MB), the
// heap the loaded cache holds per tenant (KB/tenant), the CPU the
// replica spends with no traffic at all (idle-cpu-ms/s: the change
// feed's poll) and the CPU one tenant's first load cost (load-cpu-µs),
// and the median time from a catalogue change's commit to the first
// request served with it (change-p50-ms).
func BenchmarkScale(b *testing.B) {
	sizes := []int{100, 10_000, 100_000}
	if s := os.Getenv("BENCH_SCALE_TENANTS"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatalf("BENCH_SCALE_TENANTS: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	hot := os.Getenv("BENCH_SCALE_PICK") == "hot"
	dbURL := func(b *testing.B) string { return platformtest.SQLiteURL(b) }
	if os.Getenv("BENCH_SCALE_DB") == "postgres" {
		dbURL = func(b *testing.B) string { return platformtest.PostgresSchemaURL(b) }
	}
	for _, n := range sizes {
		// BENCH_SCALE_ACTIVE loads (and draws flows from) only the first
		// that many tenants: the active set of a large registry.
		active := n
		if s := os.Getenv("BENCH_SCALE_ACTIVE"); s != "" {
			a, err := strconv.Atoi(s)
			if err != nil {
				b.Fatalf("BENCH_SCALE_ACTIVE: %v", err)
			}
			active = min(a, n)
		}
		b.Run(fmt.Sprintf("tenants=%d", n), func(b *testing.B) {
			hook, dials := countingHook(b)
			// The production refresh interval: the test platform's 50 ms
			// would poll every tenant's version twenty times a second.
			p := platformtest.Start(b, dbURL(b), platformtestServerTelemetryOff(),
				platformtest.WithConfig(func(c *config.Config) { c.CatalogueRefresh = time.Second }))
			t0 := time.Now()
			seedScale(b, p.Server.Store(), n, hook.URL)
			seeded := time.Since(t0)

			empty := heapInuse()
			t0, cpu0 := time.Now(), platformtest.CPUTime()
			warmScale(b, p.URL, active)
			warmed, warmCPU := time.Since(t0), platformtest.CPUTime()-cpu0
			perTenant := float64(heapInuse()-empty) / float64(active)
			if path := os.Getenv("BENCH_SCALE_HEAPPROFILE"); path != "" {
				writeHeapProfile(b, fmt.Sprintf("%s.%d", path, n))
			}

			// With no traffic, what the replica spends is its background
			// work: the change feed's poll, the revocations' refresh.
			cpu0 = platformtest.CPUTime()
			time.Sleep(3 * time.Second)
			idle := float64((platformtest.CPUTime() - cpu0).Microseconds()) / 3e3
			// A change's way from its commit to the first request served
			// with it.
			prop := measurePropagation(b, p.Server.Store(), p.URL, scaleSlug(0), 20)
			p50, p99 := ms(prop[len(prop)/2]), ms(prop[len(prop)-1])
			b.Logf("%d tenants (%d loaded): seeded in %v, loaded in %v (%.0f CPU-µs each), cache %.1f KB/tenant, idle %.1f CPU-ms/s, change served in %.2f ms (p50), %.2f ms (max of 20)",
				n, active, seeded.Round(time.Millisecond), warmed.Round(time.Millisecond), float64(warmCPU.Microseconds())/float64(active), perTenant/1024, idle, p50, p99)

			for _, c := range []int{1, 10, 100} {
				b.Run(fmt.Sprintf("flows=%d", c), func(b *testing.B) {
					workers := 8 * c
					client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
					pick := func(r *rand.Rand, w int) string {
						if hot {
							return scaleSlug((w % 8) * (active / 8))
						}
						return scaleSlug(r.IntN(active))
					}
					flow := func(r *rand.Rand, w int) error {
						return tryFlow(client, p.URL+"/t/"+pick(r, w)+"/mcp")
					}
					dials0 := dials.Load()
					cpu0 := platformtest.CPUTime()
					b.ResetTimer()
					runFlows(b, workers, flow, int64(b.N), nil)
					b.StopTimer()
					rounds := float64(2 * b.N)
					b.ReportMetric(float64((platformtest.CPUTime()-cpu0).Nanoseconds())/1e3/rounds, "cpu-µs/round")
					b.ReportMetric(rounds/b.Elapsed().Seconds(), "rounds/s")
					b.ReportMetric(float64(dials.Load()-dials0)/float64(b.N), "hook-dials/flow")

					// The heap with every worker's flow in flight, in a
					// phase of its own: a forced GC over a large heap
					// would otherwise land in the CPU figure.
					var heap uint64
					runFlows(b, workers, flow, int64(4*workers), func() {
						heap = heapInuse()
						if path := os.Getenv("BENCH_SCALE_HEAPPROFILE"); path != "" {
							writeHeapProfile(b, fmt.Sprintf("%s.%d.flows%d", path, n, c))
						}
					})
					b.ReportMetric(float64(heap)/(1<<20), "heap-MB")
					b.ReportMetric(perTenant/1024, "KB/tenant")
					b.ReportMetric(idle, "idle-cpu-ms/s")
					b.ReportMetric(p50, "change-p50-ms")
					b.ReportMetric(float64(warmCPU.Microseconds())/float64(active), "load-cpu-µs")
					client.CloseIdleConnections()
				})
			}
		})
	}
}

// scaleSlug is the slug of the i-th seeded tenant.
func scaleSlug(i int) string { return fmt.Sprintf("t%07d", i) }

// countingHook is benchHook counting the connections the platform opens
// to it: more than one per worker means deliveries outnumber the idle
// connections the webhook client keeps to one host.
func countingHook(b *testing.B) (*httptest.Server, *atomic.Int64) {
	body := []byte(`{"type":"complete","result":{"content":[{"type":"text","text":"ok"}]}}`)
	var dials atomic.Int64
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			dials.Add(1)
		}
	}
	s.Start()
	b.Cleanup(s.Close)
	return s, &dials
}

// seedScale writes n public tenants, each with the confirm tool (a
// declared form input, then hook), in one bulk call: its definition goes
// through the catalogue's decoding and validation as the admin API's
// does, and each tenant gets a webhook secret of its own.
func seedScale(b *testing.B, st *store.Store, n int, hook string) {
	raw, _ := json.Marshal(confirmTool(hook))
	def := catalogue.New(catalogue.KindTool)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(def); err != nil {
		b.Fatal(err)
	}
	if err := def.Validate(); err != nil {
		b.Fatal(err)
	}
	spec, _ := json.Marshal(def)
	settings := `{"auth":{"public":true}}`
	cs := make([]store.Catalogue, n)
	for i := range cs {
		secret := catalogue.NewWebhookSecret()
		cs[i] = store.Catalogue{
			Tenant: store.Tenant{Slug: scaleSlug(i), DisplayName: scaleSlug(i), Settings: settings},
			Items:  []store.Item{{Kind: string(catalogue.KindTool), Name: def.ItemName(), Spec: string(spec), WebhookSecret: &secret}},
		}
	}
	if err := st.Tenants().CreateCatalogues(context.Background(), cs); err != nil {
		b.Fatal(err)
	}
}

// warmScale loads every tenant's catalogue into the cache through its
// endpoint, from eight clients at once, and checks each serves its tool.
func warmScale(b *testing.B, base string, n int) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	defer client.CloseIdleConnections()
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + validMeta + `}}`)
	var next atomic.Int64
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := listOne(client, base+"/t/"+scaleSlug(i)+"/mcp", body); err != nil {
					errs <- fmt.Errorf("%s: %w", scaleSlug(i), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// listOne is a tools/list that must list exactly the one tool.
func listOne(client *http.Client, url string, body []byte) error {
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/list")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var m struct {
		Result struct {
			Tools []json.RawMessage `json:"tools"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 || len(m.Result.Tools) != 1 {
		return fmt.Errorf("tools/list: HTTP %d, %d tools, %v", resp.StatusCode, len(m.Result.Tools), err)
	}
	return nil
}

// runFlows runs total flows from workers goroutines at once, each with
// its own random source. If midway is set, it is called once when half
// the flows are done, with every worker's next flow in flight or about
// to be. A failure is reported, not fatal (FailNow must run on the
// benchmark's goroutine), and stops that worker.
func runFlows(b *testing.B, workers int, flow func(r *rand.Rand, w int) error, total int64, midway func()) {
	var started, done atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for started.Add(1) <= total {
				if err := flow(r, w); err != nil {
					b.Error(err)
					return
				}
				if done.Add(1) >= total/2 && midway != nil {
					once.Do(midway)
				}
			}
		}()
	}
	wg.Wait()
}

func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// heapInuse is the heap in use after a full collection: what is live,
// in the spans that hold it.
func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// BenchmarkFirstRequest is what a cold tenant's first request costs
// against a warm one's: BENCH_FIRST_TENANTS tenants (default 10,000, of
// the scale benchmark's shape) are seeded, none loaded; then one client
// sends each of a sample of them a tools/list twice, the first loading
// its catalogue (cold), the second served from the cache (warm). It
// reports the latency of each at the median and the 99th percentile,
// in µs, as the client sees it on loopback. BENCH_FIRST_DB=postgres runs
// on PostgreSQL.
func BenchmarkFirstRequest(b *testing.B) {
	n := 10_000
	if s := os.Getenv("BENCH_FIRST_TENANTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatalf("BENCH_FIRST_TENANTS: %v", err)
		}
	}
	dbURL := platformtest.SQLiteURL
	if os.Getenv("BENCH_FIRST_DB") == "postgres" {
		dbURL = platformtest.PostgresSchemaURL
	}
	hook, _ := countingHook(b)
	p := platformtest.Start(b, dbURL(b), platformtestServerTelemetryOff(),
		platformtest.WithConfig(func(c *config.Config) { c.CatalogueRefresh = time.Second }))
	seedScale(b, p.Server.Store(), n, hook.URL)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + validMeta + `}}`)
	sample := min(n, 2000)
	step := max(n/sample, 1)
	var cold, warm []time.Duration
	b.ResetTimer()
	k := 0 // each iteration takes tenants none before loaded
	for b.Loop() {
		if k >= step {
			b.Fatalf("every tenant is loaded after %d iterations: run with -benchtime 1x", k)
		}
		cold, warm = cold[:0], warm[:0]
		for i := 0; i < sample; i++ {
			url := p.URL + "/t/" + scaleSlug(i*step+k) + "/mcp"
			for _, into := range []*[]time.Duration{&cold, &warm} {
				t0 := time.Now()
				if err := listOne(client, url, body); err != nil {
					b.Fatal(err)
				}
				*into = append(*into, time.Since(t0))
			}
		}
		k++
	}
	b.StopTimer()
	pct := func(d []time.Duration, q float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[int(q*float64(len(s)-1))].Microseconds())
	}
	b.ReportMetric(pct(cold, 0.5), "cold-p50-µs")
	b.ReportMetric(pct(cold, 0.99), "cold-p99-µs")
	b.ReportMetric(pct(warm, 0.5), "warm-p50-µs")
	b.ReportMetric(pct(warm, 0.99), "warm-p99-µs")
}
