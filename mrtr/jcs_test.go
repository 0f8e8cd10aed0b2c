package mrtr

import (
	"encoding/json"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"strconv"
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

// FuzzCanonicalizeExact is FuzzCanonicalize for the exact-number mode of
// argument digests: whatever it accepts is valid JSON, canonical (a second
// pass changes nothing), and differs from the RFC 8785 form only in
// numbers.
func FuzzCanonicalizeExact(f *testing.F) {
	for _, s := range []string{`{"id":12345678901234567890123456789}`, `[1e400,-1e-400,0.1000000000000000000001]`,
		`{"b":1,"a":[1.0,"x",null]}`, `-0.0`, `1e99999999999999999999`, `{"a":{"b":{}}}`, "\"\xff\"", `[1,]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		p := jcsParser{in: in, exact: true}
		out, err := p.canonicalize(nil)
		if err != nil {
			return
		}
		if !json.Valid(in) || !json.Valid(out) {
			t.Fatalf("accepted %q -> %q but encoding/json disagrees on validity", in, out)
		}
		q := jcsParser{in: out, exact: true}
		again, err := q.canonicalize(nil)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, out, again, err)
		}
		// Read as doubles, the exact and the RFC 8785 forms are one document.
		if strict, err := Canonicalize(in); err == nil {
			var a, b any
			if json.Unmarshal(strict, &a) == nil && json.Unmarshal(out, &b) == nil && !reflect.DeepEqual(a, b) {
				t.Fatalf("%q: exact form %q and RFC 8785 form %q are different documents", in, out, strict)
			}
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

// Digests of ordinary arguments are the ones the previous version
// computed (recorded from it), so flows in flight across an upgrade keep
// verifying; arguments whose numbers a double cannot hold get new ones.
func TestArgsDigestOfOrdinaryNumbersIsUnchanged(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{`{"n":1,"env":"prod"}`, "XIMGqdf4jQ8EAzn6E_9NoQ"},
		{`{"id":9007199254740992,"ratio":0.1,"big":1e21,"tiny":5e-324,"max":1.7976931348623157e308,"neg":-0.000001}`, "xdcJr9b5FRGo9e75IhomHA"},
		{`{"x":[1.5,2e-7,123456789012345,-42,0,1e300]}`, "vAUa1opXxvTSH4MRYwpHkA"},
	} {
		if got := ArgsDigest(json.RawMessage(c.args)); got != c.want {
			t.Errorf("ArgsDigest(%s) = %s, the previous version gave %s", c.args, got, c.want)
		}
	}
	if got := ArgsDigest(json.RawMessage(`{"id":12345678901234567890123456789}`)); got == "7qaCIUkeBuU0KlpXj-t3Yg" {
		t.Error("a 29-digit id still digests as the double it rounds to")
	}
}

// Two different exact values never share a digest; two spellings of one
// exact value do. Each number is bound as {"id": N}.
func TestArgsDigestBindsTheExactValueOfEveryNumber(t *testing.T) {
	digest := func(n string) string { return ArgsDigest(json.RawMessage(`{"id":` + n + `}`)) }
	differ := [][2]string{
		{"9007199254740993", "9007199254740992"}, // 2^53+1 rounds to 2^53
		{"-9007199254740993", "-9007199254740992"},
		{"18446744073709551617", "18446744073709551616"},
		{"12345678901234567890123", "12345678901234567890124"},
		{"12345678901234567890123456789", "12345678901234567890123456790"},
		{"0.1000000000000000000001", "0.1"},
		{"0.3000000000000000444", "0.30000000000000004"},
		{"0.30000000000000004", "0.3"},
		{"1.0000000000000000000000001", "1"},
		{"333333333.33333329", "333333333.3333333"}, // RFC 8785's example rounds these together
		{"1e400", "2e400"},
		{"1e400", "1e401"},
		{"-1e400", "1e400"},
		{"1e-400", "0"}, // underflows to zero as a double
		{"1e-400", "2e-400"},
		{"-1e-400", "1e-400"},
		{"1e999999999", "2e999999999"},
		{"1e99999999999999999999", "2e99999999999999999999"}, // beyond the exact range: bound byte for byte
		{"1e99999999999999999999", "1e99999999999999999998"},
		{"1.7976931348623157e308", "1.7976931348623158e308"},
		{"1.7976931348623159e308", "1.7976931348623157e308"},
		{"4.9e-324", "5e-324"},
		{"2.4703282292062328e-324", "2.4703282292062327e-324"},
		{"123456789012345678", "123456789012345680"},
	}
	for _, p := range differ {
		if digest(p[0]) == digest(p[1]) {
			t.Errorf("%s and %s share a digest", p[0], p[1])
		}
	}
	same := [][]string{
		{"100", "1e2", "100.0", "1.00e+2", "10E1", "1000e-1", "0.1e3"},
		{"0", "-0", "0.0", "-0.0", "0e5", "-0E-5", "0.000e+99999999999999999999"},
		{"12345678901234567890123", "1.2345678901234567890123e22", "12345678901234567890123.000", "123456789012345678901230e-1"},
		{"9007199254740993", "9007199254740993.0", "9.007199254740993e15", "90071992547409930E-1"},
		{"1e400", "10e399", "0.1e401", "1E+400"},
		{"0.1000000000000000000001", "1.000000000000000000001e-1", "0.10000000000000000000010"},
		{"-1e-400", "-0.1e-399", "-10e-401"},
	}
	for _, group := range same {
		for _, n := range group[1:] {
			if digest(n) != digest(group[0]) {
				t.Errorf("%s and %s are one exact value but digest differently", group[0], n)
			}
		}
	}
}

// The exact form of a number: RFC 8785's where the value is the shortest
// form of a double, and every significant digit otherwise.
func TestExactNumberForms(t *testing.T) {
	tests := []struct{ in, want string }{
		{"1", "1"}, {"1.50", "1.5"}, {"-0", "0"}, {"1e21", "1e+21"}, {"1e20", "100000000000000000000"},
		{"0.1", "0.1"}, {"5e-324", "5e-324"}, {"1e-7", "1e-7"}, {"0.000001", "0.000001"},
		{"9007199254740993", "9007199254740993"},
		{"12345678901234567890123", "1.2345678901234567890123e+22"},
		{"1234567890123456789", "1234567890123456789"},
		{"333333333.33333329", "333333333.33333329"},
		{"0.1000000000000000000001", "0.1000000000000000000001"},
		{"1e400", "1e+400"}, {"-2.50e-400", "-2.5e-400"}, {"1e-400", "1e-400"},
		{"0.0000001000000000000000001", "1.000000000000000001e-7"},
	}
	for _, tt := range tests {
		got, err := appendExactNumber(nil, []byte(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("exact form of %s = %s, %v; want %s", tt.in, got, err, tt.want)
		}
		again, err := appendExactNumber(nil, got)
		if err != nil || string(again) != string(got) {
			t.Errorf("exact form of %s is not stable: %s then %s, %v", tt.in, got, again, err)
		}
	}
}

var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// exactValue is the value of a JSON number by math/big, an oracle
// independent of the canonicalizer. ok is false for numbers whose
// exponent is beyond ±maxExp, too large to check cheaply.
func exactValue(s string, maxExp int) (*big.Rat, bool) {
	if !jsonNumber.MatchString(s) || len(s) > 1000 {
		return nil, false
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimLeft(s[i+1:], "+"))
		if err != nil || e > maxExp || e < -maxExp {
			return nil, false
		}
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

// FuzzExactNumbers checks the exact number forms against math/big: the
// form denotes exactly the number's value, two numbers get one form if
// and only if their values are equal (so argument digests bind values),
// and wherever RFC 8785's double-based form is itself exact, the exact
// form is that one (so ordinary digests are unchanged).
func FuzzExactNumbers(f *testing.F) {
	for _, p := range [][2]string{
		{"9007199254740993", "9007199254740992"}, {"1e2", "100.0"}, {"0.1000000000000000000001", "0.1"},
		{"-0", "0.0e-7"}, {"1e400", "10e399"}, {"333333333.33333329", "333333333.3333333"}, {"5e-324", "4.9e-324"},
		{"12345678901234567890123", "1.2345678901234567890123e22"}, {"1e-400", "0"}, {"-1.5E+3", "-1500"},
	} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ra, okA := exactValue(a, 2000)
		rb, okB := exactValue(b, 2000)
		if !okA || !okB || len(a) > 300 || len(b) > 300 {
			return
		}
		ca, err := appendExactNumber(nil, []byte(a))
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		cb, err := appendExactNumber(nil, []byte(b))
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if v, ok := exactValue(string(ca), 3000); !ok || v.Cmp(ra) != 0 {
			t.Fatalf("%s: exact form %s has another value", a, ca)
		}
		if same := ra.Cmp(rb) == 0; same != (string(ca) == string(cb)) {
			t.Fatalf("%s -> %s and %s -> %s: values equal %v, forms equal %v", a, ca, b, cb, same, !same)
		}
		if same := ra.Cmp(rb) == 0; same != (ArgsDigest(json.RawMessage(`{"n":`+a+`}`)) == ArgsDigest(json.RawMessage(`{"n":`+b+`}`))) {
			t.Fatalf("%s and %s: values equal %v, digests disagree", a, b, same)
		}
		if strict, err := Canonicalize([]byte(a)); err == nil {
			if v, ok := exactValue(string(strict), 3000); ok && v.Cmp(ra) == 0 && string(strict) != string(ca) {
				t.Fatalf("%s: RFC 8785 form %s is exact, but the exact form is %s", a, strict, ca)
			}
		}
	})
}
