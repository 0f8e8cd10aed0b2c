package mrtr

import (
	"crypto/rand"
	"encoding/base64"
)

// flowIDBytes is the randomness of a flow id: 96 bits, so ids minted
// across a fleet never collide in practice and cannot be guessed.
const flowIDBytes = 12

// flowIDPrefix marks a flow id in logs, spans and deliveries.
const flowIDPrefix = "fl_"

// NewFlowID mints a flow id: "fl_" and 16 characters of unpadded
// base64url.
func NewFlowID() string {
	var b [flowIDBytes]byte
	_, _ = rand.Read(b[:])
	return flowIDPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// ValidFlowID reports whether s has the form NewFlowID mints.
func ValidFlowID(s string) bool {
	const n = len(flowIDPrefix) + (flowIDBytes*8+5)/6
	if len(s) != n || s[:len(flowIDPrefix)] != flowIDPrefix {
		return false
	}
	for i := len(flowIDPrefix); i < n; i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
