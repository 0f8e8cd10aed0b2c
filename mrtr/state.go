package mrtr

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"time"
)

// Policy defaults.
const (
	DefaultTTL           = 600 * time.Second
	DefaultSkew          = 60 * time.Second
	DefaultMaxStateBytes = 64 << 10
	DefaultMaxRounds     = 20

	// MaxTTL bounds Policy.TTL. The TTL bounds the think time of one round;
	// state that lives for days is a replay window, not a convenience.
	MaxTTL = 24 * time.Hour

	// minMaxStateBytes is the smallest usable cap: a token with empty
	// claims is already longer.
	minMaxStateBytes = 128
)

// Policy holds the verification limits. The zero value means "all
// defaults": a zero field takes its default, so a zero Skew cannot express
// "no skew at all" (use a nanosecond).
type Policy struct {
	// TTL is the lifetime of one round's token: [DefaultTTL] when zero,
	// otherwise between 1ms and [MaxTTL]. Every round re-seals with a fresh
	// issue time, so it bounds think time per round, not the whole flow.
	TTL time.Duration
	// MaxStateBytes caps the token length in bytes, checked before any
	// decoding on Open and after sealing on Seal: [DefaultMaxStateBytes]
	// when zero.
	MaxStateBytes int
	// Skew is how far in the future an issue time may lie, for clocks that
	// disagree across replicas: [DefaultSkew] when zero.
	Skew time.Duration
	// MaxRounds is the highest round Seal will mint: [DefaultMaxRounds]
	// when zero. It stops a flow that never converges.
	MaxRounds int
}

func (p Policy) withDefaults() Policy {
	if p.TTL == 0 {
		p.TTL = DefaultTTL
	}
	if p.MaxStateBytes == 0 {
		p.MaxStateBytes = DefaultMaxStateBytes
	}
	if p.Skew == 0 {
		p.Skew = DefaultSkew
	}
	if p.MaxRounds == 0 {
		p.MaxRounds = DefaultMaxRounds
	}
	return p
}

// Validate reports whether p is usable. A zero field is valid (it takes its
// default); a negative one, a TTL under a millisecond (the claims' clock
// resolution) or over [MaxTTL], or a size cap too small for any token is
// refused.
func (p Policy) Validate() error {
	switch {
	case p.TTL < 0 || (p.TTL > 0 && p.TTL < time.Millisecond) || p.TTL > MaxTTL:
		return fmt.Errorf("mrtr: request-state TTL must be between 1ms and %v, got %v", MaxTTL, p.TTL)
	case p.Skew < 0:
		return fmt.Errorf("mrtr: request-state clock skew must not be negative, got %v", p.Skew)
	case p.MaxStateBytes < 0 || (p.MaxStateBytes > 0 && p.MaxStateBytes < minMaxStateBytes):
		return fmt.Errorf("mrtr: request-state size cap must be at least %d bytes, got %d", minMaxStateBytes, p.MaxStateBytes)
	case p.MaxRounds < 0:
		return fmt.Errorf("mrtr: request-state round cap must not be negative, got %d", p.MaxRounds)
	}
	return nil
}

// Claims is what a sealed request-state token carries. Seal fills the
// fields marked "set by Seal" from the Binding and the Policy; the caller
// supplies the flow fields, the resolver record and the tenant's state.
type Claims struct {
	Version   int       // set by Seal: the claims format version, 1
	IssuedAt  time.Time // set by Seal; millisecond resolution
	Expiry    time.Time // set by Seal: IssuedAt + Policy.TTL
	Tenant    string    // set by Seal from Binding.Tenant
	Audience  string    // set by Seal from Binding.Audience
	Method    string    // set by Seal from Binding.Method
	Target    string    // set by Seal from Binding.Target
	Args      string    // set by Seal: ArgsDigest(Binding.Args)
	Principal string    // set by Seal: salted keyed hash of Binding.Principal, "" when unbound

	FlowID    string    // the flow this round belongs to
	Round     int       // 1 for the first InputRequiredResult; at most Policy.MaxRounds
	FlowStart time.Time // when the flow began; Seal sets IssuedAt when zero
	Parent    string    // W3C traceparent of the round that minted the token; may be empty

	// KeyID is the id of the key that verified the token. It is filled by
	// Open (and by Seal, with the minting key) and is not itself sealed.
	KeyID string

	Resolver json.RawMessage // the declared-inputs record, opaque here
	State    []byte          // the tenant's own plaintext state, opaque here
}

