package mrtr

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsmcp/platform/mcp"
)

// secret returns a deterministic 32-byte test secret.
func secret(fill byte) []byte { return bytes.Repeat([]byte{fill}, 32) }

func mustRing(t testing.TB, secrets ...[]byte) *Ring {
	t.Helper()
	r, err := NewRing(secrets...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustSeal(t testing.TB, c Codec, plaintext []byte) string {
	t.Helper()
	tok, _, err := c.Seal(context.Background(), plaintext)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// rawBody decodes a token's body (everything after "v1.").
func rawBody(t testing.TB, token string) []byte {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(token, tokenPrefix))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func reencode(raw []byte) string { return tokenPrefix + base64.RawURLEncoding.EncodeToString(raw) }

// wantRejection asserts err is a *Rejection with the given reason (any
// reason when reason is "").
func wantRejection(t testing.TB, err error, reason string) {
	t.Helper()
	r, ok := errors.AsType[*Rejection](err)
	if !ok {
		t.Fatalf("got error %v, want a *Rejection %q", err, reason)
	}
	if reason != "" && r.Reason != reason {
		t.Fatalf("got rejection %q, want %q", r.Reason, reason)
	}
	if len(r.Error()) > 80 || len(r.Reason) > 40 {
		t.Fatalf("rejection message %q is not short", r.Error())
	}
}

func TestRingSealUnsealRoundTripsAnyPayload(t *testing.T) {
	ring := mustRing(t, secret(1))
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	for name, payload := range map[string][]byte{
		"empty":  {},
		"utf8":   []byte("état: ✓ 部署 😀"),
		"binary": binary,
		"64KiB":  bytes.Repeat([]byte("x"), 64<<10),
	} {
		tok, kid, err := ring.Seal(context.Background(), payload)
		if err != nil {
			t.Fatalf("%s: seal: %v", name, err)
		}
		got, kid2, err := ring.Unseal(context.Background(), tok)
		if err != nil || !bytes.Equal(got, payload) || kid != kid2 || kid != ring.MinterID() {
			t.Fatalf("%s: unseal = %d bytes, %q, %v; want %d bytes under %q", name, len(got), kid2, err, len(payload), kid)
		}
	}
}

func TestRingTokenIsV1PlusUnpaddedBase64urlOverKidNonceAndCiphertext(t *testing.T) {
	ring := mustRing(t, secret(1))
	payload := []byte("hello, state")
	tok := mustSeal(t, ring, payload)
	if !strings.HasPrefix(tok, "v1.") || strings.ContainsAny(tok[3:], "=+/.\n") {
		t.Fatalf("token %q is not v1. + unpadded base64url", tok)
	}
	raw := rawBody(t, tok)
	if want := kidLen + nonceLen + len(payload) + tagLen; len(raw) != want {
		t.Fatalf("body is %d bytes, want 4+12+%d+16 = %d", len(raw), len(payload), want)
	}
	if got := fmt.Sprintf("%x", raw[:kidLen]); got != ring.MinterID() {
		t.Fatalf("body starts with kid %s, want the minter %s", got, ring.MinterID())
	}
	if want := 3 + (4*(tokenOverhead+len(payload))+2)/3; len(tok) != want {
		t.Fatalf("token is %d characters, want %d", len(tok), want)
	}
}

func TestRingTwoSealsOfTheSamePayloadAreDistinctAndBothUnseal(t *testing.T) {
	ring := mustRing(t, secret(1))
	a, b := mustSeal(t, ring, []byte("same")), mustSeal(t, ring, []byte("same"))
	if a == b {
		t.Fatal("two seals produced the same token")
	}
	if !bytes.Equal(rawBody(t, a)[:kidLen], rawBody(t, b)[:kidLen]) ||
		bytes.Equal(rawBody(t, a)[kidLen:kidLen+nonceLen], rawBody(t, b)[kidLen:kidLen+nonceLen]) {
		t.Fatal("seals must share the kid and differ in the nonce")
	}
	for _, tok := range []string{a, b} {
		if got, _, err := ring.Unseal(context.Background(), tok); err != nil || string(got) != "same" {
			t.Fatalf("unseal = %q, %v", got, err)
		}
	}
}

func TestRingTokenCorruptedInAnyRegionIsRejectedWithoutEchoingThePayload(t *testing.T) {
	ring := mustRing(t, secret(1))
	payload := []byte("secret-payload-0123456789")
	tok := mustSeal(t, ring, payload)
	raw := rawBody(t, tok)
	regions := []struct {
		name   string
		offset int
		reason string
	}{
		{"kid", 0, ReasonUnknownKey},
		{"nonce", kidLen + 3, ReasonAuthentication},
		{"ciphertext", kidLen + nonceLen + 5, ReasonAuthentication},
		{"tag", len(raw) - 1, ReasonAuthentication},
	}
	for _, r := range regions {
		for bit := range 8 {
			bad := bytes.Clone(raw)
			bad[r.offset] ^= 1 << bit
			_, _, err := ring.Unseal(context.Background(), reencode(bad))
			wantRejection(t, err, r.reason)
			if strings.Contains(err.Error(), string(payload)) || strings.Contains(err.Error(), tok) {
				t.Fatalf("%s: error %q echoes the payload or token", r.name, err)
			}
		}
	}
	for _, prefix := range []string{"v2.", "V1.", "v1-", "v1", "x1."} {
		_, _, err := ring.Unseal(context.Background(), prefix+tok[3:])
		wantRejection(t, err, ReasonMalformed)
	}
}

func TestRingStructurallyMalformedTokenIsRejected(t *testing.T) {
	ring := mustRing(t, secret(1))
	short := tokenPrefix + base64.RawURLEncoding.EncodeToString(make([]byte, tokenOverhead-1))
	for _, tok := range []string{"", "v1.", "v1", "garbage", "v1.!!!!", "v1.a", short, "v1." + strings.Repeat("A", 41)} {
		_, _, err := ring.Unseal(context.Background(), tok)
		wantRejection(t, err, ReasonMalformed)
	}
	// A body of exactly 32 zero bytes is well-formed but under no known kid.
	_, _, err := ring.Unseal(context.Background(), reencode(make([]byte, tokenOverhead)))
	wantRejection(t, err, ReasonUnknownKey)
}

func TestRingTokenMintedUnderAKeyOutsideTheRingIsRejectedAsUnknownKey(t *testing.T) {
	tok := mustSeal(t, mustRing(t, secret(1)), []byte("x"))
	_, _, err := mustRing(t, secret(2), secret(3)).Unseal(context.Background(), tok)
	wantRejection(t, err, ReasonUnknownKey)
}

func TestRingRotationFirstKeyMintsAndEveryKeyVerifies(t *testing.T) {
	oldKey, newKey := secret(1), secret(2)
	phase0 := mustRing(t, oldKey)
	phase1 := mustRing(t, oldKey, newKey) // new key verify-only
	phase2 := mustRing(t, newKey, oldKey) // new key mints
	phase3 := mustRing(t, newKey)         // old key retired

	if phase1.MinterID() != phase0.MinterID() || phase2.MinterID() != phase3.MinterID() || phase1.MinterID() == phase2.MinterID() {
		t.Fatal("the first secret must decide the minting key")
	}
	oldTok := mustSeal(t, phase1, []byte("old"))
	newTok := mustSeal(t, phase2, []byte("new"))
	for _, ring := range []*Ring{phase0, phase1, phase2} {
		if got, kid, err := ring.Unseal(context.Background(), oldTok); err != nil || string(got) != "old" || kid != phase0.MinterID() {
			t.Fatalf("a ring holding the old key refused its token: %q %q %v", got, kid, err)
		}
	}
	for _, ring := range []*Ring{phase1, phase2, phase3} {
		if got, _, err := ring.Unseal(context.Background(), newTok); err != nil || string(got) != "new" {
			t.Fatalf("a ring holding the new key refused its token: %v", err)
		}
	}
	_, _, err := phase3.Unseal(context.Background(), oldTok)
	wantRejection(t, err, ReasonUnknownKey) // retired
	_, _, err = phase0.Unseal(context.Background(), newTok)
	wantRejection(t, err, ReasonUnknownKey) // not yet rolled out
}

func TestNewRingRejectsBadRings(t *testing.T) {
	tests := []struct {
		name    string
		secrets [][]byte
		want    string
	}{
		{"empty ring", nil, "empty"},
		{"short secret", [][]byte{make([]byte, 31)}, "openssl rand -base64 32"},
		{"short later secret", [][]byte{secret(1), []byte("hunter2")}, "secret 1 is 7 bytes"},
		{"duplicate secret", [][]byte{secret(1), secret(2), secret(1)}, "secrets 0 and 2 are identical"},
	}
	for _, tt := range tests {
		_, err := NewRing(tt.secrets...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error mentioning %q", tt.name, err, tt.want)
		}
	}
}

func TestNewRingCopiesItsSecrets(t *testing.T) {
	s := secret(7)
	ring := mustRing(t, s)
	tok := mustSeal(t, ring, []byte("x"))
	clear(s)
	if _, _, err := mustRing(t, secret(7)).Unseal(context.Background(), tok); err != nil {
		t.Fatalf("token minted before the caller wiped its secret: %v", err)
	}
	if _, _, err := ring.Unseal(context.Background(), mustSeal(t, ring, []byte("y"))); err != nil {
		t.Fatalf("ring changed when the caller wiped its secret: %v", err)
	}
	if _, _, err := mustRing(t, secret(7)).Unseal(context.Background(), mustSeal(t, ring, []byte("z"))); err != nil {
		t.Fatalf("ring no longer mints under the original key: %v", err)
	}
}

func TestRingTokenRevealsThePayloadNeitherInTextNorDecodedBytes(t *testing.T) {
	ring := mustRing(t, secret(1))
	payload := []byte("PLAINTEXT-MARKER-awaiting-confirm")
	tok := mustSeal(t, ring, payload)
	if strings.Contains(tok, string(payload)) || strings.Contains(tok, base64.RawURLEncoding.EncodeToString(payload)[:12]) {
		t.Fatal("the payload is visible in the token text")
	}
	if bytes.Contains(rawBody(t, tok), payload[:8]) {
		t.Fatal("the payload is visible in the decoded token")
	}
}

func TestRingEverySubstitutionOfTheFinalTokenCharacterIsRejected(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	ring := mustRing(t, secret(1))
	// Payload lengths that leave 0, 1 and 2 spare trailing bits.
	for n := range 3 {
		tok := mustSeal(t, ring, bytes.Repeat([]byte("p"), 10+n))
		last := tok[len(tok)-1]
		tried := 0
		for _, c := range []byte(alphabet + "=+/.~ \n\x00\xff") {
			if c == last {
				continue
			}
			tried++
			_, _, err := ring.Unseal(context.Background(), tok[:len(tok)-1]+string(c))
			wantRejection(t, err, "")
		}
		if tried < 63 {
			t.Fatalf("tried only %d substitutions", tried)
		}
	}
}

func TestRingNonCanonicalTokenBodyIsRejected(t *testing.T) {
	ring := mustRing(t, secret(1))
	tok := mustSeal(t, ring, []byte("ab")) // 34 raw bytes: 46 chars, 4 spare bits
	body := tok[3:]
	raw := rawBody(t, tok)
	// The same bytes with a non-zero spare bit decode identically under a
	// lax decoder.
	lastIdx := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", body[len(body)-1])
	trailing := body[:len(body)-1] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[lastIdx|1])
	if trailing == body {
		t.Fatal("test setup: the spare bit was already set")
	}
	if lax, err := base64.RawURLEncoding.DecodeString(trailing); err != nil || !bytes.Equal(lax, raw) {
		t.Fatal("test setup: lax decoding should map the variant to the same bytes")
	}
	for name, variant := range map[string]string{
		"padding":            body + "==",
		"single padding":     body + "=",
		"newline in middle":  body[:10] + "\n" + body[10:],
		"carriage return":    body[:10] + "\r" + body[10:],
		"trailing newline":   body + "\n",
		"leading space":      " " + body,
		"junk suffix":        body + "!",
		"standard alphabet":  strings.NewReplacer("-", "+", "_", "/").Replace(body) + "+",
		"non-zero spare bit": trailing,
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := ring.Unseal(context.Background(), tokenPrefix+variant)
			wantRejection(t, err, ReasonMalformed)
		})
	}
	// Only the canonical spelling unseals, and it re-encodes to itself.
	if got, _, err := ring.Unseal(context.Background(), tok); err != nil || string(got) != "ab" {
		t.Fatalf("the canonical token failed: %v", err)
	}
	if reencode(raw) != tok {
		t.Fatal("a minted token is not in canonical form")
	}
}

