package mrtr

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Codec seals opaque bytes into a URL-safe token and back. It is the only
// part of request-state protection that touches key material, so a Vault
// Transit or KMS implementation can replace the built-in [Ring] without the
// claims and binding checks in [Sealer] changing.
//
// Seal must return a token that names no algorithm and varies on every
// call, together with the id of the key that minted it. Unseal must return
// exactly the sealed bytes and the verifying key's id for a token Seal
// produced, and an error that is or wraps a *[Rejection] for any token it
// did not mint unmodified. Comparisons of secret values must be constant
// time. Expiry, bindings, audience and principal are the Sealer's job, not
// the codec's.
//
// Implementations must be safe for concurrent use and must not retain
// plaintext after Seal returns.
type Codec interface {
	Seal(ctx context.Context, plaintext []byte) (token string, keyID string, err error)
	Unseal(ctx context.Context, token string) (plaintext []byte, keyID string, err error)
}

// Rejection reasons. They are stable identifiers meant for logs, span
// attributes and metrics; the wire error a client sees never varies by
// reason.
const (
	ReasonMalformed      = "malformed"       // not a token of ours, or claims that do not decode
	ReasonUnknownKey     = "unknown_key"     // minted under a key outside the ring
	ReasonAuthentication = "authentication"  // AEAD tag did not verify
	ReasonNonString      = "non_string"      // requestState on the wire is not a JSON string
	ReasonFuture         = "future"          // issued further in the future than the allowed skew
	ReasonExpired        = "expired"         // past its expiry
	ReasonLifetime       = "lifetime"        // expiry minus issue time exceeds the policy TTL
	ReasonTenant         = "tenant"          // minted for another tenant
	ReasonAudience       = "audience"        // minted for another audience
	ReasonBinding        = "binding"         // method, target or arguments differ
	ReasonPrincipalDrift = "principal_drift" // bound when the caller is anonymous, or the reverse
	ReasonPrincipal      = "principal"       // bound to another principal
	ReasonRevoked        = "revoked"         // the flow was cancelled
	ReasonOversize       = "oversize"        // longer than the policy allows
	ReasonCodecError     = "codec_error"     // the codec failed without rejecting (e.g. KMS unreachable)
	ReasonInternal       = "internal"        // the verifier is misconfigured; fail closed
)

// Rejection is the error for request state that must not be honoured. Its
// message carries only the reason: never the token, the plaintext or the
// principal, so it is safe to log. Callers branch with errors.As.
type Rejection struct {
	Reason string
	// FlowID and Round are the flow and round of a state that opened
	// (authenticated under a ring key and sealed for the same tenant) but
	// failed a later check: expired, bound to another request or
	// principal, revoked. Empty for a state that did not open, whose
	// contents cannot be trusted.
	FlowID string
	Round  int
	cause  error
}

func (r *Rejection) Error() string { return "mrtr: request state rejected: " + r.Reason }

// Unwrap returns the underlying failure of a codec_error rejection, such as
// a context cancellation, so callers can tell an outage from an attack.
func (r *Rejection) Unwrap() error { return r.cause }

func reject(reason string) *Rejection { return &Rejection{Reason: reason} }

// Token format of the built-in codec.
//
//	token = "v1." || base64url-nopad( kid[4] || nonce[12] || AES-256-GCM(plaintext) || tag[16] )
//	AAD   = "v1." || kid[4]
//
// The prefix and the key id are authenticated as associated data, so
// re-prefixing a token to a future version or transplanting a key id onto
// another token's body fails the tag. The token never names its algorithm:
// the version prefix implies it (RFC 8725 §2.1).
const (
	tokenPrefix   = "v1."
	kidLen        = 4
	nonceLen      = 12
	tagLen        = 16
	tokenOverhead = kidLen + nonceLen + tagLen
	minSecretLen  = 32
)

// HKDF info labels give every purpose its own key, so the AEAD key is never
// used as an HMAC key or vice versa. The kid label makes the key id a
// commitment to the AEAD key that reveals nothing about it.
const (
	infoAEAD    = "opsmcp/request-state/v1/aes-256-gcm"
	infoBinding = "opsmcp/request-state/v1/binding"
	labelKeyID  = "opsmcp/request-state/v1/kid:"
)

// Ring is the built-in Codec: AES-256-GCM under keys derived from a ring of
// secrets. The first secret mints; every secret verifies, which is what
// three-phase rotation needs (add verify-only, promote, retire).
//
// A key id is the first 4 bytes of SHA-256(label || derived AEAD key),
// written as 8 lowercase hex characters in the API and as the raw 4 bytes
// in the token. It identifies a key without revealing it and is not secret.
//
// A Ring is immutable and safe for concurrent use.
type Ring struct {
	minter *ringKey
	byID   map[[kidLen]byte]*ringKey // token lookup
	byHex  map[string]*ringKey       // API lookup
	ids    []string
}

