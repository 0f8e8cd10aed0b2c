// Package bounded cuts values that clients and tenants control down to
// what a log line, a span or a stored record may carry: a bounded length
// of valid UTF-8, and for URLs nothing that may hold a secret (user
// information, the query, the fragment).
package bounded

import (
	"net/url"
	"strings"
	"unicode/utf8"
)

// Client-supplied names and identifiers (tool and prompt names, resource
// URIs, request ids, client names) are cut to this many bytes before they
// are recorded anywhere.
const Value = 256

// String returns s as valid UTF-8 (invalid bytes and NULs replaced) of at most n
// bytes, cut on a character boundary and marked with "…" when cut.
func String(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		// No database keeps a NUL in text: PostgreSQL refuses the row
		// (and the batch or request with it), SQLite's C strings end there.
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := max(n-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// URL returns raw without its user information, query and fragment, cut
// to n bytes; a value that does not parse as a URL is recorded as "",
// since what it holds cannot be told apart.
func URL(raw string, n int) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	if u.Opaque != "" {
		// An opaque URI (urn:a:b?q) keeps its query in RawQuery too; an
		// opaque part is kept as written.
		return String(u.Scheme+":"+u.Opaque, n)
	}
	return String(u.String(), n)
}
