package keys_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	vault "github.com/hashicorp/vault/api"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/opsmcp/platform/keys"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/vaulttest"
)

// vaultManager is a manager on the Vault provider with the root token,
// the scheduler off (tests drive phases with Advance) and short intervals.
func vaultManager(t testing.TB, v *vaulttest.Server, st *store.Store, c *clock, mut ...func(*keys.Options)) *keys.Manager {
	t.Helper()
	o := keys.Options{
		Provider: keys.ProviderVault, Tenants: st.Tenants(), Logger: testLogger(t),
		Refresh: 100 * time.Millisecond, ClockSkew: 100 * time.Millisecond, Staleness: time.Hour,
		NoScheduler: true,
		Vault:       keys.VaultOptions{Address: v.Addr, Auth: keys.AuthToken, Token: v.RootToken},
	}
	if c != nil {
		o.Now = c.Now
	}
	for _, f := range mut {
		f(&o)
	}
	m, err := keys.New(o)
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	t.Cleanup(m.Close)
	return m
}

func kvEntry(t testing.TB, v *vaulttest.Server, tenantID string) *vault.KVSecret {
	t.Helper()
	s, err := v.Client(t).KVv2("secret").Get(context.Background(), "opsmcp/keyrings/"+tenantID)
	if err != nil {
		t.Fatalf("read the ring from Vault: %v", err)
	}
	return s
}

// TestVaultRingCreationAndCheckAndSet: the first use of a tenant creates
// its ring in KV v2 (one entry, 32-byte secret, rotation record); every
// write is check-and-set, so a stale writer loses and exactly one of many
// racing replicas advances each phase.
func TestVaultRingCreationAndCheckAndSet(t *testing.T) {
	v := vaulttest.Start(t)
	ctx := context.Background()
	url := platformtest.SQLiteURL(t)
	st := platformtest.Store(t, url)
	id := addTenant(t, st, "acme", 1)
	c := newClock()
	m := vaultManager(t, v, st, c)

	if _, err := m.Codec(ctx, id); err != nil {
		t.Fatal(err)
	}
	e := kvEntry(t, v, id)
	if e.VersionMetadata.Version != 1 {
		t.Fatalf("created at version %d", e.VersionMetadata.Version)
	}
	raw, _ := json.Marshal(e.Data)
	var rec keys.Record
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Format != "opsmcp.keyring/v1" || rec.Tenant != id || rec.Phase != keys.PhaseSteady || len(rec.Keys) != 1 ||
		len(rec.Keys[0].Secret) != 32 || rec.Keys[0].Kind != keys.KindAES || rec.PeriodSeconds != 30*24*3600 || rec.NextAt.IsZero() {
		t.Fatalf("stored ring: %s", raw)
	}

	// A stale check-and-set loses, in Vault itself.
	_, err := v.Client(t).KVv2("secret").Put(ctx, "opsmcp/keyrings/"+id, e.Data, vault.WithCheckAndSet(0))
	if err == nil || !strings.Contains(err.Error(), "check-and-set") {
		t.Fatalf("stale cas accepted: %v", err)
	}
	// Creating a ring that exists is a conflict, not an overwrite.
	if _, err := m.Create(ctx, id, ""); !errors.Is(err, keys.ErrRingExists) {
		t.Fatalf("create over an existing ring: %v", err)
	}

	// Racing replicas: exactly one advances each phase.
	var ms []*keys.Manager
	for range 3 {
		ms = append(ms, vaultManager(t, v, platformtest.Store(t, url), c))
	}
	p := time.Second
	if _, err := m.Update(ctx, id, &p, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []keys.Transition{keys.Stage, keys.Promote, keys.Retire} {
		if want == keys.Retire {
			long := time.Hour
			if _, err := m.Update(ctx, id, &long, nil); err != nil {
				t.Fatal(err)
			}
		}
		c.Add(3 * time.Second)
		before := kvEntry(t, v, id).VersionMetadata.Version
		won := raceAdvance(t, ms, id, want, 3)
		if won != 1 {
			t.Fatalf("%s: %d replicas advanced the phase, want exactly 1", want, won)
		}
		if after := kvEntry(t, v, id).VersionMetadata.Version; after != before+1 {
			t.Fatalf("%s: Vault version %d → %d, want one write", want, before, after)
		}
	}
}

// raceAdvance has every manager call Advance per goroutines at once and
// returns how many calls advanced the phase.
func raceAdvance(t *testing.T, ms []*keys.Manager, id string, want keys.Transition, per int) int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	start := make(chan struct{})
	for _, m := range ms {
		for range per {
			wg.Go(func() {
				<-start
				tr, ok, err := m.Advance(context.Background(), id)
				if err != nil {
					t.Errorf("advance: %v", err)
				}
				if ok {
					if tr != want {
						t.Errorf("advanced %s, want %s", tr, want)
					}
					mu.Lock()
					won++
					mu.Unlock()
				}
			})
		}
	}
	close(start)
	wg.Wait()
	return won
}