type ringKey struct {
	id      [kidLen]byte
	hexID   string
	aad     []byte      // "v1." || id
	aead    cipher.AEAD // built once; sealing does no key setup
	binding []byte
	macs    sync.Pool // of *principalHasher keyed with binding
}

// NewRing builds a ring from secrets; the first one mints. Each secret must
// be at least 32 bytes of high-entropy material (for example the output of
// `openssl rand -base64 32`, decoded, or 32 bytes from crypto/rand), and no
// secret may appear twice. The secrets are copied, so the caller may wipe
// or reuse its slices.
func NewRing(secrets ...[]byte) (*Ring, error) {
	if len(secrets) == 0 {
		return nil, errors.New("mrtr: request-state key ring is empty: give at least one secret")
	}
	r := &Ring{
		byID:  make(map[[kidLen]byte]*ringKey, len(secrets)),
		byHex: make(map[string]*ringKey, len(secrets)),
	}
	for i, secret := range secrets {
		if len(secret) < minSecretLen {
			return nil, fmt.Errorf("mrtr: request-state secret %d is %d bytes, want at least %d: "+
				"generate one with `openssl rand -base64 32` (and decode it) or 32 bytes from crypto/rand",
				i, len(secret), minSecretLen)
		}
		for j := range i {
			if bytes.Equal(secrets[j], secret) {
				return nil, fmt.Errorf("mrtr: request-state secrets %d and %d are identical", j, i)
			}
		}
		k, err := newRingKey(bytes.Clone(secret))
		if err != nil {
			return nil, fmt.Errorf("mrtr: request-state secret %d: %w", i, err)
		}
		if prev, dup := r.byID[k.id]; dup {
			return nil, fmt.Errorf("mrtr: request-state secret %d has the same key id %s as an earlier secret", i, prev.hexID)
		}
		r.byID[k.id] = k
		r.byHex[k.hexID] = k
		r.ids = append(r.ids, k.hexID)
		if i == 0 {
			r.minter = k
		}
	}
	return r, nil
}

