package catalogue

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var kinds = []Kind{KindTool, KindPrompt, KindResource, KindResourceTemplate}

// FuzzValidateDefinition decodes arbitrary JSON as each kind of
// definition and validates it, as the admin API does with a tenant's
// request body. Validation never panics; a refusal is a *ValidationError
// naming at least one field, every one with a message; and a definition
// that passes still passes after a round trip through JSON (what storage
// does), so nothing accepted fails to load later.
func FuzzValidateDefinition(f *testing.F) {
	for _, seed := range []struct {
		kind uint8
		body string
	}{
		{0, `{"name":"get_weather","description":"d","inputSchema":{"type":"object","properties":{"city":{"type":"string"}}},"handler":{"url":"https://h.example/mcp"}}`},
		{0, `{"name":"t","inputSchema":{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"}}},"handler":{"url":"https://h.example"},"inputs":[{"name":"ok","kind":"form","message":"Sure?","requestedSchema":{"type":"object","properties":{"yes":{"type":"boolean"}}}}]}`},
		{0, `{"name":"t","inputSchema":{"$ref":"https://evil.example/s.json"},"handler":{"url":"http://169.254.169.254/"}}`},
		{0, `{"name":"t","inputSchema":{"type":"object","properties":{"p":{"pattern":"(a+)+$"}}},"outputSchema":{"type":"array"},"handler":{"url":"https://h.example","timeoutMs":-1}}`},
		{1, `{"name":"p","arguments":[{"name":"a"}],"messages":[{"role":"user","content":{"type":"text","text":"{{a}}"}}]}`},
		{2, `{"name":"r","uri":"file:///etc/passwd","text":"x"}`},
		{2, `{"name":"r","uri":"https://x.example/r","blob":"not base64!"}`},
		{3, `{"name":"rt","uriTemplate":"https://x.example/{id}{?q,r}{#frag}","handler":{"url":"https://h.example"},"completions":{"id":["a"],"nope":["b"]}}`},
		{3, `{"name":"rt","uriTemplate":"x://{a}{a}{b:3}{c*}{=d}}{","handler":{"url":"https://h.example"}}`},
	} {
		f.Add(seed.kind, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, k uint8, body []byte) {
		kind := kinds[int(k)%len(kinds)]
		d := New(kind)
		if json.Unmarshal(body, d) != nil {
			return
		}
		err := d.Validate()
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Errors) == 0 {
				t.Fatalf("%s: refusal %v is not a ValidationError naming a field", kind, err)
			}
			for _, fe := range ve.Errors {
				if fe.Field == "" || fe.Message == "" {
					t.Fatalf("%s: problem without a field or message: %+v", kind, fe)
				}
			}
			return
		}
		stored, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("%s: an accepted definition does not encode: %v", kind, err)
		}
		again := New(kind)
		if err := json.Unmarshal(stored, again); err != nil {
			t.Fatalf("%s: an accepted definition does not decode: %v", kind, err)
		}
		if err := again.Validate(); err != nil {
			t.Fatalf("%s: accepted, but refused after a round trip: %v\n%s", kind, err, stored)
		}
	})
}

// FuzzURITemplate parses arbitrary templates and matches arbitrary URIs
// against those that parse. Neither panics; a parsed template keeps its
// text, names each variable once, and a match names only its variables.
// A template without variables matches exactly its own text.
func FuzzURITemplate(f *testing.F) {
	for _, s := range [][2]string{
		{"https://x.example/{id}", "https://x.example/42"},
		{"file:///{+path}", "file:///a/b%20c"},
		{"https://x.example/{id}{?q,r}", "https://x.example/1?q=a&r=b"},
		{"https://x.example{/a,b}{.ext}{#f}", "https://x.example/1/2.json#top"},
		{"db://{a}{&b}", "db://x&b=%zz"},
		{"plain://no/vars", "plain://no/vars"},
		{"{a}{b}", "ab"},
		{"x://{a:3}", ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, raw, uri string) {
		tmpl, err := ParseURITemplate(raw)
		if err != nil {
			return
		}
		if tmpl.String() != raw {
			t.Fatalf("String() = %q, want %q", tmpl.String(), raw)
		}
		vars := tmpl.Vars()
		for i, v := range vars {
			if slices.Contains(vars[i+1:], v) || !tmpl.HasVar(v) {
				t.Fatalf("%q: variable %q listed twice or not found", raw, v)
			}
		}
		if vals, ok := tmpl.Match(uri); ok {
			for name := range vals {
				if !tmpl.HasVar(name) {
					t.Fatalf("%q matched %q with unknown variable %q", raw, uri, name)
				}
			}
		}
		if len(vars) == 0 {
			if _, ok := tmpl.Match(raw); !ok {
				t.Fatalf("%q without variables does not match itself", raw)
			}
		}
	})
}

// FuzzCompileSchema compiles arbitrary schemas (a tenant's inputSchema)
// and validates an arbitrary instance against those that compile: neither
// may panic. A compiled schema never depends on anything outside itself:
// recompiling gives a schema that judges the instance the same way.
func FuzzCompileSchema(f *testing.F) {
	for _, s := range [][2]string{
		{`{"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"]}`, `{"n":0}`},
		{`{"$ref":"#/$defs/a","$defs":{"a":{"type":"string","pattern":"^(a|b)*$"}}}`, `"abab"`},
		{`{"$ref":"https://evil.example/schema.json"}`, `1`},
		{`{"$ref":"file:///etc/passwd"}`, `1`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#"}`, `{}`},
		{`{"allOf":[{"$ref":"#"}]}`, `[]`},
		{`true`, `null`},
		{`{"type":"number","multipleOf":1e-308}`, `1e308`},
		{`{"format":"email","type":"string"}`, `"a@b"`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, schema, instance []byte) {
		s, err := CompileSchema(schema)
		if err != nil {
			return
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(instance)))
		if err != nil {
			return
		}
		first := s.Validate(v) == nil
		s2, err := CompileSchema(schema)
		if err != nil {
			t.Fatalf("compiled once, refused the second time: %v", err)
		}
		if (s2.Validate(v) == nil) != first {
			t.Fatal("two compilations of one schema judge an instance differently")
		}
	})
}

// External references are refused at compilation, whatever their scheme:
// the platform never reads a file or URL a tenant names. (Relative
// references such as "other.json" resolve against the schema's URN base
// to the schema itself, so they load nothing either.)
func TestSchemasCannotReferenceOutsideThemselves(t *testing.T) {
	for _, ref := range []string{"https://evil.example/s.json", "http://169.254.169.254/latest/meta-data", "file:///etc/passwd",
		"urn:other:schema", "http://[::1%25lo]:8200/v1/secret"} {
		_, err := CompileSchema(json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"` + ref + `"}}}`))
		if err == nil {
			t.Errorf("$ref %s compiled", ref)
		}
	}
}
