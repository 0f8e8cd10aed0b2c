package mrtr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// A Form is an elicitation form's requested schema, read for a client to
// show: each property a Field, in the order the schema lists them, with
// what a person needs to fill it in.
//
// ReadForm is lenient, as a client must be with whatever a server sends:
// it ignores keywords it does not know and keywords whose values have the
// wrong type. The platform checks the forms tenants declare strictly
// (ValidateInputs), refusing what ReadForm would skip, but both read each
// keyword the same way, here.
type Form struct {
	Fields []Field
}

// A Field is one property of a form.
type Field struct {
	Name        string
	Title       string
	Description string
	// Type is the property's type as written: string, number, integer,
	// boolean or array for the spec's primitives; "" when absent or not a
	// string.
	Type   string
	Format string
	// Options are the values a choice allows, with their titles: enum
	// (titled by enumNames) or oneOf for a single choice; the items'
	// enum or anyOf for a multi-select.
	Options []Option
	// Multi reports a multi-select: an array whose items are options.
	Multi    bool
	Required bool
	// Default is the default value as written; nil when there is none.
	Default json.RawMessage
	// Bounds; nil when absent.
	Minimum, Maximum     *float64
	MinLength, MaxLength *int
	MinItems, MaxItems   *int
}

// An Option is one value of a choice.
type Option struct {
	Value string
	Title string // "" when the schema gives none
}

// Field returns the field named name, or nil.
func (f *Form) Field(name string) *Field {
	for i := range f.Fields {
		if f.Fields[i].Name == name {
			return &f.Fields[i]
		}
	}
	return nil
}

// ReadForm reads a requested schema. An empty schema is a form without
// fields. It fails only when the schema, its properties or a property is
// not a JSON object.
func ReadForm(schema json.RawMessage) (*Form, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return &Form{}, nil
	}
	r := readSchema(schema)
	switch {
	case r.members == nil:
		return nil, errors.New("the requested schema is not a JSON object")
	case r.props == nil && r.members["properties"] != nil:
		return nil, errors.New("the requested schema's properties are not a JSON object")
	}
	required := map[string]bool{}
	for _, name := range r.required {
		required[name] = true
	}
	form := &Form{}
	for _, name := range r.names {
		fr := readField(name, r.props[name])
		if fr.members == nil {
			return nil, fmt.Errorf("property %s is not a JSON object", name)
		}
		fr.Required = required[name]
		form.Fields = append(form.Fields, fr.Field)
	}
	return form, nil
}

// schemaReading is a requested schema's top level as read.
type schemaReading struct {
	members  map[string]json.RawMessage // nil when the schema is not an object
	props    map[string]json.RawMessage // nil when properties is absent or not an object
	names    []string                   // the properties' names, in document order
	required []string                   // nil when absent or not an array of strings
	// requiredBad is set when required is present but not an array of
	// strings.
	requiredBad bool
}

func readSchema(raw json.RawMessage) schemaReading {
	var r schemaReading
	var err error
	if r.members, err = jsonObject(raw); err != nil {
		return r
	}
	if v, ok := r.members["properties"]; ok {
		if r.props, err = jsonObject(v); err == nil {
			r.names = memberOrder(v)
		}
	}
	if v, ok := r.members["required"]; ok && json.Unmarshal(v, &r.required) != nil {
		r.required, r.requiredBad = nil, true
	}
	return r
}

// fieldReading is one property as read: the Field, and for the strict
// parser the members it checks keywords against and what was wrong with
// the values it could not read.
type fieldReading struct {
	Field
	members map[string]json.RawMessage // nil when the property is not an object
	items   map[string]json.RawMessage // the array items' members; nil when absent or not an object
	// sources are the options by the keyword that lists them: enum,
	// oneOf, items.enum and items.anyOf; one entry per listed item.
	sources map[string][]optionItem
	// enumNames are the enum's titles; nil when absent or unreadable.
	enumNames []string
	// problems are values of the wrong JSON type (or shape), by keyword
	// path under the property ("minLength", "oneOf[2].const"), with the
	// message the strict parser reports. ReadForm ignores them.
	problems map[string]string
}

// optionItem is one item of a list of options.
type optionItem struct {
	Option
	members map[string]json.RawMessage // of a {const, title} item; nil for an enum string or a non-object
	ok      bool                       // the item is a usable option
}

