package endpoint

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/opsmcp/platform/mrtr"
)

// TestDecodeCacheGivesWhatDecodingGives: the capabilities a request
// carries decode the same from the cache as afresh, the first time and
// every time after, including byte strings that differ only where
// decoding would notice (duplicate members, escapes, spacing); what
// fails to decode fails every time and is not remembered; a value over
// the key bound is decoded and not kept; and a stream of distinct values
// never holds more than the bound.
func TestDecodeCacheGivesWhatDecodingGives(t *testing.T) {
	var c decodeCache[mrtr.ClientCapabilities]
	inputs := []string{
		`{}`,
		`{"elicitation":{}}`,
		`{"elicitation":{"form":{},"url":{}},"sampling":{"tools":{}}}`,
		`{"elicitation":{"form":{}},"elicitation":{"url":{}}}`, // the last member wins, as decoding says
		`{"elicitation" : { "url" : { } } }`,
		`{"\u0065licitation":{"url":{}}}`,
		`{"extensions":{"io.modelcontextprotocol/tasks":{"list":{}}},"roots":{"listChanged":true}}`,
		`{"roots":{"listChanged":false}}`,
		`{"elicitation":null}`,
	}
	for round := range 3 {
		for _, in := range inputs {
			var want mrtr.ClientCapabilities
			if err := json.Unmarshal([]byte(in), &want); err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			var got mrtr.ClientCapabilities
			if err := c.decode([]byte(in), &got); err != nil {
				t.Fatalf("round %d, %s: %v", round, in, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, %s: got %+v, want %+v", round, in, got, want)
			}
		}
	}
	if c.len() != len(inputs) {
		t.Fatalf("the cache holds %d values for %d inputs", c.len(), len(inputs))
	}

	for _, bad := range []string{`{"elicitation":`, `{"roots":{"listChanged":"yes"}}`, `{"extensions":[]}`} {
		for range 2 {
			var got mrtr.ClientCapabilities
			if c.decode([]byte(bad), &got) == nil {
				t.Fatalf("%s decoded", bad)
			}
		}
	}
	if c.len() != len(inputs) {
		t.Fatalf("failed decodes were remembered: %d values", c.len())
	}

	big := `{"extensions":{"x":"` + strings.Repeat("a", decodeCacheKey) + `"}}`
	var got mrtr.ClientCapabilities
	if err := c.decode([]byte(big), &got); err != nil || string(got.Extensions["x"]) != `"`+strings.Repeat("a", decodeCacheKey)+`"` {
		t.Fatalf("an oversize value: %v, %d bytes of x", err, len(got.Extensions["x"]))
	}
	if c.len() != len(inputs) {
		t.Fatal("an oversize value was kept")
	}

	for i := range 5 * decodeCacheEntries {
		var v mrtr.ClientCapabilities
		in := fmt.Sprintf(`{"extensions":{"e%d":{}}}`, i)
		if err := c.decode([]byte(in), &v); err != nil || len(v.Extensions) != 1 || v.Extensions[fmt.Sprintf("e%d", i)] == nil {
			t.Fatalf("%s: %v, %+v", in, err, v)
		}
		if n := c.len(); n > decodeCacheEntries {
			t.Fatalf("the cache holds %d values, over its bound of %d", n, decodeCacheEntries)
		}
	}
}

// BenchmarkClientCapabilities decodes a typical client's capabilities
// as every request carries them: afresh, and through the cache.
func BenchmarkClientCapabilities(b *testing.B) {
	raw := []byte(`{"elicitation":{"form":{},"url":{}},"sampling":{"tools":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}`)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v mrtr.ClientCapabilities
			if err := json.Unmarshal(raw, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		var c decodeCache[mrtr.ClientCapabilities]
		b.ReportAllocs()
		for b.Loop() {
			var v mrtr.ClientCapabilities
			if err := c.decode(raw, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
