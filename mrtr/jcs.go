package mrtr

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting of arrays and objects Canonicalize
// accepts. Arguments arrive from the network before any schema check, so
// the canonicalizer must not let a deep document drive unbounded recursion.
const maxJSONDepth = 512

// Canonicalize returns the RFC 8785 (JSON Canonicalization Scheme) form of
// the JSON text in data: no insignificant whitespace, object members sorted
// by the UTF-16 code units of their names, numbers in ECMAScript
// Number.prototype.toString form (so 1, 1.0 and 1e0 are one value) and
// strings with the minimal escaping the RFC prescribes.
//
// The input must be I-JSON (RFC 7493), as RFC 8785 requires: invalid UTF-8,
// lone surrogate escapes, duplicate member names and numbers outside the
// IEEE 754 double range are errors rather than being silently altered.
func Canonicalize(data []byte) ([]byte, error) {
	p := jcsParser{in: data}
	return p.canonicalize(make([]byte, 0, len(data)))
}

// canonicalize appends the canonical form of p.in to dst; p.out keeps the
// (possibly grown) buffer for reuse.
func (p *jcsParser) canonicalize(dst []byte) ([]byte, error) {
	p.skipSpace()
	out, err := p.value(dst, 0)
	if err != nil {
		return nil, err
	}
	p.out = out
	p.skipSpace()
	if p.pos != len(p.in) {
		return nil, p.errorf("trailing data after JSON value")
	}
	return out, nil
}

// ArgsDigest is the argument binding carried in sealed request state:
// base64url-nopad(SHA-256(JCS(args))[:16]), always 22 characters.
//
// Absent arguments, null and {} digest identically, because a client may
// legitimately send any of them for "no arguments". Canonicalization makes
// the digest independent of key order, whitespace and number spelling, so a
// client that re-serializes the same arguments on its retry is not refused.
//
// Numbers are bound by their exact value, not by the double nearest to
// it: the webhook receives the arguments as sent, so a confirmation given
// for id 12345678901234567890123 must not complete a call for id
// 12345678901234567890124, though both round to one double. A number
// whose exact value is the shortest form of a double (every integer up to
// 2^53, 0.1, 1e21, ...) is written as RFC 8785 writes it, so digests of
// ordinary arguments are what they were before exact numbers; any other
// (more digits than a double holds, beyond its range, below its least
// subnormal) keeps all its significant digits in the same layout, for
// example 1.2345678901234567890123e+22. Two spellings of one exact value
// (100, 100.0, 1e2) digest alike; two different values never do. Minus
// zero digests as zero, as in RFC 8785: -0 and 0 are one exact value,
// every JSON parser compares them equal, and a digest that told them apart
// would refuse a client whose serializer drops the sign on its retry.
//
// Arguments that are not I-JSON (invalid UTF-8, a lone surrogate escape, a
// duplicate key) cannot be canonicalized; they are digested byte for byte
// under a distinct domain prefix instead, so they are still bound exactly
// and can never collide with a canonical digest (canonical JSON never
// begins with a NUL byte).
func ArgsDigest(raw json.RawMessage) string {
	d := argsDigest(raw)
	return string(d[:])
}

// argsDigestLen is the length of an ArgsDigest: 16 bytes in base64url.
const argsDigestLen = 22

// argsDigest is ArgsDigest without allocating for typical arguments, for
// the verification path.
func argsDigest(raw json.RawMessage) [argsDigestLen]byte {
	var sum [sha256.Size]byte
	p := parserPool.Get().(*jcsParser)
	if canon, err := canonicalArgs(p, raw); err == nil {
		sum = sha256.Sum256(canon)
	} else {
		h := sha256.New()
		h.Write([]byte("\x00opsmcp/non-canonical-args\x00"))
		h.Write(raw)
		h.Sum(sum[:0])
	}
	p.release()
	var d [argsDigestLen]byte
	b64Encode(d[:], sum[:16])
	return d
}

// parserPool recycles parsers and their buffers on the argument-digest
// path, which runs on every request that carries state.
var parserPool = sync.Pool{New: func() any { return new(jcsParser) }}

// maxPooledParser bounds the buffers a pooled parser may keep.
const maxPooledParser = 16 << 10

