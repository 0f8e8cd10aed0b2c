package keys_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsmcp/platform/feed"
	"github.com/opsmcp/platform/keys"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/vaulttest"
)

// A "round" below is what one MRTR round costs in key operations: open
// the inbound requestState and seal the next one, with a principal bound.

func benchRound(b *testing.B, m *keys.Manager, id string, parallel bool) {
	ctx := context.Background()
	s := sealer(b, m, id, 0, nil)
	tok, _ := seal(b, s, id)
	one := func(s *mrtr.Sealer) {
		if _, err := s.Open(ctx, tok, binding(id)); err != nil {
			b.Fatal(err)
		}
		if _, _, err := s.Seal(ctx, binding(id), &mrtr.Claims{FlowID: "fl_bench", Round: 2}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	if !parallel {
		for b.Loop() {
			// The endpoint asks for the codec on every round: include it.
			c, err := m.Codec(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			one(&mrtr.Sealer{Codec: c})
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c, err := m.Codec(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			one(&mrtr.Sealer{Codec: c})
		}
	})
}

// BenchmarkRingRound: the built-in AES-256-GCM ring, served from the
// cache (the same for the local and the Vault KV provider).
func BenchmarkRingRound(b *testing.B) {
	st := platformtest.Store(b, platformtest.SQLiteURL(b))
	id := addTenant(b, st, "acme", 600)
	m := localManager(b, st, masterKey(), nil)
	m.Close() // no background refresh in the measurement
	b.Run("serial", func(b *testing.B) { benchRound(b, m, id, false) })
	b.Run("parallel", func(b *testing.B) { benchRound(b, m, id, true) })
}

// BenchmarkTransitRound: Transit custody against a Vault dev server on
// loopback: one encrypt and one decrypt request per round.
func BenchmarkTransitRound(b *testing.B) {
	v := vaulttest.StartDev(b)
	st := platformtest.Store(b, platformtest.SQLiteURL(b))
	id := addTenant(b, st, "acme", 600)
	m := vaultManager(b, v, st, nil, func(o *keys.Options) { o.Custody = keys.KindTransit; o.Logger = quietLog() })
	if _, err := m.Codec(context.Background(), id); err != nil {
		b.Fatal(err)
	}
	m.Close()
	b.Run("serial", func(b *testing.B) { benchRound(b, m, id, false) })
	b.Run("parallel", func(b *testing.B) { benchRound(b, m, id, true) })
}

// BenchmarkVaultRefresh: the per-tenant, per-interval cost of keeping a
// ring fresh: one KV v2 metadata read.
func BenchmarkVaultRefresh(b *testing.B) {
	v := vaulttest.StartDev(b)
	st := platformtest.Store(b, platformtest.SQLiteURL(b))
	id := addTenant(b, st, "acme", 600)
	m := vaultManager(b, v, st, nil, func(o *keys.Options) { o.Logger = quietLog() })
	if _, err := m.Codec(context.Background(), id); err != nil {
		b.Fatal(err)
	}
	m.Close()
	b.ReportAllocs()
	for b.Loop() {
		if err := keys.RefreshForTest(m, id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKeyRingsIdle: what a replica spends keeping N cached rings
// fresh with no traffic, for 3 s, with the change feed (a read of the
// key store a second says it answers; the feed vouches for the rings)
// and without it (every ring re-checked every second, as before the
// feed, and as now while the feed is behind). Local provider on SQLite;
// it reports the key store reads a second and the process's CPU.
func BenchmarkKeyRingsIdle(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		for _, withFeed := range []bool{false, true} {
			b.Run(fmt.Sprintf("rings=%d/feed=%v", n, withFeed), func(b *testing.B) {
				ctx := context.Background()
				st := platformtest.Store(b, platformtest.SQLiteURL(b))
				cs := make([]store.Catalogue, n)
				for i := range cs {
					cs[i].Tenant = store.Tenant{Slug: fmt.Sprintf("t%06d", i), DisplayName: "T"}
				}
				if err := st.Tenants().CreateCatalogues(ctx, cs); err != nil {
					b.Fatal(err)
				}
				var f *feed.Follower
				o := keys.Options{Provider: keys.ProviderLocal, Tenants: st.Tenants(), Rings: st.KeyRings(), MasterKey: masterKey(),
					Logger: quietLog(), NoScheduler: true, Changes: st.Changes()}
				if withFeed {
					o.Feed = feedClock{&f}
				}
				m, err := keys.New(o)
				if err != nil {
					b.Fatal(err)
				}
				ctl := keys.ControlBackendForTest(m)
				var reads atomic.Int64
				ctl.FailWith(func(string) error { reads.Add(1); return nil })
				m.Start()
				b.Cleanup(m.Close)
				if withFeed {
					fctx, cancel := context.WithCancel(ctx)
					f = feed.New(fctx, st.Changes(), quietLog(), time.Second)
					f.Add(m)
					done := make(chan struct{})
					go func() { defer close(done); f.Run(fctx) }()
					b.Cleanup(func() { cancel(); <-done })
				}
				for i := range cs {
					if _, err := m.Codec(ctx, cs[i].Tenant.ID); err != nil {
						b.Fatal(err)
					}
				}
				time.Sleep(2 * time.Second) // the rings' creation settles (announced, read back)
				for b.Loop() {
					r0, cpu0 := reads.Load(), platformtest.CPUTime()
					time.Sleep(3 * time.Second)
					b.ReportMetric(float64(reads.Load()-r0)/3, "store-reads/s")
					b.ReportMetric(float64((platformtest.CPUTime()-cpu0).Microseconds())/3e3, "idle-cpu-ms/s")
				}
			})
		}
	}
}
