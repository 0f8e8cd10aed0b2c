package mrtr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// A compiledInput is a validated Input, ready to render and check.
type compiledInput struct {
	in       *Input
	dep      int // index of the input When refers to, or -1
	equals   any // decoded When.Equals
	message  textTemplate
	url      textTemplate
	schema   *formSchema
	schemaJS json.RawMessage // canonical requestedSchema
	sampling *samplingTemplate
	need     capNeed
	usesArgs bool
	// static is the question rendered once at compile time when it reads
	// no arguments (most do): rendering and digesting it again on every
	// round would give the same bytes. Shared and read-only.
	static *question
}

// compileInputs validates inputs and prepares them for Resolve.
func compileInputs(inputs []Input) ([]compiledInput, error) {
	if len(inputs) > MaxInputs {
		return nil, newInputError("inputs", fmt.Sprintf("at most %d inputs may be declared, not %d", MaxInputs, len(inputs)))
	}
	out := make([]compiledInput, len(inputs))
	index := make(map[string]int, len(inputs))
	for i := range inputs {
		in := &inputs[i]
		p := fmt.Sprintf("inputs[%d]", i)
		if err := checkInputName(in.Name); err != nil {
			return nil, &InputError{Path: p + ".name", Err: err}
		}
		if j, dup := index[in.Name]; dup {
			return nil, newInputError(p+".name", fmt.Sprintf("duplicate name %q (also inputs[%d])", in.Name, j))
		}
		c, err := compileInput(in, p)
		if err != nil {
			return nil, err
		}
		c.dep = -1
		if in.When != nil {
			if err := c.compileCondition(inputs, out, index, p+".when"); err != nil {
				return nil, err
			}
		}
		out[i] = c
		index[in.Name] = i
	}
	return out, nil
}

func checkInputName(name string) error {
	if name == "" || len(name) > 64 {
		return errors.New("must be 1 to 64 characters")
	}
	for _, r := range name {
		if !isNameRune(r) {
			return errors.New("may contain only letters, digits, '_' and '-'")
		}
	}
	return nil
}

func compileInput(in *Input, p string) (compiledInput, error) {
	c := compiledInput{in: in}
	forbid := func(set bool, field string) error {
		if set {
			return newInputError(p+"."+field, "not allowed for kind "+in.Kind)
		}
		return nil
	}
	var err error
	switch in.Kind {
	case KindForm:
		if err := errors.Join(forbid(in.URL != "", "url"), forbid(len(in.Sampling) > 0, "sampling")); err != nil {
			return c, err
		}
		if c.message, err = compileMessage(in.Message, p); err != nil {
			return c, err
		}
		if len(in.RequestedSchema) == 0 {
			return c, newInputError(p+".requestedSchema", "is required for kind form")
		}
		if c.schema, err = parseFormSchema(in.RequestedSchema, p+".requestedSchema"); err != nil {
			return c, err
		}
		// Canonicalizing checks the schema is I-JSON; the question keeps the
		// tenant's own property order (forms are shown in it), while its
		// digest is taken over the canonical form, so order never matters
		// to pinning.
		if _, err = Canonicalize(in.RequestedSchema); err != nil {
			return c, &InputError{Path: p + ".requestedSchema", Err: err}
		}
		var compact bytes.Buffer
		if err = json.Compact(&compact, in.RequestedSchema); err != nil {
			return c, &InputError{Path: p + ".requestedSchema", Err: err}
		}
		c.schemaJS = compact.Bytes()
		c.need.form = true
		c.usesArgs = c.message.hasArgs()
	case KindURL:
		if err := errors.Join(forbid(len(in.RequestedSchema) > 0, "requestedSchema"), forbid(len(in.Sampling) > 0, "sampling")); err != nil {
			return c, err
		}
		if c.message, err = compileMessage(in.Message, p); err != nil {
			return c, err
		}
		if in.URL == "" {
			return c, newInputError(p+".url", "is required for kind url")
		}
		if c.url, err = parseURLTemplate(in.URL); err != nil {
			return c, &InputError{Path: p + ".url", Err: err}
		}
		c.need.url = true
		c.usesArgs = c.message.hasArgs() || c.url.hasArgs()
	case KindSampling:
		if err := errors.Join(forbid(in.Message != "", "message"), forbid(in.URL != "", "url"), forbid(len(in.RequestedSchema) > 0, "requestedSchema")); err != nil {
			return c, err
		}
		if len(in.Sampling) == 0 {
			return c, newInputError(p+".sampling", "is required for kind sampling")
		}
		if c.sampling, err = parseSampling(in.Sampling, p+".sampling"); err != nil {
			return c, err
		}
		c.need.sampling = true
		c.need.samplingTools = c.sampling.tools
		c.need.samplingContext = c.sampling.context
		c.usesArgs = c.sampling.hasArgs()
	case KindRoots:
		if err := errors.Join(forbid(in.Message != "", "message"), forbid(in.URL != "", "url"),
			forbid(len(in.RequestedSchema) > 0, "requestedSchema"), forbid(len(in.Sampling) > 0, "sampling")); err != nil {
			return c, err
		}
		c.need.roots = true
	case "":
		return c, newInputError(p+".kind", "is required (form, url, sampling or roots)")
	default:
		return c, newInputError(p+".kind", fmt.Sprintf("unknown kind %q (want form, url, sampling or roots)", in.Kind))
	}
	if !c.usesArgs {
		q, err := c.render(nil, "")
		if err != nil {
			return c, &InputError{Path: p, Err: err}
		}
		c.static = &q
	}
	return c, nil
}

