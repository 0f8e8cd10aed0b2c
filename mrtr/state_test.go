package mrtr

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsmcp/platform/mcp"
)

var epoch = time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)

type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time                  { return c.t }
func (c *fakeClock) Advance(d time.Duration)         { c.t = c.t.Add(d) }
func (c *fakeClock) At(t time.Time) func() time.Time { return func() time.Time { return t } }

const alice = `["https://as.example","alice","client-123"]`

func deployBinding() Binding {
	return Binding{
		Tenant:    "acme",
		Audience:  "https://acme.example/mcp",
		Method:    mcp.MethodToolsCall,
		Target:    "deploy",
		Args:      json.RawMessage(`{"env":"prod","replicas":3}`),
		Principal: alice,
	}
}

// newSealer returns a sealer over a fresh two-key ring and its clock.
func newSealer(t testing.TB) (*Sealer, *fakeClock) {
	clk := &fakeClock{t: epoch}
	return &Sealer{Codec: mustRing(t, secret(1), secret(2)), Now: clk.Now}, clk
}

func seal(t testing.TB, s *Sealer, b Binding, c *Claims) string {
	t.Helper()
	if c == nil {
		c = &Claims{FlowID: "flow-1", Round: 1, State: []byte("awaiting-confirm")}
	}
	tok, _, err := s.Seal(context.Background(), b, c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func open(s *Sealer, tok string, b Binding) error {
	_, err := s.Open(context.Background(), tok, b)
	return err
}

func TestSealerRoundTripsEveryClaim(t *testing.T) {
	s, clk := newSealer(t)
	b := deployBinding()
	in := &Claims{
		FlowID:    "flow-7",
		Round:     3,
		FlowStart: epoch.Add(-2 * time.Minute),
		Parent:    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		Resolver:  json.RawMessage(`{"v":1,"outcomes":{}}`),
		State:     []byte("tenant state \x00\xff"),
	}
	tok, kid, err := s.Seal(context.Background(), b, in)
	if err != nil {
		t.Fatal(err)
	}
	if kid != s.Codec.(*Ring).MinterID() || in.KeyID != kid {
		t.Fatalf("Seal returned key %q (claims %q), want the minter", kid, in.KeyID)
	}
	clk.Advance(time.Minute)
	got, err := s.Open(context.Background(), tok, b)
	if err != nil {
		t.Fatal(err)
	}
	want := *in
	if fmt.Sprint(*got) != fmt.Sprint(want) {
		t.Fatalf("claims changed in transit:\n got %+v\nwant %+v", *got, want)
	}
	if got.Version != 1 || !got.IssuedAt.Equal(epoch) || !got.Expiry.Equal(epoch.Add(DefaultTTL)) ||
		got.Tenant != "acme" || got.Audience != b.Audience || got.Method != mcp.MethodToolsCall || got.Target != "deploy" ||
		got.Args != ArgsDigest(b.Args) || len(got.Principal) != 32 || got.KeyID != kid {
		t.Fatalf("bound claims not filled as documented: %+v", *got)
	}
}

func TestSealerRoundTripsStateOfAnySize(t *testing.T) {
	s, _ := newSealer(t)
	b := deployBinding()
	for _, n := range []int{0, 1, 300, 40 << 10} {
		st := bytes.Repeat([]byte{0xA5}, n)
		tok := seal(t, s, b, &Claims{Round: 1, State: st})
		got, err := s.Open(context.Background(), tok, b)
		if err != nil || !bytes.Equal(got.State, st) || got.Resolver != nil {
			t.Fatalf("%d-byte state: %v", n, err)
		}
	}
}

func TestSealDefaultsFlowStartToTheFirstIssueTime(t *testing.T) {
	s, _ := newSealer(t)
	c := &Claims{Round: 1}
	seal(t, s, deployBinding(), c)
	if !c.FlowStart.Equal(epoch) {
		t.Fatalf("FlowStart = %v, want the issue time %v", c.FlowStart, epoch)
	}
}

func TestClaimsEnvelopeCarriesTheBoundFieldsAndAnEmptyPrincipalWhenUnbound(t *testing.T) {
	s, _ := newSealer(t)
	ring := s.Codec.(*Ring)
	for _, principal := range []string{"", alice} {
		b := deployBinding()
		b.Principal = principal
		plaintext, _, err := ring.Unseal(context.Background(), seal(t, s, b, nil))
		if err != nil {
			t.Fatal(err)
		}
		c, ok := decodeClaims(plaintext)
		if !ok {
			t.Fatal("minted claims do not decode")
		}
		if len(c.Args) != 22 || c.Expiry.Sub(c.IssuedAt) != DefaultTTL || c.Method != mcp.MethodToolsCall {
			t.Fatalf("envelope %+v", c)
		}
		if principal == "" && c.Principal != "" || principal != "" && len(c.Principal) != 32 {
			t.Fatalf("principal claim %q for principal %q", c.Principal, principal)
		}
		if bytes.Contains(plaintext, []byte("alice")) {
			t.Fatal("the principal appears in clear inside the envelope")
		}
	}
}

func TestDecodeClaimsAcceptsExactlyOneEncoding(t *testing.T) {
	c := &Claims{Version: 1, IssuedAt: epoch, Expiry: epoch.Add(time.Minute), FlowStart: epoch, Round: 2,
		Tenant: "t", Method: "tools/call", Target: "x", Args: ArgsDigest(nil), FlowID: "f", State: []byte("s")}
	enc := appendClaims(nil, c)
	got, ok := decodeClaims(enc)
	if !ok || !bytes.Equal(appendClaims(nil, got), enc) {
		t.Fatal("claims do not round trip through their encoding")
	}
	// A non-minimal varint for the round (2 as 0x82 0x00) is refused.
	pre := appendClaims(nil, &Claims{IssuedAt: c.IssuedAt, Expiry: c.Expiry, FlowStart: c.FlowStart})
	roundAt := len(pre) - 8 - 2 // 8 empty strings, 2 empty blobs, then back to the round byte
	if pre[roundAt] != 0 {
		t.Fatal("test setup: round byte not found")
	}
	nonMinimal := append(append(bytes.Clone(enc[:roundAt]), 0x82, 0x00), enc[roundAt+1:]...)
	if _, ok := decodeClaims(nonMinimal); ok {
		t.Fatal("a non-minimal varint was accepted")
	}
}

func TestCodecAuthenticatedBytesThatAreNotClaimsAreRejected(t *testing.T) {
	s, _ := newSealer(t)
	ring := s.Codec.(*Ring)
	b := deployBinding()
	valid, _, err := ring.Unseal(context.Background(), seal(t, s, b, nil))
	if err != nil {
		t.Fatal(err)
	}
	v2 := bytes.Clone(valid)
	v2[0] = 2
	noMethod := appendClaims(nil, &Claims{IssuedAt: epoch, Expiry: epoch.Add(time.Minute), Target: "deploy"})
	for name, plaintext := range map[string][]byte{
		"empty":          {},
		"json claims":    []byte(`{"v":1,"iat":1,"exp":2,"m":"tools/call","s":"x"}`),
		"plain text":     []byte("awaiting-confirm"),
		"version 2":      v2,
		"truncated":      valid[:len(valid)-1],
		"trailing byte":  append(bytes.Clone(valid), 0),
		"length overrun": append(bytes.Clone(valid[:len(valid)-17]), 0xff, 0xff, 0x03),
		"no method":      noMethod,
	} {
		t.Run(name, func(t *testing.T) {
			wantRejection(t, open(s, mustSeal(t, ring, plaintext), b), ReasonMalformed)
		})
	}
}

func TestStateTheServerDidNotMintIsRejected(t *testing.T) {
	s, _ := newSealer(t)
	for _, tok := range []string{"awaiting-confirm", `{"step":2}`, "v1.awaiting-confirm", ""} {
		wantRejection(t, open(s, tok, deployBinding()), ReasonMalformed)
	}
}

func TestExpiredStateIsRejectedAndJustInsideTheTTLIsAccepted(t *testing.T) {
	s, clk := newSealer(t)
	s.Policy.TTL = 10 * time.Minute
	b := deployBinding()
	tok := seal(t, s, b, nil)
	clk.t = epoch.Add(10*time.Minute - time.Millisecond)
	if err := open(s, tok, b); err != nil {
		t.Fatalf("1ms inside the TTL: %v", err)
	}
	for _, after := range []time.Duration{10 * time.Minute, 10*time.Minute + time.Second, 24 * time.Hour} {
		clk.t = epoch.Add(after)
		wantRejection(t, open(s, tok, b), ReasonExpired)
	}
}

func TestAFractionalMintInstantKeepsTheFullTTL(t *testing.T) {
	s, clk := newSealer(t)
	s.Policy.TTL = time.Minute
	clk.t = epoch.Add(999_999 * time.Nanosecond) // truncated to epoch on mint
	c := &Claims{Round: 1}
	tok := seal(t, s, deployBinding(), c)
	if got := c.Expiry.Sub(c.IssuedAt); got != time.Minute {
		t.Fatalf("exp - iat = %v, want exactly the TTL", got)
	}
	clk.t = epoch.Add(time.Minute - time.Millisecond)
	if err := open(s, tok, deployBinding()); err != nil {
		t.Fatal(err)
	}
}

func TestStateMintedInTheFutureIsRejectedBeyondTheSkew(t *testing.T) {
	tests := []struct {
		ahead  time.Duration
		reason string // "" = accepted
	}{
		{30 * time.Second, ""},
		{60 * time.Second, ""},
		{60*time.Second + time.Millisecond, ReasonFuture},
		{120 * time.Second, ReasonFuture},
		{365 * 24 * time.Hour, ReasonFuture},
	}
	for _, tt := range tests {
		s, clk := newSealer(t)
		clk.t = epoch.Add(tt.ahead) // the minting replica's clock runs ahead
		tok := seal(t, s, deployBinding(), nil)
		clk.t = epoch
		err := open(s, tok, deployBinding())
		if tt.reason == "" {
			if err != nil {
				t.Errorf("%v ahead: %v", tt.ahead, err)
			}
			continue
		}
		wantRejection(t, err, tt.reason)
	}
}

func TestALifetimeLongerThanTheTTLIsRejected(t *testing.T) {
	lax, clk := newSealer(t)
	lax.Policy.TTL = time.Hour
	strict := &Sealer{Codec: lax.Codec, Now: clk.Now, Policy: Policy{TTL: 10 * time.Minute}}
	tok := seal(t, lax, deployBinding(), nil)
	wantRejection(t, open(strict, tok, deployBinding()), ReasonLifetime)
	if err := open(lax, tok, deployBinding()); err != nil {
		t.Fatalf("the minting policy refused its own token: %v", err)
	}
	// A claims value whose expiry precedes its issue time is refused too
	// (issued 30s ahead within the skew, expiring 10s ahead).
	bad := appendClaims(nil, &Claims{IssuedAt: epoch.Add(30 * time.Second), Expiry: epoch.Add(10 * time.Second), Method: mcp.MethodToolsCall,
		Tenant: "acme", Audience: deployBinding().Audience, Target: "deploy", Args: ArgsDigest(deployBinding().Args)})
	wantRejection(t, open(strict, mustSeal(t, strict.Codec, bad), deployBinding()), ReasonLifetime)
}

func TestStateForAnotherTenantIsRejectedEvenWithASharedKey(t *testing.T) {
	s, _ := newSealer(t)
	b := deployBinding()
	tok := seal(t, s, b, nil)
	other := b
	other.Tenant = "globex"
	wantRejection(t, open(s, tok, other), ReasonTenant)
}

func TestStateForAnotherAudienceIsRejectedIncludingPresenceDrift(t *testing.T) {
	s, _ := newSealer(t)
	cases := []struct{ minted, live string }{
		{"https://acme.example/mcp", "https://acme.example/other"},
		{"https://acme.example/mcp", ""},
		{"", "https://acme.example/mcp"},
	}
	for _, c := range cases {
		mint, live := deployBinding(), deployBinding()
		mint.Audience, live.Audience = c.minted, c.live
		wantRejection(t, open(s, seal(t, s, mint, nil), live), ReasonAudience)
	}
}

func TestStateReplayedOnAnotherMethodTargetOrArgumentsIsRejected(t *testing.T) {
	s, _ := newSealer(t)
	tok := seal(t, s, deployBinding(), nil)
	for name, mutate := range map[string]func(*Binding){
		"method":          func(b *Binding) { b.Method = mcp.MethodPromptsGet },
		"target":          func(b *Binding) { b.Target = "destroy" },
		"arguments":       func(b *Binding) { b.Args = json.RawMessage(`{"env":"staging","replicas":3}`) },
		"fewer arguments": func(b *Binding) { b.Args = json.RawMessage(`{"env":"prod"}`) },
		"no arguments":    func(b *Binding) { b.Args = nil },
		"number as text":  func(b *Binding) { b.Args = json.RawMessage(`{"env":"prod","replicas":"3"}`) },
	} {
		b := deployBinding()
		mutate(&b)
		t.Run(name, func(t *testing.T) { wantRejection(t, open(s, tok, b), ReasonBinding) })
	}
	if err := open(s, tok, deployBinding()); err != nil {
		t.Fatalf("the original request no longer completes: %v", err)
	}
}

func TestArgumentsThatDifferOnlyInSpellingAreTheSameBinding(t *testing.T) {
	s, _ := newSealer(t)
	b := deployBinding()
	tok := seal(t, s, b, nil)
	for _, args := range []string{
		`{"replicas":3,"env":"prod"}`, `{"env":"prod","replicas":3.0}`, `{"env":"prod","replicas":3e0}`,
		"{ \"env\" : \"\\u0070rod\",\n \"replicas\" : 30e-1 }",
	} {
		b.Args = json.RawMessage(args)
		if err := open(s, tok, b); err != nil {
			t.Errorf("args %s: %v", args, err)
		}
	}
	for _, minted := range []string{"", "null", "{}"} {
		mb := deployBinding()
		mb.Args = json.RawMessage(minted)
		tok := seal(t, s, mb, nil)
		for _, live := range []string{"", "null", "{}", " { } "} {
			lb := mb
			lb.Args = json.RawMessage(live)
			if err := open(s, tok, lb); err != nil {
				t.Errorf("minted with %q, retried with %q: %v", minted, live, err)
			}
		}
	}
}

func TestLoneSurrogateArgumentsAndPrincipalsBindAndVerify(t *testing.T) {
	s, _ := newSealer(t)
	b := deployBinding()
	b.Args = json.RawMessage(`{"name":"\ud800"}`)
	b.Principal = "[\"iss\",\"\xed\xa0\x80\",\"client\"]" // invalid UTF-8 (a raw surrogate)
	tok := seal(t, s, b, &Claims{Round: 1, State: []byte("\xed\xa0\x80")})
	c, err := s.Open(context.Background(), tok, b)
	if err != nil || string(c.State) != "\xed\xa0\x80" {
		t.Fatalf("lone surrogates: %v", err)
	}
	other := b
	other.Args = json.RawMessage(`{"name":"\udbff"}`)
	wantRejection(t, open(s, tok, other), ReasonBinding)
}

func TestStateForAnotherPrincipalIsRejectedAndTheSamePrincipalCompletes(t *testing.T) {
	s, _ := newSealer(t)
	b := deployBinding()
	tok := seal(t, s, b, nil)
	for _, p := range []string{
		`["https://as.example","bob","client-123"]`,
		`["https://as.example","alice","client-999"]`,
		`["https://evil.example","alice","client-123"]`,
		alice + " ",
	} {
		other := b
		other.Principal = p
		wantRejection(t, open(s, tok, other), ReasonPrincipal)
	}
	if err := open(s, tok, b); err != nil {
		t.Fatalf("the same principal: %v", err)
	}
}

func TestPrincipalDriftIsRejectedInBothDirections(t *testing.T) {
	s, _ := newSealer(t)
	bound, anon := deployBinding(), deployBinding()
	anon.Principal = ""
	wantRejection(t, open(s, seal(t, s, bound, nil), anon), ReasonPrincipalDrift)
	wantRejection(t, open(s, seal(t, s, anon, nil), bound), ReasonPrincipalDrift)
	if err := open(s, seal(t, s, anon, nil), anon); err != nil {
		t.Fatalf("anonymous to anonymous: %v", err)
	}
}

func TestTwoMintsForTheSamePrincipalCarryDifferentSaltedClaims(t *testing.T) {
	s, _ := newSealer(t)
	a, b := &Claims{Round: 1}, &Claims{Round: 1}
	seal(t, s, deployBinding(), a)
	seal(t, s, deployBinding(), b)
	if a.Principal == b.Principal || len(a.Principal) != 32 {
		t.Fatalf("principal claims %q and %q are linkable", a.Principal, b.Principal)
	}
}

func TestAForgedPrincipalClaimIsRejected(t *testing.T) {
	s, _ := newSealer(t)
	b := deployBinding()
	base := Claims{Version: 1, IssuedAt: epoch, Expiry: epoch.Add(time.Minute), Tenant: b.Tenant, Audience: b.Audience,
		Method: b.Method, Target: b.Target, Args: ArgsDigest(b.Args)}
	valid := &Claims{Round: 1}
	seal(t, s, b, valid)
	flipped := []byte(valid.Principal)
	flipped[20] ^= 1
	for name, claim := range map[string]string{
		"not base64":          "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!",
		"wrong length":        valid.Principal[:31],
		"padded":              valid.Principal + "=",
		"flipped mac":         string(flipped),
		"unkeyed sha256 form": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
	} {
		c := base
		c.Principal = claim
		t.Run(name, func(t *testing.T) {
			wantRejection(t, open(s, mustSeal(t, s.Codec, appendClaims(nil, &c)), b), ReasonPrincipal)
		})
	}
}

func TestThePrincipalIsCheckedUnderTheBindingKeyOfTheVerifyingKey(t *testing.T) {
	oldKey, newKey := secret(1), secret(2)
	clk := &fakeClock{t: epoch}
	before := &Sealer{Codec: mustRing(t, oldKey), Now: clk.Now}
	after := &Sealer{Codec: mustRing(t, newKey, oldKey), Now: clk.Now}
	b := deployBinding()
	if err := open(after, seal(t, before, b, nil), b); err != nil {
		t.Fatalf("a principal-bound token from before rotation: %v", err)
	}
	// Claims whose principal hash was made under the old key's binding key
	// but re-encrypted under the new key fail: the keys travel together.
	plaintext, _, err := before.Codec.Unseal(context.Background(), seal(t, before, b, nil))
	if err != nil {
		t.Fatal(err)
	}
	resealed := mustSeal(t, after.Codec, plaintext)
	wantRejection(t, open(after, resealed, b), ReasonPrincipal)
}

// opaqueCodec hides Ring's BindingKeyer methods, as a Transit codec would.
type opaqueCodec struct{ Codec }

func TestASealerOverAnOpaqueCodecKeysPrincipalsWithItsBindingKey(t *testing.T) {
	clk := &fakeClock{t: epoch}
	codec := opaqueCodec{mustRing(t, secret(1))}
	s := &Sealer{Codec: codec, Now: clk.Now, BindingKey: secret(9)}
	b := deployBinding()
	tok := seal(t, s, b, nil)
	if err := open(s, tok, b); err != nil {
		t.Fatal(err)
	}
	other := &Sealer{Codec: codec, Now: clk.Now, BindingKey: secret(8)}
	wantRejection(t, open(other, tok, b), ReasonPrincipal)

	keyless := &Sealer{Codec: codec, Now: clk.Now}
	if _, _, err := keyless.Seal(context.Background(), b, &Claims{}); err == nil || !strings.Contains(err.Error(), "binding key") {
		t.Fatalf("sealing a bound principal without a binding key: %v", err)
	}
	wantRejection(t, open(keyless, tok, b), ReasonInternal)
	anon := b
	anon.Principal = ""
	if err := open(keyless, seal(t, keyless, anon, nil), anon); err != nil {
		t.Fatalf("unbound state needs no binding key: %v", err)
	}
	short := &Sealer{Codec: codec, Now: clk.Now, BindingKey: []byte("short")}
	if _, _, err := short.Seal(context.Background(), b, &Claims{}); err == nil {
		t.Fatal("a short binding key was accepted")
	}
}

func TestARevokedFlowIsRejected(t *testing.T) {
	s, _ := newSealer(t)
	var asked []string
	s.Revoked = func(_ context.Context, flowID string) bool {
		asked = append(asked, flowID)
		return flowID == "cancelled"
	}
	b := deployBinding()
	wantRejection(t, open(s, seal(t, s, b, &Claims{FlowID: "cancelled", Round: 2}), b), ReasonRevoked)
	if err := open(s, seal(t, s, b, &Claims{FlowID: "live", Round: 2}), b); err != nil {
		t.Fatal(err)
	}
	// The revocation store is consulted last, only for otherwise valid state.
	other := b
	other.Target = "destroy"
	wantRejection(t, open(s, seal(t, s, b, &Claims{FlowID: "x", Round: 1}), other), ReasonBinding)
	if strings.Join(asked, ",") != "cancelled,live" {
		t.Fatalf("Revoked consulted for %q", asked)
	}
}

// spyCodec records whether Unseal ran and can fail on demand.
type spyCodec struct {
	Codec
	unsealed atomic.Int32
	sealErr  error
	openErr  error
}

func (c *spyCodec) Seal(ctx context.Context, p []byte) (string, string, error) {
	if c.sealErr != nil {
		return "", "", c.sealErr
	}
	return c.Codec.Seal(ctx, p)
}

func (c *spyCodec) Unseal(ctx context.Context, tok string) ([]byte, string, error) {
	c.unsealed.Add(1)
	if c.openErr != nil {
		return nil, "", c.openErr
	}
	return c.Codec.Unseal(ctx, tok)
}

func TestAnOversizeTokenIsRejectedBeforeAnyDecoding(t *testing.T) {
	spy := &spyCodec{Codec: mustRing(t, secret(1))}
	s := &Sealer{Codec: spy, Policy: Policy{MaxStateBytes: 1024}, BindingKey: secret(9)}
	wantRejection(t, open(s, strings.Repeat("A", 1025), deployBinding()), ReasonOversize)
	wantRejection(t, open(s, "v1."+strings.Repeat("A", 4<<20), deployBinding()), ReasonOversize)
	if n := spy.unsealed.Load(); n != 0 {
		t.Fatalf("the codec ran %d times on oversize input", n)
	}
	wantRejection(t, open(s, strings.Repeat("A", 1024), deployBinding()), ReasonMalformed)
}

func TestSealRefusesStateThatWouldNotFitTheCap(t *testing.T) {
	s, _ := newSealer(t)
	s.Policy.MaxStateBytes = 1024
	for _, n := range []int{700, 1024, 1 << 20} {
		_, _, err := s.Seal(context.Background(), deployBinding(), &Claims{Round: 1, State: make([]byte, n)})
		if !errors.Is(err, ErrStateTooLarge) {
			t.Fatalf("%d-byte state: got %v, want ErrStateTooLarge", n, err)
		}
	}
	tok := seal(t, s, deployBinding(), &Claims{Round: 1, State: make([]byte, 500)})
	if err := open(s, tok, deployBinding()); err != nil {
		t.Fatal(err)
	}
}

func TestSealRefusesRoundsBeyondTheLimit(t *testing.T) {
	s, _ := newSealer(t)
	s.Policy.MaxRounds = 3
	for round := 1; round <= 3; round++ {
		seal(t, s, deployBinding(), &Claims{Round: round})
	}
	_, _, err := s.Seal(context.Background(), deployBinding(), &Claims{Round: 4})
	if !errors.Is(err, ErrTooManyRounds) {
		t.Fatalf("round 4 of 3: got %v, want ErrTooManyRounds", err)
	}
	if _, _, err := s.Seal(context.Background(), deployBinding(), &Claims{Round: -1}); err == nil || errors.Is(err, ErrTooManyRounds) {
		t.Fatalf("negative round: %v", err)
	}
	s.Policy.MaxRounds = 0
	seal(t, s, deployBinding(), &Claims{Round: DefaultMaxRounds})
	if _, _, err := s.Seal(context.Background(), deployBinding(), &Claims{Round: DefaultMaxRounds + 1}); !errors.Is(err, ErrTooManyRounds) {
		t.Fatalf("default cap: %v", err)
	}
}

func TestACodecThatFailsDuringSealYieldsAnErrorNotAToken(t *testing.T) {
	cause := errors.New("vault: connection refused")
	s := &Sealer{Codec: &spyCodec{Codec: mustRing(t, secret(1)), sealErr: cause}, BindingKey: secret(9)}
	tok, _, err := s.Seal(context.Background(), deployBinding(), &Claims{Round: 1})
	if tok != "" || !errors.Is(err, cause) {
		t.Fatalf("got %q, %v", tok, err)
	}
	if _, ok := errors.AsType[*Rejection](err); ok {
		t.Fatal("a seal-side failure must not look like a rejection")
	}
}

func TestACodecThatFailsUnexpectedlyOnOpenFailsClosed(t *testing.T) {
	for _, cause := range []error{errors.New("kms: throttled"), context.DeadlineExceeded} {
		s := &Sealer{Codec: &spyCodec{Codec: mustRing(t, secret(1)), openErr: cause}}
		err := open(s, "v1.anything", deployBinding())
		wantRejection(t, err, ReasonCodecError)
		if !errors.Is(err, cause) {
			t.Fatalf("the cause %v is not reachable through the rejection", cause)
		}
		if strings.Contains(err.Error(), cause.Error()) {
			t.Fatalf("the rejection message %q carries codec text", err)
		}
	}
	s := &Sealer{Codec: &spyCodec{Codec: mustRing(t, secret(1)), openErr: fmt.Errorf("wrapped: %w", reject(ReasonUnknownKey))}}
	wantRejection(t, open(s, "v1.x", deployBinding()), ReasonUnknownKey)
}

func TestAMisconfiguredSealerFailsClosed(t *testing.T) {
	tok := seal(t, &Sealer{Codec: mustRing(t, secret(1))}, deployBinding(), nil)
	for name, s := range map[string]*Sealer{
		"no codec":       {},
		"invalid policy": {Codec: mustRing(t, secret(1)), Policy: Policy{TTL: -time.Second}},
	} {
		t.Run(name, func(t *testing.T) {
			wantRejection(t, open(s, tok, deployBinding()), ReasonInternal)
			if _, _, err := s.Seal(context.Background(), deployBinding(), &Claims{}); err == nil {
				t.Fatal("Seal succeeded")
			}
		})
	}
	noMethod := deployBinding()
	noMethod.Method = ""
	if _, _, err := (&Sealer{Codec: mustRing(t, secret(1))}).Seal(context.Background(), noMethod, nil); err == nil {
		t.Fatal("a binding without a method was sealed")
	}
}

func TestEachRoundIsResealedWithAFreshTokenAndIssueTime(t *testing.T) {
	s, clk := newSealer(t)
	b := deployBinding()
	tok := seal(t, s, b, &Claims{FlowID: "f", Round: 1})
	for round := 2; round <= 4; round++ {
		clk.Advance(9 * time.Minute) // within one TTL per round, beyond it in total
		c, err := s.Open(context.Background(), tok, b)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		c.Round++
		next := seal(t, s, b, c)
		if next == tok || !c.IssuedAt.Equal(clk.t) || !c.FlowStart.Equal(epoch) {
			t.Fatalf("round %d: not re-stamped (iat %v, start %v)", round, c.IssuedAt, c.FlowStart)
		}
		tok = next
	}
}

func TestTokenFromJSONTreatsNullAsAbsentAndRefusesNonStrings(t *testing.T) {
	for _, raw := range []string{"", "null", " null ", "\n"} {
		if tok, present, err := TokenFromJSON(json.RawMessage(raw)); tok != "" || present || err != nil {
			t.Errorf("%q: got %q, %v, %v; want absent", raw, tok, present, err)
		}
	}
	if tok, present, err := TokenFromJSON(json.RawMessage(`"v1.abc\u002d"`)); tok != "v1.abc-" || !present || err != nil {
		t.Errorf("string: got %q, %v, %v", tok, present, err)
	}
	for _, raw := range []string{`42`, `{"s":"x"}`, `["v1.x"]`, `true`, `nul`, `"unterminated`} {
		_, present, err := TokenFromJSON(json.RawMessage(raw))
		wantRejection(t, err, ReasonNonString)
		if present {
			t.Errorf("%s reported present", raw)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	valid := []Policy{{}, {TTL: time.Millisecond}, {TTL: MaxTTL, Skew: time.Nanosecond, MaxStateBytes: 128, MaxRounds: 1}}
	for _, p := range valid {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	invalid := []Policy{
		{TTL: -time.Second}, {TTL: time.Microsecond}, {TTL: MaxTTL + 1}, {TTL: time.Duration(1<<63 - 1)},
		{Skew: -1}, {MaxStateBytes: -1}, {MaxStateBytes: 64}, {MaxRounds: -1},
	}
	for _, p := range invalid {
		if err := p.Validate(); err == nil {
			t.Errorf("%+v was accepted", p)
		}
	}
	d := Policy{}.withDefaults()
	if d.TTL != 600*time.Second || d.Skew != 60*time.Second || d.MaxStateBytes != 64<<10 || d.MaxRounds != DefaultMaxRounds {
		t.Fatalf("defaults %+v", d)
	}
}

func TestRejectionsNeverLeakTheTokenStateOrPrincipal(t *testing.T) {
	s, clk := newSealer(t)
	s.Revoked = func(context.Context, string) bool { return true }
	const marker = "STATE-MARKER-9f2c"
	b := deployBinding()
	tok := seal(t, s, b, &Claims{FlowID: "f", Round: 1, State: []byte(marker)})
	var errs []error
	collect := func(tok string, b Binding) { errs = append(errs, open(s, tok, b)) }
	collect(tok, b) // revoked
	collect(tok[:len(tok)-2]+"AA", b)
	other := b
	other.Principal = `["x","mallory","y"]`
	collect(tok, other)
	other.Principal = ""
	collect(tok, other)
	other = b
	other.Target = "x"
	collect(tok, other)
	clk.Advance(time.Hour)
	collect(tok, b)
	for _, err := range errs {
		wantRejection(t, err, "")
		for _, secret := range []string{tok, tok[3:20], marker, alice, "alice"} {
			if strings.Contains(err.Error(), secret) || strings.Contains(fmt.Sprintf("%+v %#v", err, err), secret) {
				t.Fatalf("rejection %q leaks %q", err, secret)
			}
		}
	}
}

func TestSealerIsSafeForConcurrentUse(t *testing.T) {
	s, _ := newSealer(t)
	b := deployBinding()
	done := make(chan error)
	for g := range 4 {
		go func() {
			for i := range 100 {
				c := &Claims{FlowID: fmt.Sprint(g), Round: 1, State: fmt.Appendf(nil, "%d", i)}
				tok, _, err := s.Seal(context.Background(), b, c)
				if err == nil {
					_, err = s.Open(context.Background(), tok, b)
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func FuzzDecodeClaims(f *testing.F) {
	f.Add(appendClaims(nil, &Claims{IssuedAt: epoch, Expiry: epoch, Method: "m", State: []byte("s")}))
	f.Add([]byte{1})
	f.Add([]byte{1, 0x80, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, ok := decodeClaims(b)
		if !ok {
			return
		}
		if again := appendClaims(nil, c); !bytes.Equal(again, b) {
			t.Fatalf("two encodings of one claims value: %x and %x", b, again)
		}
	})
}

// typicalClaims is a round-two state of about 300 bytes.
func typicalClaims() *Claims {
	return &Claims{
		FlowID:   "0f8b6c2e-9d1a-4c7e-b0a3-5e2f8d7c6b1a",
		Round:    2,
		Parent:   "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		Resolver: json.RawMessage(`{"v":1,"outcomes":{"confirm":{"action":"accept","data":{"ok":true},"q":"_fZbwPys4tn6ogEHRin4tQ"}}}`),
		State:    bytes.Repeat([]byte("s"), 300),
	}
}

func BenchmarkSeal(b *testing.B) {
	s := &Sealer{Codec: mustRing(b, secret(1), secret(2))}
	bind := deployBinding()
	c := typicalClaims()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.Seal(ctx, bind, c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnseal(b *testing.B) {
	s := &Sealer{Codec: mustRing(b, secret(1), secret(2))}
	bind := deployBinding()
	ctx := context.Background()
	tok, _, err := s.Seal(ctx, bind, typicalClaims())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Open(ctx, tok, bind); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSealThenOpen(b *testing.B) {
	s := &Sealer{Codec: mustRing(b, secret(1), secret(2))}
	bind := deployBinding()
	c := typicalClaims()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		tok, _, err := s.Seal(ctx, bind, c)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Open(ctx, tok, bind); err != nil {
			b.Fatal(err)
		}
	}
}

// State sealed for one big integer does not open for the next one, which
// rounds to the same double; it does open for another spelling of the
// same value.
func TestStateBindsBigIntegerArgumentsExactly(t *testing.T) {
	s := &Sealer{Codec: mustRing(t, secret(1)), Now: (&fakeClock{t: epoch}).Now}
	b := deployBinding()
	b.Args = json.RawMessage(`{"id": 12345678901234567890123456789}`)
	tok, _, err := s.Seal(context.Background(), b, &Claims{FlowID: "f", Round: 1})
	if err != nil {
		t.Fatal(err)
	}
	other := b
	other.Args = json.RawMessage(`{"id": 12345678901234567890123456790}`)
	if _, err := s.Open(context.Background(), tok, other); err == nil {
		t.Fatal("state sealed for id …789 opened for id …790")
	} else if r, ok := errors.AsType[*Rejection](err); !ok || r.Reason != ReasonBinding {
		t.Fatalf("want a binding rejection, got %v", err)
	}
	respelled := b
	respelled.Args = json.RawMessage(`{"id":1.2345678901234567890123456789e28}`)
	if _, err := s.Open(context.Background(), tok, respelled); err != nil {
		t.Fatalf("the same value spelled otherwise: %v", err)
	}
}

// FuzzTokenFromJSON reads arbitrary requestState values as they arrive in
// request params. It never panics; a token it returns is exactly the JSON
// string encoding/json reads, "no state" is only absent or null, and any
// other value is a non_string rejection. What it returns then goes through
// Sealer.Open, which accepts nothing it did not mint.
func FuzzTokenFromJSON(f *testing.F) {
	s := &Sealer{Codec: mustRing(f, secret(1)), Now: (&fakeClock{t: epoch}).Now}
	b := deployBinding()
	for _, seed := range []string{``, `null`, ` null `, `"v1.AAAA"`, `"v1.\u0041"`, `123`, `{"token":"x"}`, `["v1."]`,
		`"\ud800"`, `"v1.` + strings.Repeat("A", 80) + `"`, `nul`, `"unterminated`, `"a" "b"`, "\"v1.\x00\"", `"v1.a\"b"`, `"v1.ab\\"`, `"v1.a\\\"`, "\"v1.\x7f\"", `"v1.é"`, `"v1."x`, `"`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		tok, present, err := TokenFromJSON(raw)
		trimmed := strings.Trim(string(raw), " \t\r\n")
		switch {
		case err != nil:
			if r, ok := errors.AsType[*Rejection](err); !ok || r.Reason != ReasonNonString || present || tok != "" {
				t.Fatalf("%q: error %v (present %v, token %q), want a bare non_string rejection", raw, err, present, tok)
			}
		case !present:
			if trimmed != "" && trimmed != "null" {
				t.Fatalf("%q read as no state", raw)
			}
		default:
			var want string
			if json.Unmarshal(raw, &want) != nil || want != tok {
				t.Fatalf("%q read as token %q; encoding/json reads %q", raw, tok, want)
			}
			if _, err := s.Open(context.Background(), tok, b); err == nil {
				t.Fatalf("Open accepted %q, which was never minted", tok)
			}
		}
	})
}

func TestARejectionNamesTheFlowOnlyWhenTheStateOpenedForTheTenant(t *testing.T) {
	s, clk := newSealer(t)
	b := deployBinding()
	tok := seal(t, s, b, &Claims{FlowID: "flow-7", Round: 3})
	rejection := func(tok string, b Binding) *Rejection {
		t.Helper()
		var r *Rejection
		if err := open(s, tok, b); !errors.As(err, &r) {
			t.Fatalf("open: %v, want a rejection", err)
		}
		return r
	}
	other := b
	other.Args = json.RawMessage(`{"env":"prod","replicas":4}`)
	bob := b
	bob.Principal = `["https://as.example","bob","client-123"]`
	for name, r := range map[string]*Rejection{
		"binding":   rejection(tok, other),
		"principal": rejection(tok, bob),
	} {
		if r.FlowID != "flow-7" || r.Round != 3 {
			t.Errorf("%s rejection names flow %q round %d, want flow-7 round 3", name, r.FlowID, r.Round)
		}
	}
	// Sealed for another tenant: the flow is not this tenant's to name.
	foreign := b
	foreign.Tenant = "globex"
	if r := rejection(tok, foreign); r.Reason != ReasonTenant || r.FlowID != "" {
		t.Errorf("foreign tenant: reason %q, flow %q; want tenant and no flow", r.Reason, r.FlowID)
	}
	// A state that does not open names nothing.
	if r := rejection(tok[:len(tok)-2]+"AA", b); r.FlowID != "" {
		t.Errorf("tampered state names flow %q", r.FlowID)
	}
	clk.Advance(DefaultTTL + time.Second)
	if r := rejection(tok, b); r.Reason != ReasonExpired || r.FlowID != "flow-7" {
		t.Errorf("expired: reason %q, flow %q; want expired and flow-7", r.Reason, r.FlowID)
	}
}