// Binding is the live request a token is bound to: Seal writes it into the
// claims, Open insists on an exact match.
type Binding struct {
	Tenant   string
	Audience string
	Method   string // the carrier method, e.g. tools/call; required
	Target   string // tool or prompt name, or resource URI
	// Args are the raw wire arguments; the canonical digest is computed
	// here, so two spellings of the same JSON bind identically.
	Args json.RawMessage
	// Principal is the canonical principal string (for example the JSON
	// array [issuer, subject, client]); "" means anonymous, so the state is
	// unbound and only an anonymous caller may continue it.
	Principal string
}

// BindingKeyer is implemented by codecs that can hand out a per-key HMAC
// key for the principal claim, such as [Ring]. Tying that key to the AEAD
// key means a rotation rotates both, and a token is checked under the
// binding key of exactly the key that verified it. Codecs that keep key
// material out of process (Transit, a KMS) do not implement it; the
// Sealer's BindingKey is used instead.
type BindingKeyer interface {
	// MinterID returns the id of the key the codec's Seal mints under.
	MinterID() string
	// BindingKey returns the binding key for keyID. The caller must not
	// modify the slice.
	BindingKey(keyID string) ([]byte, bool)
}

// Errors Seal returns that an endpoint may want to turn into something
// other than an internal error.
var (
	// ErrTooManyRounds means the flow reached Policy.MaxRounds; it is the
	// tool's failure to converge, fit for a tool error.
	ErrTooManyRounds = errors.New("mrtr: flow exceeded the round limit")
	// ErrStateTooLarge means the sealed token would exceed
	// Policy.MaxStateBytes, so no verifier would accept it.
	ErrStateTooLarge = errors.New("mrtr: request state exceeds the size limit")
)

// Sealer seals request state bound to its request and verifies it on the
// way back. Its fields are read-only once in use; a Sealer is then safe for
// concurrent use.
type Sealer struct {
	// Codec seals and unseals the encoded claims; required.
	Codec Codec
	// BindingKey keys the principal hash when Codec is not a BindingKeyer.
	// At least 32 bytes, distinct from any encryption key. Needed only
	// when principals are bound.
	BindingKey []byte
	// Policy sets TTL, skew, size and round limits; zero means defaults.
	Policy Policy
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Revoked reports whether a flow was cancelled. Open consults it last,
	// only for otherwise valid state that names a flow. It cannot fail: an
	// implementation that cannot tell must decide, and failing closed
	// (true) is the safe choice. nil means nothing is revoked.
	Revoked func(ctx context.Context, flowID string) bool
}

func (s *Sealer) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// bindingKey returns the principal HMAC key that belongs with keyID.
func (s *Sealer) bindingKey(keyID string) ([]byte, bool) {
	if bk, ok := s.Codec.(BindingKeyer); ok {
		return bk.BindingKey(keyID)
	}
	if len(s.BindingKey) < minSecretLen {
		return nil, false
	}
	return s.BindingKey, true
}