func (p *jcsParser) release() {
	if cap(p.out) > maxPooledParser || cap(p.tmp) > maxPooledParser ||
		cap(p.names) > maxPooledParser || cap(p.scratch) > maxPooledParser {
		return
	}
	*p = jcsParser{out: p.out[:0], tmp: p.tmp[:0], names: p.names[:0], scratch: p.scratch[:0]}
	parserPool.Put(p)
}

// canonicalArgs canonicalizes tool arguments into p's output buffer,
// mapping absent and null to {}.
func canonicalArgs(p *jcsParser, raw json.RawMessage) ([]byte, error) {
	i, j := 0, len(raw)
	for i < j && isJSONSpace(raw[i]) {
		i++
	}
	for j > i && isJSONSpace(raw[j-1]) {
		j--
	}
	if t := raw[i:j]; len(t) == 0 || string(t) == "null" {
		return []byte("{}"), nil
	}
	p.in = raw
	p.exact = true
	return p.canonicalize(p.out[:0])
}

func isJSONSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

type jcsParser struct {
	in      []byte
	pos     int
	out     []byte // output buffer, kept for reuse by pooled parsers
	scratch []byte // decoded string values, reused
	names   []byte // decoded member names that needed unescaping
	tmp     []byte // reordering space for unsorted objects, reused
	// exact writes numbers a double cannot hold exactly with every
	// significant digit (see ArgsDigest) instead of refusing or rounding.
	exact bool
}

func (p *jcsParser) errorf(format string, args ...any) error {
	return fmt.Errorf("jcs: offset %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *jcsParser) skipSpace() {
	for p.pos < len(p.in) && isJSONSpace(p.in[p.pos]) {
		p.pos++
	}
}

// value appends the canonical form of the value at p.pos to out.
func (p *jcsParser) value(out []byte, depth int) ([]byte, error) {
	if p.pos >= len(p.in) {
		return nil, p.errorf("unexpected end of input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(out, depth+1)
	case c == '[':
		return p.array(out, depth+1)
	case c == '"':
		s, err := p.str(p.scratch[:0])
		if err != nil {
			return nil, err
		}
		p.scratch = s[:0]
		return appendJCSString(out, s), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(out)
	default:
		for _, lit := range [...]string{"null", "true", "false"} {
			if len(p.in)-p.pos >= len(lit) && string(p.in[p.pos:p.pos+len(lit)]) == lit {
				p.pos += len(lit)
				return append(out, lit...), nil
			}
		}
		return nil, p.errorf("invalid character %q", c)
	}
}

func (p *jcsParser) array(out []byte, depth int) ([]byte, error) {
	if depth > maxJSONDepth {
		return nil, p.errorf("nesting deeper than %d", maxJSONDepth)
	}
	p.pos++ // [
	out = append(out, '[')
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return append(out, ']'), nil
	}
	for {
		p.skipSpace()
		var err error
		if out, err = p.value(out, depth); err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.in) {
			return nil, p.errorf("unterminated array")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
			out = append(out, ',')
		case ']':
			p.pos++
			return append(out, ']'), nil
		default:
			return nil, p.errorf("expected ',' or ']' in array")
		}
	}
}

// member locates one canonical "name":value pair inside the output buffer,
// with the decoded name kept for sorting and duplicate detection.
type member struct {
	name   []byte
	lo, hi int
}

