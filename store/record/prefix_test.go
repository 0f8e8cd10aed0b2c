package record

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestAPrefixIsTheRangeFromItToItsEnd checks prefixEnd against its
// meaning, over prefixes that end at every awkward byte: every string
// that starts with the prefix sorts, bytewise, at or after it and
// before its end; every string between the two starts with it; and the
// end is valid UTF-8 (it is bound as text).
func TestAPrefixIsTheRangeFromItToItsEnd(t *testing.T) {
	prefixes := []string{"a", "dep", "deploy-", "z", "~", "\x7f", "é", "Zoë", "a\u07ff", "\uffff", "\U0010FFFF", "a\U0010FFFF", "\U0010FFFF\U0010FFFF", "\ud7ff", "fl_A"}
	alphabet := []rune{'a', 'z', '-', '~', 0x7f, 0x80, 'é', 0x7ff, 0x800, 0xd7ff, 0xe000, 0xffff, 0x10000, utf8.MaxRune}
	rnd := rand.New(rand.NewPCG(1, 2))
	random := func() string {
		var b strings.Builder
		for range rnd.IntN(5) {
			b.WriteRune(alphabet[rnd.IntN(len(alphabet))])
		}
		return b.String()
	}
	for _, p := range prefixes {
		end, ok := prefixEnd(p)
		if ok && (!utf8.ValidString(end) || end <= p) {
			t.Fatalf("prefix %q: end %q is not valid text above it", p, end)
		}
		for range 2000 {
			s := random()
			if rnd.IntN(2) == 0 {
				s = p + s
			}
			in := s >= p && (!ok || s < end)
			if strings.HasPrefix(s, p) && !in {
				t.Fatalf("prefix %q: %q starts with it but is outside [%q, %q)", p, s, p, end)
			}
			// The range may hold strings without the prefix (substr
			// checks them out); none between p and the next rune's start.
			if in && !strings.HasPrefix(s, p) && s < p+string(utf8.MaxRune) {
				t.Fatalf("prefix %q: %q is in the range close above it without starting with it", p, s)
			}
		}
	}
}
