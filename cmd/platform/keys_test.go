package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/testkit/platformtest"
)

func TestKeysVerbs(t *testing.T) {
	mk := make([]byte, 32)
	rand.Read(mk)
	p := platformtest.Start(t, platformtest.SQLiteURL(t), platformtest.WithConfig(func(c *config.Config) {
		c.Keys.Provider = "local"
		c.Keys.MasterKey = base64.StdEncoding.EncodeToString(mk)
		c.Keys.Refresh = 100 * time.Millisecond
		c.Keys.ClockSkew = 100 * time.Millisecond
	}))
	p.Tenant(t, "acme")
	keys := func(want int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		args = append([]string{"keys"}, args...)
		args = append(args, "--url", p.URL, "--token", platformtest.AdminToken)
		if code := run(args, &out, &errb); code != want {
			t.Fatalf("platform %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out.String(), errb.String())
		}
		return out.String() + errb.String()
	}

	if out := keys(1, "show", "acme"); !strings.Contains(out, "no key ring yet") {
		t.Fatalf("show before any ring:\n%s", out)
	}
	keys(0, "create", "acme")
	out := keys(0, "show", "acme")
	if !strings.Contains(out, "phase steady") || !strings.Contains(out, "local provider") || !strings.Contains(out, "KEY") {
		t.Fatalf("show:\n%s", out)
	}
	var v struct {
		Keys []struct{ ID string }
	}
	if err := json.Unmarshal([]byte(keys(0, "show", "acme", "--json")), &v); err != nil || len(v.Keys) != 1 {
		t.Fatalf("show --json: %v %+v", err, v)
	}
	k1 := v.Keys[0].ID
	if out := keys(0, "rotate", "acme"); !strings.Contains(out, "phase staged") {
		t.Fatalf("rotate:\n%s", out)
	}
	if out := keys(1, "rotate", "acme"); !strings.Contains(out, "in progress") {
		t.Fatalf("rotate again:\n%s", out)
	}
	if out := keys(0, "period", "acme", "45d"); !strings.Contains(out, "period 1080h0m0s") {
		t.Fatalf("period:\n%s", out)
	}
	if out := keys(2, "period", "acme", "soon"); !strings.Contains(out, "bad period") {
		t.Fatalf("bad period:\n%s", out)
	}
	if out := keys(2, "revoke", "acme", k1); !strings.Contains(out, "--confirm "+k1) {
		t.Fatalf("unconfirmed revoke:\n%s", out)
	}
	if out := keys(0, "revoke", "acme", k1, "--confirm", k1); strings.Contains(out, k1) {
		t.Fatalf("revoked key still shown:\n%s", out)
	}
	if out := keys(1, "show", "nope"); !strings.Contains(out, "Not found") {
		t.Fatalf("unknown tenant:\n%s", out)
	}
	if out := keys(2, "frobnicate", "acme"); !strings.Contains(out, "unknown verb") {
		t.Fatalf("unknown verb:\n%s", out)
	}
}
