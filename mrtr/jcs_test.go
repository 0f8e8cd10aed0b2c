package mrtr

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// RFC 8785 §3.2.2.3 and Appendix B: IEEE 754 bit patterns and their
// ECMAScript serializations.
func TestESNumberFormattingMatchesTheRFC8785Table(t *testing.T) {
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"}, // minus zero
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tt := range tests {
		got, err := appendESNumber(nil, math.Float64frombits(tt.bits))
		if err != nil || string(got) != tt.want {
			t.Errorf("%016x: got %q, %v; want %q", tt.bits, got, err, tt.want)
		}
	}
	for _, bits := range []uint64{0x7fffffffffffffff, 0x7ff0000000000000, 0xfff0000000000000} {
		if got, err := appendESNumber(nil, math.Float64frombits(bits)); err == nil {
			t.Errorf("%016x: got %q, want an error for NaN/Infinity", bits, got)
		}
	}
}

func TestCanonicalizeNumberLiterals(t *testing.T) {
	tests := []struct{ in, want string }{
		{"1", "1"}, {"1.0", "1"}, {"1e0", "1"}, {"1E0", "1"}, {"10e-1", "1"}, {"0.1e1", "1"},
		{"-0", "0"}, {"-0.0", "0"}, {"0e10", "0"},
		{"1e21", "1e+21"}, {"1e20", "100000000000000000000"},
		{"333333333.33333329", "333333333.3333333"},
		{"1e-7", "1e-7"}, {"0.000001", "0.000001"}, {"0.0000001", "1e-7"},
		{"5e-324", "5e-324"}, {"4.50", "4.5"}, {"2e-3", "0.002"},
		{"0.000000000000000000000000001", "1e-27"}, {"1E30", "1e+30"},
		{"123456789012345", "123456789012345"},
		{"1234567890123456789", "1234567890123456800"},
		{"-12", "-12"}, {"1e-400", "0"},
	}
	for _, tt := range tests {
		got, err := Canonicalize([]byte(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

// The example of RFC 8785 §3.2.4.
func TestCanonicalizeRFC8785Example(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	got, err := Canonicalize([]byte(in))
	if err != nil || string(got) != want {
		t.Fatalf("got %s, %v\nwant %s", got, err, want)
	}
}

// RFC 8785 §3.2.3: members sort by UTF-16 code units, which puts U+1F600
// (surrogates D83D DE00) before U+FB33.
func TestCanonicalizeSortsMembersByUTF16CodeUnits(t *testing.T) {
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	want := "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\"," +
		"\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
	got, err := Canonicalize([]byte(in))
	if err != nil || string(got) != want {
		t.Fatalf("got %s, %v\nwant %s", got, err, want)
	}
}

func TestCanonicalizeNestedStructuresAndEscapes(t *testing.T) {
	tests := []struct{ in, want string }{
		{` { "b" : [ 1 , { "z":1, "a":2 } ] , "a" : {} } `, `{"a":{},"b":[1,{"a":2,"z":1}]}`},
		{`[]`, `[]`}, {` [ ] `, `[]`}, {`{}`, `{}`}, {`"x"`, `"x"`}, {`true`, `true`},
		{`"\u0000\u001f\b\f\n\r\t"`, `"\u0000\u001f\b\f\n\r\t"`},
		{`"\u2028\/<>&"`, "\"\u2028/<>&\""},
		{`"\uD834\uDD1E"`, `"𝄞"`},
		{`{"a\u0062":1,"aa":2}`, `{"aa":2,"ab":1}`},
	}
	for _, tt := range tests {
		got, err := Canonicalize([]byte(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestCanonicalizeRejectsWhatIsNotIJSON(t *testing.T) {
	deep := strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1)
	for name, in := range map[string]string{
		"empty":                      ``,
		"trailing data":              `{} {}`,
		"duplicate key":              `{"a":1,"a":2}`,
		"duplicate key via escape":   `{"a":1,"\u0061":2}`,
		"duplicate key out of order": `{"b":1,"a":1,"b":2}`,
		"invalid UTF-8":              "\"\xff\"",
		"lone high surrogate":        `"\ud800"`,
		"lone low surrogate":         `"\udc00"`,
		"reversed surrogates":        `"\udc00\ud800"`,
		"raw control character":      "\"a\nb\"",
		"bad escape":                 `"\x"`,
		"short unicode escape":       `"\u12"`,
		"unterminated string":        `"abc`,
		"leading zero":               `01`,
		"leading plus":               `+1`,
		"bare dot":                   `1.`,
		"bare exponent":              `1e`,
		"overflow":                   `1e400`,
		"NaN literal":                `NaN`,
		"single quotes":              `{'a':1}`,
		"trailing comma":             `[1,]`,
		"missing colon":              `{"a" 1}`,
		"non-string key":             `{1:1}`,
		"too deep":                   deep,
		"unterminated object":        `{"a":1`,
	} {
		if got, err := Canonicalize([]byte(in)); err == nil {
			t.Errorf("%s: Canonicalize(%q) = %s, want an error", name, in, got)
		}
	}
}

func TestCanonicalizeIsIdempotent(t *testing.T) {
	in := `{"z":[1.50,-0,"\u00e9",{"y":null,"x":1e-9}],"a":"\ud83d\ude00"}`
	once, err := Canonicalize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	twice, err := Canonicalize(once)
	if err != nil || string(once) != string(twice) {
		t.Fatalf("not idempotent: %s then %s, %v", once, twice, err)
	}
}

func TestArgsDigestTreatsAbsentNullAndEmptyObjectAlike(t *testing.T) {
	want := ArgsDigest(json.RawMessage(`{}`))
	if len(want) != 22 {
		t.Fatalf("digest %q is %d characters, want 22", want, len(want))
	}
	for _, raw := range []string{"", "null", " null\n", "{ }", " {} "} {
		if got := ArgsDigest(json.RawMessage(raw)); got != want {
			t.Errorf("ArgsDigest(%q) = %s, want %s", raw, got, want)
		}
	}
	if got := ArgsDigest(nil); got != want {
		t.Errorf("ArgsDigest(nil) = %s, want %s", got, want)
	}
}

func TestArgsDigestIgnoresSpellingButNotValue(t *testing.T) {
	base := ArgsDigest(json.RawMessage(`{"n":1,"env":"prod"}`))
	for _, same := range []string{
		`{"env":"prod","n":1}`, `{"n":1.0,"env":"prod"}`, `{"n":1e0,"env":"pro\u0064"}`, " {\n\"env\" : \"prod\" , \"n\":10e-1}",
	} {
		if got := ArgsDigest(json.RawMessage(same)); got != base {
			t.Errorf("ArgsDigest(%s) = %s, want %s", same, got, base)
		}
	}
	for _, other := range []string{
		`{"n":2,"env":"prod"}`, `{"n":"1","env":"prod"}`, `{"env":"prod"}`, `{"n":1,"env":"Prod"}`, `[1,"prod"]`, `{}`,
	} {
		if got := ArgsDigest(json.RawMessage(other)); got == base {
			t.Errorf("ArgsDigest(%s) collides with the base arguments", other)
		}
	}
}

func TestArgsDigestBindsNonCanonicalArgumentsByteForByte(t *testing.T) {
	a := ArgsDigest(json.RawMessage(`{"s":"\ud800"}`))
	b := ArgsDigest(json.RawMessage(`{"s":"\udbff"}`))
	c := ArgsDigest(json.RawMessage(`{"s": "\ud800"}`))
	if len(a) != 22 || a == b || a == c {
		t.Fatalf("non-canonical arguments must get distinct 22-character digests: %q %q %q", a, b, c)
	}
	if a != ArgsDigest(json.RawMessage(`{"s":"\ud800"}`)) {
		t.Fatal("the digest of non-canonical arguments is not deterministic")
	}
}

func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1.0,"x",null]}`, `"\ud83d\ude00"`, `1e21`, `-0.0`, `{"a":{"b":{}}}`, "\"\xff\"", `[1,]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		if err != nil {
			return
		}
		if !json.Valid(in) || !json.Valid(out) {
			t.Fatalf("accepted %q -> %q but encoding/json disagrees on validity", in, out)
		}
		again, err := Canonicalize(out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, out, again, err)
		}
	})
}

func BenchmarkArgsDigest(b *testing.B) {
	args := json.RawMessage(`{"replicas":3,"env":"prod","tags":["a","b"],"dry_run":false}`)
	b.ReportAllocs()
	for b.Loop() {
		argsDigest(args)
	}
}
