package mrtr

import (
	"crypto/rand"
	"encoding/base64"
	"time"
)

// flowIDBytes is the randomness of a flow id: 96 bits, so ids minted
// across a fleet never collide in practice and cannot be guessed.
const flowIDBytes = 12

// flowIDPrefix marks a flow id in logs, spans and deliveries.
const flowIDPrefix = "fl_"

// A flow id starts with the second it was minted, flowIDTimeChars
// characters of sortable (the base64url characters in byte order), so
// that ids minted close together sort close together: the record's index
// on flow ids then takes a batch's new flows on a few pages at its
// growing edge, not one random page each (the difference, on SQLite, is a
// page written to the log per flow). 36 bits of seconds last until the
// year 4147.
const (
	flowIDTimeChars = 6
	sortable        = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"
)

// Flow id lengths: the minted form, and the form of earlier releases (the
// random part alone), still accepted for the flows they recorded.
const (
	randomChars     = (flowIDBytes*8 + 5) / 6
	flowIDLen       = len(flowIDPrefix) + flowIDTimeChars + randomChars
	flowIDLenBefore = len(flowIDPrefix) + randomChars
)

// NewFlowID mints a flow id: "fl_", the current second in 6 sortable
// characters, then 96 random bits in 16 characters of unpadded base64url.
func NewFlowID() string { return newFlowID(time.Now()) }

func newFlowID(now time.Time) string {
	var b [flowIDLen]byte
	copy(b[:], flowIDPrefix)
	sec := uint64(max(now.Unix(), 0))
	for i := len(flowIDPrefix) + flowIDTimeChars - 1; i >= len(flowIDPrefix); i-- {
		b[i] = sortable[sec&63]
		sec >>= 6
	}
	var r [flowIDBytes]byte
	_, _ = rand.Read(r[:])
	base64.RawURLEncoding.Encode(b[len(flowIDPrefix)+flowIDTimeChars:], r[:])
	return string(b[:])
}

// ValidFlowID reports whether s has the form NewFlowID mints, or the
// form earlier releases minted ("fl_" and 16 random characters).
func ValidFlowID(s string) bool {
	if len(s) != flowIDLen && len(s) != flowIDLenBefore || s[:len(flowIDPrefix)] != flowIDPrefix {
		return false
	}
	for i := len(flowIDPrefix); i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
