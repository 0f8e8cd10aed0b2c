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
// tenant writes is one the platform actually enforces on the answer.
type formSchema struct {
	fields   []formField // sorted by name, so checks run in a stable order
	required []string
}

// A formField is one property of a formSchema.
type formField struct {
	name      string
	typ       string // "string", "number", "integer", "boolean" or "array"
	minLength int    // -1 when absent
	maxLength int    // -1 when absent
	format    string
	options   []string // enum, oneOf consts, or the array's item options
	minimum   *float64
	maximum   *float64
	minItems  int // -1 when absent
	maxItems  int // -1 when absent
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
	top, err := jsonObject(raw)
	if err != nil {
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
	propsRaw, ok := top["properties"]
	if !ok {
		return nil, newInputError(path+".properties", "is required")
	}
	props, err := jsonObject(propsRaw)
	if err != nil {
		return nil, newInputError(path+".properties", "must be a JSON object")
	}
	s := &formSchema{}
	for _, name := range sortedMemberNames(props) {
		if name == "" {
			return nil, newInputError(path+".properties", "property names must not be empty")
		}
		f, err := parseFormField(name, props[name], path+".properties."+name)
		if err != nil {
			return nil, err
		}
		s.fields = append(s.fields, f)
	}
	if v, ok := top["required"]; ok {
		var req []string
		if err := json.Unmarshal(v, &req); err != nil {
			return nil, newInputError(path+".required", "must be an array of property names")
		}
		for i, name := range req {
			p := fmt.Sprintf("%s.required[%d]", path, i)
			if s.field(name) == nil {
				return nil, newInputError(p, fmt.Sprintf("%q is not a property", name))
			}
			if slices.Contains(req[:i], name) {
				return nil, newInputError(p, fmt.Sprintf("%q is listed twice", name))
			}
		}
		s.required = req
	}
	return s, nil
}

func (s *formSchema) field(name string) *formField {
	i, ok := slices.BinarySearchFunc(s.fields, name, func(f formField, n string) int { return strings.Compare(f.name, n) })
	if !ok {
		return nil
	}
	return &s.fields[i]
}

func parseFormField(name string, raw json.RawMessage, path string) (formField, error) {
	f := formField{name: name, minLength: -1, maxLength: -1, minItems: -1, maxItems: -1}
	obj, err := jsonObject(raw)
	if err != nil {
		return f, newInputError(path, "must be a JSON object")
	}
	typ, err := jsonString(obj["type"])
	allowed, known := fieldKeywords[typ]
	if err != nil || !known {
		return f, newInputError(path+".type", "must be one of string, number, integer, boolean, array (nested objects are not allowed)")
	}
	f.typ = typ
	for _, k := range sortedMemberNames(obj) {
		if !slices.Contains(allowed, k) {
			return f, newInputError(path+"."+k, fmt.Sprintf("unsupported keyword for type %s", typ))
		}
	}
	for _, k := range []string{"title", "description"} {
		if v, ok := obj[k]; ok {
			if _, err := jsonString(v); err != nil {
				return f, newInputError(path+"."+k, "must be a string")
			}
		}
	}
	switch typ {
	case "string":
		if err := f.parseString(obj, path); err != nil {
			return f, err
		}
	case "number", "integer":
		for _, k := range []string{"minimum", "maximum"} {
			v, ok := obj[k]
			if !ok {
				continue
			}
			var n float64
			if err := json.Unmarshal(v, &n); err != nil {
				return f, newInputError(path+"."+k, "must be a number")
			}
			if k == "minimum" {
				f.minimum = &n
			} else {
				f.maximum = &n
			}
		}
		if f.minimum != nil && f.maximum != nil && *f.minimum > *f.maximum {
			return f, newInputError(path+".maximum", "must not be less than minimum")
		}
	case "array":
		if err := f.parseArray(obj, path); err != nil {
			return f, err
		}
	}
	if v, ok := obj["default"]; ok {
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

func (f *formField) parseString(obj map[string]json.RawMessage, path string) error {
	var err error
	if f.minLength, err = optCount(obj, "minLength", path); err != nil {
		return err
	}
	if f.maxLength, err = optCount(obj, "maxLength", path); err != nil {
		return err
	}
	if f.minLength >= 0 && f.maxLength >= 0 && f.minLength > f.maxLength {
		return newInputError(path+".maxLength", "must not be less than minLength")
	}
	if v, ok := obj["format"]; ok {
		f.format, err = jsonString(v)
		switch {
		case err != nil:
			return newInputError(path+".format", "must be a string")
		case f.format != "email" && f.format != "uri" && f.format != "date" && f.format != "date-time":
			return newInputError(path+".format", "must be one of email, uri, date, date-time")
		}
	}
	enumRaw, hasEnum := obj["enum"]
	oneOfRaw, hasOneOf := obj["oneOf"]
	switch {
	case hasEnum && hasOneOf:
		return newInputError(path+".oneOf", "cannot be combined with enum")
	case hasEnum:
		if f.options, err = parseEnum(enumRaw, path+".enum"); err != nil {
			return err
		}
		if v, ok := obj["enumNames"]; ok {
			var names []string
			if err := json.Unmarshal(v, &names); err != nil || len(names) != len(f.options) {
				return newInputError(path+".enumNames", "must be an array of strings as long as enum")
			}
		}
	case hasOneOf:
		if f.options, err = parseTitledOptions(oneOfRaw, path+".oneOf"); err != nil {
			return err
		}
	}
	if _, ok := obj["enumNames"]; ok && !hasEnum {
		return newInputError(path+".enumNames", "requires enum")
	}
	return nil
}

func (f *formField) parseArray(obj map[string]json.RawMessage, path string) error {
	var err error
	if f.minItems, err = optCount(obj, "minItems", path); err != nil {
		return err
	}
	if f.maxItems, err = optCount(obj, "maxItems", path); err != nil {
		return err
	}
	if f.minItems >= 0 && f.maxItems >= 0 && f.minItems > f.maxItems {
		return newInputError(path+".maxItems", "must not be less than minItems")
	}
	itemsRaw, ok := obj["items"]
	if !ok {
		return newInputError(path+".items", "is required (arrays must be multi-select enums of strings)")
	}
	items, err := jsonObject(itemsRaw)
	if err != nil {
		return newInputError(path+".items", "must be a JSON object")
	}
	for _, k := range sortedMemberNames(items) {
		if k != "type" && k != "enum" && k != "anyOf" {
			return newInputError(path+".items."+k, "unsupported keyword (allowed: type, enum, anyOf)")
		}
	}
	if v, ok := items["type"]; ok {
		if typ, err := jsonString(v); err != nil || typ != "string" {
			return newInputError(path+".items.type", `must be "string"`)
		}
	}
	enumRaw, hasEnum := items["enum"]
	anyOfRaw, hasAnyOf := items["anyOf"]
	switch {
	case hasEnum == hasAnyOf:
		return newInputError(path+".items", "needs exactly one of enum or anyOf")
	case hasEnum:
		if _, ok := items["type"]; !ok {
			return newInputError(path+".items.type", `is required with enum and must be "string"`)
		}
		f.options, err = parseEnum(enumRaw, path+".items.enum")
	default:
		f.options, err = parseTitledOptions(anyOfRaw, path+".items.anyOf")
	}
	return err
}

func optCount(obj map[string]json.RawMessage, key, path string) (int, error) {
	v, ok := obj[key]
	if !ok {
		return -1, nil
	}
	var n int
	if err := json.Unmarshal(v, &n); err != nil || n < 0 {
		return -1, newInputError(path+"."+key, "must be a non-negative integer")
	}
	return n, nil
}

func parseEnum(raw json.RawMessage, path string) ([]string, error) {
	var opts []string
	if err := json.Unmarshal(raw, &opts); err != nil || len(opts) == 0 {
		return nil, newInputError(path, "must be a non-empty array of strings")
	}
	for i, o := range opts {
		if slices.Contains(opts[:i], o) {
			return nil, newInputError(fmt.Sprintf("%s[%d]", path, i), fmt.Sprintf("duplicate option %q", o))
		}
	}
	return opts, nil
}

func parseTitledOptions(raw json.RawMessage, path string) ([]string, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil || len(list) == 0 {
		return nil, newInputError(path, "must be a non-empty array of {const, title} objects")
	}
	opts := make([]string, 0, len(list))
	for i, item := range list {
		p := fmt.Sprintf("%s[%d]", path, i)
		obj, err := jsonObject(item)
		if err != nil {
			return nil, newInputError(p, "must be a {const, title} object")
		}
		for _, k := range sortedMemberNames(obj) {
			if k != "const" && k != "title" {
				return nil, newInputError(p+"."+k, "unsupported keyword (allowed: const, title)")
			}
		}
		c, err := jsonString(obj["const"])
		if err != nil {
			return nil, newInputError(p+".const", "must be a string")
		}
		if _, err := jsonString(obj["title"]); err != nil {
			return nil, newInputError(p+".title", "must be a string")
		}
		if slices.Contains(opts, c) {
			return nil, newInputError(p+".const", fmt.Sprintf("duplicate option %q", c))
		}
		opts = append(opts, c)
	}
	return opts, nil
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
		raw, ok := content[f.name]
		if !ok {
			continue
		}
		v, err := jsonValue(raw)
		if err != nil {
			return f.name + " is not valid JSON"
		}
		if why := f.check(v); why != "" {
			return why
		}
	}
	return ""
}

// check checks one decoded value (json.Number for numbers) against f.
func (f *formField) check(v any) string {
	switch f.typ {
	case "string":
		s, ok := v.(string)
		if !ok {
			return f.name + " must be a string"
		}
		return f.checkString(s)
	case "number", "integer":
		n, ok := v.(json.Number)
		if !ok {
			return f.name + " must be a number"
		}
		x, err := n.Float64()
		if err != nil || math.IsInf(x, 0) {
			return f.name + " must be a finite number"
		}
		if f.typ == "integer" && x != math.Trunc(x) {
			return f.name + " must be an integer"
		}
		if f.minimum != nil && x < *f.minimum {
			return f.name + " must be at least " + formatNumber(*f.minimum)
		}
		if f.maximum != nil && x > *f.maximum {
			return f.name + " must be at most " + formatNumber(*f.maximum)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return f.name + " must be true or false"
		}
	case "array":
		list, ok := v.([]any)
		if !ok {
			return f.name + " must be a list of strings"
		}
		for _, item := range list {
			s, ok := item.(string)
			if !ok {
				return f.name + " must be a list of strings"
			}
			if !slices.Contains(f.options, s) {
				return f.name + " must contain only the listed options"
			}
		}
		if f.minItems >= 0 && len(list) < f.minItems {
			return fmt.Sprintf("%s needs at least %d selection(s)", f.name, f.minItems)
		}
		if f.maxItems >= 0 && len(list) > f.maxItems {
			return fmt.Sprintf("%s allows at most %d selection(s)", f.name, f.maxItems)
		}
	}
	return ""
}

func (f *formField) checkString(s string) string {
	if f.options != nil {
		if !slices.Contains(f.options, s) {
			return f.name + " must be one of the listed options"
		}
		return ""
	}
	n := utf8.RuneCountInString(s)
	if f.minLength >= 0 && n < f.minLength {
		return fmt.Sprintf("%s must be at least %d characters", f.name, f.minLength)
	}
	if f.maxLength >= 0 && n > f.maxLength {
		return fmt.Sprintf("%s must be at most %d characters", f.name, f.maxLength)
	}
	switch f.format {
	case "email":
		if a, err := mail.ParseAddress(s); err != nil || a.Name != "" || a.Address != s {
			return f.name + " must be an email address"
		}
	case "uri":
		if u, err := url.Parse(s); err != nil || u.Scheme == "" {
			return f.name + " must be an absolute URI"
		}
	case "date":
		if _, err := time.Parse(time.DateOnly, s); err != nil {
			return f.name + " must be a date (YYYY-MM-DD)"
		}
	case "date-time":
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			return f.name + " must be a date-time (RFC 3339)"
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
