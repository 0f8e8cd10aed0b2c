package endpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"
)

func TestAFailedDeliverysCauseIsBoundedOneLineText(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"plain", "upstream down", `HTTP 502, body starts "upstream down"`},
		{"lines and tabs folded", "a\r\n\tb\x00\x1bc  d", `HTTP 502, body starts "a b c d"`},
		{"empty", "", "HTTP 502"},
		{"only space", " \n\t ", "HTTP 502"},
		{"invalid UTF-8 ends it", "ok\xff\xfesecret", `HTTP 502, body starts "ok"`},
		{"long, cut", strings.Repeat("x", 5000), `HTTP 502, body starts "` + strings.Repeat("x", bodyStart) + `"`},
		{"runes counted, not bytes", strings.Repeat("é", 300), `HTTP 502, body starts "` + strings.Repeat("é", bodyStart) + `"`},
		{"quotes escaped", `say "hi"`, `HTTP 502, body starts "say \"hi\""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: 502, Body: io.NopCloser(strings.NewReader(tc.body))}
			we := statusError(resp)
			if got := we.Why(true); got != tc.want || we.Class != "status" || strings.Contains(we.Detail, "body") {
				t.Fatalf("cause %q (detail %q); want %q", got, we.Detail, tc.want)
			}
			// Without the tenant's consent to record content, no body.
			if got := we.Why(false); got != "HTTP 502" {
				t.Fatalf("cause without the body: %q", got)
			}
			if got := we.Why(true); !utf8.ValidString(got) || strings.ContainsAny(got, "\n\r\x00") {
				t.Fatalf("cause is not one line of text: %q", got)
			}
		})
	}
}

func TestAFailedDeliverysCauseNamesTheBodysMediaType(t *testing.T) {
	resp := &http.Response{StatusCode: 503, Header: http.Header{"Content-Type": {"text/html; charset=utf-8"}},
		Body: io.NopCloser(strings.NewReader("<html>down"))}
	if got := statusError(resp).Why(false); got != "HTTP 503 (text/html)" {
		t.Fatalf("cause %q", got)
	}
}

func TestJSONCausesSayWhereTheAnswerBroke(t *testing.T) {
	var v struct{ Type string }
	for _, tc := range []struct {
		body   string
		offset int64
		want   string
	}{
		{`{"type": x}`, 0, "invalid JSON at byte 10"},
		{`{"type": x}`, 100, "invalid JSON at byte 110"},
		{`{"type": 3}`, 0, "JSON of the wrong type at byte 10: Type must not be a number"},
		{`{"type": `, 0, "invalid JSON: the answer ends early, at byte 9"},
	} {
		err := jsonUnmarshal(tc.body, &v)
		if got := jsonCause(err, tc.offset); got != tc.want {
			t.Errorf("%s at %d: %q; want %q", tc.body, tc.offset, got, tc.want)
		}
	}
}

func TestConnectCausesNameTheFailureNotTheAddress(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8080},
			Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}, "connect: connection refused"},
		{&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "internal.corp", IsNotFound: true}}, "DNS: no such host"},
		{&net.OpError{Op: "dial", Err: &os.SyscallError{Syscall: "connect", Err: syscall.EHOSTUNREACH}}, "connect: no route to host"},
		{fmt.Errorf("Post %q: %w", "http://10.1.2.3/x", io.EOF), "connect: the backend closed the connection without answering"},
		{errors.New("something else at 10.1.2.3"), "connect: the backend could not be reached"},
	} {
		got := connectCause(tc.err)
		if got != tc.want {
			t.Errorf("%v: %q; want %q", tc.err, got, tc.want)
		}
		if strings.Contains(got, "10.1.2.3") || strings.Contains(got, "internal.corp") {
			t.Errorf("the cause names the address: %q", got)
		}
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