func (p *jcsParser) object(out []byte, depth int) ([]byte, error) {
	if depth > maxJSONDepth {
		return nil, p.errorf("nesting deeper than %d", maxJSONDepth)
	}
	p.pos++ // {
	start := len(out)
	out = append(out, '{')
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return append(out, '}'), nil
	}
	var local [8]member
	members := local[:0]
	sorted := true
	for {
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return nil, p.errorf("expected member name")
		}
		name, err := p.name()
		if err != nil {
			return nil, err
		}
		m := member{name: name, lo: len(out)}
		if n := len(members); n > 0 {
			switch c := compareUTF16(members[n-1].name, m.name); {
			case c == 0:
				return nil, p.errorf("duplicate member name")
			case c > 0:
				sorted = false
			}
		}
		out = appendJCSString(out, name)
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return nil, p.errorf("expected ':' after member name")
		}
		p.pos++
		out = append(out, ':')
		p.skipSpace()
		if out, err = p.value(out, depth); err != nil {
			return nil, err
		}
		m.hi = len(out)
		members = append(members, m)
		p.skipSpace()
		if p.pos >= len(p.in) {
			return nil, p.errorf("unterminated object")
		}
		if p.in[p.pos] == '}' {
			p.pos++
			break
		}
		if p.in[p.pos] != ',' {
			return nil, p.errorf("expected ',' or '}' in object")
		}
		p.pos++
		out = append(out, ',')
	}
	if sorted {
		return append(out, '}'), nil
	}
	slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.name, b.name) })
	for i := 1; i < len(members); i++ {
		if string(members[i-1].name) == string(members[i].name) {
			return nil, p.errorf("duplicate member name")
		}
	}
	p.tmp = append(p.tmp[:0], out[start+1:]...)
	body := p.tmp
	out = out[:start+1]
	for i, m := range members {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, body[m.lo-start-1:m.hi-start-1]...)
	}
	return append(out, '}'), nil
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785
// §3.2.3 requires. UTF-8 byte order equals code point order, which differs
// from UTF-16 order only between supplementary characters (encoded as
// surrogates 0xD800-0xDFFF) and BMP characters from 0xE000 up.
func compareUTF16(a, b []byte) int {
	for len(a) > 0 && len(b) > 0 {
		if a[0] < utf8.RuneSelf && b[0] < utf8.RuneSelf {
			if a[0] != b[0] {
				return int(a[0]) - int(b[0])
			}
			a, b = a[1:], b[1:]
			continue
		}
		ra, na := utf8.DecodeRune(a)
		rb, nb := utf8.DecodeRune(b)
		if ra != rb {
			return int(utf16Lead(ra)) - int(utf16Lead(rb))
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// utf16Lead is the first UTF-16 code unit of r; it decides the order of two
// distinct runes (equal lead surrogates imply equal high bits, and the
// trailing surrogate then orders like the code point).
func utf16Lead(r rune) rune {
	if r >= 0x10000 {
		hi, lo := utf16.EncodeRune(r)
		// Fold the trailing unit in below the lead so distinct supplementary
		// runes sharing a lead still order by code point.
		return hi<<10 | (lo - 0xDC00)
	}
	return r << 10
}

// name decodes a member name. A name without escapes or non-ASCII bytes,
// the usual case, is returned as a slice of the input; any other is
// decoded into p.names. The result stays valid for the whole parse.
func (p *jcsParser) name() ([]byte, error) {
	for i := p.pos + 1; i < len(p.in); i++ {
		c := p.in[i]
		if c == '"' {
			name := p.in[p.pos+1 : i : i]
			p.pos = i + 1
			return name, nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
	}
	start := len(p.names)
	names, err := p.str(p.names)
	if err != nil {
		return nil, err
	}
	p.names = names
	return names[start:len(names):len(names)], nil
}

// str decodes the JSON string at p.pos, appending its UTF-8 bytes to dst.
func (p *jcsParser) str(dst []byte) ([]byte, error) {
	p.pos++ // opening quote
	for {
		// Copy the run of bytes that need no interpretation in one go.
		i := p.pos
		for i < len(p.in) {
			c := p.in[i]
			if c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
				break
			}
			i++
		}
		dst = append(dst, p.in[p.pos:i]...)
		p.pos = i
		if p.pos >= len(p.in) {
			return nil, p.errorf("unterminated string")
		}
		switch c := p.in[p.pos]; {
		case c == '"':
			p.pos++
			return dst, nil
		case c < 0x20:
			return nil, p.errorf("control character in string")
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(p.in[p.pos:])
			if r == utf8.RuneError && n <= 1 {
				return nil, p.errorf("invalid UTF-8 in string")
			}
			dst = append(dst, p.in[p.pos:p.pos+n]...)
			p.pos += n
		default: // backslash
			if p.pos+1 >= len(p.in) {
				return nil, p.errorf("unterminated escape")
			}
			e := p.in[p.pos+1]
			p.pos += 2
			switch e {
			case '"', '\\', '/':
				dst = append(dst, e)
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r, err := p.hex4()
				if err != nil {
					return nil, err
				}
				if utf16.IsSurrogate(r) {
					if r >= 0xDC00 || p.pos+1 >= len(p.in) || p.in[p.pos] != '\\' || p.in[p.pos+1] != 'u' {
						return nil, p.errorf("lone surrogate escape")
					}
					p.pos += 2
					r2, err := p.hex4()
					if err != nil {
						return nil, err
					}
					if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
						return nil, p.errorf("lone surrogate escape")
					}
				}
				dst = utf8.AppendRune(dst, r)
			default:
				return nil, p.errorf("invalid escape '\\%c'", e)
			}
		}
	}
}

func (p *jcsParser) hex4() (rune, error) {
	if len(p.in)-p.pos < 4 {
		return 0, p.errorf("short \\u escape")
	}
	var r rune
	for _, c := range p.in[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, p.errorf("invalid \\u escape")
		}
	}
	p.pos += 4
	return r, nil
}

const hexDigits = "0123456789abcdef"

// appendJCSString appends s (valid UTF-8) as a JSON string escaped per
// RFC 8785 §3.2.2.2: only '"', '\\' and control characters are escaped,
// the latter with the two-letter forms where JSON has them and lowercase
// \u00xx otherwise. Everything else, '/' and U+2028 included, is literal.
func appendJCSString(out, s []byte) []byte {
	out = append(out, '"')
	start := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		out = append(out, s[start:i]...)
		start = i + 1
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
	}
	out = append(out, s[start:]...)
	return append(out, '"')
}

