package auth

import (
	"net/http"
	"testing"
)

func TestBearerTokenReadsOnlyWellFormedBearerHeaders(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers []string
		want    string
		ok      bool
	}{
		{"canonical", []string{"Bearer abc.def-ghi_jkl~mno+p/q"}, "abc.def-ghi_jkl~mno+p/q", true},
		{"scheme in any case", []string{"bEaReR tok"}, "tok", true},
		{"several spaces", []string{"Bearer   tok"}, "tok", true},
		{"padding", []string{"Bearer dG9r=="}, "dG9r==", true},
		{"no header", nil, "", false},
		{"bare token", []string{"tok"}, "", false},
		{"other scheme", []string{"Basic dXNlcjpwYXNz"}, "", false},
		{"scheme alone", []string{"Bearer"}, "", false},
		{"scheme and spaces", []string{"Bearer   "}, "", false},
		{"trailing space", []string{"Bearer tok "}, "", false},
		{"two tokens", []string{"Bearer tok other"}, "", false},
		{"tab separator", []string{"Bearer\ttok"}, "", false},
		{"quote in token", []string{`Bearer "tok"`}, "", false},
		{"comma list", []string{"Bearer tok, Basic x"}, "", false},
		{"padding only", []string{"Bearer =="}, "", false},
		{"padding inside", []string{"Bearer to=k"}, "", false},
		{"two headers", []string{"Bearer tok", "Bearer tok"}, "", false},
		{"non-ASCII", []string{"Bearer tök"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tc.headers {
				h.Add("Authorization", v)
			}
			got, ok := BearerToken(h)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("BearerToken(%q) = %q, %v; want %q, %v", tc.headers, got, ok, tc.want, tc.ok)
			}
		})
	}
}