// Seal mints a token for c bound to b. It sets c's Version, IssuedAt,
// Expiry, Tenant, Audience, Method, Target, Args, Principal and KeyID (and
// FlowStart when zero) from b, the policy and the clock, with a fresh salt
// for the principal hash so two tokens of one principal cannot be linked.
//
// Errors are for the server's log, not the client: the endpoint should
// answer with a generic internal error, except that [ErrTooManyRounds] and
// [ErrStateTooLarge] (test with errors.Is) describe the tool's behaviour.
// After an error, c may have been partly updated and must not be reused as
// if sealed.
func (s *Sealer) Seal(ctx context.Context, b Binding, c *Claims) (token, keyID string, err error) {
	if s.Codec == nil {
		return "", "", errors.New("mrtr: seal request state: no codec")
	}
	if err := s.Policy.Validate(); err != nil {
		return "", "", fmt.Errorf("mrtr: seal request state: %w", err)
	}
	p := s.Policy.withDefaults()
	if c == nil {
		c = new(Claims)
	}
	switch {
	case b.Method == "":
		return "", "", errors.New("mrtr: seal request state: binding has no method")
	case c.Round < 0:
		return "", "", fmt.Errorf("mrtr: seal request state: negative round %d", c.Round)
	case c.Round > p.MaxRounds:
		return "", "", fmt.Errorf("%w (round %d, limit %d)", ErrTooManyRounds, c.Round, p.MaxRounds)
	case len(c.State)+len(c.Resolver) > p.MaxStateBytes:
		// The token is longer than its plaintext, so this cannot fit;
		// refusing now avoids sealing megabytes only to discard them.
		return "", "", fmt.Errorf("%w (%d plaintext bytes, limit %d)", ErrStateTooLarge, len(c.State)+len(c.Resolver), p.MaxStateBytes)
	}

	var mintID string
	c.Principal = ""
	if b.Principal != "" {
		if bk, ok := s.Codec.(BindingKeyer); ok {
			mintID = bk.MinterID()
		}
		var salt [principalSaltLen]byte
		rand.Read(salt[:]) // never fails
		mac, ok := s.principalMAC(mintID, salt, b.Principal)
		if !ok {
			return "", "", errors.New("mrtr: seal request state: a principal is bound but there is no binding key " +
				"(set Sealer.BindingKey to 32+ secret bytes, or use a codec that implements BindingKeyer)")
		}
		c.Principal = encodePrincipalClaim(salt, mac)
	}

	iat := s.now().UnixMilli()
	c.Version = claimsVersion
	c.IssuedAt = time.UnixMilli(iat)
	c.Expiry = time.UnixMilli(iat + p.TTL.Milliseconds())
	if c.FlowStart.IsZero() {
		c.FlowStart = c.IssuedAt
	}
	c.Tenant, c.Audience, c.Method, c.Target = b.Tenant, b.Audience, b.Method, b.Target
	c.Args = ArgsDigest(b.Args)

	buf := getBuffer(c.encodedLen())
	*buf = appendClaims((*buf)[:0], c)
	token, keyID, err = s.Codec.Seal(ctx, *buf)
	putBuffer(buf)
	if err != nil {
		return "", "", fmt.Errorf("mrtr: seal request state: codec: %w", err)
	}
	if mintID != "" && keyID != mintID {
		// The principal was hashed under another key's binding key; no
		// verifier would accept this token.
		return "", "", fmt.Errorf("mrtr: seal request state: codec minted under key %s, expected %s", keyID, mintID)
	}
	if len(token) > p.MaxStateBytes {
		return "", "", fmt.Errorf("%w (%d token bytes, limit %d)", ErrStateTooLarge, len(token), p.MaxStateBytes)
	}
	c.KeyID = keyID
	return token, keyID, nil
}

