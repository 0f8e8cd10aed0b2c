// Package jsontext writes and checks JSON text by hand for the paths
// that run for every round (the flow record's encoding, the check of
// every request body), where encoding/json's reflection, its scanner and
// its re-validation of every document embedded in another cost more than
// the values themselves.
package jsontext

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string. Invalid UTF-8 and NUL become
// U+FFFD: the text is stored, and no database keeps a NUL in text
// (PostgreSQL refuses the row, and the batch with it; SQLite's C strings
// end there) nor, on PostgreSQL, invalid UTF-8.
func AppendString[T ~string | ~[]byte](b []byte, s T) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == 0:
				b = append(b, `\ufffd`...)
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		// At most four bytes, converted on the stack for a []byte.
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Text is s as AppendString stores it, for a value that goes to the
// database beside JSON text but not in it: invalid bytes and NUL become
// U+FFFD, each on its own. s itself, without a copy, when it holds
// neither.
func Text(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return string(AppendText(make([]byte, 0, len(s)+8), s))
}

// AppendText appends s as Text has it.
func AppendText(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == 0 || (r == utf8.RuneError && size == 1) {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return b
}

// Marshal is json.Marshal without HTML escaping: a value's strings and
// raw members (a tenant's _meta, a view's HTML) keep their <, > and &
// as written, rather than \u003c, \u003e and \u0026.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
