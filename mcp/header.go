package mcp

import (
	"encoding/base64"
	"strings"
)

// base64 marks of an encoded header value: =?base64?…?=.
const (
	b64Open  = "=?base64?"
	b64Close = "?="
)

// EncodeHeaderValue returns s as an MCP header value: as is when every
// character is printable ASCII (0x20–0x7E) with no leading or trailing
// space, and otherwise (or when s itself looks like an encoded value) as
// =?base64?<base64 of the UTF-8 bytes>?=.
func EncodeHeaderValue(s string) string {
	if needsBase64(s) {
		return b64Open + base64.StdEncoding.EncodeToString([]byte(s)) + b64Close
	}
	return s
}

func needsBase64(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == ' ' || s[len(s)-1] == ' ' || strings.HasPrefix(s, b64Open) {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7E {
			return true
		}
	}
	return false
}

// DecodeHeaderValue reads an MCP header value, decoding the base64 form
// strictly. Only a value with both marks is encoded; anything else is
// literal. ok is false for an encoded value that does not decode, which
// then matches nothing.
func DecodeHeaderValue(v string) (s string, ok bool) {
	if !strings.HasPrefix(v, b64Open) || !strings.HasSuffix(v, b64Close) || len(v) < len(b64Open)+len(b64Close) {
		return v, true
	}
	inner := v[len(b64Open) : len(v)-len(b64Close)]
	// The decoder skips CR and LF even in strict mode; an encoded value
	// holds neither.
	b, err := base64.StdEncoding.Strict().DecodeString(inner)
	if err != nil || strings.ContainsAny(inner, "\r\n") {
		return "", false
	}
	return string(b), true
}

// ValidHeaderName reports whether s is an RFC 9110 token, the form an
// x-mcp-header name (the part after Mcp-Param-) must take.
func ValidHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
