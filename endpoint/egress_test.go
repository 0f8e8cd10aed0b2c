package endpoint_test

import (
	"strings"
	"testing"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/testkit/oidctest"
	"github.com/opsmcp/platform/testkit/platformtest"
)

func privateTargets(allow bool) platformtest.Option {
	return platformtest.WithConfig(func(c *config.Config) { c.AllowPrivateTargets, c.AllowPrivateWebhooks = allow, false })
}

// Every spelling of a loopback or otherwise private webhook address is
// refused by the delivery guard, the zoned IPv6 literal (which reached
// loopback past the earlier guard) among them, and the backend is never
// reached.
func TestWebhookGuardRefusesEverySpellingOfAPrivateAddress(t *testing.T) {
	h := newHook(t, replyText("x"))
	p := setup(t, h, privateTargets(false))
	port := h.URL[strings.LastIndex(h.URL, ":"):]
	hosts := []string{"[::1%25lo]", "[::1]", "[0:0:0:0:0:0:0:1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::127.0.0.1]",
		"[64:ff9b::7f00:1]", "[2002:7f00:1::]", "0.0.0.0", "[::]", "localhost", "[fe80::1%25lo]", "169.254.169.254", "100.64.0.1"}
	for i, host := range hosts {
		name := "spelling" + string(rune('a'+i))
		h.setSecret(p.Tool(t, "acme", echoTool(name, "http://"+host+port+"/hook")))
		res := platformtest.Result(t, p.MCP(t, "acme", "tools/call", obj{"name": name, "arguments": obj{}}))
		if res["isError"] != true || !strings.Contains(toolText(t, res), "(refused_address)") {
			t.Errorf("%s: got %v", host, res)
		}
	}
	if h.last() != nil {
		t.Fatal("the webhook was reached")
	}
}

// The operator setting governs token verification too: without private
// targets, a tenant's issuer on loopback is never fetched and its tokens
// are refused (reason "discovery"); with them, under the new setting name
// alone, the same issuer works.
func TestIssuerFetchesFollowThePrivateTargetsSetting(t *testing.T) {
	op := oidctest.Start(t)
	for _, allow := range []bool{false, true} {
		h := newHook(t, replyText("ok"))
		p := platformtest.Start(t, platformtest.SQLiteURL(t), privateTargets(allow))
		authTenant(t, p, "acme", op, oidctest.ClientA, false)
		h.setSecret(p.Tool(t, "acme", echoTool("echo", h.URL)))
		tok := op.UserToken(t, oidctest.ClientA, op.UserName(1))
		r := bearerCall(t, p, "acme", tok, obj{"name": "echo", "arguments": obj{}, "_meta": platformtest.Meta(nil)})
		switch {
		case allow && r.Status != 200:
			t.Errorf("private targets allowed: HTTP %d %s", r.Status, r.Body)
		case !allow && (r.Status != 401 || !strings.Contains(p.Logs.String(), `"reason":"discovery"`)):
			t.Errorf("private targets refused: HTTP %d, want 401 with reason discovery in the log", r.Status)
		}
	}
}