// TestVaultRotationPhases: every phase transition on Vault, with a second
// replica that only refreshes, and retirement and revocation refusing
// tokens under the retired keys.
func TestVaultRotationPhases(t *testing.T) {
	v := vaulttest.Start(t)
	ctx := context.Background()
	url := platformtest.SQLiteURL(t)
	st := platformtest.Store(t, url)
	id := addTenant(t, st, "acme", 60)
	c := newClock()
	a := vaultManager(t, v, st, c)
	b := vaultManager(t, v, platformtest.Store(t, url), c) // another replica
	ttl := time.Minute

	tokOld, k1 := seal(t, sealer(t, a, id, ttl, c.Now), id)
	if _, err := a.RotateNow(ctx, id); err != nil {
		t.Fatal(err)
	}
	// Within the margin the other replica verifies the staged key.
	waitFor(t, "the other replica verifies the staged key", func() bool {
		cd, err := b.Codec(ctx, id)
		return err == nil && len(mustKeyIDs(cd)) == 2
	})
	c.Add(a.Margin())
	if tr, ok, err := b.Advance(ctx, id); err != nil || !ok || tr != keys.Promote {
		t.Fatalf("promote: %s %v %v", tr, ok, err)
	}
	tokNew, k2 := seal(t, sealer(t, b, id, ttl, c.Now), id)
	if k2 == k1 {
		t.Fatal("promoted ring still mints under the old key")
	}
	// The first replica opens the new token at once (refresh on unknown
	// key) and the old one still.
	sa := sealer(t, a, id, ttl, c.Now)
	if r := openReason(t, sa, id, tokNew); r != "" {
		t.Fatalf("replica a refused the new key's token: %s", r)
	}
	if r := openReason(t, sa, id, tokOld); r != "" {
		t.Fatalf("replica a refused the retiring key's token: %s", r)
	}
	c.Add(ttl + a.Margin())
	if tr, ok, err := a.Advance(ctx, id); err != nil || !ok || tr != keys.Retire {
		t.Fatalf("retire: %s %v %v", tr, ok, err)
	}
	waitFor(t, "the other replica refuses the retired key", func() bool {
		return openReason(t, sealer(t, b, id, ttl, c.Now), id, tokOld) == mrtr.ReasonUnknownKey
	})

	// Emergency revocation of the minter: its tokens are refused at once
	// on this replica and within a refresh on the other.
	tok2, _ := seal(t, sealer(t, a, id, ttl, c.Now), id)
	view, err := a.Revoke(ctx, id, k2, k2)
	if err != nil {
		t.Fatal(err)
	}
	if view.Keys[0].ID == k2 {
		t.Fatal("revoked key still mints")
	}
	if r := openReason(t, sealer(t, a, id, ttl, c.Now), id, tok2); r != mrtr.ReasonUnknownKey {
		t.Fatalf("revoked key's token on this replica: %q", r)
	}
	waitFor(t, "the other replica refuses the revoked key", func() bool {
		return openReason(t, sealer(t, b, id, ttl, c.Now), id, tok2) == mrtr.ReasonUnknownKey
	})
}

func mustKeyIDs(c mrtr.Codec) []string {
	type ids interface{ KeyIDs() []string }
	if r, ok := c.(ids); ok {
		return r.KeyIDs()
	}
	return nil
}

