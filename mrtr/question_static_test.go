package mrtr

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestAQuestionRenderedAtCompileTimeIsTheOneEachRoundWouldRender checks
// the compile-time rendering of questions that read no arguments, for
// every kind: it is byte for byte (and digest for digest) what rendering
// on the round gives, a rejection reason still reaches the message, and a
// question that reads arguments is never rendered ahead.
func TestAQuestionRenderedAtCompileTimeIsTheOneEachRoundWouldRender(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	for _, tc := range []struct {
		in     Input
		static bool
	}{
		{Input{Name: "f", Kind: KindForm, Message: "Proceed?", RequestedSchema: raw(`{"type":"object","properties":{"ok":{"type":"boolean"}}}`)}, true},
		{Input{Name: "u", Kind: KindURL, Message: "Sign in", URL: "https://id.example/login"}, true},
		{Input{Name: "s", Kind: KindSampling, Sampling: raw(`{"messages":[{"role":"user","content":{"type":"text","text":"Say hi"}}],"maxTokens":5}`)}, true},
		{Input{Name: "r", Kind: KindRoots}, true},
		{Input{Name: "fa", Kind: KindForm, Message: "Hello {{args.who}}?", RequestedSchema: raw(`{"type":"object","properties":{"ok":{"type":"boolean"}}}`)}, false},
		{Input{Name: "ua", Kind: KindURL, Message: "Sign in", URL: "https://id.example/login?u={{args.who}}"}, false},
		{Input{Name: "sa", Kind: KindSampling, Sampling: raw(`{"messages":[{"role":"user","content":{"type":"text","text":"Hi {{args.who}}"}}],"maxTokens":5}`)}, false},
	} {
		t.Run(tc.in.Name, func(t *testing.T) {
			c, err := compileInput(&tc.in, "inputs[0]")
			if err != nil {
				t.Fatal(err)
			}
			if (c.static != nil) != tc.static {
				t.Fatalf("rendered at compile time: %v, want %v", c.static != nil, tc.static)
			}
			if !tc.static {
				return
			}
			fresh := c
			fresh.static = nil
			want, err := fresh.render(nil, "")
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.render(nil, "")
			if err != nil {
				t.Fatal(err)
			}
			if got.digest != want.digest || got.req.Method != want.req.Method || !bytes.Equal(got.req.Params, want.req.Params) {
				t.Fatalf("compile-time question %s %s %s, a round's %s %s %s",
					got.req.Method, got.req.Params, got.digest, want.req.Method, want.req.Params, want.digest)
			}
			withReason, err := c.render(nil, "too short")
			if err != nil {
				t.Fatal(err)
			}
			if (tc.in.Kind == KindForm || tc.in.Kind == KindURL) &&
				(!strings.Contains(string(withReason.req.Params), "too short") || withReason.digest == got.digest) {
				t.Fatalf("a rejection reason did not reach the question: %s", withReason.req.Params)
			}
		})
	}
}