func readField(name string, raw json.RawMessage) fieldReading {
	r := fieldReading{Field: Field{Name: name}, sources: map[string][]optionItem{}, problems: map[string]string{}}
	m, err := jsonObject(raw)
	if err != nil {
		return r
	}
	r.members = m
	r.Type, _ = jsonString(m["type"])
	r.Title = r.str(m, "title")
	r.Description = r.str(m, "description")
	r.Format = r.str(m, "format")
	r.Minimum = r.number(m, "minimum")
	r.Maximum = r.number(m, "maximum")
	r.MinLength = r.count(m, "minLength")
	r.MaxLength = r.count(m, "maxLength")
	r.MinItems = r.count(m, "minItems")
	r.MaxItems = r.count(m, "maxItems")
	if v, ok := m["default"]; ok {
		r.Default = v
	}
	if v, ok := m["enum"]; ok {
		r.readEnum("enum", v)
	}
	if v, ok := m["enumNames"]; ok {
		if json.Unmarshal(v, &r.enumNames) != nil {
			r.enumNames = nil
			r.problems["enumNames"] = "must be an array of strings as long as enum"
		}
	}
	if v, ok := m["oneOf"]; ok {
		r.readTitled("oneOf", v)
	}
	if v, ok := m["items"]; ok {
		if r.items, err = jsonObject(v); err != nil {
			r.problems["items"] = "must be a JSON object"
		} else {
			if t, ok := r.items["type"]; ok {
				if typ, err := jsonString(t); err != nil || typ != "string" {
					r.problems["items.type"] = `must be "string"`
				}
			}
			if v, ok := r.items["enum"]; ok {
				r.readEnum("items.enum", v)
			}
			if v, ok := r.items["anyOf"]; ok {
				r.readTitled("items.anyOf", v)
			}
		}
	}
	// The choice a person is offered.
	switch {
	case r.Type == "array" && r.items != nil:
		r.Multi = true
		r.Options = append(usable(r.sources["items.enum"]), usable(r.sources["items.anyOf"])...)
	case len(usable(r.sources["enum"])) > 0:
		r.Options = usable(r.sources["enum"])
		for i := range min(len(r.Options), len(r.enumNames)) {
			r.Options[i].Title = r.enumNames[i]
		}
	default:
		r.Options = usable(r.sources["oneOf"])
	}
	return r
}

func usable(items []optionItem) []Option {
	var out []Option
	for _, it := range items {
		if it.ok {
			out = append(out, it.Option)
		}
	}
	return out
}

// str reads a string keyword.
func (r *fieldReading) str(m map[string]json.RawMessage, key string) string {
	v, ok := m[key]
	if !ok {
		return ""
	}
	s, err := jsonString(v)
	if err != nil {
		r.problems[key] = "must be a string"
	}
	return s
}

// number reads a numeric keyword.
func (r *fieldReading) number(m map[string]json.RawMessage, key string) *float64 {
	v, ok := m[key]
	if !ok {
		return nil
	}
	var n float64
	if err := json.Unmarshal(v, &n); err != nil {
		r.problems[key] = "must be a number"
		return nil
	}
	return &n
}

// count reads a non-negative integer keyword.
func (r *fieldReading) count(m map[string]json.RawMessage, key string) *int {
	v, ok := m[key]
	if !ok {
		return nil
	}
	var n int
	if err := json.Unmarshal(v, &n); err != nil || n < 0 {
		r.problems[key] = "must be a non-negative integer"
		return nil
	}
	return &n
}

// readEnum reads a list of option strings.
func (r *fieldReading) readEnum(key string, raw json.RawMessage) {
	var opts []string
	if err := json.Unmarshal(raw, &opts); err != nil || len(opts) == 0 {
		r.problems[key] = "must be a non-empty array of strings"
		return
	}
	items := make([]optionItem, len(opts))
	for i, o := range opts {
		items[i] = optionItem{Option: Option{Value: o}, ok: true}
	}
	r.sources[key] = items
}

// readTitled reads a list of {const, title} options.
func (r *fieldReading) readTitled(key string, raw json.RawMessage) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil || len(list) == 0 {
		r.problems[key] = "must be a non-empty array of {const, title} objects"
		return
	}
	items := make([]optionItem, len(list))
	for i, raw := range list {
		p := fmt.Sprintf("%s[%d]", key, i)
		m, err := jsonObject(raw)
		if err != nil {
			r.problems[p] = "must be a {const, title} object"
			continue
		}
		it := optionItem{members: m}
		var cerr, terr error
		it.Value, cerr = jsonString(m["const"])
		if cerr != nil {
			r.problems[p+".const"] = "must be a string"
		}
		if t, ok := m["title"]; ok {
			it.Title, terr = jsonString(t)
		} else {
			terr = errors.New("absent")
		}
		if terr != nil {
			r.problems[p+".title"] = "must be a string"
		}
		it.ok = cerr == nil
		items[i] = it
	}
	r.sources[key] = items
}

// memberOrder returns a JSON object's member names in document order,
// each once.
func memberOrder(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var names []string
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return names
		}
		k, _ := t.(string)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return names
		}
		if !seen[k] {
			names = append(names, k)
			seen[k] = true
		}
	}
	return names
}