// TestVaultAppRoleLoginAndRenewal: the platform logs in with AppRole under
// the least-privilege policy, and keeps working past the token's max TTL
// by renewing and logging in again.
func TestVaultAppRoleLoginAndRenewal(t *testing.T) {
	v := vaulttest.Start(t)
	v.Policy(t, "opsmcp", keys.VaultPolicy)
	roleID, secretID := v.AppRole(t, "platform", []string{"opsmcp"}, 2*time.Second, 4*time.Second)
	secretFile := t.TempDir() + "/secret-id"
	if err := writeFile(secretFile, secretID+"\n"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := platformtest.Store(t, platformtest.SQLiteURL(t))
	aesT, transitT := addTenant(t, st, "acme", 60), addTenant(t, st, "globex", 60)
	m := vaultManager(t, v, st, nil, func(o *keys.Options) {
		o.Vault = keys.VaultOptions{Address: v.Addr, Auth: keys.AuthAppRole, RoleID: roleID, SecretIDFile: secretFile}
	})
	if _, err := m.Codec(ctx, aesT); err != nil {
		t.Fatalf("ring through an AppRole token: %v", err)
	}
	if _, err := m.Create(ctx, transitT, keys.KindTransit); err != nil {
		t.Fatalf("transit ring through an AppRole token: %v", err)
	}
	// Past the max TTL (4s) twice over: every operation keeps working.
	deadline := time.Now().Add(9 * time.Second)
	for time.Now().Before(deadline) {
		for _, id := range []string{aesT, transitT} {
			s := sealer(t, m, id, time.Minute, nil)
			tok, _ := seal(t, s, id)
			if r := openReason(t, s, id, tok); r != "" {
				t.Fatalf("round trip at %s: %s", time.Until(deadline), r)
			}
			if _, err := m.Show(ctx, id); err != nil {
				t.Fatalf("show: %v", err)
			}
		}
		if h := m.Health(); h.Status != keys.HealthOK {
			t.Fatalf("health %s: %s", h.Status, h.Detail)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// A wrong secret id fails to log in, clearly, without crashing.
	bad := vaultManager(t, v, st, nil, func(o *keys.Options) {
		o.Vault = keys.VaultOptions{Address: v.Addr, Auth: keys.AuthAppRole, RoleID: roleID, SecretID: "not-the-secret"}
	})
	if _, err := bad.Codec(ctx, aesT); err == nil || !strings.Contains(err.Error(), "approle login") {
		t.Fatalf("codec with a bad secret id: %v", err)
	}
}

// TestVaultTransitCustody: seal and open through Transit under a per-
// tenant key; the three phases map onto Transit versions, and Vault
// itself refuses the retired version once it is retired.
func TestVaultTransitCustody(t *testing.T) {
	v := vaulttest.Start(t)
	ctx := context.Background()
	st := platformtest.Store(t, platformtest.SQLiteURL(t))
	a, b, mixed := addTenant(t, st, "acme", 60), addTenant(t, st, "globex", 60), addTenant(t, st, "initech", 60)
	c := newClock()
	m := vaultManager(t, v, st, c, func(o *keys.Options) { o.Custody = keys.KindTransit })
	ttl := time.Minute
	root := v.Client(t)
	transitInfo := func(id string) map[string]any {
		s, err := root.Logical().Read("transit/keys/opsmcp-" + id)
		if err != nil || s == nil {
			t.Fatalf("transit key of %s: %v", id, err)
		}
		return s.Data
	}

	sa := sealer(t, m, a, ttl, c.Now)
	tok1, k1 := seal(t, sa, a)
	if !strings.HasPrefix(tok1, "t1.") || k1 != "opsmcp-"+a+":v1" {
		t.Fatalf("transit token %.12s… under %s", tok1, k1)
	}
	if r := openReason(t, sa, a, tok1); r != "" {
		t.Fatalf("open: %s", r)
	}
	// Another tenant's Transit key does not open it, even with the same
	// version number.
	sb := sealer(t, m, b, ttl, c.Now)
	bind := binding(a)
	if _, err := sb.Open(ctx, tok1, bind); err == nil {
		t.Fatal("tenant b opened tenant a's token")
	}
	// Tampering is refused.
	tampered := tok1[:len(tok1)-3] + flip(tok1[len(tok1)-3:])
	if r := openReason(t, sa, a, tampered); r != mrtr.ReasonAuthentication && r != mrtr.ReasonMalformed {
		t.Fatalf("tampered token: %q", r)
	}

	// Stage: Transit v2 exists, v1 still mints (pinned key_version).
	if _, err := m.RotateNow(ctx, a); err != nil {
		t.Fatal(err)
	}
	if info := transitInfo(a); jsonInt(info["latest_version"]) != 2 {
		t.Fatalf("after staging: %v", info)
	}
	if _, kid := seal(t, sealer(t, m, a, ttl, c.Now), a); kid != k1 {
		t.Fatalf("staged transit ring mints under %s", kid)
	}
	c.Add(m.Margin())
	if _, ok, err := m.Advance(ctx, a); err != nil || !ok {
		t.Fatalf("promote: %v %v", ok, err)
	}
	sa = sealer(t, m, a, ttl, c.Now)
	tok2, k2 := seal(t, sa, a)
	if k2 != "opsmcp-"+a+":v2" {
		t.Fatalf("promoted transit ring mints under %s", k2)
	}
	if r := openReason(t, sa, a, tok1); r != "" {
		t.Fatalf("v1 token while promoted: %s", r)
	}
	c.Add(ttl + m.Margin())
	if _, ok, err := m.Advance(ctx, a); err != nil || !ok {
		t.Fatalf("retire: %v %v", ok, err)
	}
	sa = sealer(t, m, a, ttl, c.Now)
	if r := openReason(t, sa, a, tok1); r != mrtr.ReasonUnknownKey {
		t.Fatalf("v1 token after retirement: %q", r)
	}
	if r := openReason(t, sa, a, tok2); r == mrtr.ReasonUnknownKey || r == mrtr.ReasonAuthentication {
		t.Fatalf("v2 token after retirement: %q", r)
	}
	info := transitInfo(a)
	if jsonInt(info["min_decryption_version"]) != 2 || jsonInt(info["min_encryption_version"]) != 2 {
		t.Fatalf("Vault does not enforce the retirement: %v", info)
	}

	// Moving a tenant from aes to transit custody is a rotation like any
	// other: both kinds verify while it runs.
	m2 := vaultManager(t, v, st, c) // default aes custody
	sm := sealer(t, m2, mixed, ttl, c.Now)
	tokAES, kAES := seal(t, sm, mixed)
	tr := keys.KindTransit
	if _, err := m2.Update(ctx, mixed, nil, &tr); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.RotateNow(ctx, mixed); err != nil {
		t.Fatal(err)
	}
	c.Add(m2.Margin())
	if _, ok, err := m2.Advance(ctx, mixed); err != nil || !ok {
		t.Fatalf("promote to transit: %v %v", ok, err)
	}
	sm = sealer(t, m2, mixed, ttl, c.Now)
	tokT, kT := seal(t, sm, mixed)
	if !strings.HasPrefix(tokT, "t1.") || kT == kAES {
		t.Fatalf("after moving to transit custody: minted %.6s… under %s", tokT, kT)
	}
	if r := openReason(t, sm, mixed, tokAES); r != "" {
		t.Fatalf("aes token in the mixed ring: %s", r)
	}
	if r := openReason(t, sm, mixed, tokT); r != "" {
		t.Fatalf("transit token in the mixed ring: %s", r)
	}
}

func flip(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
	}
	return string(b)
}

func jsonInt(v any) int64 {
	switch n := v.(type) {
	case json.Number:
		i, _ := n.Int64()
		return i
	case float64:
		return int64(n)
	}
	return -1
}

// TestVaultMalformedOrForeignRecordFailsClosedAlone: a tenant whose Vault
// entry is not ours, or another tenant's, fails closed; the rest serve.
func TestVaultMalformedOrForeignRecordFailsClosedAlone(t *testing.T) {
	v := vaulttest.Start(t)
	ctx := context.Background()
	st := platformtest.Store(t, platformtest.SQLiteURL(t))
	a, b := addTenant(t, st, "acme", 60), addTenant(t, st, "globex", 60)
	m := vaultManager(t, v, st, nil)
	tokB, _ := seal(t, sealer(t, m, b, time.Minute, nil), b)
	if _, err := m.Codec(ctx, a); err != nil {
		t.Fatal(err)
	}
	kv := v.Client(t).KVv2("secret")
	for name, data := range map[string]map[string]any{
		"foreign format": {"format": "someone-else/v1", "keys": "x"},
		"other tenant":   kvEntry(t, v, b).Data,
		"garbage":        {"format": "opsmcp.keyring/v1", "tenant": a, "keys": 7},
	} {
		if _, err := kv.Put(ctx, "opsmcp/keyrings/"+a, data); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the corrupted ring is refused as malformed", func() bool {
			_, err := m.Codec(ctx, a)
			return errors.Is(err, keys.ErrMalformed)
		})
		if _, err := m.Show(ctx, a); !errors.Is(err, keys.ErrMalformed) {
			t.Fatalf("%s: show: %v", name, err)
		}
		if r := openReason(t, sealer(t, m, b, time.Minute, nil), b, tokB); r != "" {
			t.Fatalf("%s: the other tenant was affected: %s", name, r)
		}
	}
	// The scheduler neither crashes nor "repairs" it by overwriting.
	if err := m.Schedule(ctx); err != nil {
		t.Logf("scheduler pass: %v", err)
	}
	if _, err := m.Codec(ctx, a); !errors.Is(err, keys.ErrMalformed) {
		t.Fatalf("after a scheduler pass: %v", err)
	}
}

