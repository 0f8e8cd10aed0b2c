package jsontext

import "encoding/json"

// maxDepth is how deeply Valid follows nesting itself; a deeper
// document is encoding/json's to judge (its own limit is 10,000). No
// request the platform reads nests past a few levels.
const maxDepth = 64

// Valid reports whether data is one JSON value, with any whitespace
// around it, exactly as encoding/json's Valid does: strings may hold any
// byte from 0x20 up, invalid UTF-8 included. Every request body is
// checked before it is read, and encoding/json's scanner, a function
// call a byte, was most of decoding one.
func Valid(data []byte) bool {
	// open holds a bit a level, object (1) or array (0), innermost
	// lowest.
	var open uint64
	depth := 0
	i := skipSpace(data, 0)
	for {
		// A value starts at i.
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case '{', '[':
			obj := data[i] == '{'
			j := skipSpace(data, i+1)
			if j < len(data) && (obj && data[j] == '}' || !obj && data[j] == ']') {
				i = j + 1
				break // empty: a whole value
			}
			if depth == maxDepth {
				return json.Valid(data)
			}
			open <<= 1
			if obj {
				open |= 1
			}
			depth++
			i = j
			if obj {
				if i = key(data, i); i < 0 {
					return false
				}
			}
			continue
		case '"':
			i = stringEnd(data, i)
		case 't':
			i = literal(data, i, "true")
		case 'f':
			i = literal(data, i, "false")
		case 'n':
			i = literal(data, i, "null")
		default:
			i = numberEnd(data, i)
		}
		if i < 0 {
			return false
		}
		// A value ended at i: close what it ends, then the next value.
		for {
			i = skipSpace(data, i)
			if depth == 0 {
				return i == len(data)
			}
			if i >= len(data) {
				return false
			}
			obj := open&1 == 1
			if c := data[i]; obj && c == '}' || !obj && c == ']' {
				open >>= 1
				depth--
				i++
				continue
			} else if c != ',' {
				return false
			}
			i = skipSpace(data, i+1)
			if obj {
				if i = key(data, i); i < 0 {
					return false
				}
			}
			break
		}
	}
}

// key reads an object's key and its colon from i, and returns where its
// value starts, or -1.
func key(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	if i = stringEnd(data, i); i < 0 {
		return -1
	}
	i = skipSpace(data, i)
	if i >= len(data) || data[i] != ':' {
		return -1
	}
	return skipSpace(data, i+1)
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd returns the index after the string that starts at data[i]
// ('"'), or -1 if it is not one.
func stringEnd(data []byte, i int) int {
	for i++; i < len(data); i++ {
		if !stringStop[data[i]] {
			continue
		}
		switch c := data[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(data) {
				return -1
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(data) {
					return -1
				}
				for _, h := range data[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// stringStop marks the bytes that end a run of a string's plain bytes:
// the quote, the backslash and the control characters.
var stringStop = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// literal returns the index after lit at data[i], or -1.
func literal(data []byte, i int, lit string) int {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// numberEnd returns the index after the number that starts at data[i],
// or -1: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func numberEnd(data []byte, i int) int {
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return -1
	case data[i] == '0':
		i++
	case '1' <= data[i] && data[i] <= '9':
		i = digits(data, i)
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		if i++; i >= len(data) || !isDigit(data[i]) {
			return -1
		}
		i = digits(data, i)
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		if i++; i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || !isDigit(data[i]) {
			return -1
		}
		i = digits(data, i)
	}
	return i
}

func digits(data []byte, i int) int {
	for i < len(data) && isDigit(data[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