// number validates the RFC 8259 number at p.pos and appends its
// ECMAScript serialization.
func (p *jcsParser) number(out []byte) ([]byte, error) {
	start := p.pos
	in := p.in
	i := p.pos
	if in[i] == '-' {
		i++
	}
	digits := func() int {
		j := i
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		return i - j
	}
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case digits() == 0:
		p.pos = i
		return nil, p.errorf("invalid number")
	}
	integer := true
	if i < len(in) && in[i] == '.' {
		i++
		integer = false
		if digits() == 0 {
			p.pos = i
			return nil, p.errorf("invalid number: no digits after '.'")
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		integer = false
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if digits() == 0 {
			p.pos = i
			return nil, p.errorf("invalid number: no digits in exponent")
		}
	}
	p.pos = i
	lit := in[start:i]
	// Fast path: a plain integer of at most 15 digits is exactly
	// representable and ECMAScript prints it as written (bar negative zero).
	if integer && len(lit) <= 15 {
		if string(lit) == "-0" {
			return append(out, '0'), nil
		}
		return append(out, lit...), nil
	}
	if p.exact {
		out, err := appendExactNumber(out, lit)
		if err != nil {
			return nil, p.errorf("%v", err)
		}
		return out, nil
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) && !math.IsInf(f, 0) {
			// Underflow to zero or a subnormal is not an error in ECMAScript.
			err = nil
		}
		if err != nil {
			return nil, p.errorf("number out of IEEE 754 double range")
		}
	}
	return appendESNumber(out, f)
}

// appendESNumber appends f formatted as ECMAScript Number.prototype.toString
// does (ECMA-262 Number::toString), which RFC 8785 §3.2.2.3 adopts: the
// shortest round-tripping digits, in fixed notation for 1e-7 <= |f| < 1e21
// and exponential notation ("1e+21", "1.5e-7") outside it.
func appendESNumber(out []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, errors.New("jcs: NaN and Infinity have no JSON form")
	}
	if f == 0 {
		return append(out, '0'), nil // also -0
	}
	if f < 0 {
		out = append(out, '-')
		f = -f
	}
	// strconv's shortest 'e' form gives the digits d1.d2...dk and exponent;
	// ECMA-262 calls the decimal point position n = exponent + 1.
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	mant, exp := e, 0
	for i, c := range e {
		if c == 'e' {
			mant = e[:i]
			x, err := strconv.Atoi(string(e[i+1:]))
			if err != nil {
				return nil, fmt.Errorf("jcs: formatting %v: %w", f, err)
			}
			exp = x
			break
		}
	}
	var ds [20]byte
	digits := ds[:0]
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	return appendDecimal(out, digits, int64(exp)+1), nil
}

