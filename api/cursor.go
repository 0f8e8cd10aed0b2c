package api

import (
	"encoding/base64"
	"errors"
	"strings"
)

// Cursors are opaque to clients: the last name of a page, tagged so a
// cursor from one list is not mistaken for another kind of token.
const cursorPrefix = "c1:"

func encodeCursor(last string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + last))
}

func decodeCursor(cur string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(cur)
	if err != nil {
		return "", err
	}
	s, ok := strings.CutPrefix(string(b), cursorPrefix)
	if !ok || s == "" {
		return "", errors.New("bad cursor")
	}
	return s, nil
}
