package mrtr_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/opsmcp/platform/mrtr"
)

func ptr[T any](v T) *T { return &v }

func TestReadFormGivesEveryFieldInDocumentOrderWithWhatAClientShows(t *testing.T) {
	form, err := mrtr.ReadForm(json.RawMessage(`{"type":"object","properties":{
		"name": {"type":"string","title":"Name","description":"Your full name","minLength":2,"maxLength":40,"default":"Ada"},
		"email": {"type":"string","format":"email"},
		"size": {"type":"string","enum":["s","m","l"],"enumNames":["Small","Medium","Large"]},
		"colour": {"type":"string","oneOf":[{"const":"r","title":"Red"},{"const":"g","title":"Green"}]},
		"age": {"type":"integer","minimum":0,"maximum":150},
		"ratio": {"type":"number","minimum":0.5},
		"gift": {"type":"boolean","default":false},
		"tags": {"type":"array","items":{"type":"string","enum":["a","b"]},"minItems":1,"maxItems":2},
		"extras": {"type":"array","items":{"anyOf":[{"const":"x","title":"Extra X"},{"const":"y","title":"Extra Y"}]}}
	},"required":["email","name"]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []mrtr.Field{
		{Name: "name", Title: "Name", Description: "Your full name", Type: "string", Required: true, Default: json.RawMessage(`"Ada"`),
			MinLength: ptr(2), MaxLength: ptr(40)},
		{Name: "email", Type: "string", Format: "email", Required: true},
		{Name: "size", Type: "string", Options: []mrtr.Option{{"s", "Small"}, {"m", "Medium"}, {"l", "Large"}}},
		{Name: "colour", Type: "string", Options: []mrtr.Option{{"r", "Red"}, {"g", "Green"}}},
		{Name: "age", Type: "integer", Minimum: ptr(0.0), Maximum: ptr(150.0)},
		{Name: "ratio", Type: "number", Minimum: ptr(0.5)},
		{Name: "gift", Type: "boolean", Default: json.RawMessage(`false`)},
		{Name: "tags", Type: "array", Multi: true, Options: []mrtr.Option{{Value: "a"}, {Value: "b"}}, MinItems: ptr(1), MaxItems: ptr(2)},
		{Name: "extras", Type: "array", Multi: true, Options: []mrtr.Option{{"x", "Extra X"}, {"y", "Extra Y"}}},
	}
	if !reflect.DeepEqual(form.Fields, want) {
		for i := range max(len(want), len(form.Fields)) {
			var got, w any
			if i < len(form.Fields) {
				got = form.Fields[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if !reflect.DeepEqual(got, w) {
				t.Errorf("field %d:\n got %+v\nwant %+v", i, got, w)
			}
		}
	}
	if f := form.Field("age"); f == nil || f.Name != "age" || form.Field("nope") != nil {
		t.Fatalf("Field lookup: %+v", f)
	}
}

func TestReadFormIsLenientWithWhatItCannotUse(t *testing.T) {
	form, err := mrtr.ReadForm(json.RawMessage(`{"type":"object","$schema":"x","additionalProperties":false,"properties":{
		"z": {"type":"string","title":5,"description":null,"minLength":-1,"maxLength":"3","pattern":"^a","x-ui":"wide"},
		"a": {"type":"string","enum":[1,2],"oneOf":[{"const":"k"},{"title":"no const"},{"const":7,"title":"bad"},"loose"]},
		"n": {"type":"object","properties":{"deep":{"type":"string"}}},
		"u": {},
		"dup": {"type":"integer"},
		"m": {"type":"array","items":{"type":"integer","enum":["p"],"anyOf":[{"const":"q","title":"Q"}]},"minItems":"1"},
		"dup": {"type":"string"}
	},"required":"z"}`))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range form.Fields {
		names = append(names, f.Name)
	}
	// Document order; a repeated name counts once, where it first appears
	// (its value is the last one, as for any JSON decoder).
	if strings.Join(names, ",") != "z,a,n,u,dup,m" {
		t.Fatalf("fields %q", names)
	}
	want := map[string]mrtr.Field{
		// Values of the wrong type are skipped, unknown keywords ignored,
		// and a required list that is not a list requires nothing.
		"z": {Name: "z", Type: "string"},
		// Unusable options are left out; usable ones keep whatever
		// title they have.
		"a": {Name: "a", Type: "string", Options: []mrtr.Option{{Value: "k"}}},
		// A type the spec does not allow is kept as written, for the
		// client to decide.
		"n":   {Name: "n", Type: "object"},
		"u":   {Name: "u"},
		"dup": {Name: "dup", Type: "string"},
		// Both lists of a multi-select are offered.
		"m": {Name: "m", Type: "array", Multi: true, Options: []mrtr.Option{{Value: "p"}, {"q", "Q"}}},
	}
	for _, f := range form.Fields {
		if !reflect.DeepEqual(f, want[f.Name]) {
			t.Errorf("field %s:\n got %+v\nwant %+v", f.Name, f, want[f.Name])
		}
	}
}

func TestReadFormRefusesOnlyWhatIsNotAForm(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{`[1]`, "not a JSON object"},
		{`"form"`, "not a JSON object"},
		{`{"type":"object","properties":[]}`, "properties are not a JSON object"},
		{`{"type":"object","properties":{"a":"string"}}`, "property a is not a JSON object"},
		{`{"type":"object","properties":{"a":{"type":"string"}`, "not a JSON object"},
	} {
		if form, err := mrtr.ReadForm(json.RawMessage(tc.schema)); err == nil || form != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %+v, %v; want an error saying %q", tc.schema, form, err, tc.want)
		}
	}
	for _, empty := range []string{``, `  `, `{}`, `{"type":"object"}`, `{"type":"object","properties":{}}`} {
		if form, err := mrtr.ReadForm(json.RawMessage(empty)); err != nil || form == nil || len(form.Fields) != 0 {
			t.Errorf("%q: %+v, %v; want a form without fields", empty, form, err)
		}
	}
}
