package mrtr

import (
	"errors"
	"reflect"
	"testing"
)

// The strict parser's answer for each schema: the first problem, by the
// path and message a tenant is shown, or "" for a schema it accepts. The
// table pins what the parser reports, so a change to how it reads a
// schema cannot change what it says.
var formSchemaVerdicts = []struct{ schema, want string }{
	{`{"type":"object","properties":{}}`, ""},
	{`[1]`, "s: must be a JSON object"},
	{`"x"`, "s: must be a JSON object"},
	{`{"type":"object","properties":{},"$schema":5}`, "s.$schema: must be a string"},
	{`{"type":"object","properties":{},"$schema":"https://json-schema.org/draft/2020-12/schema"}`, ""},
	{`{"type":"object","properties":{},"title":"x"}`, "s.title: unsupported keyword (allowed: $schema, type, properties, required)"},
	{`{"type":"array","properties":{}}`, "s.type: must be \"object\""},
	{`{"properties":{}}`, "s.type: must be \"object\""},
	{`{"type":"object"}`, "s.properties: is required"},
	{`{"type":"object","properties":[]}`, "s.properties: must be a JSON object"},
	{`{"type":"object","properties":{"":{"type":"string"}}}`, "s.properties: property names must not be empty"},
	{`{"type":"object","properties":{"a":5}}`, "s.properties.a: must be a JSON object"},
	{`{"type":"object","properties":{"a":{}}}`, "s.properties.a.type: must be one of string, number, integer, boolean, array (nested objects are not allowed)"},
	{`{"type":"object","properties":{"a":{"type":5}}}`, "s.properties.a.type: must be one of string, number, integer, boolean, array (nested objects are not allowed)"},
	{`{"type":"object","properties":{"a":{"type":"object"}}}`, "s.properties.a.type: must be one of string, number, integer, boolean, array (nested objects are not allowed)"},
	{`{"type":"object","properties":{"a":{"type":"null"}}}`, "s.properties.a.type: must be one of string, number, integer, boolean, array (nested objects are not allowed)"},
	{`{"type":"object","properties":{"a":{"type":"string","pattern":"x"}}}`, "s.properties.a.pattern: unsupported keyword for type string"},
	{`{"type":"object","properties":{"a":{"type":"boolean","minimum":1}}}`, "s.properties.a.minimum: unsupported keyword for type boolean"},
	{`{"type":"object","properties":{"a":{"type":"string","title":5}}}`, "s.properties.a.title: must be a string"},
	{`{"type":"object","properties":{"a":{"type":"string","description":false}}}`, "s.properties.a.description: must be a string"},
	{`{"type":"object","properties":{"a":{"type":"string","title":"T","description":"D"}}}`, ""},
	{`{"type":"object","properties":{"a":{"type":"string","minLength":0,"maxLength":0}}}`, ""},
	{`{"type":"object","properties":{"a":{"type":"array","minItems":0,"maxItems":0,"items":{"type":"string","enum":["x"]}}}}`, ""},
	{`{"type":"object","properties":{"a":{"type":"string","minLength":-1}}}`, "s.properties.a.minLength: must be a non-negative integer"},
	{`{"type":"object","properties":{"a":{"type":"string","minLength":1.5}}}`, "s.properties.a.minLength: must be a non-negative integer"},
	{`{"type":"object","properties":{"a":{"type":"string","maxLength":"3"}}}`, "s.properties.a.maxLength: must be a non-negative integer"},
	{`{"type":"object","properties":{"a":{"type":"string","minLength":3,"maxLength":2}}}`, "s.properties.a.maxLength: must not be less than minLength"},
	{`{"type":"object","properties":{"a":{"type":"string","minLength":2,"maxLength":2}}}`, ""},
	{`{"type":"object","properties":{"a":{"type":"string","format":5}}}`, "s.properties.a.format: must be a string"},
	{`{"type":"object","properties":{"a":{"type":"string","format":"phone"}}}`, "s.properties.a.format: must be one of email, uri, date, date-time"},
	{`{"type":"object","properties":{"a":{"type":"string","format":"email"}}}`, ""},
	{`{"type":"object","properties":{"a":{"type":"string","format":"date-time","minLength":"x"}}}`, "s.properties.a.minLength: must be a non-negative integer"},
	{`{"type":"object","properties":{"a":{"type":"string","enum":["x"],"oneOf":[{"const":"x","title":"X"}]}}}`, "s.properties.a.oneOf: cannot be combined with enum"},
	{`{"type":"object","properties":{"a":{"type":"string","enum":[]}}}`, "s.properties.a.enum: must be a non-empty array of strings"},
	{`{"type":"object","properties":{"a":{"type":"string","enum":[1,2]}}}`, "s.properties.a.enum: must be a non-empty array of strings"},
	{`{"type":"object","properties":{"a":{"type":"string","enum":"x"}}}`, "s.properties.a.enum: must be a non-empty array of strings"},
	{`{"type":"object","properties":{"a":{"type":"string","enum":["x","y","x"]}}}`, "s.properties.a.enum[2]: duplicate option \"x\""},
	{`{"type":"object","properties":{"a":{"type":"string","enum":["x","y"],"enumNames":["X"]}}}`, "s.properties.a.enumNames: must be an array of strings as long as enum"},
	{`{"type":"object","properties":{"a":{"type":"string","enum":["x","y"],"enumNames":["X",2]}}}`, "s.properties.a.enumNames: must be an array of strings as long as enum"},
	{`{"type":"object","properties":{"a":{"type":"string","enum":["x","y"],"enumNames":["X","Y"]}}}`, ""},
	{`{"type":"object","properties":{"a":{"type":"string","enumNames":["X"]}}}`, "s.properties.a.enumNames: requires enum"},
	{`{"type":"object","properties":{"a":{"type":"string","oneOf":[]}}}`, "s.properties.a.oneOf: must be a non-empty array of {const, title} objects"},
	{`{"type":"object","properties":{"a":{"type":"string","oneOf":{}}}}`, "s.properties.a.oneOf: must be a non-empty array of {const, title} objects"},
	{`{"type":"object","properties":{"a":{"type":"string","oneOf":[5]}}}`, "s.properties.a.oneOf[0]: must be a {const, title} object"},
	{`{"type":"object","properties":{"a":{"type":"string","oneOf":[{"const":"x","title":"X","extra":1}]}}}`, "s.properties.a.oneOf[0].extra: unsupported keyword (allowed: const, title)"},
	{`{"type":"object","properties":{"a":{"type":"string","oneOf":[{"const":5,"title":"X"}]}}}`, "s.properties.a.oneOf[0].const: must be a string"},
	{`{"type":"object","properties":{"a":{"type":"string","oneOf":[{"title":"X"}]}}}`, "s.properties.a.oneOf[0].const: must be a string"},
	{`{"type":"object","properties":{"a":{"type":"string","oneOf":[{"const":"x"}]}}}`, "s.properties.a.oneOf[0].title: must be a string"},
	{`{"type":"object","properties":{"a":{"type":"string","oneOf":[{"const":"x","title":5}]}}}`, "s.properties.a.oneOf[0].title: must be a string"},
	{`{"type":"object","properties":{"a":{"type":"string","oneOf":[{"const":"x","title":"X"},{"const":"x","title":"Y"}]}}}`, "s.properties.a.oneOf[1].const: duplicate option \"x\""},
	{`{"type":"object","properties":{"a":{"type":"string","oneOf":[{"const":"x","title":"X"},{"const":"y","title":"Y"}]}}}`, ""},
	{`{"type":"object","properties":{"a":{"type":"string","oneOf":[{"const":"x","title":"X"}],"enumNames":["X"]}}}`, "s.properties.a.enumNames: requires enum"},
	{`{"type":"object","properties":{"a":{"type":"number","minimum":"1"}}}`, "s.properties.a.minimum: must be a number"},
	{`{"type":"object","properties":{"a":{"type":"integer","maximum":true}}}`, "s.properties.a.maximum: must be a number"},
	{`{"type":"object","properties":{"a":{"type":"integer","minimum":5,"maximum":1}}}`, "s.properties.a.maximum: must not be less than minimum"},
	{`{"type":"object","properties":{"a":{"type":"number","minimum":-1.5,"maximum":1e3}}}`, ""},
	{`{"type":"object","properties":{"a":{"type":"integer","default":1.5}}}`, "s.properties.a.default: does not satisfy the property's own schema: a must be an integer"},
	{`{"type":"object","properties":{"a":{"type":"integer","default":3,"minimum":5}}}`, "s.properties.a.default: does not satisfy the property's own schema: a must be at least 5"},
	{`{"type":"object","properties":{"a":{"type":"integer","default":7,"minimum":5}}}`, ""},
	{`{"type":"object","properties":{"a":{"type":"boolean","default":"yes"}}}`, "s.properties.a.default: does not satisfy the property's own schema: a must be true or false"},
	{`{"type":"object","properties":{"a":{"type":"boolean","default":true}}}`, ""},
	{`{"type":"object","properties":{"a":{"type":"string","default":"abc","maxLength":2}}}`, "s.properties.a.default: does not satisfy the property's own schema: a must be at most 2 characters"},
	{`{"type":"object","properties":{"a":{"type":"string","default":"z","enum":["x"]}}}`, "s.properties.a.default: does not satisfy the property's own schema: a must be one of the listed options"},
	{`{"type":"object","properties":{"a":{"type":"string","format":"email","default":"not-an-email"}}}`, "s.properties.a.default: does not satisfy the property's own schema: a must be an email address"},
	{`{"type":"object","properties":{"a":{"type":"array"}}}`, "s.properties.a.items: is required (arrays must be multi-select enums of strings)"},
	{`{"type":"object","properties":{"a":{"type":"array","items":5}}}`, "s.properties.a.items: must be a JSON object"},
	{`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","enum":["x"],"minLength":1}}}}`, "s.properties.a.items.minLength: unsupported keyword (allowed: type, enum, anyOf)"},
	{`{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer","enum":["x"]}}}}`, "s.properties.a.items.type: must be \"string\""},
	{`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}}}}`, "s.properties.a.items: needs exactly one of enum or anyOf"},
	{`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","enum":["x"],"anyOf":[{"const":"x","title":"X"}]}}}}`, "s.properties.a.items: needs exactly one of enum or anyOf"},
	{`{"type":"object","properties":{"a":{"type":"array","items":{"enum":["x"]}}}}`, "s.properties.a.items.type: is required with enum and must be \"string\""},
	{`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","enum":["x","x"]}}}}`, "s.properties.a.items.enum[1]: duplicate option \"x\""},
	{`{"type":"object","properties":{"a":{"type":"array","items":{"anyOf":[{"const":"x","title":"X"}]}}}}`, ""},
	{`{"type":"object","properties":{"a":{"type":"array","items":{"anyOf":[{"const":"x"}]}}}}`, "s.properties.a.items.anyOf[0].title: must be a string"},
	{`{"type":"object","properties":{"a":{"type":"array","items":{"anyOf":[]}}}}`, "s.properties.a.items.anyOf: must be a non-empty array of {const, title} objects"},
	{`{"type":"object","properties":{"a":{"type":"array","minItems":-1,"items":{"type":"string","enum":["x"]}}}}`, "s.properties.a.minItems: must be a non-negative integer"},
	{`{"type":"object","properties":{"a":{"type":"array","minItems":2,"maxItems":1,"items":{"type":"string","enum":["x"]}}}}`, "s.properties.a.maxItems: must not be less than minItems"},
	{`{"type":"object","properties":{"a":{"type":"array","maxItems":"1","items":{"type":"string","enum":["x"]}}}}`, "s.properties.a.maxItems: must be a non-negative integer"},
	{`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","enum":["x","y"]},"default":["z"]}}}`, "s.properties.a.default: does not satisfy the property's own schema: a must contain only the listed options"},
	{`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","enum":["x","y"]},"default":["x"],"minItems":1,"maxItems":2}}}`, ""},
	{`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","enum":["x","y"]},"default":[],"minItems":1}}}`, "s.properties.a.default: does not satisfy the property's own schema: a needs at least 1 selection(s)"},
	{`{"type":"object","properties":{"a":{"type":"string"}},"required":"a"}`, "s.required: must be an array of property names"},
	{`{"type":"object","properties":{"a":{"type":"string"}},"required":[1]}`, "s.required: must be an array of property names"},
	{`{"type":"object","properties":{"a":{"type":"string"}},"required":["b"]}`, "s.required[0]: \"b\" is not a property"},
	{`{"type":"object","properties":{"a":{"type":"string"}},"required":["a","a"]}`, "s.required[1]: \"a\" is listed twice"},
	{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["b","a"]}`, ""},
	{`{"type":"object","properties":{"b":{"type":"object"},"a":{"type":"integer","minimum":"x"}}}`, "s.properties.a.minimum: must be a number"},
	{`{"type":"object","properties":{"a":{"type":"string","title":5,"minLength":-1}}}`, "s.properties.a.title: must be a string"},
	{`{"type":"object","properties":{"a":{"type":"string","enum":["x"],"default":"x"}},"required":["a"]}`, ""},
	{`{"type":"object","properties":{"a":{"type":"string","enum":["x"],"enumNames":"X"}}}`, "s.properties.a.enumNames: must be an array of strings as long as enum"},
	{`{"type":"object","properties":{"a":{"type":"string","oneOf":[{"const":"x","title":"X"}],"default":"y"}}}`, "s.properties.a.default: does not satisfy the property's own schema: a must be one of the listed options"},
}

func TestTheStrictParserNamesTheFirstProblemOfEachSchema(t *testing.T) {
	for _, tc := range formSchemaVerdicts {
		_, err := parseFormSchema([]byte(tc.schema), "s")
		got := ""
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Errorf("%s: %v is not an *InputError", tc.schema, err)
			}
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.schema, got, tc.want)
		}
	}
}

// What checkContent says of answers to each schema: "" for an acceptable
// answer, else the reason shown to the user (naming fields, never values).
var formContentVerdicts = []struct{ schema, content, want string }{
	{`{"type":"object","properties":{"a":{"type":"string","minLength":2,"maxLength":3}},"required":["a"]}`, `{"a":"x"}`, "a must be at least 2 characters"},
	{`{"type":"object","properties":{"a":{"type":"string","minLength":2,"maxLength":3}},"required":["a"]}`, `{"a":"xyzw"}`, "a must be at most 3 characters"},
	{`{"type":"object","properties":{"a":{"type":"string","minLength":2,"maxLength":3}},"required":["a"]}`, `{"a":"xy"}`, ""},
	{`{"type":"object","properties":{"a":{"type":"string","minLength":2,"maxLength":3}},"required":["a"]}`, `{}`, "a is required"},
	{`{"type":"object","properties":{"a":{"type":"string","minLength":2,"maxLength":3}},"required":["a"]}`, `{"a":"xy","b":1}`, "the answer contains fields the form does not ask for"},
	{`{"type":"object","properties":{"a":{"type":"string","minLength":2,"maxLength":3}},"required":["a"]}`, `[1]`, "the answer's content is not an object"},
	{`{"type":"object","properties":{"a":{"type":"string","minLength":2,"maxLength":3}},"required":["a"]}`, `{"a":5}`, "a must be a string"},
	{`{"type":"object","properties":{"a":{"type":"string","format":"email"}}}`, `{"a":"ada@example.com"}`, ""},
	{`{"type":"object","properties":{"a":{"type":"string","format":"email"}}}`, `{"a":"Ada <ada@example.com>"}`, "a must be an email address"},
	{`{"type":"object","properties":{"a":{"type":"string","format":"uri"}}}`, `{"a":"relative/path"}`, "a must be an absolute URI"},
	{`{"type":"object","properties":{"a":{"type":"string","format":"uri"}}}`, `{"a":"https://x.example"}`, ""},
	{`{"type":"object","properties":{"a":{"type":"string","format":"date"}}}`, `{"a":"2026-02-30"}`, "a must be a date (YYYY-MM-DD)"},
	{`{"type":"object","properties":{"a":{"type":"string","format":"date"}}}`, `{"a":"2026-02-28"}`, ""},
	{`{"type":"object","properties":{"a":{"type":"string","format":"date-time"}}}`, `{"a":"2026-02-28T10:00:00Z"}`, ""},
	{`{"type":"object","properties":{"a":{"type":"string","format":"date-time"}}}`, `{"a":"2026-02-28 10:00"}`, "a must be a date-time (RFC 3339)"},
	{`{"type":"object","properties":{"a":{"type":"string","enum":["x","y"]}}}`, `{"a":"z"}`, "a must be one of the listed options"},
	{`{"type":"object","properties":{"a":{"type":"string","enum":["x","y"],"minLength":5}}}`, `{"a":"x"}`, ""},
	{`{"type":"object","properties":{"a":{"type":"string","oneOf":[{"const":"x","title":"X"}]}}}`, `{"a":"X"}`, "a must be one of the listed options"},
	{`{"type":"object","properties":{"a":{"type":"string","oneOf":[{"const":"x","title":"X"}]}}}`, `{"a":"x"}`, ""},
	{`{"type":"object","properties":{"a":{"type":"integer","minimum":1,"maximum":10}}}`, `{"a":0}`, "a must be at least 1"},
	{`{"type":"object","properties":{"a":{"type":"integer","minimum":1,"maximum":10}}}`, `{"a":11}`, "a must be at most 10"},
	{`{"type":"object","properties":{"a":{"type":"integer","minimum":1,"maximum":10}}}`, `{"a":1.5}`, "a must be an integer"},
	{`{"type":"object","properties":{"a":{"type":"integer","minimum":1,"maximum":10}}}`, `{"a":"3"}`, "a must be a number"},
	{`{"type":"object","properties":{"a":{"type":"integer","minimum":1,"maximum":10}}}`, `{"a":5.0}`, ""},
	{`{"type":"object","properties":{"a":{"type":"number","minimum":0.5}}}`, `{"a":0.25}`, "a must be at least 0.5"},
	{`{"type":"object","properties":{"a":{"type":"number"}}}`, `{"a":1e400}`, "a must be a finite number"},
	{`{"type":"object","properties":{"a":{"type":"boolean"}}}`, `{"a":"true"}`, "a must be true or false"},
	{`{"type":"object","properties":{"a":{"type":"boolean"}}}`, `{"a":false}`, ""},
	{`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","enum":["x","y","z"]},"minItems":1,"maxItems":2}}}`, `{"a":[]}`, "a needs at least 1 selection(s)"},
	{`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","enum":["x","y","z"]},"minItems":1,"maxItems":2}}}`, `{"a":["x","y","z"]}`, "a allows at most 2 selection(s)"},
	{`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","enum":["x","y","z"]},"minItems":1,"maxItems":2}}}`, `{"a":["x","w"]}`, "a must contain only the listed options"},
	{`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","enum":["x","y","z"]},"minItems":1,"maxItems":2}}}`, `{"a":["x",1]}`, "a must be a list of strings"},
	{`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","enum":["x","y","z"]},"minItems":1,"maxItems":2}}}`, `{"a":"x"}`, "a must be a list of strings"},
	{`{"type":"object","properties":{"a":{"type":"array","items":{"anyOf":[{"const":"x","title":"X"}]}}}}`, `{"a":["x"]}`, ""},
	{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["b","a"]}`, `{"a":"x"}`, "b is required"},
	{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`, `{"a":1,"b":"x"}`, "a must be a string"},
	{`{"type":"object","properties":{"a":{"type":"string"}}}`, `{"a":"x"} trailing`, "the answer's content is not an object"},
}

