package bounded

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestStringIsValidUTF8WithinItsBound(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly-10", 10, "exactly-10"},
		{"eleven-char", 10, "eleven-…"}, // the mark counts: three bytes
		{"ééééé", 6, "é…"},              // a two-byte rune is not split
		{"a\xffb", 10, "a\uFFFDb"},
		{"a\x00b\x00", 10, "a\uFFFDb\uFFFD"},
		{strings.Repeat("x", 1000), 256, strings.Repeat("x", 253) + "…"},
		{"", 5, ""},
		{"abc", 0, "…"},
	}
	for _, tc := range cases {
		got := String(tc.in, tc.n)
		if got != tc.want {
			t.Errorf("String(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("String(%q, %d) is not valid UTF-8", tc.in, tc.n)
		}
		if tc.n >= len("…") && len(got) > tc.n {
			t.Errorf("String(%q, %d) is %d bytes", tc.in, tc.n, len(got))
		}
	}
}

// TestURLNeverKeepsWhatMayHoldASecret: every way a URL can carry a
// secret (user information, a query, a fragment, in hierarchical and
// opaque forms, escaped or not) is dropped.
func TestURLNeverKeepsWhatMayHoldASecret(t *testing.T) {
	cases := map[string]string{
		"https://example.com/a/b":                           "https://example.com/a/b",
		"https://user:pass@example.com/p?token=s3cret#frag": "https://example.com/p",
		"https://example.com/p?":                            "https://example.com/p",
		"https://example.com/p#s3cret":                      "https://example.com/p",
		"docs://readme?s3cret=1":                            "docs://readme",
		"file:///etc/passwd?s3cret":                         "file:///etc/passwd",
		"urn:isbn:123?s3cret":                               "urn:isbn:123",
		"mailto:a@example.com?subject=s3cret":               "mailto:a@example.com",
		"repo://acme/site/README.md?ref=s3cret#L10":         "repo://acme/site/README.md",
		"https://s3cret@example.com/":                       "https://example.com/",
		"https://example.com/%3Fs3cret":                     "https://example.com/%3Fs3cret", // an escaped ? is path, not query
		"http://[::1%25lo]/x?s3cret":                        "http://[::1%25lo]/x",
		"%zz?s3cret":                                        "",
		"":                                                  "",
	}
	for in, want := range cases {
		got := URL(in, Value)
		if got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, "s3cret") && !strings.Contains(want, "s3cret") {
			t.Errorf("URL(%q) kept the secret", in)
		}
	}
	long := "https://example.com/" + strings.Repeat("p", 1000) + "?s3cret"
	if got := URL(long, Value); len(got) > Value || strings.Contains(got, "s3cret") {
		t.Errorf("a long URL recorded as %d bytes: %q", len(got), got)
	}
}