func compileMessage(msg, p string) (textTemplate, error) {
	if strings.TrimSpace(msg) == "" {
		return textTemplate{}, newInputError(p+".message", "is required")
	}
	t, err := parseTemplate(msg)
	if err != nil {
		return textTemplate{}, &InputError{Path: p + ".message", Err: err}
	}
	return t, nil
}

// compileCondition resolves c's When against the inputs declared before
// it; out and index hold those already compiled.
func (c *compiledInput) compileCondition(inputs []Input, out []compiledInput, index map[string]int, p string) error {
	w := c.in.When
	j, ok := index[w.Input]
	if !ok {
		for k := range inputs {
			if inputs[k].Name == w.Input && w.Input != "" {
				return newInputError(p+".input", fmt.Sprintf("%q is not declared before this input; conditions may refer only to earlier inputs", w.Input))
			}
		}
		return newInputError(p+".input", fmt.Sprintf("no input named %q", w.Input))
	}
	dep := &out[j]
	switch w.Action {
	case "", ActionAccept:
	case ActionDecline, ActionCancel:
		if dep.in.Kind == KindSampling || dep.in.Kind == KindRoots {
			return newInputError(p+".action", fmt.Sprintf("a %s input is never declined or cancelled", dep.in.Kind))
		}
	case ActionUnsupported:
		if !dep.in.Optional {
			return newInputError(p+".action", fmt.Sprintf("only an optional input can be unsupported; %q is required", w.Input))
		}
	default:
		return newInputError(p+".action", "must be accept, decline, cancel or unsupported")
	}
	switch {
	case w.Field == "" && len(w.Equals) > 0:
		return newInputError(p+".equals", "requires field")
	case w.Field != "" && len(w.Equals) == 0:
		return newInputError(p+".equals", "is required with field")
	case w.Field != "":
		if w.Action != "" && w.Action != ActionAccept {
			return newInputError(p+".field", "needs action accept: only accepted answers have content")
		}
		if dep.in.Kind != KindForm {
			return newInputError(p+".field", fmt.Sprintf("%q is not a form input", w.Input))
		}
		f := dep.schema.field(w.Field)
		if f == nil {
			return newInputError(p+".field", fmt.Sprintf("%q is not a property of %q", w.Field, w.Input))
		}
		v, err := jsonValue(w.Equals)
		if err != nil {
			return newInputError(p+".equals", "must be valid JSON")
		}
		if why := f.check(v); why != "" {
			return newInputError(p+".equals", "can never match: "+why)
		}
		if err := json.Unmarshal(w.Equals, &c.equals); err != nil {
			return newInputError(p+".equals", "must be valid JSON")
		}
	}
	c.dep = j
	return nil
}

// holds reports whether c's condition holds for its dependency's answer.
func (c *compiledInput) holds(dep Answer) bool {
	w := c.in.When
	want := w.Action
	if want == "" {
		want = ActionAccept
	}
	if dep.Action != want {
		return false
	}
	if w.Field == "" {
		return true
	}
	content, err := jsonObject(dep.Content)
	if err != nil {
		return false
	}
	raw, ok := content[w.Field]
	if !ok {
		return false
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	return reflect.DeepEqual(v, c.equals)
}
