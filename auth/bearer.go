package auth

import (
	"net/http"
	"strings"
)

// BearerToken reads the token of an "Authorization: Bearer <token>"
// header (RFC 6750 §2.1): the scheme in any case, one or more spaces,
// then a token of the b64token characters. Anything else (another scheme,
// a bare token, an empty or malformed token, two Authorization headers)
// is no token.
func BearerToken(h http.Header) (string, bool) {
	vs := h.Values("Authorization")
	if len(vs) != 1 {
		return "", false
	}
	scheme, tok, ok := strings.Cut(vs[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimLeft(tok, " ")
	if tok == "" {
		return "", false
	}
	for i := 0; i < len(tok); i++ {
		if !b64tokenChar(tok[i]) {
			// Trailing '=' padding is allowed; anything else is not.
			if strings.Trim(tok[i:], "=") == "" && i > 0 {
				break
			}
			return "", false
		}
	}
	return tok, true
}

// b64tokenChar reports whether c may appear in a b64token before its
// padding.
func b64tokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		return true
	}
	return false
}
