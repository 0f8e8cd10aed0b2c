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
// none, +, #, ., /, ;, ? and &; no prefix or explode modifiers, which
// cannot be matched unambiguously). Two expressions that touch, the
// second without an operator character to start it ({a}{b}), are refused
// too: nothing in a URI could tell where one value ends.
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
	touching := false // the previous expression ended where this one starts
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if close := strings.IndexByte(rest, '}'); close >= 0 && (open < 0 || close < open) {
			return nil, fmt.Errorf("unmatched '}' at offset %d", len(raw)-len(rest)+close)
		}
		lit := rest
		if open >= 0 {
			lit = rest[:open]
		}
		if at, err := checkLiteral(lit); err != nil {
			return nil, fmt.Errorf("%v at offset %d", err, len(raw)-len(rest)+at)
		}
		re.WriteString(regexp.QuoteMeta(lit))
		if open < 0 {
			break
		}
		if open > 0 {
			touching = false
		}
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
		if strings.ContainsRune("+#./;?&", rune(expr[0])) {
			op, expr = expr[:1], expr[1:]
		} else if strings.ContainsRune("=,!@|", rune(expr[0])) {
			return nil, fmt.Errorf("reserved operator %q", expr[:1])
		}
		if touching && (op == "" || op == "+") {
			return nil, fmt.Errorf("expression {%s%s} follows another with nothing between them to tell the values apart", op, expr)
		}
		touching = true
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
	case ";":
		// An empty value is the name alone (";x"), per RFC 6570 3.2.7.
		return ";" + regexp.QuoteMeta(name) + `(?:=([^;/?#]*))?`
	case "?", "&":
		sep := op
		if i > 0 {
			sep = "&"
		}
		return regexp.QuoteMeta(sep) + regexp.QuoteMeta(name) + `=([^&#]*)`
	}
	return simple
}

// checkLiteral checks the text between expressions: RFC 6570 allows any
// URI character there, and '%' only as the start of a percent-encoding.
// It returns the offset of the first character refused.
func checkLiteral(lit string) (int, error) {
	for i := 0; i < len(lit); i++ {
		c := lit[i]
		switch {
		case c == '%':
			if i+2 >= len(lit) || !isHex(lit[i+1]) || !isHex(lit[i+2]) {
				return i, errors.New("'%' not followed by two hex digits")
			}
			i += 2
		case c <= ' ' || c == 0x7f || strings.IndexByte("\"'<>\\^`|", c) >= 0:
			return i, fmt.Errorf("character %q is not allowed in a URI", c)
		}
	}
	return 0, nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
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
