package endpoint

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// What a failed delivery tells the operator (WebhookError.Cause): the
// transport's own words, the backend's status (and, for a tenant that
// records content, how its body starts), where its JSON broke. The
// client is told less (Detail): it names no address and quotes nothing
// of the backend's.

// bodyStart bounds the part of a failed answer's body an operator sees.
const bodyStart = 80

// statusError is a delivery answered with a status outside 2xx: its
// status and, when the body has text, how it starts. The rest of the
// body is read (within a bound) so the connection can be reused.
func statusError(resp *http.Response) *WebhookError {
	head := make([]byte, 256)
	n, _ := io.ReadFull(resp.Body, head)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	cause := "HTTP " + strconv.Itoa(resp.StatusCode)
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err == nil {
			cause += " (" + mt + ")"
		}
	}
	return &WebhookError{Class: "status", Detail: fmt.Sprintf("the backend answered HTTP %d", resp.StatusCode), Cause: cause,
		Body: printable(head[:n], bodyStart)}
}

// printable is the start of b as one line of at most n runes: control
// characters and runs of space become one space, invalid UTF-8 ends it.
func printable(b []byte, n int) string {
	var sb strings.Builder
	space := false
	for len(b) > 0 && n > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			break
		}
		b = b[size:]
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = sb.Len() > 0
			continue
		}
		if space {
			sb.WriteByte(' ')
			n--
			space = false
		}
		sb.WriteRune(r)
		n--
	}
	return sb.String()
}

// jsonCause says where an answer's JSON broke, at offset bytes into the
// body plus the error's own offset; a value of the wrong type names its
// field (a name from the contract, not the backend's content).
func jsonCause(err error, offset int64) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		if strings.HasPrefix(se.Error(), "unexpected end") {
			return fmt.Sprintf("invalid JSON: the answer ends early, at byte %d", offset+se.Offset)
		}
		return fmt.Sprintf("invalid JSON at byte %d", offset+se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "the answer"
		}
		return fmt.Sprintf("JSON of the wrong type at byte %d: %s must not be a %s", offset+te.Offset, field, te.Value)
	}
	return "invalid JSON"
}

// connectCause is why a connection failed, in the system's words and
// without the address dialled (a private network's addresses are not
// the tenant's to learn).
func connectCause(err error) string {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		if dns.IsNotFound {
			return "DNS: no such host"
		}
		if dns.IsTimeout {
			return "DNS: timeout"
		}
		return "DNS: lookup failed"
	}
	var sys *os.SyscallError
	if errors.As(err, &sys) {
		return "connect: " + sys.Err.Error()
	}
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var record tls.RecordHeaderError
	switch {
	case errors.As(err, &unknown):
		return "TLS: certificate signed by an unknown authority"
	case errors.As(err, &host):
		return "TLS: certificate is not valid for the webhook's host"
	case errors.As(err, &invalid):
		return "TLS: certificate invalid (expired or not yet valid, or not for servers)"
	case errors.As(err, &record):
		return "TLS: the backend did not answer TLS (plain HTTP on an https URL?)"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connect: the backend closed the connection without answering"
	}
	var tlsAlert tls.AlertError
	if errors.As(err, &tlsAlert) {
		return "TLS: the backend refused the handshake (" + tlsAlert.Error() + ")"
	}
	return "connect: the backend could not be reached"
}