// TestVaultOutageServesCachedRingsUpToStaleness: with Vault down, a
// replica keeps serving its cached rings and reports degraded; past the
// staleness limit the tenants fail closed and readiness goes false; when
// Vault is back, everything recovers, and rotation resumes.
func TestVaultOutageServesCachedRingsUpToStaleness(t *testing.T) {
	v := vaulttest.Start(t)
	ctx := context.Background()
	st := platformtest.Store(t, platformtest.SQLiteURL(t))
	id := addTenant(t, st, "acme", 60)
	m := vaultManager(t, v, st, nil, func(o *keys.Options) {
		o.Staleness = 3 * time.Second
		o.Vault.Timeout = time.Second
	})
	tok, _ := seal(t, sealer(t, m, id, time.Minute, nil), id)
	waitFor(t, "the keys are healthy", func() bool { return m.Health().Status == keys.HealthOK })

	v.Stop()
	down := time.Now()
	waitFor(t, "the keys are degraded with Vault down", func() bool { return m.Health().Status == keys.HealthDegraded })
	if !m.Health().Ready() {
		t.Fatal("degraded must stay ready")
	}
	// Cached ring: rounds keep working.
	for time.Since(down) < 2*time.Second {
		s := sealer(t, m, id, time.Minute, nil)
		if r := openReason(t, s, id, tok); r != "" {
			t.Fatalf("round refused %s into the outage: %s", time.Since(down), r)
		}
		seal(t, s, id)
		time.Sleep(100 * time.Millisecond)
	}
	// Rotation is paused: the scheduler does nothing, rotate now fails
	// cleanly.
	if err := m.Schedule(ctx); err != nil {
		t.Fatalf("scheduler pass during the outage: %v", err)
	}
	if _, err := m.RotateNow(ctx, id); err == nil {
		t.Fatal("rotate now succeeded with Vault down")
	}
	// Past the staleness limit: fail closed, not ready.
	waitFor(t, "the cached ring goes stale and the keys unavailable", func() bool {
		_, err := m.Codec(ctx, id)
		return errors.Is(err, keys.ErrStale) && m.Health().Status == keys.HealthUnavailable
	})
	if h := m.Health(); h.Ready() {
		t.Fatalf("past staleness: %+v", h)
	}

	v.Restart(t)
	waitFor(t, "the keys are healthy again with Vault back", func() bool { return m.Health().Status == keys.HealthOK })
	s := sealer(t, m, id, time.Minute, nil)
	if r := openReason(t, s, id, tok); r != "" {
		t.Fatalf("after Vault returned: %s", r)
	}
	if _, err := m.RotateNow(ctx, id); err != nil {
		t.Fatalf("rotation after Vault returned: %v", err)
	}
}

