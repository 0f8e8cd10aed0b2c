package mrtr

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"testing"
	"time"
)

func BenchmarkMicroNow(b *testing.B) {
	for b.Loop() {
		_ = time.Now()
	}
}
func BenchmarkMicroRand(b *testing.B) {
	var x [12]byte
	for b.Loop() {
		rand.Read(x[:])
	}
}
func BenchmarkMicroB64Enc(b *testing.B) {
	raw := make([]byte, 650)
	for b.Loop() {
		_ = encodeToken(raw)
	}
}
func BenchmarkMicroB64Dec(b *testing.B) {
	s := base64.RawURLEncoding.EncodeToString(make([]byte, 650))
	for b.Loop() {
		decodeStrict(s, 32)
	}
}
func BenchmarkMicroRingSeal(b *testing.B) {
	r := mustRing(b, secret(1))
	p := make([]byte, 620)
	for b.Loop() {
		r.Seal(context.Background(), p)
	}
}
func BenchmarkMicroArgs(b *testing.B) {
	a := deployBinding().Args
	for b.Loop() {
		argsDigest(a)
	}
}
func BenchmarkMicroHMAC(b *testing.B) {
	r := mustRing(b, secret(1))
	for b.Loop() {
		r.principalMAC(r.MinterID(), [8]byte{}, alice)
	}
}
func BenchmarkMicroDecodeClaims(b *testing.B) {
	c := typicalClaims()
	c.Method = "tools/call"
	enc := appendClaims(nil, c)
	for b.Loop() {
		decodeClaims(enc)
	}
}

func BenchmarkMicroStdB64Enc8K(b *testing.B) {
	raw := make([]byte, 8192)
	dst := make([]byte, base64.RawURLEncoding.EncodedLen(8192))
	b.SetBytes(8192)
	for b.Loop() {
		base64.RawURLEncoding.Encode(dst, raw)
	}
}
func BenchmarkMicroStdB64Dec8K(b *testing.B) {
	src := []byte(base64.RawURLEncoding.EncodeToString(make([]byte, 8192)))
	dst := make([]byte, 8192)
	b.SetBytes(8192)
	for b.Loop() {
		base64.RawURLEncoding.Decode(dst, src)
	}
}

func BenchmarkMicroMyB64Dec8K(b *testing.B) {
	src := base64.RawURLEncoding.EncodeToString(make([]byte, 8192))
	dst := make([]byte, 8192)
	b.SetBytes(8192)
	for b.Loop() {
		b64Decode(dst, src)
	}
}
func BenchmarkMicroMyB64Enc8K(b *testing.B) {
	raw := make([]byte, 8192)
	dst := make([]byte, base64.RawURLEncoding.EncodedLen(8192))
	b.SetBytes(8192)
	for b.Loop() {
		b64Encode(dst, raw)
	}
}
