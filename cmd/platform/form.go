package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/opsmcp/platform/mrtr"
)

// field is one form field as the terminal asks it: the field as mrtr
// reads it from the requested schema, and its default decoded.
type field struct {
	mrtr.Field
	def any // nil when there is none
}

// formFields reads a requested schema's fields, in their order.
func formFields(schema json.RawMessage) ([]field, error) {
	form, err := mrtr.ReadForm(schema)
	if err != nil {
		return nil, err
	}
	fields := make([]field, len(form.Fields))
	for i, f := range form.Fields {
		fields[i].Field = f
		if f.Default != nil {
			_ = json.Unmarshal(f.Default, &fields[i].def)
		}
	}
	return fields, nil
}

// bounds are the least and most a field takes: a number's value, or a
// multi-select's number of choices; nil when unbounded.
func (f *field) bounds() (lo, hi *float64) {
	if !f.Multi {
		return f.Minimum, f.Maximum
	}
	asFloat := func(n *int) *float64 {
		if n == nil {
			return nil
		}
		v := float64(*n)
		return &v
	}
	return asFloat(f.MinItems), asFloat(f.MaxItems)
}

// prompt renders the field's question line.
func (f *field) prompt() string {
	label := f.Name
	if f.Title != "" && f.Title != f.Name {
		label = f.Title + " (" + f.Name + ")"
	}
	var hints []string
	typ := f.Type
	if f.Multi {
		typ = "choose any, comma-separated"
	}
	if typ != "" {
		hints = append(hints, typ)
	}
	if f.Format != "" {
		hints = append(hints, f.Format)
	}
	if f.Required {
		hints = append(hints, "required")
	}
	lo, hi := f.bounds()
	if lo != nil {
		hints = append(hints, "min "+strconv.FormatFloat(*lo, 'f', -1, 64))
	}
	if hi != nil {
		hints = append(hints, "max "+strconv.FormatFloat(*hi, 'f', -1, 64))
	}
	s := label
	if f.Description != "" {
		s += " - " + f.Description
	}
	if len(hints) > 0 {
		s += " (" + strings.Join(hints, ", ") + ")"
	}
	if len(f.Options) > 0 {
		var opts []string
		for i, o := range f.Options {
			s := fmt.Sprintf("%d) %s", i+1, o.Value)
			if o.Title != "" && o.Title != o.Value {
				s += " " + o.Title
			}
			opts = append(opts, s)
		}
		s += " [" + strings.Join(opts, "  ") + "]"
	}
	if f.Type == "boolean" {
		s += " [y/n]"
	}
	if f.def != nil {
		s += fmt.Sprintf(" (default %v)", f.def)
	}
	return s
}

// parse reads a typed answer; set is false when an optional field was
// left empty.
func (f *field) parse(line string, required bool) (any, bool, error) {
	v := strings.TrimSpace(line)
	if f.Type == "string" && !f.Multi && len(f.Options) == 0 {
		v = strings.TrimRight(line, "\r\n") // keep a string's own spaces
		if strings.TrimSpace(v) == "" {
			v = ""
		}
	}
	if v == "" {
		switch {
		case f.def != nil:
			return f.def, true, nil
		case required:
			return nil, false, errors.New("an answer is required")
		}
		return nil, false, nil
	}
	lo, hi := f.bounds()
	if f.Multi {
		var out []string
		for _, part := range strings.Split(v, ",") {
			choice, err := f.choice(strings.TrimSpace(part))
			if err != nil {
				return nil, false, err
			}
			out = append(out, choice)
		}
		if lo != nil && float64(len(out)) < *lo || hi != nil && float64(len(out)) > *hi {
			return nil, false, errors.New("choose between the minimum and maximum number of values")
		}
		return out, true, nil
	}
	if len(f.Options) > 0 {
		c, err := f.choice(v)
		return c, err == nil, err
	}
	switch f.Type {
	case "boolean":
		switch strings.ToLower(v) {
		case "y", "yes", "true", "t", "1":
			return true, true, nil
		case "n", "no", "false", "f", "0":
			return false, true, nil
		}
		return nil, false, errors.New("answer y or n")
	case "integer", "number":
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
			return nil, false, fmt.Errorf("%q is not a number", v)
		}
		if f.Type == "integer" && n != math.Trunc(n) {
			return nil, false, fmt.Errorf("%q is not a whole number", v)
		}
		if lo != nil && n < *lo || hi != nil && n > *hi {
			return nil, false, fmt.Errorf("%s is out of range", v)
		}
		if f.Type == "integer" {
			return int64(n), true, nil
		}
		return n, true, nil
	}
	n := len([]rune(v))
	if f.MinLength != nil && n < *f.MinLength || f.MaxLength != nil && n > *f.MaxLength {
		return nil, false, errors.New("the answer's length is out of range")
	}
	return v, true, nil
}

// choice maps a typed choice (a value, its number or its title) to an
// option's value.
func (f *field) choice(v string) (string, error) {
	for _, o := range f.Options {
		if o.Value == v {
			return o.Value, nil
		}
	}
	if i, err := strconv.Atoi(v); err == nil && i >= 1 && i <= len(f.Options) {
		return f.Options[i-1].Value, nil
	}
	for _, o := range f.Options {
		if o.Title != "" && strings.EqualFold(o.Title, v) {
			return o.Value, nil
		}
	}
	values := make([]string, len(f.Options))
	for i, o := range f.Options {
		values[i] = o.Value
	}
	return "", fmt.Errorf("%q is not one of %s", v, strings.Join(values, ", "))
}

// fromJSON checks an answer from the answers file, converting a string
// where the field wants a number or boolean.
func (f *field) fromJSON(raw json.RawMessage) (any, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil && f.Type != "string" && !f.Multi {
		v, _, err := f.parse(s, true)
		return v, err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case string:
		if len(f.Options) > 0 {
			return f.choice(x)
		}
		return x, nil
	case bool:
		if f.Type != "boolean" && f.Type != "" {
			return nil, fmt.Errorf("%v is not a %s", x, f.Type)
		}
	case float64:
		if f.Type != "number" && f.Type != "integer" && f.Type != "" {
			return nil, fmt.Errorf("%v is not a %s", x, f.Type)
		}
		if f.Type == "integer" && x != math.Trunc(x) {
			return nil, fmt.Errorf("%v is not a whole number", x)
		}
	case []any:
		var out []string
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, errors.New("want a list of strings")
			}
			c, err := f.choice(s)
			if err != nil && len(f.Options) > 0 {
				return nil, err
			}
			if err != nil {
				c = s
			}
			out = append(out, c)
		}
		return out, nil
	}
	return v, nil
}
