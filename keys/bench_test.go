package keys_test

import (
	"context"
	"testing"

	"github.com/opsmcp/platform/keys"
	"github.com/opsmcp/platform/mrtr"
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
