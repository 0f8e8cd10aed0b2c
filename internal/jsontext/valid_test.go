package jsontext

import (
	"encoding/json"
	"strings"
	"testing"
)

// validCases are documents at every edge of the grammar, each judged
// by encoding/json in the test rather than by a hand-written answer.
var validCases = []string{
	``, ` `, `{}`, `[]`, ` { } `, "\t[\n]\r", `{`, `}`, `[`, `]`, `[}`, `{]`, `{}}`, `[]]`, `{} {}`, `[][]`,
	`""`, `"a"`, `"`, `"\"`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\a"`, `"\x41"`, `"\u0041"`, `"\u004"`, `"\u00G1"`,
	`"\uD800"`, `"\uDFFF\uD800"`, `"\u"`, `"\u12"`, "\"\x00\"", "\"\x1f\"", "\"\x7f\"", "\"\xff\xfe\"", "\"é\"", "\"\t\"",
	`0`, `-0`, `00`, `01`, `-`, `-a`, `1.`, `1.0`, `.1`, `1e`, `1e+`, `1e-2`, `1E+20`, `1.5e3`, `-1.5E-3`, `1e1.5`,
	`+1`, `0x10`, `1_000`, `123456789012345678901234567890`, `1e999999`, `- 1`, `0.`, `0.e1`, `2.e3`, `0e0`,
	`true`, `false`, `null`, `tru`, `True`, `nul`, `nulll`, `truefalse`, `true false`, `nan`, `Infinity`,
	`{"a":1}`, `{"a":1,}`, `{,"a":1}`, `{"a" 1}`, `{"a":}`, `{a:1}`, `{'a':1}`, `{"a":1 "b":2}`, `{"a":1,"b":2}`,
	`{"a":{"b":{"c":[1,2,{"d":null}]}}}`, `[1,2,3]`, `[1,,2]`, `[,1]`, `[1,]`, `[1 2]`, `[[]]`, `[[],[]]`, `[{}, {} ]`,
	`{"":""}`, `{"a":[]}`, `{"a":{}}`, `{ "a" : [ 1 , { } ] , "b" : "" }`, `[1]x`, `{"a":1}x`, `"a"x`, `1x`, `[1]]`,
	"{\"a\":1}\v", "\v{}", "\u00a0{}", `{"a":1}` + "\x00",
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"n":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
}

func TestValidAgreesWithEncodingJSON(t *testing.T) {
	cases := append([]string(nil), validCases...)
	// Nesting at and around the depth Valid follows itself, and far past
	// it, empty containers (which open no level) among them.
	for _, n := range []int{1, 63, 64, 65, 200, 10000, 10001} {
		cases = append(cases,
			strings.Repeat("[", n)+strings.Repeat("]", n),
			strings.Repeat("[", n)+strings.Repeat("]", n-1),
			strings.Repeat(`{"a":`, n)+"1"+strings.Repeat("}", n),
			strings.Repeat(`{"a":[`, n)+"{}"+strings.Repeat("]}", n),
			strings.Repeat(`[{},`, n)+"1"+strings.Repeat("]", n))
	}
	for _, c := range cases {
		if got, want := Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%.60q) = %v, encoding/json says %v", c, got, want)
		}
	}
}

// FuzzValid checks Valid against encoding/json's Valid on any bytes:
// the request path's fast decoding rests on the two agreeing.
func FuzzValid(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := Valid(data), json.Valid(data); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", data, got, want)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	doc := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"tool0007","arguments":{},"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":"` +
		strings.Repeat("AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_", 20) + `","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1.0.0"}}}}`)
	for _, c := range []struct {
		name  string
		valid func([]byte) bool
	}{{"jsontext", Valid}, {"encoding-json", json.Valid}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if !c.valid(doc) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
