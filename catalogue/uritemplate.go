package catalogue

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// URITemplate is a parsed RFC 6570 template, compiled once for matching
// request URIs against it.
type URITemplate struct {
	raw  string
	vars []string
	re   *regexp.Regexp
}

var varName = regexp.MustCompile(`^[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*$`)

// ParseURITemplate parses a level 1 to 3 RFC 6570 template (operators
// none, +, #, ., /, ? and &; no prefix or explode modifiers, which cannot
// be matched unambiguously).
func ParseURITemplate(raw string) (*URITemplate, error) {
	if raw == "" {
		return nil, errors.New("is required")
	}
	if len(raw) > 2048 {
		return nil, errors.New("must be at most 2048 characters")
	}
	t := &URITemplate{raw: raw}
	var re strings.Builder
	re.WriteString("^")
	rest := raw
	seen := map[string]bool{}
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if close := strings.IndexByte(rest, '}'); close >= 0 && (open < 0 || close < open) {
			return nil, fmt.Errorf("unmatched '}' at offset %d", len(raw)-len(rest)+close)
		}
		if open < 0 {
			re.WriteString(regexp.QuoteMeta(rest))
			break
		}
		re.WriteString(regexp.QuoteMeta(rest[:open]))
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("unclosed '{' at offset %d", len(raw)-len(rest)+open)
		}
		expr := rest[open+1 : open+end]
		rest = rest[open+end+1:]
		if expr == "" {
			return nil, errors.New("empty expression {}")
		}
		op := ""
		if strings.ContainsRune("+#./?&", rune(expr[0])) {
			op, expr = expr[:1], expr[1:]
		} else if strings.ContainsRune("=,!@|", rune(expr[0])) {
			return nil, fmt.Errorf("reserved operator %q", expr[:1])
		}
		names := strings.Split(expr, ",")
		for i, name := range names {
			if strings.ContainsAny(name, ":*") {
				return nil, fmt.Errorf("variable %q: prefix and explode modifiers are not supported", name)
			}
			if !varName.MatchString(name) {
				return nil, fmt.Errorf("invalid variable name %q", name)
			}
			if seen[name] {
				return nil, fmt.Errorf("variable %q appears twice", name)
			}
			seen[name] = true
			t.vars = append(t.vars, name)
			re.WriteString(matchPart(op, name, i))
		}
	}
	re.WriteString("$")
	compiled, err := regexp.Compile(re.String())
	if err != nil {
		return nil, fmt.Errorf("cannot be matched: %v", err)
	}
	t.re = compiled
	return t, nil
}

// matchPart is the regular expression for the i-th variable of an
// expression with operator op.
func matchPart(op, name string, i int) string {
	const simple = `([^/?#&,]*)`
	switch op {
	case "":
		if i > 0 {
			return "," + simple
		}
		return simple
	case "+":
		if i > 0 {
			return `,([^?#,]*)`
		}
		return `([^?#,]*)`
	case "#":
		sep := "#"
		if i > 0 {
			sep = ","
		}
		return regexp.QuoteMeta(sep) + `([^,]*)`
	case ".":
		return `\.([^/?#.]*)`
	case "/":
		return `/([^/?#]*)`
	case "?", "&":
		sep := op
		if i > 0 {
			sep = "&"
		}
		return regexp.QuoteMeta(sep) + regexp.QuoteMeta(name) + `=([^&#]*)`
	}
	return simple
}

// String returns the template as written.
func (t *URITemplate) String() string { return t.raw }

// Vars lists the template's variables in order.
func (t *URITemplate) Vars() []string { return t.vars }

// HasVar reports whether the template names variable v.
func (t *URITemplate) HasVar(v string) bool {
	for _, name := range t.vars {
		if name == v {
			return true
		}
	}
	return false
}

// Match reports whether uri is an expansion of the template and returns
// the percent-decoded variable values.
func (t *URITemplate) Match(uri string) (map[string]string, bool) {
	m := t.re.FindStringSubmatch(uri)
	if m == nil {
		return nil, false
	}
	vals := make(map[string]string, len(t.vars))
	for i, name := range t.vars {
		v, err := url.PathUnescape(m[i+1])
		if err != nil {
			return nil, false
		}
		vals[name] = v
	}
	return vals, true
}
