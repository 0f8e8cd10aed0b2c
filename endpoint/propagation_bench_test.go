package endpoint_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// BenchmarkChangePropagation is the time from a catalogue change's
// commit to the first request a replica serves with it: a writer changes
// a tool's description, and a client asks the replica every half
// millisecond until it lists the new one (so the figures include up to
// that much polling); changes come 20 ms to 1 s apart, at random. The replica's feed poll is the production 1 s: on
// PostgreSQL the writer is another store, as another replica's admin
// API is, and the notification tells the replica; on SQLite the writer
// is the replica's own store (a SQLite deployment is one process), and
// the notification is in process. It reports the p50 and p99 in ms.
func BenchmarkChangePropagation(b *testing.B) {
	for _, d := range platformtest.Dialects() {
		b.Run(d.Name, func(b *testing.B) {
			url := d.New(b)
			p := platformtest.Start(b, url, platformtestServerTelemetryOff(),
				platformtest.WithConfig(func(c *config.Config) { c.CatalogueRefresh = time.Second }))
			writer := p.Server.Store()
			if d.Name == "postgres" {
				writer = platformtest.Store(b, url)
			}
			seedScale(b, p.Server.Store(), 1, "https://hooks.example.com/x")
			for b.Loop() {
				ds := measurePropagation(b, writer, p.URL, scaleSlug(0), 50)
				b.ReportMetric(ms(ds[len(ds)/2]), "p50-ms")
				b.ReportMetric(ms(ds[len(ds)*99/100]), "p99-ms")
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// measurePropagation changes slug's tool description n times through
// st and returns, sorted, how long each took to be served at base.
func measurePropagation(b *testing.B, st *store.Store, base, slug string, n int) []time.Duration {
	b.Helper()
	ctx := context.Background()
	client := &http.Client{}
	defer client.CloseIdleConnections()
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + validMeta + `}}`)
	description := func() string {
		req, _ := http.NewRequest("POST", base+"/t/"+slug+"/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/list")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		var m struct {
			Result struct {
				Tools []struct{ Description string } `json:"tools"`
			} `json:"result"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || len(m.Result.Tools) != 1 {
			b.Fatalf("tools/list: HTTP %d: %v", resp.StatusCode, err)
		}
		return m.Result.Tools[0].Description
	}
	description() // loaded
	out := make([]time.Duration, 0, n)
	for i := range n {
		want := fmt.Sprintf("version %d", i)
		if _, err := st.Tenants().UpdateItem(ctx, slug, "tool", "confirm", 0, func(it *store.Item) error {
			var spec map[string]any
			if err := json.Unmarshal([]byte(it.Spec), &spec); err != nil {
				return err
			}
			spec["description"] = want
			raw, err := json.Marshal(spec)
			it.Spec = string(raw)
			return err
		}, nil); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		for description() != want {
			if time.Since(t0) > 10*time.Second {
				b.Fatalf("change %d not served within 10 s", i)
			}
			time.Sleep(500 * time.Microsecond)
		}
		out = append(out, time.Since(t0))
		// Apart, at random against any replica's timers, as changes come.
		time.Sleep(time.Duration(20+rand.IntN(1000)) * time.Millisecond)
	}
	slices.Sort(out)
	return out
}