func TestRingTokenReprefixedToAFutureVersionIsRejected(t *testing.T) {
	ring := mustRing(t, secret(1))
	tok := mustSeal(t, ring, []byte("x"))
	for _, p := range []string{"v2.", "v10.", "v1.v1."} {
		_, _, err := ring.Unseal(context.Background(), p+tok[3:])
		wantRejection(t, err, ReasonMalformed)
	}
}

func TestRingKidTransplantedOntoAnotherTokensBodyIsRejected(t *testing.T) {
	a, b := secret(1), secret(2)
	ring := mustRing(t, a, b)
	tokA := mustSeal(t, ring, []byte("minted under a"))
	tokB := mustSeal(t, mustRing(t, b), []byte("minted under b"))
	rawA, rawB := rawBody(t, tokA), rawBody(t, tokB)
	copy(rawA[:kidLen], rawB[:kidLen]) // claim key b for a's ciphertext
	_, _, err := ring.Unseal(context.Background(), reencode(rawA))
	wantRejection(t, err, ReasonAuthentication)
}

func TestEphemeralRingsAreProtectedAndMutuallyUnintelligible(t *testing.T) {
	a, b := Ephemeral(), Ephemeral()
	if a.MinterID() == b.MinterID() {
		t.Fatal("two ephemeral rings share a key")
	}
	tok := mustSeal(t, a, []byte("mine"))
	if got, _, err := a.Unseal(context.Background(), tok); err != nil || string(got) != "mine" {
		t.Fatalf("own token: %v", err)
	}
	_, _, err := b.Unseal(context.Background(), tok)
	wantRejection(t, err, ReasonUnknownKey)
}

