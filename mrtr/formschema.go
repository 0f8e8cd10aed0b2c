package mrtr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/mail"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// A formSchema is a parsed elicitation requestedSchema: a flat object of
// primitive properties (the spec's PrimitiveSchemaDefinition). Only the
// keywords the spec defines are accepted, so that every constraint a
// tenant writes is one the platform actually enforces on the answer. The
// keywords are read by readSchema and readField, as for ReadForm; the
// checks here are what makes the parser strict.
type formSchema struct {
	fields   []formField // sorted by name, so checks run in a stable order
	required []string
}

// A formField is one property of a formSchema.
type formField struct {
	Field
	options []string // the values of Field.Options
}

// Keywords the spec allows on each primitive type.
var fieldKeywords = map[string][]string{
	"string":  {"type", "title", "description", "default", "minLength", "maxLength", "format", "enum", "enumNames", "oneOf"},
	"number":  {"type", "title", "description", "default", "minimum", "maximum"},
	"integer": {"type", "title", "description", "default", "minimum", "maximum"},
	"boolean": {"type", "title", "description", "default"},
	"array":   {"type", "title", "description", "default", "minItems", "maxItems", "items"},
}

// parseFormSchema parses and checks a requestedSchema. Errors are
// *InputError values whose Path extends path.
func parseFormSchema(raw json.RawMessage, path string) (*formSchema, error) {
	r := readSchema(raw)
	top := r.members
	if top == nil {
		return nil, newInputError(path, "must be a JSON object")
	}
	for _, k := range sortedMemberNames(top) {
		switch k {
		case "$schema", "type", "properties", "required":
		default:
			return nil, newInputError(path+"."+k, "unsupported keyword (allowed: $schema, type, properties, required)")
		}
	}
	if v, ok := top["$schema"]; ok {
		if _, err := jsonString(v); err != nil {
			return nil, newInputError(path+".$schema", "must be a string")
		}
	}
	if typ, err := jsonString(top["type"]); err != nil || typ != "object" {
		return nil, newInputError(path+".type", `must be "object"`)
	}
	if _, ok := top["properties"]; !ok {
		return nil, newInputError(path+".properties", "is required")
	}
	if r.props == nil {
		return nil, newInputError(path+".properties", "must be a JSON object")
	}
	s := &formSchema{}
	for _, name := range sortedMemberNames(r.props) {
		if name == "" {
			return nil, newInputError(path+".properties", "property names must not be empty")
		}
		f, err := parseFormField(readField(name, r.props[name]), path+".properties."+name)
		if err != nil {
			return nil, err
		}
		s.fields = append(s.fields, f)
	}
	if r.requiredBad {
		return nil, newInputError(path+".required", "must be an array of property names")
	}
	for i, name := range r.required {
		p := fmt.Sprintf("%s.required[%d]", path, i)
		if s.field(name) == nil {
			return nil, newInputError(p, fmt.Sprintf("%q is not a property", name))
		}
		if slices.Contains(r.required[:i], name) {
			return nil, newInputError(p, fmt.Sprintf("%q is listed twice", name))
		}
		s.field(name).Required = true
	}
	s.required = r.required
	return s, nil
}

func (s *formSchema) field(name string) *formField {
	i, ok := slices.BinarySearchFunc(s.fields, name, func(f formField, n string) int { return strings.Compare(f.Name, n) })
	if !ok {
		return nil
	}
	return &s.fields[i]
}

// problem is the error for a value readField could not read, if any.
func (r *fieldReading) problem(path, key string) error {
	if msg, bad := r.problems[key]; bad {
		return newInputError(path+"."+key, msg)
	}
	return nil
}

func parseFormField(r fieldReading, path string) (formField, error) {
	f := formField{Field: r.Field}
	for _, o := range r.Options {
		f.options = append(f.options, o.Value)
	}
	if r.members == nil {
		return f, newInputError(path, "must be a JSON object")
	}
	allowed, known := fieldKeywords[r.Type]
	if !known {
		return f, newInputError(path+".type", "must be one of string, number, integer, boolean, array (nested objects are not allowed)")
	}
	for _, k := range sortedMemberNames(r.members) {
		if !slices.Contains(allowed, k) {
			return f, newInputError(path+"."+k, fmt.Sprintf("unsupported keyword for type %s", r.Type))
		}
	}
	for _, k := range []string{"title", "description"} {
		if err := r.problem(path, k); err != nil {
			return f, err
		}
	}
	switch r.Type {
	case "string":
		if err := checkStringKeywords(&r, path); err != nil {
			return f, err
		}
	case "number", "integer":
		for _, k := range []string{"minimum", "maximum"} {
			if err := r.problem(path, k); err != nil {
				return f, err
			}
		}
		if f.Minimum != nil && f.Maximum != nil && *f.Minimum > *f.Maximum {
			return f, newInputError(path+".maximum", "must not be less than minimum")
		}
	case "array":
		if err := checkArrayKeywords(&r, path); err != nil {
			return f, err
		}
	}
	if v := r.Default; v != nil {
		val, err := jsonValue(v)
		if err != nil {
			return f, newInputError(path+".default", "must be valid JSON")
		}
		if why := f.check(val); why != "" {
			return f, newInputError(path+".default", "does not satisfy the property's own schema: "+why)
		}
	}
	return f, nil
}