// Open verifies token against the live request b and returns its claims.
// Any failure is a *[Rejection] naming the first check that failed; the
// checks run in this order, cheapest and least trusting first:
//
//  1. oversize: the token is longer than Policy.MaxStateBytes, checked
//     before any decoding so an attacker cannot make us decode megabytes;
//  2. the codec: malformed, unknown_key, authentication (or codec_error if
//     it failed without rejecting);
//  3. malformed: the authenticated bytes are not a version-1 claims
//     encoding (wrong version, truncated, trailing bytes, no method);
//  4. future: the issue time is beyond now + Policy.Skew;
//  5. expired: now is not before the expiry;
//  6. lifetime: expiry minus issue time is not within (0, Policy.TTL], so
//     a token minted under a longer TTL (a laxer past policy, or a leaked
//     key) cannot outlive the current one;
//  7. tenant, then audience;
//  8. binding: method, target or argument digest differ;
//  9. principal_drift: exactly one of the claim and b.Principal is empty;
//  10. principal: the salted HMAC, recomputed under the binding key of the
//     key that verified the token, does not match (constant time);
//  11. revoked: Sealer.Revoked reports the flow cancelled.
//
// Time checks are written as positive accept tests, so anything that is
// not clearly valid is rejected. The returned Claims own their memory.
func (s *Sealer) Open(ctx context.Context, token string, b Binding) (*Claims, error) {
	if s.Codec == nil || s.Policy.Validate() != nil {
		return nil, reject(ReasonInternal)
	}
	p := s.Policy.withDefaults()
	if len(token) > p.MaxStateBytes {
		return nil, reject(ReasonOversize)
	}
	plaintext, keyID, err := s.Codec.Unseal(ctx, token)
	if err != nil {
		if r, ok := errors.AsType[*Rejection](err); ok {
			return nil, r
		}
		return nil, &Rejection{Reason: ReasonCodecError, cause: err}
	}
	c, ok := decodeClaims(plaintext)
	if !ok {
		return nil, reject(ReasonMalformed)
	}
	c.KeyID = keyID

	if r := s.check(ctx, c, b, keyID, p); r != nil {
		if c.Tenant == b.Tenant {
			r.FlowID, r.Round = c.FlowID, c.Round
		}
		return nil, r
	}
	return c, nil
}

// check applies every check after authentication, in the fixed order.
func (s *Sealer) check(ctx context.Context, c *Claims, b Binding, keyID string, p Policy) *Rejection {
	now := s.now().UnixMilli()
	iat, exp := c.IssuedAt.UnixMilli(), c.Expiry.UnixMilli()
	if !(iat <= now+p.Skew.Milliseconds()) {
		return reject(ReasonFuture)
	}
	if !(now < exp) {
		return reject(ReasonExpired)
	}
	// iat <= now+skew and exp > now hold here, so neither sum can overflow.
	if !(iat < exp && exp <= iat+p.TTL.Milliseconds()) {
		return reject(ReasonLifetime)
	}
	if c.Tenant != b.Tenant {
		return reject(ReasonTenant)
	}
	if c.Audience != b.Audience {
		return reject(ReasonAudience)
	}
	if args := argsDigest(b.Args); c.Method != b.Method || c.Target != b.Target || c.Args != string(args[:]) {
		return reject(ReasonBinding)
	}
	if (c.Principal == "") != (b.Principal == "") {
		return reject(ReasonPrincipalDrift)
	}
	if b.Principal != "" {
		salt, mac, ok := decodePrincipalClaim(c.Principal)
		if !ok {
			return reject(ReasonPrincipal)
		}
		want, ok := s.principalMAC(keyID, salt, b.Principal)
		if !ok {
			return reject(ReasonInternal)
		}
		if !hmac.Equal(mac[:], want[:]) {
			return reject(ReasonPrincipal)
		}
	}
	if s.Revoked != nil && c.FlowID != "" && s.Revoked(ctx, c.FlowID) {
		return reject(ReasonRevoked)
	}
	return nil
}

// TokenFromJSON reads the requestState member of request params as it
// arrived on the wire. Absent and an explicit null both mean "no state"
// (present is false); a JSON string is the token; anything else is a
// non_string *Rejection, so a handler never sees state the server did not
// verify.
func TokenFromJSON(raw json.RawMessage) (token string, present bool, err error) {
	i, j := 0, len(raw)
	for i < j && isJSONSpace(raw[i]) {
		i++
	}
	for j > i && isJSONSpace(raw[j-1]) {
		j--
	}
	switch v := raw[i:j]; {
	case len(v) == 0 || string(v) == "null":
		return "", false, nil
	case v[0] != '"':
		return "", false, reject(ReasonNonString)
	}
	if s := raw[i+1 : j]; len(s) > 0 && s[len(s)-1] == '"' && printableASCII(s[:len(s)-1]) {
		// A sealed token's alphabet: the string is its bytes, as
		// json.Unmarshal would decode it, without its validating scan.
		return string(s[:len(s)-1]), true, nil
	}
	if err := json.Unmarshal(raw, &token); err != nil {
		return "", false, reject(ReasonNonString)
	}
	return token, true, nil
}

