package mcp

import "testing"

func TestHeaderValuesRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		in, wire string
	}{
		{"plain", "plain"},
		{"", ""},
		{"with inner space", "with inner space"},
		{" leading", "=?base64?IGxlYWRpbmc=?="},
		{"trailing ", "=?base64?dHJhaWxpbmcg?="},
		{"Zürich", "=?base64?WsO8cmljaA==?="},
		{"line\nbreak", "=?base64?bGluZQpicmVhaw==?="},
		{"=?base64?looks encoded?=", "=?base64?PT9iYXNlNjQ/bG9va3MgZW5jb2RlZD89?="},
	} {
		if got := EncodeHeaderValue(tc.in); got != tc.wire {
			t.Errorf("EncodeHeaderValue(%q) = %q, want %q", tc.in, got, tc.wire)
		}
		if got, ok := DecodeHeaderValue(tc.wire); !ok || got != tc.in {
			t.Errorf("DecodeHeaderValue(%q) = %q, %v; want %q", tc.wire, got, ok, tc.in)
		}
	}
}

func TestDecodeHeaderValueIsStrict(t *testing.T) {
	for _, v := range []string{
		"=?base64?not base64?=",
		"=?base64?WsO8cmljaA?=",    // padding missing
		"=?base64?WsO8cmljaA===?=", // too much padding
		"=?base64?WsO8cmljaB==?=",  // non-zero trailing bits
		"=?base64?Ws\nO8cmljaA==?=",
	} {
		if got, ok := DecodeHeaderValue(v); ok {
			t.Errorf("DecodeHeaderValue(%q) = %q, accepted", v, got)
		}
	}
	// Only a value with both marks is encoded.
	for _, v := range []string{"=?base64?abc", "abc?=", "=?base64?=", "=?BASE64?YQ==?="} {
		if got, ok := DecodeHeaderValue(v); !ok || got != v {
			t.Errorf("DecodeHeaderValue(%q) = %q, %v; want it literal", v, got, ok)
		}
	}
}

func TestValidHeaderName(t *testing.T) {
	for name, want := range map[string]bool{
		"Region": true, "x-y_z.1": true, "!#$%&'*+-.^_`|~": true,
		"": false, "a b": false, "a:b": false, "a/b": false, "ä": false, "a\tb": false, `"q"`: false,
	} {
		if ValidHeaderName(name) != want {
			t.Errorf("ValidHeaderName(%q) = %v, want %v", name, !want, want)
		}
	}
}