func newRingKey(secret []byte) (*ringKey, error) {
	aeadKey, err := hkdf.Key(sha256.New, secret, nil, infoAEAD, 32)
	if err != nil {
		return nil, fmt.Errorf("deriving AEAD key: %w", err)
	}
	bindingKey, err := hkdf.Key(sha256.New, secret, nil, infoBinding, 32)
	if err != nil {
		return nil, fmt.Errorf("deriving binding key: %w", err)
	}
	block, err := aes.NewCipher(aeadKey)
	if err != nil {
		return nil, fmt.Errorf("AES key setup: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("GCM setup: %w", err)
	}
	h := sha256.New()
	h.Write([]byte(labelKeyID))
	h.Write(aeadKey)
	k := &ringKey{aead: aead, binding: bindingKey}
	copy(k.id[:], h.Sum(nil))
	k.hexID = hex.EncodeToString(k.id[:])
	k.aad = append([]byte(tokenPrefix), k.id[:]...)
	k.macs.New = func() any { return newPrincipalHasher(bindingKey) }
	return k, nil
}

// Ephemeral returns a ring with one fresh random secret. It suits a single
// process (the default when nothing is configured): its tokens cannot be
// opened by any other process, so a retry that reaches another replica is
// refused rather than trusted.
func Ephemeral() *Ring {
	secret := make([]byte, minSecretLen)
	rand.Read(secret) // never fails: crypto/rand aborts the process instead
	r, err := NewRing(secret)
	if err != nil {
		panic("mrtr: ephemeral ring: " + err.Error()) // unreachable: the secret is well-formed
	}
	return r
}

// KeyIDs returns the ids of the ring's keys, minter first.
func (r *Ring) KeyIDs() []string { return append([]string(nil), r.ids...) }

// MinterID returns the id of the key that Seal uses.
func (r *Ring) MinterID() string { return r.minter.hexID }

// BindingKey returns the HMAC key for request bindings that belongs to the
// ring key keyID, derived from the same secret as its AEAD key under a
// separate label. The returned slice is shared: do not modify it.
func (r *Ring) BindingKey(keyID string) ([]byte, bool) {
	k, ok := r.byHex[keyID]
	if !ok {
		return nil, false
	}
	return k.binding, true
}

// principalMAC computes the principal MAC under keyID's binding key with a
// pooled, pre-keyed HMAC: the Sealer's fast path for the built-in codec.
func (r *Ring) principalMAC(keyID string, salt [principalSaltLen]byte, principal string) ([principalMACLen]byte, bool) {
	k, ok := r.byHex[keyID]
	if !ok {
		return [principalMACLen]byte{}, false
	}
	h := k.macs.Get().(*principalHasher)
	mac := h.sum(salt, principal)
	k.macs.Put(h)
	return mac, true
}

// Seal encrypts plaintext under the minting key with a fresh random nonce.
func (r *Ring) Seal(_ context.Context, plaintext []byte) (string, string, error) {
	k := r.minter
	buf := getBuffer(tokenOverhead + len(plaintext))
	raw := append((*buf)[:0], k.id[:]...)
	raw = raw[:kidLen+nonceLen]
	rand.Read(raw[kidLen:]) // never fails
	raw = k.aead.Seal(raw, raw[kidLen:kidLen+nonceLen], plaintext, k.aad)
	token := encodeToken(raw)
	*buf = raw
	putBuffer(buf)
	return token, k.hexID, nil
}

// encodeToken writes the prefix and the base64url body straight into the
// returned string, its only allocation.
func encodeToken(raw []byte) string {
	var b strings.Builder
	b.Grow(len(tokenPrefix) + base64.RawURLEncoding.EncodedLen(len(raw)))
	b.WriteString(tokenPrefix)
	var chunk [256]byte
	const step = len(chunk) / 4 * 3
	for len(raw) > 0 {
		n := min(step, len(raw))
		b.Write(b64Encode(chunk[:], raw[:n]))
		raw = raw[n:]
	}
	return b.String()
}

// Unseal verifies and decrypts a token minted by any key in the ring. The
// key is chosen by its id in one map lookup, never by trying each key. The
// returned plaintext is freshly allocated and owned by the caller.
func (r *Ring) Unseal(_ context.Context, token string) ([]byte, string, error) {
	body, ok := strings.CutPrefix(token, tokenPrefix)
	if !ok {
		return nil, "", reject(ReasonMalformed)
	}
	raw, ok := decodeStrict(body, tokenOverhead)
	if !ok {
		return nil, "", reject(ReasonMalformed)
	}
	k, ok := r.byID[[kidLen]byte(raw[:kidLen])]
	if !ok {
		return nil, "", reject(ReasonUnknownKey)
	}
	nonce, sealed := raw[kidLen:kidLen+nonceLen], raw[kidLen+nonceLen:]
	// Decrypt in place: the decoded buffer is ours and becomes the result.
	plaintext, err := k.aead.Open(sealed[:0], nonce, sealed, k.aad)
	if err != nil {
		return nil, "", reject(ReasonAuthentication)
	}
	return plaintext, k.hexID, nil
}

// decodeStrict decodes unpadded base64url, accepting only the canonical
// spelling: padding, whitespace (which encoding/base64 silently skips),
// any byte outside the alphabet and non-zero trailing bits are refused, so
// the decoded bytes always re-encode to exactly s. It also refuses bodies
// that would decode to fewer than minLen bytes.
func decodeStrict(s string, minLen int) ([]byte, bool) {
	n, ok := b64DecodedLen(len(s))
	if !ok || n < minLen {
		return nil, false
	}
	buf := make([]byte, n)
	if !b64Decode(buf, s) {
		return nil, false
	}
	return buf, true
}

// A small base64url codec (RFC 4648 §5, no padding), faster than
// encoding/base64 for our sizes because it reads the token string in place
// and needs only one table lookup per character on decode and one per two
// characters on encode, and strict by construction.
const b64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

var (
	// b64Pairs maps 12 bits to the two alphabet characters encoding them,
	// first character in the high byte.
	b64Pairs [1 << 12]uint16
	// b64Dec[i][c] is the 6-bit value of c shifted into position i of a
	// 4-character quantum, or b64Invalid for bytes outside the alphabet.
	b64Dec [4][256]uint32
)

const b64Invalid = 0xFF000000

func init() {
	for i := range b64Pairs {
		b64Pairs[i] = uint16(b64Alphabet[i>>6])<<8 | uint16(b64Alphabet[i&0x3F])
	}
	for i := range b64Dec {
		for c := range b64Dec[i] {
			b64Dec[i][c] = b64Invalid
		}
	}
	for v, c := range []byte(b64Alphabet) {
		for i := range b64Dec {
			b64Dec[i][c] = uint32(v) << (18 - 6*i)
		}
	}
}

// b64Encode encodes src into dst, which must have room, and returns the
// encoded part of dst.
func b64Encode(dst, src []byte) []byte {
	n := base64.RawURLEncoding.EncodedLen(len(src))
	out := dst[:n]
	// 6 bytes to 8 characters per step, reading and writing whole words.
	for len(src) >= 8 && len(dst) >= 8 {
		v := binary.BigEndian.Uint64(src)
		binary.BigEndian.PutUint64(dst,
			uint64(b64Pairs[v>>52&0xFFF])<<48|uint64(b64Pairs[v>>40&0xFFF])<<32|
				uint64(b64Pairs[v>>28&0xFFF])<<16|uint64(b64Pairs[v>>16&0xFFF]))
		src, dst = src[6:], dst[8:]
	}
	for len(src) >= 3 && len(dst) >= 4 {
		v := uint(src[0])<<16 | uint(src[1])<<8 | uint(src[2])
		binary.BigEndian.PutUint32(dst, uint32(b64Pairs[v>>12&0xFFF])<<16|uint32(b64Pairs[v&0xFFF]))
		src, dst = src[3:], dst[4:]
	}
	switch len(src) {
	case 1:
		binary.BigEndian.PutUint16(dst, b64Pairs[uint(src[0])<<4])
	case 2:
		v := uint(src[0])<<16 | uint(src[1])<<8
		binary.BigEndian.PutUint16(dst, b64Pairs[v>>12&0xFFF])
		dst[2] = byte(b64Pairs[v&0xFFF] >> 8)
	}
	return out
}

// b64DecodedLen is the decoded length of n characters; a length that is 1
// more than a multiple of 4 is impossible.
func b64DecodedLen(n int) (int, bool) {
	if n%4 == 1 {
		return 0, false
	}
	return n/4*3 + (n%4*6)/8, true
}

// b64Decode decodes s into dst and reports whether s is canonical
// base64url whose decoded length is exactly len(dst).
func b64Decode(dst []byte, s string) bool {
	if n, ok := b64DecodedLen(len(s)); !ok || n != len(dst) {
		return false
	}
	var bad uint32
	// 8 characters to 6 bytes per step, with one word store.
	for len(s) >= 8 && len(dst) >= 8 {
		v1 := b64Dec[0][s[0]] | b64Dec[1][s[1]] | b64Dec[2][s[2]] | b64Dec[3][s[3]]
		v2 := b64Dec[0][s[4]] | b64Dec[1][s[5]] | b64Dec[2][s[6]] | b64Dec[3][s[7]]
		bad |= v1 | v2
		binary.BigEndian.PutUint64(dst, uint64(v1)<<40|uint64(v2&0xFFFFFF)<<16)
		s, dst = s[8:], dst[6:]
	}
	for len(s) >= 4 && len(dst) >= 3 {
		v := b64Dec[0][s[0]] | b64Dec[1][s[1]] | b64Dec[2][s[2]] | b64Dec[3][s[3]]
		bad |= v
		dst[0], dst[1], dst[2] = byte(v>>16), byte(v>>8), byte(v)
		s, dst = s[4:], dst[3:]
	}
	switch len(s) { // 0, 2 or 3 characters remain
	case 2:
		v := b64Dec[0][s[0]] | b64Dec[1][s[1]]
		if v&0xFFFF != 0 { // the 4 spare bits must be zero
			return false
		}
		bad |= v
		dst[0] = byte(v >> 16)
	case 3:
		v := b64Dec[0][s[0]] | b64Dec[1][s[1]] | b64Dec[2][s[2]]
		if v&0xFF != 0 { // the 2 spare bits must be zero
			return false
		}
		bad |= v
		dst[0], dst[1] = byte(v>>16), byte(v>>8)
	}
	return bad&b64Invalid == 0
}

// Sealing buffers are pooled: they hold the encoded claims and the raw
// token only until the token string is built.
var bufferPool sync.Pool // of *[]byte

const maxPooledBuffer = 64 << 10

func getBuffer(n int) *[]byte {
	if b, ok := bufferPool.Get().(*[]byte); ok {
		if cap(*b) >= n {
			return b
		}
		bufferPool.Put(b)
	}
	b := make([]byte, 0, max(n, 1024))
	return &b
}

// putBuffer wipes the used part of b (*b must span everything written),
// which may have held plaintext, and recycles it.
func putBuffer(b *[]byte) {
	if cap(*b) > maxPooledBuffer {
		return
	}
	clear(*b)
	*b = (*b)[:0]
	bufferPool.Put(b)
}
