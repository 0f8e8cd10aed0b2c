package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestFormFieldsArePromptedAndParsedFromTheSharedReading(t *testing.T) {
	fields, err := formFields(json.RawMessage(`{"type":"object","required":["size"],"properties":{
		"size": {"type":"string","title":"Size","description":"Pick one","enum":["s","m"],"enumNames":["Small","Medium"]},
		"tags": {"type":"array","items":{"anyOf":[{"const":"a","title":"Alpha"},{"const":"b","title":"Beta"},{"const":"c","title":"Gamma"}]},"minItems":1,"maxItems":2},
		"count": {"type":"integer","minimum":1,"maximum":9,"default":3},
		"ok": {"type":"boolean"},
		"note": {"type":"string","format":"email","maxLength":12}
	}}`))
	if err != nil {
		t.Fatal(err)
	}
	prompts := map[string]string{}
	byName := map[string]*field{}
	var order []string
	for i := range fields {
		f := &fields[i]
		order = append(order, f.Name)
		prompts[f.Name] = f.prompt()
		byName[f.Name] = f
	}
	if strings.Join(order, ",") != "size,tags,count,ok,note" {
		t.Fatalf("order %q: want the schema's", order)
	}
	for name, want := range map[string]string{
		"size":  "Size (size) - Pick one (string, required) [1) s Small  2) m Medium]",
		"tags":  "tags (choose any, comma-separated, min 1, max 2) [1) a Alpha  2) b Beta  3) c Gamma]",
		"count": "count (integer, min 1, max 9) (default 3)",
		"ok":    "ok (boolean) [y/n]",
		"note":  "note (string, email)",
	} {
		if prompts[name] != want {
			t.Errorf("prompt of %s:\n got %q\nwant %q", name, prompts[name], want)
		}
	}
	for _, tc := range []struct {
		field, line string
		want        any
		set         bool
		err         string
	}{
		{"size", "m", "m", true, ""},
		{"size", "2", "m", true, ""},
		{"size", "small", "s", true, ""}, // by title, in any case
		{"size", "xl", "", false, `"xl" is not one of s, m`},
		{"size", "", nil, false, "an answer is required"},
		{"tags", "Alpha, 3", []string{"a", "c"}, true, ""},
		{"tags", "a,b,c", nil, false, "choose between the minimum and maximum"},
		{"count", "", float64(3), true, ""}, // the default
		{"count", "7", int64(7), true, ""},
		{"count", "10", nil, false, "10 is out of range"},
		{"count", "2.5", nil, false, "not a whole number"},
		{"ok", "Y", true, true, ""},
		{"ok", "maybe", nil, false, "answer y or n"},
		{"note", "  ada@x.io ", "  ada@x.io ", true, ""}, // a string keeps its spaces
		{"note", "far-too-long@example.com", nil, false, "length is out of range"},
		{"note", "   ", nil, false, ""}, // optional, left empty
	} {
		f := byName[tc.field]
		got, set, err := f.parse(tc.line, f.Required)
		if !reflect.DeepEqual(got, tc.want) || set != tc.set || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s %q: %#v %v %v; want %#v %v %q", tc.field, tc.line, got, set, err, tc.want, tc.set, tc.err)
		}
	}
	// Answers from the answers file are typed the same way.
	if v, err := byName["count"].fromJSON(json.RawMessage(`"4"`)); err != nil || v != int64(4) {
		t.Errorf(`count from "4": %#v %v`, v, err)
	}
	if v, err := byName["tags"].fromJSON(json.RawMessage(`["Beta"]`)); err != nil || !reflect.DeepEqual(v, []string{"b"}) {
		t.Errorf(`tags from ["Beta"]: %#v %v`, v, err)
	}
	if _, err := byName["ok"].fromJSON(json.RawMessage(`3`)); err == nil {
		t.Error("a number accepted for a boolean")
	}
}
