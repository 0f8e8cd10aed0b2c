package endpoint_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
)

// TestASessionMeetsADatabaseOutageWithARetryableAnswer: a session whose
// sealing key was retired is verified against its record. While the
// database does not answer, its requests get 503 (send it again), never
// 404 (which tells the client its session is gone, so it would drop the
// session and every call it has in flight); once the database is back,
// the same session serves again. (Found by the fleet test's PostgreSQL
// outage.)
func TestASessionMeetsADatabaseOutageWithARetryableAnswer(t *testing.T) {
	db, relay := platformtest.PostgresThroughRelay(t, platformtest.PostgresSchemaURL(t))
	h := newHook(t, answersHook)
	p := platformtest.Start(t, db, platformtest.WithConfig(func(c *config.Config) {
		// Rings in the database, cached for a minute without it.
		c.Keys.Provider, c.Keys.MasterKey = "local", key()
		c.Keys.Refresh, c.Keys.ClockSkew, c.Keys.ScheduleEvery, c.Keys.Staleness = 20*time.Millisecond, time.Millisecond, 20*time.Millisecond, time.Minute
	}))
	p.Tenant(t, "acme")
	h.setSecret(p.Tool(t, "acme", echoTool("echo", h.URL)))
	p.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme/keys", obj{"rotationPeriodSeconds": 315360000})
	p.MustAdmin(t, 200, "PATCH", "/api/v1/tenants/acme", obj{"settings": obj{"stateTtlSeconds": 1}})
	c := newLegacyClient(t, legacyURL(p, "acme"))
	c.initialize("2025-11-25", legacyCaps)
	ring := func() (string, []string) {
		v := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/keys", nil)
		var ids []string
		for _, k := range v["keys"].([]any) {
			ids = append(ids, k.(map[string]any)["id"].(string))
		}
		return v["phase"].(string), ids
	}
	_, before := ring()
	p.MustAdmin(t, 200, "POST", "/api/v1/tenants/acme/keys/rotate", nil)
	testwait.Until(t, "the session's key is retired", func() bool {
		phase, ids := ring()
		return phase == "steady" && !slices.Contains(ids, before[0])
	})
	if _, status := c.call("tools/list", obj{}); status != 200 {
		t.Fatalf("the session after its key's retirement: %d", status)
	}

	relay.Cut()
	msg, status := c.call("tools/list", obj{})
	e, _ := msg["error"].(map[string]any)
	if status != 503 || e == nil || !strings.Contains(e["message"].(string), "try again") {
		t.Fatalf("a session verified against its record while the database is down: %d %v", status, msg)
	}
	relay.Restore()
	testwait.Until(t, "the session serves again once the database is back", func() bool {
		_, status := c.call("tools/list", obj{})
		return status == 200
	})
}

// TestAnAnswerThatCannotBePassedOnIsRefusedForTheClientToSendAgain: an
// answer posted to a replica that does not hold its call is passed on
// through the database. When that replica cannot reach the database,
// the answer gets 503 instead of 202 (a 202 would leave the call
// waiting for an answer that never comes); sent again, here to the
// replica holding the call, it is taken and the call completes. (Found
// by the fleet test's PostgreSQL outage.)
func TestAnAnswerThatCannotBePassedOnIsRefusedForTheClientToSendAgain(t *testing.T) {
	keys := key()
	db := platformtest.PostgresSchemaURL(t)
	viaRelay, relay := platformtest.PostgresThroughRelay(t, db)
	a := platformtest.Start(t, db, platformtest.WithStateKeys(keys))
	b := platformtest.Start(t, viaRelay, platformtest.WithStateKeys(keys), platformtest.WithConfig(func(c *config.Config) { c.PublicURL = a.URL }))
	h := newHook(t, answersHook)
	a.Tenant(t, "acme")
	h.setSecret(a.Tool(t, "acme", chainTool("order", h.URL)))
	c := newLegacyClient(t, legacyURL(a, "acme"))
	c.initialize("2025-11-25", legacyCaps)
	toB := c.clone()
	toB.url = legacyURL(b, "acme")
	// b has the tenant's catalogue loaded: it needs the database only
	// to pass the answer on.
	if _, status := toB.call("tools/list", obj{}); status != 200 {
		t.Fatalf("tools/list on b: %d", status)
	}
	asked := 0
	msg, _ := c.exchange("tools/call", obj{"name": "order", "arguments": obj{"order": "o-1"}}, func(m map[string]any) bool {
		if m["method"] != "elicitation/create" {
			return false
		}
		asked++
		result, _ := answerEverything("elicitation/create", m["params"].(map[string]any))
		answer := obj{"jsonrpc": "2.0", "id": m["id"], "result": result}
		if asked == 1 {
			relay.Cut()
			if r := toB.post(toB.url, answer); r.Status != 503 {
				t.Errorf("an answer the replica could not pass on: %d %s", r.Status, r.Body)
			}
			relay.Restore()
		}
		if r := c.post(c.url, answer); r.Status != 202 {
			t.Errorf("the answer sent again: %d", r.Status)
		}
		return false
	})
	res, _ := msg["result"].(map[string]any)
	if res == nil || res["isError"] == true || !strings.Contains(toolText(t, res), "Ada") {
		t.Fatalf("the call after its answer was sent again: %v", msg)
	}
}