// TestVaultKubernetesLogin: the platform logs in with its service-account
// token through Vault's Kubernetes auth method. Vault checks the token
// with the cluster's TokenReview API, played here by a small HTTP server
// (Kubernetes, not Vault, is the stand-in).
func TestVaultKubernetesLogin(t *testing.T) {
	v := vaulttest.Start(t)
	v.Policy(t, "opsmcp", keys.VaultPolicy)
	jwt := vaulttest.ServiceAccountJWT(t, "opsmcp", "platform")
	reviews := vaulttest.Kubernetes(t, v, "opsmcp", "platform", jwt, []string{"opsmcp"})
	tokenFile := t.TempDir() + "/token"
	if err := writeFile(tokenFile, jwt); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := platformtest.Store(t, platformtest.SQLiteURL(t))
	id := addTenant(t, st, "acme", 60)
	m := vaultManager(t, v, st, nil, func(o *keys.Options) {
		o.Vault = keys.VaultOptions{Address: v.Addr, Auth: keys.AuthKubernetes, KubernetesRole: "platform", KubernetesTokenFile: tokenFile}
	})
	s := sealer(t, m, id, time.Minute, nil)
	tok, _ := seal(t, s, id)
	if r := openReason(t, s, id, tok); r != "" {
		t.Fatalf("round trip: %s", r)
	}
	if _, err := m.RotateNow(ctx, id); err != nil {
		t.Fatal(err)
	}
	if reviews.Load() == 0 {
		t.Fatal("Vault never asked Kubernetes to review the token")
	}
	// A token Kubernetes does not vouch for is refused at login.
	badFile := t.TempDir() + "/bad"
	if err := writeFile(badFile, vaulttest.ServiceAccountJWT(t, "opsmcp", "intruder")); err != nil {
		t.Fatal(err)
	}
	bad := vaultManager(t, v, st, nil, func(o *keys.Options) {
		o.Vault = keys.VaultOptions{Address: v.Addr, Auth: keys.AuthKubernetes, KubernetesRole: "platform", KubernetesTokenFile: badFile}
	})
	if _, err := bad.Codec(ctx, id); err == nil || !strings.Contains(err.Error(), "kubernetes login") {
		t.Fatalf("codec with an unvouched token: %v", err)
	}
}