// appendDecimal appends the positive decimal 0.d1d2...dk × 10^n (digits
// d1...dk without leading or trailing zeros) in the layout ECMA-262
// Number::toString gives a double: plain digits for 1e-7 <= value < 1e21,
// else one digit, the rest after a point, and a signed exponent. It never
// rounds, so it writes a digit string of any length exactly.
func appendDecimal(out, digits []byte, n int64) []byte {
	k := int64(len(digits))
	switch {
	case k <= n && n <= 21:
		out = append(out, digits...)
		for range n - k {
			out = append(out, '0')
		}
	case 0 < n && n <= 21:
		out = append(out, digits[:n]...)
		out = append(out, '.')
		out = append(out, digits[n:]...)
	case -6 < n && n <= 0:
		out = append(out, '0', '.')
		for range -n {
			out = append(out, '0')
		}
		out = append(out, digits...)
	default:
		out = append(out, digits[0])
		if k > 1 {
			out = append(out, '.')
			out = append(out, digits[1:]...)
		}
		out = append(out, 'e')
		if n-1 >= 0 {
			out = append(out, '+')
		}
		out = strconv.AppendInt(out, n-1, 10)
	}
	return out
}

// maxExactExponent bounds the decimal exponent of a number written
// exactly (as in d.ddde±X). Far beyond any double (about 1e308), it keeps
// the arithmetic in int64 and the form short; a number past it is not
// canonicalized, and ArgsDigest then binds the arguments byte for byte.
const maxExactExponent = 1_000_000_000

// appendExactNumber appends the canonical form of the valid RFC 8259
// number lit by its exact value (see ArgsDigest): the RFC 8785 form when
// that value is the shortest form of a double, else every significant
// digit in the same layout.
func appendExactNumber(out, lit []byte) ([]byte, error) {
	neg := lit[0] == '-'
	s := lit
	if neg {
		s = s[1:]
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	intDigits := i
	var buf [40]byte
	all := append(buf[:0], s[:i]...) // integer and fraction digits
	if i < len(s) && s[i] == '.' {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		all = append(all, s[i+1:j]...)
		i = j
	}
	lead := 0
	for lead < len(all) && all[lead] == '0' {
		lead++
	}
	digits := all[lead:]
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
	}
	if len(digits) == 0 {
		return append(out, '0'), nil // zero, whatever its sign and exponent
	}
	var exp int64
	if i < len(s) { // e or E
		i++
		expNeg := false
		if s[i] == '+' || s[i] == '-' {
			expNeg = s[i] == '-'
			i++
		}
		for ; i < len(s); i++ {
			exp = exp*10 + int64(s[i]-'0')
			if exp > 2*maxExactExponent { // keeps the sums below in int64
				return nil, errors.New("number exponent too large")
			}
		}
		if expNeg {
			exp = -exp
		}
	}
	n := int64(intDigits-lead) + exp // the value is 0.digits × 10^n
	if n-1 > maxExactExponent || n-1 < -maxExactExponent {
		// Bounded on the exponent written, so a written form always reads
		// back (canonicalizing twice changes nothing).
		return nil, errors.New("number exponent too large")
	}
	// A double's shortest form has at most 17 digits and a decimal
	// exponent within [-323, 309]; only such a value can be one.
	if len(digits) <= 17 && n > -330 && n < 315 {
		f, err := strconv.ParseFloat(string(lit), 64)
		if err == nil || (errors.Is(err, strconv.ErrRange) && !math.IsInf(f, 0)) {
			if f != 0 && shortestIs(f, digits, n) {
				return appendESNumber(out, f)
			}
		}
	}
	if neg {
		out = append(out, '-')
	}
	return appendDecimal(out, digits, n), nil
}

// shortestIs reports whether the shortest round-tripping decimal of f is
// ±0.digits × 10^n.
func shortestIs(f float64, digits []byte, n int64) bool {
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], math.Abs(f), 'e', -1, 64)
	at := 0
	for at < len(e) && e[at] != 'e' {
		at++
	}
	x, err := strconv.Atoi(string(e[at+1:]))
	if err != nil || int64(x+1) != n {
		return false
	}
	// The mantissa is "d" for one digit, else "d.ddd".
	mant, want := e[:at], len(digits)+1
	if len(digits) == 1 {
		want = 1
	}
	return len(mant) == want && mant[0] == digits[0] && (want == 1 || string(mant[2:]) == string(digits[1:]))
}
