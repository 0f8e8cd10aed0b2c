package jsontext

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestAppendStringReadsBackAsEncodingJSONWould(t *testing.T) {
	for _, s := range []string{
		"", "plain", `quote " and back\slash`, "control \x01\x1f\n\r\t", "nul\x00inside", "\x00",
		"bad\xffutf8", "\xc3", "truncated \xe2\x82", "é ✓ 𝄞", "\u2028\u2029", "<html>&amp;",
		strings.Repeat("a\"", 100), "ends with \\",
	} {
		b := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%q encoded as %s: not a JSON string: %v", s, b, err)
		}
		// encoding/json replaces each invalid byte with U+FFFD too; NUL
		// is replaced here only.
		std, _ := json.Marshal(s)
		var want string
		_ = json.Unmarshal(std, &want)
		want = strings.ReplaceAll(want, "\x00", "\uFFFD")
		if back != want {
			t.Fatalf("%q read back as %q, want %q", s, back, want)
		}
		if got := Text(s); got != want {
			t.Fatalf("Text(%q) = %q, want %q, as AppendString stores it", s, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("a\x00b\xff\"\\\n")
	f.Fuzz(func(t *testing.T, s string) {
		b := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%q encoded as %s: %v", s, b, err)
		}
		if strings.IndexByte(back, 0) >= 0 {
			t.Fatalf("%q read back with a NUL", s)
		}
		if string(AppendString(nil, []byte(s))) != string(b) {
			t.Fatalf("%q encodes differently as bytes", s)
		}
		if Text(s) != back {
			t.Fatalf("Text(%q) = %q, but AppendString stores %q", s, Text(s), back)
		}
	})
}

func TestAppendStringOfBytesMatchesStringAndDoesNotCopyIt(t *testing.T) {
	src := "héllo \xff wörld ✓ 𝄞 \"q\" \x00 \x1f"
	if got, want := string(AppendString(nil, []byte(src))), string(AppendString(nil, src)); got != want {
		t.Fatalf("bytes encode as %s, the string as %s", got, want)
	}
	buf, bs := make([]byte, 0, 256), []byte(src)
	if n := testing.AllocsPerRun(100, func() { buf = AppendString(buf[:0], bs) }); n != 0 {
		t.Fatalf("%v allocations encoding bytes into a large enough buffer, want none", n)
	}
}