func TestRingKeyIDsAndBindingKeys(t *testing.T) {
	ring := mustRing(t, secret(1), secret(2))
	ids := ring.KeyIDs()
	if len(ids) != 2 || ids[0] != ring.MinterID() || ids[0] == ids[1] {
		t.Fatalf("KeyIDs = %q, minter %q", ids, ring.MinterID())
	}
	for _, id := range ids {
		if len(id) != 8 || strings.ToLower(id) != id {
			t.Fatalf("key id %q is not 8 lowercase hex characters", id)
		}
	}
	ids[0] = "mutated"
	if ring.KeyIDs()[0] == "mutated" {
		t.Fatal("KeyIDs exposes the ring's own slice")
	}
	k0, ok0 := ring.BindingKey(ring.MinterID())
	k1, ok1 := ring.BindingKey(ring.KeyIDs()[1])
	if !ok0 || !ok1 || len(k0) != 32 || bytes.Equal(k0, k1) || bytes.Equal(k0, secret(1)) {
		t.Fatal("each key needs its own 32-byte binding key, distinct from its secret")
	}
	for _, bad := range []string{"", "00000000", strings.ToUpper(ring.MinterID()), ring.MinterID() + "0", "zzzzzzzz"} {
		if _, ok := ring.BindingKey(bad); ok {
			t.Errorf("BindingKey(%q) found a key", bad)
		}
	}
}