func checkStringKeywords(r *fieldReading, path string) error {
	for _, k := range []string{"minLength", "maxLength"} {
		if err := r.problem(path, k); err != nil {
			return err
		}
	}
	if r.MinLength != nil && r.MaxLength != nil && *r.MinLength > *r.MaxLength {
		return newInputError(path+".maxLength", "must not be less than minLength")
	}
	if _, ok := r.members["format"]; ok {
		if err := r.problem(path, "format"); err != nil {
			return err
		}
		switch r.Format {
		case "email", "uri", "date", "date-time":
		default:
			return newInputError(path+".format", "must be one of email, uri, date, date-time")
		}
	}
	_, hasEnum := r.members["enum"]
	_, hasOneOf := r.members["oneOf"]
	switch {
	case hasEnum && hasOneOf:
		return newInputError(path+".oneOf", "cannot be combined with enum")
	case hasEnum:
		if err := checkOptions(r, path, "enum"); err != nil {
			return err
		}
		if _, ok := r.members["enumNames"]; ok {
			if r.problems["enumNames"] != "" || len(r.enumNames) != len(r.sources["enum"]) {
				return newInputError(path+".enumNames", "must be an array of strings as long as enum")
			}
		}
	case hasOneOf:
		if err := checkOptions(r, path, "oneOf"); err != nil {
			return err
		}
	}
	if _, ok := r.members["enumNames"]; ok && !hasEnum {
		return newInputError(path+".enumNames", "requires enum")
	}
	return nil
}

func checkArrayKeywords(r *fieldReading, path string) error {
	for _, k := range []string{"minItems", "maxItems"} {
		if err := r.problem(path, k); err != nil {
			return err
		}
	}
	if r.MinItems != nil && r.MaxItems != nil && *r.MinItems > *r.MaxItems {
		return newInputError(path+".maxItems", "must not be less than minItems")
	}
	if _, ok := r.members["items"]; !ok {
		return newInputError(path+".items", "is required (arrays must be multi-select enums of strings)")
	}
	if err := r.problem(path, "items"); err != nil {
		return err
	}
	for _, k := range sortedMemberNames(r.items) {
		if k != "type" && k != "enum" && k != "anyOf" {
			return newInputError(path+".items."+k, "unsupported keyword (allowed: type, enum, anyOf)")
		}
	}
	if err := r.problem(path, "items.type"); err != nil {
		return err
	}
	_, hasEnum := r.items["enum"]
	_, hasAnyOf := r.items["anyOf"]
	switch {
	case hasEnum == hasAnyOf:
		return newInputError(path+".items", "needs exactly one of enum or anyOf")
	case hasEnum:
		if _, ok := r.items["type"]; !ok {
			return newInputError(path+".items.type", `is required with enum and must be "string"`)
		}
		return checkOptions(r, path, "items.enum")
	default:
		return checkOptions(r, path, "items.anyOf")
	}
}

// checkOptions checks the options listed under key: readable, each a
// string or a {const, title} object as the keyword wants, none twice.
func checkOptions(r *fieldReading, path, key string) error {
	if err := r.problem(path, key); err != nil {
		return err
	}
	var seen []string
	for i, it := range r.sources[key] {
		p := fmt.Sprintf("%s[%d]", key, i)
		if it.members == nil && !it.ok { // not a {const, title} object
			if err := r.problem(path, p); err != nil {
				return err
			}
		}
		for _, k := range sortedMemberNames(it.members) {
			if k != "const" && k != "title" {
				return newInputError(path+"."+p+"."+k, "unsupported keyword (allowed: const, title)")
			}
		}
		if it.members != nil {
			for _, k := range []string{p + ".const", p + ".title"} {
				if err := r.problem(path, k); err != nil {
					return err
				}
			}
		}
		if slices.Contains(seen, it.Value) {
			if it.members != nil {
				p += ".const"
			}
			return newInputError(path+"."+p, fmt.Sprintf("duplicate option %q", it.Value))
		}
		seen = append(seen, it.Value)
	}
	return nil
}