func TestAnswersAreCheckedAgainstTheFormSchema(t *testing.T) {
	for _, tc := range formContentVerdicts {
		s, err := parseFormSchema([]byte(tc.schema), "s")
		if err != nil {
			t.Fatalf("%s: %v", tc.schema, err)
		}
		if got := s.checkContent([]byte(tc.content)); got != tc.want {
			t.Errorf("%s with %s: %q, want %q", tc.schema, tc.content, got, tc.want)
		}
	}
}

// The strict parser and ReadForm read the same facts: on every schema the
// parser accepts, its fields are ReadForm's, only sorted by name.
func TestTheStrictParserAndReadFormReadTheSameFields(t *testing.T) {
	for _, tc := range formSchemaVerdicts {
		if tc.want != "" {
			continue
		}
		strict, err := parseFormSchema([]byte(tc.schema), "s")
		if err != nil {
			t.Fatal(err)
		}
		form, err := ReadForm([]byte(tc.schema))
		if err != nil {
			t.Fatalf("%s: ReadForm: %v", tc.schema, err)
		}
		if len(form.Fields) != len(strict.fields) {
			t.Fatalf("%s: %d fields, the parser has %d", tc.schema, len(form.Fields), len(strict.fields))
		}
		for _, f := range form.Fields {
			sf := strict.field(f.Name)
			if sf == nil || !reflect.DeepEqual(sf.Field, f) {
				t.Errorf("%s: field %s\n read %+v\n strict %+v", tc.schema, f.Name, f, sf)
			}
		}
	}
}