func TestRingIsSafeForConcurrentUse(t *testing.T) {
	ring := mustRing(t, secret(1), secret(2))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				p := fmt.Appendf(nil, "%d/%d", g, i)
				tok := mustSeal(t, ring, p)
				if got, _, err := ring.Unseal(context.Background(), tok); err != nil || !bytes.Equal(got, p) {
					t.Errorf("concurrent round trip: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestRejectionIsFoundWithErrorsAs(t *testing.T) {
	_, _, err := mustRing(t, secret(1)).Unseal(context.Background(), "nope")
	wrapped := fmt.Errorf("verifying: %w", err)
	r, ok := errors.AsType[*Rejection](wrapped)
	if !ok || r.Reason != ReasonMalformed {
		t.Fatalf("errors.As on a wrapped rejection: %v", wrapped)
	}
	if got := r.Error(); got != "mrtr: request state rejected: malformed" {
		t.Fatalf("Error() = %q", got)
	}
}

// sealWithNonce seals like Ring.Seal but with a chosen nonce, so that
// every fuzzing process mints the very same seed tokens.
func sealWithNonce(r *Ring, nonce byte, plaintext []byte) string {
	k := r.minter
	raw := append(bytes.Clone(k.id[:]), bytes.Repeat([]byte{nonce}, nonceLen)...)
	raw = k.aead.Seal(raw, raw[kidLen:], plaintext, k.aad)
	return encodeToken(raw)
}

// FuzzUnseal feeds arbitrary tokens to Ring.Unseal and Sealer.Open. Neither
// may panic, and nothing but a token minted here may ever be accepted:
// strict decoding gives every token exactly one spelling, so acceptance of
// anything else would be a forgery or a malleability bug.
func FuzzUnseal(f *testing.F) {
	ring := mustRing(f, secret(1), secret(2))
	s := &Sealer{Codec: ring, Now: (&fakeClock{t: epoch}).Now}
	b := Binding{Tenant: "acme", Audience: "acme", Method: mcp.MethodToolsCall, Target: "deploy",
		Args: []byte(`{"env":"prod"}`), Principal: `["iss","alice","cli"]`}
	minted := map[string]bool{}
	mint := func(tok string) {
		minted[tok] = true
		f.Add(tok)
	}
	for i, p := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("y"), 100)} {
		mint(sealWithNonce(ring, byte(i), p))
	}
	// Valid claims for b, with a fixed salt, so Open has seeds to accept.
	mac, _ := ring.principalMAC(ring.MinterID(), [principalSaltLen]byte{7}, b.Principal)
	for round := 1; round <= 3; round++ {
		c := &Claims{IssuedAt: epoch, Expiry: epoch.Add(time.Minute), FlowStart: epoch, Round: round,
			Tenant: b.Tenant, Audience: b.Audience, Method: b.Method, Target: b.Target, Args: ArgsDigest(b.Args),
			Principal: encodePrincipalClaim([principalSaltLen]byte{7}, mac), FlowID: "flow-1", State: []byte("st")}
		tok := sealWithNonce(ring, byte(10+round), appendClaims(nil, c))
		if _, err := s.Open(context.Background(), tok, b); err != nil {
			f.Fatalf("seed for round %d: %v", round, err)
		}
		mint(tok)
	}
	for _, seed := range []string{"", "v1.", "v1.AAAA", "v2.abcd", "v1." + strings.Repeat("A", 43), "v1.====", "v1.\n\n"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, token string) {
		_, _, err := ring.Unseal(context.Background(), token)
		if err == nil && !minted[token] {
			t.Fatalf("Ring.Unseal accepted a token it never minted: %q", token)
		}
		if _, ok := errors.AsType[*Rejection](err); err != nil && !ok {
			t.Fatalf("Ring.Unseal error %v is not a *Rejection", err)
		}
		_, err = s.Open(context.Background(), token, b)
		if err == nil && !minted[token] {
			t.Fatalf("Sealer.Open accepted a token never minted: %q", token)
		}
		if _, ok := errors.AsType[*Rejection](err); err != nil && !ok {
			t.Fatalf("Sealer.Open error %v is not a *Rejection", err)
		}
	})
}