// checkContent checks accepted form content against s. It returns "" when
// the content is acceptable, or a short reason fit to show the user. A
// reason names fields by their schema key only, never echoing the answer,
// because it is appended to the re-asked question and kept in the state.
func (s *formSchema) checkContent(raw json.RawMessage) string {
	content, err := jsonObject(raw)
	if err != nil {
		return "the answer's content is not an object"
	}
	for k := range content {
		if s.field(k) == nil {
			return "the answer contains fields the form does not ask for"
		}
	}
	for _, name := range s.required {
		if _, ok := content[name]; !ok {
			return name + " is required"
		}
	}
	for i := range s.fields {
		f := &s.fields[i]
		raw, ok := content[f.Name]
		if !ok {
			continue
		}
		v, err := jsonValue(raw)
		if err != nil {
			return f.Name + " is not valid JSON"
		}
		if why := f.check(v); why != "" {
			return why
		}
	}
	return ""
}

// check checks one decoded value (json.Number for numbers) against f.
func (f *formField) check(v any) string {
	switch f.Type {
	case "string":
		s, ok := v.(string)
		if !ok {
			return f.Name + " must be a string"
		}
		return f.checkString(s)
	case "number", "integer":
		n, ok := v.(json.Number)
		if !ok {
			return f.Name + " must be a number"
		}
		x, err := n.Float64()
		if err != nil || math.IsInf(x, 0) {
			return f.Name + " must be a finite number"
		}
		if f.Type == "integer" && x != math.Trunc(x) {
			return f.Name + " must be an integer"
		}
		if f.Minimum != nil && x < *f.Minimum {
			return f.Name + " must be at least " + formatNumber(*f.Minimum)
		}
		if f.Maximum != nil && x > *f.Maximum {
			return f.Name + " must be at most " + formatNumber(*f.Maximum)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return f.Name + " must be true or false"
		}
	case "array":
		list, ok := v.([]any)
		if !ok {
			return f.Name + " must be a list of strings"
		}
		for _, item := range list {
			s, ok := item.(string)
			if !ok {
				return f.Name + " must be a list of strings"
			}
			if !slices.Contains(f.options, s) {
				return f.Name + " must contain only the listed options"
			}
		}
		if f.MinItems != nil && len(list) < *f.MinItems {
			return fmt.Sprintf("%s needs at least %d selection(s)", f.Name, *f.MinItems)
		}
		if f.MaxItems != nil && len(list) > *f.MaxItems {
			return fmt.Sprintf("%s allows at most %d selection(s)", f.Name, *f.MaxItems)
		}
	}
	return ""
}

func (f *formField) checkString(s string) string {
	if f.options != nil {
		if !slices.Contains(f.options, s) {
			return f.Name + " must be one of the listed options"
		}
		return ""
	}
	n := utf8.RuneCountInString(s)
	if f.MinLength != nil && n < *f.MinLength {
		return fmt.Sprintf("%s must be at least %d characters", f.Name, *f.MinLength)
	}
	if f.MaxLength != nil && n > *f.MaxLength {
		return fmt.Sprintf("%s must be at most %d characters", f.Name, *f.MaxLength)
	}
	switch f.Format {
	case "email":
		if a, err := mail.ParseAddress(s); err != nil || a.Name != "" || a.Address != s {
			return f.Name + " must be an email address"
		}
	case "uri":
		if u, err := url.Parse(s); err != nil || u.Scheme == "" {
			return f.Name + " must be an absolute URI"
		}
	case "date":
		if _, err := time.Parse(time.DateOnly, s); err != nil {
			return f.Name + " must be a date (YYYY-MM-DD)"
		}
	case "date-time":
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			return f.Name + " must be a date-time (RFC 3339)"
		}
	}
	return ""
}

func formatNumber(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// jsonObject decodes a JSON object into its raw members. Member values
// are the exact bytes of the input, and keys are matched exactly (unlike
// decoding into a struct, which folds case).
func jsonObject(raw json.RawMessage) (map[string]json.RawMessage, error) {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// jsonString decodes a JSON string; anything else, including an absent
// (nil) value, is an error.
func jsonString(raw json.RawMessage) (string, error) {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 || raw[0] != '"' {
		return "", errors.New("not a JSON string")
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// jsonValue decodes any JSON value, keeping numbers as json.Number so
// that integer checks see the number as written.
func jsonValue(raw json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func sortedMemberNames[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