// TestVaultCallsMadeForARequestAreSpansUnderIt: with Transit custody,
// the ring's first load and every seal and open call Vault while a
// request waits; each call is a CLIENT span under the request's span,
// with Vault's address and no path or token. The refresh loop's
// background reads are not traced.
func TestVaultCallsMadeForARequestAreSpansUnderIt(t *testing.T) {
	v := vaulttest.Start(t)
	st := platformtest.Store(t, platformtest.SQLiteURL(t))
	a := addTenant(t, st, "acme", 60)
	m := vaultManager(t, v, st, nil, func(o *keys.Options) { o.Custody = keys.KindTransit })
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())

	ctx, request := tp.Tracer("test").Start(context.Background(), "tools/call", trace.WithSpanKind(trace.SpanKindServer))
	codec, err := m.Codec(ctx, a) // creates the ring: KV read and write, Transit key
	if err != nil {
		t.Fatal(err)
	}
	loaded := len(rec.Ended())
	tok, _, err := codec.Seal(ctx, []byte("state"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := codec.Unseal(ctx, tok); err != nil {
		t.Fatal(err)
	}
	request.End()
	spans := rec.Ended()
	if loaded == 0 || len(spans)-1 <= loaded {
		t.Fatalf("%d spans for the first load, %d in all: want both the load and the Transit calls traced", loaded, len(spans))
	}
	u, err := url.Parse(v.Addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range spans[:len(spans)-1] {
		if s.SpanKind() != trace.SpanKindClient || s.Parent().SpanID() != request.SpanContext().SpanID() {
			t.Fatalf("span %q (%v) is not a CLIENT child of the request", s.Name(), s.SpanKind())
		}
		got := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			got[kv.Key] = kv.Value
			if e := kv.Value.String(); strings.Contains(e, "/") || strings.Contains(e, v.RootToken) {
				t.Fatalf("span %q records a path or the token: %v", s.Name(), kv)
			}
		}
		if got["server.address"].AsString() != u.Hostname() || strconv.FormatInt(got["server.port"].AsInt64(), 10) != u.Port() {
			t.Fatalf("span %q does not name Vault: %v", s.Name(), s.Attributes())
		}
	}

	// The refresh loop re-reads the ring every 100 ms, outside any
	// request: none of it is traced, even with a recording global
	// provider.
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	defer otel.SetTracerProvider(prev)
	n := len(rec.Ended())
	time.Sleep(350 * time.Millisecond)
	if extra := len(rec.Ended()) - n; extra != 0 {
		t.Fatalf("%d background Vault calls traced", extra)
	}
}

// TestVaultOverAUnixSocketIsAccepted: a Vault (Agent) address on a unix
// socket builds a manager; the client's socket dialling is not wrapped
// away by tracing.
func TestVaultOverAUnixSocketIsAccepted(t *testing.T) {
	st := platformtest.Store(t, platformtest.SQLiteURL(t))
	m, err := keys.New(keys.Options{Provider: keys.ProviderVault, Tenants: st.Tenants(), Logger: testLogger(t),
		Vault: keys.VaultOptions{Address: "unix://" + t.TempDir() + "/agent.sock", Auth: keys.AuthToken, Token: "t"}})
	if err != nil {
		t.Fatalf("unix socket address refused: %v", err)
	}
	m.Close()
}
