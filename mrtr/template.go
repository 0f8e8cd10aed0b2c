package mrtr

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/opsmcp/platform/internal/jsontext"
)

// A textTemplate is tenant-written text with {{args.NAME}} placeholders.
//
// The language is deliberately tiny: a placeholder names one top-level
// call argument and nothing else, so a question can only be built from
// data the request state already binds (the arguments). Anything volatile
// (time, counters, random ids) would change the question's digest every
// round and the flow would never finish.
type textTemplate struct {
	parts []templatePart
}

// A templatePart is literal text, or the name of an argument whose value
// is substituted, escaped by escape when the template is a URL.
type templatePart struct {
	text   string
	arg    bool
	escape func(string) string
}

// hasArgs reports whether rendering t reads any argument.
func (t *textTemplate) hasArgs() bool {
	for _, p := range t.parts {
		if p.arg {
			return true
		}
	}
	return false
}

// render substitutes args into t. A missing or null argument renders as
// the empty string; strings render as themselves; anything else renders as
// compact JSON (numbers in ECMAScript form, object keys sorted), so the
// same arguments always render the same text on every replica.
func (t *textTemplate) render(args map[string]any) string {
	if len(t.parts) == 1 && !t.parts[0].arg {
		return t.parts[0].text
	}
	var b strings.Builder
	for _, p := range t.parts {
		if !p.arg {
			b.WriteString(p.text)
			continue
		}
		v := argText(args[p.text])
		if p.escape != nil {
			v = p.escape(v)
		}
		b.WriteString(v)
	}
	return b.String()
}

func argText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	}
	b, err := jsontext.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// parseTemplate parses s. Every "{{" opens a placeholder; there is no
// escape for a literal "{{", which keeps the grammar unambiguous.
func parseTemplate(s string) (textTemplate, error) {
	var t textTemplate
	rest := s
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			break
		}
		if i > 0 {
			t.parts = append(t.parts, templatePart{text: rest[:i]})
		}
		j := strings.Index(rest[i+2:], "}}")
		if j < 0 {
			return textTemplate{}, errors.New(`unclosed "{{"`)
		}
		inner := strings.TrimSpace(rest[i+2 : i+2+j])
		name, ok := strings.CutPrefix(inner, "args.")
		if !ok {
			return textTemplate{}, fmt.Errorf("placeholder {{%s}} must have the form {{args.NAME}}", inner)
		}
		if err := checkArgName(name); err != nil {
			return textTemplate{}, fmt.Errorf("placeholder {{%s}}: %w", inner, err)
		}
		t.parts = append(t.parts, templatePart{text: name, arg: true})
		rest = rest[i+2+j+2:]
	}
	if rest != "" || len(t.parts) == 0 {
		t.parts = append(t.parts, templatePart{text: rest})
	}
	return t, nil
}

func checkArgName(name string) error {
	if name == "" {
		return errors.New("missing argument name")
	}
	for _, r := range name {
		switch {
		case r == '.':
			return errors.New("only top-level arguments can be referenced")
		case !isNameRune(r):
			return errors.New("argument names may contain only letters, digits, '_' and '-'")
		}
	}
	return nil
}

func isNameRune(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '-'
}

// parseURLTemplate parses a URL template. Placeholders may appear only
// after the authority (in the path, query or fragment): call arguments
// come from the model or the user's client, and letting them choose the
// host would let them point the user at a site of their choosing. Values
// are escaped for the component they land in, so an argument cannot add
// path segments or query parameters either.
func parseURLTemplate(s string) (textTemplate, error) {
	t, err := parseTemplate(s)
	if err != nil {
		return textTemplate{}, err
	}
	prefix := s
	if i := strings.Index(s, "{{"); i >= 0 {
		prefix = s[:i]
	}
	u, err := url.Parse(prefix)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return textTemplate{}, errors.New("must be an absolute http or https URL whose scheme and host are literal")
	}
	if t.hasArgs() {
		_, afterScheme, _ := strings.Cut(prefix, "://")
		if !strings.ContainsAny(afterScheme, "/?#") {
			return textTemplate{}, errors.New("placeholders may appear only after the host (in the path, query or fragment)")
		}
	}
	// Choose each placeholder's escaping by the component it falls in.
	inQuery, inFragment := false, false
	for i := range t.parts {
		p := &t.parts[i]
		if !p.arg {
			for _, c := range p.text {
				switch {
				case c == '#':
					inFragment = true
				case c == '?' && !inFragment:
					inQuery = true
				}
			}
			continue
		}
		if inQuery && !inFragment {
			p.escape = url.QueryEscape
		} else {
			p.escape = url.PathEscape
		}
	}
	// A sample rendering must still be an absolute URL.
	if _, err := url.Parse(t.render(nil)); err != nil {
		return textTemplate{}, fmt.Errorf("does not render to a valid URL: %w", err)
	}
	return t, nil
}

// decodeArgs decodes call arguments for rendering. Absent and null mean
// no arguments.
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return nil, nil
	}
	if s[0] != '{' {
		return nil, errors.New("arguments must be a JSON object")
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decoding arguments: %w", err)
	}
	return m, nil
}