// printableASCII reports whether s holds only printable ASCII other than
// the quote and the backslash: a JSON string's content that needs no
// decoding.
func printableASCII(s []byte) bool {
	for _, c := range s {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// The principal claim is base64url-nopad(salt[8] || HMAC-SHA256(key,
// "principal:" || salt || principal)[:16]), 32 characters. The salt makes
// every mint distinct (tokens of one principal cannot be linked even if a
// key leaks); the key makes the hash useless to anyone without it, so a
// principal cannot be confirmed by guessing, unlike an unkeyed hash.
const (
	principalSaltLen = 8
	principalMACLen  = 16
	principalLabel   = "principal:"
)

var principalLabelBytes = []byte(principalLabel)

// principalHasher is a keyed HMAC with its own message buffer, so that a
// pooled instance computes a MAC without allocating.
type principalHasher struct {
	mac hash.Hash
	msg []byte
	out [sha256.Size]byte
}

func newPrincipalHasher(key []byte) *principalHasher {
	return &principalHasher{mac: hmac.New(sha256.New, key), msg: make([]byte, 0, 128)}
}

func (h *principalHasher) sum(salt [principalSaltLen]byte, principal string) [principalMACLen]byte {
	h.msg = append(append(append(h.msg[:0], principalLabelBytes...), salt[:]...), principal...)
	h.mac.Reset()
	h.mac.Write(h.msg)
	clear(h.msg) // the principal is not secret, but need not linger
	return [principalMACLen]byte(h.mac.Sum(h.out[:0]))
}

// principalMAC computes the principal MAC under the binding key that
// belongs with keyID: through the Ring's pooled HMACs when the codec is
// the built-in one, else through BindingKeyer or Sealer.BindingKey.
func (s *Sealer) principalMAC(keyID string, salt [principalSaltLen]byte, principal string) ([principalMACLen]byte, bool) {
	if r, ok := s.Codec.(*Ring); ok {
		return r.principalMAC(keyID, salt, principal)
	}
	key, ok := s.bindingKey(keyID)
	if !ok {
		return [principalMACLen]byte{}, false
	}
	return newPrincipalHasher(key).sum(salt, principal), true
}

func encodePrincipalClaim(salt [principalSaltLen]byte, mac [principalMACLen]byte) string {
	var raw [principalSaltLen + principalMACLen]byte
	copy(raw[:], salt[:])
	copy(raw[principalSaltLen:], mac[:])
	var text [principalClaimLen]byte
	return string(b64Encode(text[:], raw[:]))
}

// principalClaimLen is the length of a principal claim: 24 bytes in
// base64url.
const principalClaimLen = 32

// decodePrincipalClaim accepts only the canonical 32-character spelling.
func decodePrincipalClaim(claim string) (salt [principalSaltLen]byte, mac [principalMACLen]byte, ok bool) {
	var raw [principalSaltLen + principalMACLen]byte
	if len(claim) != principalClaimLen || !b64Decode(raw[:], claim) {
		return salt, mac, false
	}
	return [principalSaltLen]byte(raw[:principalSaltLen]), [principalMACLen]byte(raw[principalSaltLen:]), true
}

// Claims encoding, version 1.
//
// The claims use a compact binary form rather than JSON: the bytes are
// authenticated by the codec before we parse them, so the format needs to
// be strict and cheap, not self-describing. JSON would cost a reflective
// decode with an allocation per field and would escape the tenant's state a
// second time; this layout decodes in one pass with two allocations (one
// string for all the short fields, and the plaintext buffer itself, which
// Resolver and State then alias) and adds a few bytes of overhead instead
// of ~100 bytes of field names.
//
//	version   byte (1)
//	iat       varint (zig-zag), unix milliseconds
//	exp       varint, unix milliseconds
//	flowStart varint, unix milliseconds
//	round     uvarint
//	then each as uvarint length || bytes, in this order:
//	tenant, audience, method, target, args, principal, flowID, parent,
//	resolver, state
//
// Decoding is canonical: a varint in a longer form than necessary, a
// length past the end, or bytes left over are all malformed, so one claims
// value has exactly one encoding. Adding a field means a new version.
const claimsVersion = 1

func (c *Claims) stringFields() [8]string {
	return [8]string{c.Tenant, c.Audience, c.Method, c.Target, c.Args, c.Principal, c.FlowID, c.Parent}
}

func (c *Claims) encodedLen() int {
	n := 1 + 3*binary.MaxVarintLen64 + binary.MaxVarintLen64
	for _, f := range c.stringFields() {
		n += binary.MaxVarintLen64 + len(f)
	}
	return n + 2*binary.MaxVarintLen64 + len(c.Resolver) + len(c.State)
}

func appendClaims(b []byte, c *Claims) []byte {
	b = append(b, claimsVersion)
	b = binary.AppendVarint(b, c.IssuedAt.UnixMilli())
	b = binary.AppendVarint(b, c.Expiry.UnixMilli())
	b = binary.AppendVarint(b, c.FlowStart.UnixMilli())
	b = binary.AppendUvarint(b, uint64(c.Round))
	for _, f := range c.stringFields() {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	b = binary.AppendUvarint(b, uint64(len(c.Resolver)))
	b = append(b, c.Resolver...)
	b = binary.AppendUvarint(b, uint64(len(c.State)))
	return append(b, c.State...)
}

// claimsReader reads the canonical encoding; any violation latches ok off.
type claimsReader struct {
	b   []byte
	pos int
	ok  bool
}

func (r *claimsReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b[r.pos:])
	// n <= 0: truncated or overflow. A final byte of zero after the first
	// is a non-minimal encoding of a smaller value.
	if n <= 0 || (n > 1 && r.b[r.pos+n-1] == 0) {
		r.ok = false
		return 0
	}
	r.pos += n
	return v
}

func (r *claimsReader) varint() int64 {
	u := r.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

// span returns the bounds of the next length-prefixed field.
func (r *claimsReader) span() (lo, hi int) {
	n := r.uvarint()
	if !r.ok || n > uint64(len(r.b)-r.pos) {
		r.ok = false
		return r.pos, r.pos
	}
	lo = r.pos
	r.pos += int(n)
	return lo, r.pos
}

func decodeClaims(b []byte) (*Claims, bool) {
	if len(b) == 0 || b[0] != claimsVersion {
		return nil, false
	}
	r := claimsReader{b: b, pos: 1, ok: true}
	iat, exp, start := r.varint(), r.varint(), r.varint()
	round := r.uvarint()
	var spans [8][2]int
	for i := range spans {
		spans[i][0], spans[i][1] = r.span()
	}
	resLo, resHi := r.span()
	stLo, stHi := r.span()
	if !r.ok || r.pos != len(b) || round > uint64(maxInt) {
		return nil, false
	}
	// One allocation for all the short fields; each is a substring.
	base := spans[0][0]
	all := string(b[base:spans[7][1]])
	field := func(i int) string { return all[spans[i][0]-base : spans[i][1]-base] }
	c := &Claims{
		Version:   claimsVersion,
		IssuedAt:  time.UnixMilli(iat),
		Expiry:    time.UnixMilli(exp),
		FlowStart: time.UnixMilli(start),
		Round:     int(round),
		Tenant:    field(0),
		Audience:  field(1),
		Method:    field(2),
		Target:    field(3),
		Args:      field(4),
		Principal: field(5),
		FlowID:    field(6),
		Parent:    field(7),
	}
	if c.Method == "" {
		return nil, false
	}
	if resHi > resLo {
		c.Resolver = json.RawMessage(b[resLo:resHi:resHi])
	}
	if stHi > stLo {
		c.State = b[stLo:stHi:stHi]
	}
	return c, true
}

const maxInt = int(^uint(0) >> 1)