// The built-in base64url codec must agree with encoding/base64 in strict
// mode on everything except the whitespace the standard decoder skips.
func TestBase64CodecAgreesWithEncodingBase64Strict(t *testing.T) {
	std := base64.RawURLEncoding.Strict()
	for n := range 70 {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*37 + n)
		}
		want := std.EncodeToString(src)
		got := string(b64Encode(make([]byte, len(want)), src))
		if got != want {
			t.Fatalf("encode %d bytes: %q, want %q", n, got, want)
		}
	}
	f := func(s string) {
		t.Helper()
		stdOut, stdErr := std.DecodeString(s)
		n, ok := b64DecodedLen(len(s))
		var out []byte
		if ok {
			out = make([]byte, n)
			ok = b64Decode(out, s)
		}
		switch {
		case strings.ContainsAny(s, "\r\n"):
			if ok {
				t.Fatalf("%q: accepted a body containing a newline", s)
			}
		case (stdErr == nil) != ok || (ok && !bytes.Equal(out, stdOut)):
			t.Fatalf("%q: got %x, %v; encoding/base64 gives %x, %v", s, out, ok, stdOut, stdErr)
		}
	}
	for _, s := range []string{"", "A", "AA", "AB", "AAA", "AAB", "AAAA", "AAAAA", "AAAAAA", "AAAAAAA", "_-_-", "AA==", "A=", "AAA\n", "A\nAA", "+/AA", "AAAA AAAA", "\x00AAA", "AAA\xff"} {
		f(s)
	}
	// Long bodies, through the word-at-a-time path, intact and with one
	// character replaced by each of a few bad or merely different bytes at
	// every position.
	for n := range 120 {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*131 + n*7)
		}
		enc := std.EncodeToString(src)
		f(enc)
		if n == 40 || n == 41 || n == 119 {
			for i := range len(enc) {
				for _, c := range []byte{'=', '+', '/', '\n', 0, 0xff, 'A', '_'} {
					f(enc[:i] + string(c) + enc[i+1:])
				}
			}
		}
	}
	// Every 2- and 3-character tail, over the whole byte range.
	for a := range 256 {
		for b := range 256 {
			f(string([]byte{'Q', 'U', 'J', 'D', byte(a), byte(b)}))
			if a%7 == 0 {
				f(string([]byte{'Q', byte(b), byte(a)}))
			}
		}
	}
}
