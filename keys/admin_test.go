package keys_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// localPlatform is an instance on the local keys provider.
func localPlatform(t *testing.T, db string, mk []byte) *platformtest.Platform {
	return platformtest.Start(t, db, platformtest.WithConfig(func(c *config.Config) {
		c.Keys.Provider = "local"
		c.Keys.MasterKey = base64.StdEncoding.EncodeToString(mk)
		c.Keys.Refresh = 100 * time.Millisecond
		c.Keys.ClockSkew = 100 * time.Millisecond
		c.Keys.ScheduleEvery = 100 * time.Millisecond
	}))
}

// TestAdminKeysAPI: show, create, rotate now, change the period and
// custody, revoke with confirmation; problems for every misuse; every
// change audit-logged, reads not; never key material on the wire.
func TestAdminKeysAPI(t *testing.T) {
	p := localPlatform(t, platformtest.SQLiteURL(t), masterKey())
	p.Tenant(t, "acme")
	base := "/api/v1/tenants/acme/keys"

	// Reading writes nothing: a tenant without a ring has none until its
	// first round or an admin creates one.
	if r := p.Admin(t, "GET", base, nil); r.Status != 404 || !strings.Contains(string(r.Body), "no key ring yet") {
		t.Fatalf("show before any ring: %d %s", r.Status, r.Body)
	}
	p.MustAdmin(t, 201, "POST", base, obj{})
	v := p.MustAdmin(t, 200, "GET", base, nil)
	if v["provider"] != "local" || v["phase"] != "steady" || v["custody"] != "aes" {
		t.Fatalf("show: %v", v)
	}
	ks := v["keys"].([]any)
	k1 := ks[0].(map[string]any)["id"].(string)
	raw := p.Admin(t, "GET", base, nil).Body
	if strings.Contains(string(raw), "secret") {
		t.Fatalf("the view mentions secrets: %s", raw)
	}
	if r := p.Admin(t, "POST", base, obj{}); r.Status != 409 {
		t.Fatalf("create over a ring: %d %s", r.Status, r.Body)
	}

	v = p.MustAdmin(t, 200, "POST", base+"/rotate", nil)
	if v["phase"] != "staged" || len(v["keys"].([]any)) != 2 {
		t.Fatalf("rotate: %v", v)
	}
	if r := p.Admin(t, "POST", base+"/rotate", nil); r.Status != 409 || !strings.Contains(string(r.Body), "in progress") {
		t.Fatalf("rotate while rotating: %d %s", r.Status, r.Body)
	}

	if r := p.Admin(t, "PATCH", base, obj{"rotationPeriodSeconds": 0}); r.Status != 422 {
		t.Fatalf("bad period: %d %s", r.Status, r.Body)
	}
	if r := p.Admin(t, "PATCH", base, obj{"custody": "transit"}); r.Status != 422 {
		t.Fatalf("transit custody on the local provider: %d %s", r.Status, r.Body)
	}
	v = p.MustAdmin(t, 200, "PATCH", base, obj{"rotationPeriodSeconds": 86400})
	if v["rotationPeriodSeconds"].(float64) != 86400 {
		t.Fatalf("period: %v", v)
	}

	if r := p.Admin(t, "POST", base+"/"+k1+"/revoke", obj{"confirm": "yes"}); r.Status != 422 || !strings.Contains(string(r.Body), `"confirm"`) {
		t.Fatalf("unconfirmed revoke: %d %s", r.Status, r.Body)
	}
	if r := p.Admin(t, "POST", base+"/ffffffff/revoke", obj{"confirm": "ffffffff"}); r.Status != 404 {
		t.Fatalf("revoke of an unknown key: %d %s", r.Status, r.Body)
	}
	v = p.MustAdmin(t, 200, "POST", base+"/"+k1+"/revoke", obj{"confirm": k1})
	for _, k := range v["keys"].([]any) {
		if k.(map[string]any)["id"] == k1 {
			t.Fatalf("revoked key still in the ring: %v", v)
		}
	}
	if r := p.Admin(t, "GET", "/api/v1/tenants/nope/keys", nil); r.Status != 404 {
		t.Fatalf("unknown tenant: %d", r.Status)
	}

	acme, err := p.Server.Store().Tenants().Get(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := p.Server.Store().Audit().List(context.Background(), acme.ID, time.Time{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, e := range entries {
		got[e.Action]++
		if strings.HasPrefix(e.Action, "keys.") && e.Actor == "" {
			t.Fatalf("audit entry without an actor: %+v", e)
		}
		if strings.Contains(e.Action, "/keys") {
			t.Fatalf("a generic audit entry besides the detailed one: %+v", e)
		}
	}
	if got["keys.show"] != 0 {
		t.Fatalf("a read was audited (a read writes nothing): %v", got)
	}
	for _, want := range []string{"keys.create", "keys.rotate", "keys.update", "keys.revoke", "keys.revoke.refused"} {
		if got[want] == 0 {
			t.Fatalf("no %s audit entry; have %v", want, got)
		}
	}
	for _, e := range entries {
		if e.Action == "keys.revoke" && e.Object != k1 {
			t.Fatalf("revoke audit names %q, want %q", e.Object, k1)
		}
		if strings.Contains(e.Detail, "secret") {
			t.Fatalf("audit detail mentions secrets: %s", e.Detail)
		}
	}
}

// TestStaticProviderHasNoKeyRoutes: with the default static ring there is
// nothing to manage.
func TestStaticProviderHasNoKeyRoutes(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.Tenant(t, "acme")
	r := p.Admin(t, "GET", "/api/v1/tenants/acme/keys", nil)
	if r.Status != 404 || !strings.Contains(string(r.Body), "not enabled") {
		t.Fatalf("keys on the static provider: %d %s", r.Status, r.Body)
	}
}

// TestLocalProviderRotatesOnItsPeriod: the scheduler rotates a tenant
// through all three phases by itself when its period is up.
func TestLocalProviderRotatesOnItsPeriod(t *testing.T) {
	db := platformtest.SQLiteURL(t)
	mk := masterKey()
	a := localPlatform(t, db, mk)
	a.MustAdmin(t, 201, "POST", "/api/v1/tenants", obj{"slug": "acme", "displayName": "Acme", "settings": obj{"stateTtlSeconds": 1}})
	a.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme/keys", obj{"rotationPeriodSeconds": 2})
	v0 := a.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/keys", nil)
	k0 := v0["keys"].([]any)[0].(map[string]any)["id"]
	waitFor(t, "the rotation completes with a new minting key", func() bool {
		v := a.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/keys", nil)
		ks := v["keys"].([]any)
		return v["phase"] == "steady" && ks[0].(map[string]any)["id"] != k0
	})
	var view struct{ Generation int64 }
	_ = json.Unmarshal(a.Admin(t, "GET", "/api/v1/tenants/acme/keys", nil).Body, &view)
	if view.Generation < 4 {
		t.Fatalf("generation %d after a scheduled rotation", view.Generation)
	}
}

// TestKeyRingGaugesFollowTheRotation: the replica's Prometheus endpoint
// reports each tenant's ring (phase, key count, minting key's age) from
// the cached rings, labelled by slug, and follows a rotation into its
// staged phase. (The clock skew is an hour, so the scheduler does not
// promote the staged key during the test.)
func TestKeyRingGaugesFollowTheRotation(t *testing.T) {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED"} {
		t.Setenv(k, "")
	}
	p := platformtest.Start(t, platformtest.SQLiteURL(t), platformtest.WithConfig(func(c *config.Config) {
		c.Keys.Provider = "local"
		c.Keys.MasterKey = base64.StdEncoding.EncodeToString(masterKey())
		c.Keys.Refresh = 100 * time.Millisecond
		c.Keys.ClockSkew = time.Hour
		c.Keys.ScheduleEvery = 100 * time.Millisecond
	}))
	p.Tenant(t, "acme")
	base := "/api/v1/tenants/acme/keys"
	acme := map[string]string{"opsmcp_tenant": "acme"}
	// gauges waits until the phase and key count are the ones wanted
	// (the slug of a tenant the endpoint has not served is known from the
	// registry's next catalogue poll) and returns the minting key's age.
	gauges := func(wantPhase, wantKeys float64) float64 {
		t.Helper()
		var age float64
		var present bool
		waitFor(t, fmt.Sprintf("the gauges show phase %v with %v keys", wantPhase, wantKeys), func() bool {
			m := platformtest.Scrape(t, p.URL, "")
			phase, _ := m.Value("opsmcp_keys_rotation_phase", acme)
			keys, _ := m.Value("opsmcp_keys_ring_keys", acme)
			age, present = m.Value("opsmcp_keys_ring_age_seconds", acme)
			return phase == wantPhase && keys == wantKeys
		})
		if !present || age < 0 || age > 60 {
			t.Fatalf("minting key age = %v (present %v)", age, present)
		}
		return age
	}

	p.MustAdmin(t, 201, "POST", base, obj{}) // creates and caches the ring
	age := gauges(0, 1)
	time.Sleep(20 * time.Millisecond)
	if again := gauges(0, 1); again <= age {
		t.Fatalf("the minting key's age did not grow: %v then %v", age, again)
	}
	p.MustAdmin(t, 200, "POST", base+"/rotate", nil)
	if staged := gauges(1, 2); staged < age { // the old key still mints
		t.Fatalf("staging reset the minting key's age: %v, was %v", staged, age)
	}
}
