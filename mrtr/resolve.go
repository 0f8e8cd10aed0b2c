package mrtr

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/opsmcp/platform/mcp"
)

// Kinds of declared input: what the platform asks the client for.
const (
	KindForm     = "form"     // elicitation/create, form mode
	KindURL      = "url"      // elicitation/create, URL mode
	KindSampling = "sampling" // sampling/createMessage
	KindRoots    = "roots"    // roots/list
)

// ActionUnsupported is the Answer action of an optional input the client
// could not be asked, because its request did not declare the capability.
// It is not a wire action: the client never sends it, and it is never
// recorded, since capabilities are declared per request and a later round
// may declare them.
const ActionUnsupported = "unsupported"

// RecordVersion is the version of the Record format this package writes.
// A record of any other version is treated as no progress.
const RecordVersion = 1

// An Input is one piece of information a tenant's tool, prompt or resource
// template declares it needs before its webhook is called. The platform
// asks for it across as many rounds as it takes, so the webhook only ever
// sees complete answers and never deals with rounds itself.
//
// Inputs are written by tenants through a REST API and stored as JSON;
// check them with ValidateInputs when they are registered.
type Input struct {
	// Name is the key under which the question is asked on the wire and
	// the answer reaches the webhook: 1 to 64 of [A-Za-z0-9_-]. Names
	// never contain '.', which keeps them apart from the '.'-prefixed keys
	// the platform uses for webhook-driven input.
	Name string `json:"name"`

	// Kind is one of KindForm, KindURL, KindSampling or KindRoots.
	Kind string `json:"kind"`

	// Message is the text shown to the user, for form and url inputs. It
	// is a template: {{args.NAME}} is replaced by the top-level call
	// argument NAME (missing or null renders as ""). Build it only from
	// arguments: volatile data would change the question every round.
	Message string `json:"message,omitempty"`

	// RequestedSchema is the form's schema: a flat object whose properties
	// are the spec's primitive schemas (string, number, integer, boolean,
	// single- and multi-select enums of strings).
	RequestedSchema json.RawMessage `json:"requestedSchema,omitempty"`

	// URL is the page a url input sends the user to. It is a template
	// like Message, but placeholders may appear only after the host, and
	// substituted values are escaped for the path or query.
	URL string `json:"url,omitempty"`

	// Sampling is the sampling input's CreateMessageRequestParams. The
	// text of text content blocks and the systemPrompt are templates.
	Sampling json.RawMessage `json:"sampling,omitempty"`

	// When, if set, makes the input conditional on the answer to an
	// earlier input.
	When *Condition `json:"when,omitempty"`

	// Optional inputs do not hold up the call: their decline or cancel is
	// not listed in Resolution.Refused, and a client that lacks the needed
	// capability gets no -32021 error; the input resolves as
	// ActionUnsupported instead.
	Optional bool `json:"optional,omitempty"`
}

// A Condition makes an input applicable only when an earlier input's
// outcome matches it. A condition on an input that is still unanswered
// defers the dependent input to a later round; a condition that does not
// match skips it (it is neither asked nor answered).
type Condition struct {
	// Input names an input declared earlier in the list, which rules out
	// cycles by construction.
	Input string `json:"input"`

	// Action is the outcome to match: accept (the default), decline,
	// cancel, or unsupported (optional inputs only).
	Action string `json:"action,omitempty"`

	// Field and Equals, set together, further require that the accepted
	// form content has Field equal to Equals (as JSON values).
	Field  string          `json:"field,omitempty"`
	Equals json.RawMessage `json:"equals,omitempty"`
}

// InputError reports an invalid input declaration. Path locates the
// offending value, as in "inputs[2].requestedSchema.properties.age.type",
// so that a tenant can be told exactly what to fix.
type InputError struct {
	Path string
	Err  error
}

func (e *InputError) Error() string { return e.Path + ": " + e.Err.Error() }

func (e *InputError) Unwrap() error { return e.Err }

func newInputError(path, msg string) error {
	return &InputError{Path: path, Err: errors.New(msg)}
}

// MissingCapabilityError reports that a required input cannot be asked
// because the client's request did not declare the capability it needs.
// The caller answers JSON-RPC -32021 with data.requiredCapabilities set to
// Required.
type MissingCapabilityError struct {
	// Required holds every missing capability, merged, in the shape the
	// spec's requiredCapabilities takes (e.g. {"elicitation":{}}).
	Required ClientCapabilities

	// Inputs names the inputs that could not be asked, in declaration
	// order.
	Inputs []string
}

func (e *MissingCapabilityError) Error() string {
	var needs []string
	if el := e.Required.Elicitation; el != nil {
		if el.Form != nil || el.URL == nil {
			needs = append(needs, "form elicitation")
		}
		if el.URL != nil {
			needs = append(needs, "URL elicitation")
		}
	}
	if s := e.Required.Sampling; s != nil {
		switch {
		case s.Tools == nil && s.Context == nil:
			needs = append(needs, "sampling")
		default:
			if s.Tools != nil {
				needs = append(needs, "sampling.tools")
			}
			if s.Context != nil {
				needs = append(needs, "sampling.context")
			}
		}
	}
	if e.Required.Roots != nil {
		needs = append(needs, "roots")
	}
	names := make([]string, len(e.Inputs))
	for i, n := range e.Inputs {
		names[i] = strconv.Quote(n)
	}
	return fmt.Sprintf("mrtr: client did not declare the %s capability required by input %s",
		strings.Join(needs, ", "), strings.Join(names, ", "))
}

// A Record is the resolver's progress, sealed into the request state
// between rounds. It is opaque to the sealing layer; use EncodeRecord and
// DecodeRecord. Short JSON names keep the sealed token small.
//
// A record is rebuilt every round from what is resolved in that round, so
// outcomes of inputs that are now skipped, waiting on a reworded earlier
// question, or no longer declared do not survive.
type Record struct {
	// V is RecordVersion.
	V int `json:"v"`

	// Outcomes holds the resolved inputs by name.
	Outcomes map[string]Outcome `json:"o,omitempty"`

	// Asked holds, by name, the digest of the question exactly as it was
	// asked in the last round. A fresh answer counts only if the question
	// it answers is the one this round would ask.
	Asked map[string]string `json:"k,omitempty"`

	// Rejected holds, by name, the reason appended to a question re-asked
	// because its previous answer was rejected. The next round re-renders
	// that exact question to check the answer is for it.
	Rejected map[string]string `json:"r,omitempty"`
}

// An Outcome is one resolved input.
type Outcome struct {
	// Action is accept, decline or cancel. Sampling and roots answers are
	// recorded as accept.
	Action string `json:"a"`

	// Data is the client's content, as sent: the form content, the
	// CreateMessageResult or the ListRootsResult (compacted).
	Data json.RawMessage `json:"d,omitempty"`

	// Q is the digest of the question answered. The outcome is used only
	// while the input still renders to that question.
	Q string `json:"q"`
}

// EncodeRecord encodes r for sealing.
func EncodeRecord(r Record) ([]byte, error) {
	b, err := marshalNoEscape(r)
	if err != nil {
		return nil, fmt.Errorf("mrtr: encoding resolver record: %w", err)
	}
	return b, nil
}

// DecodeRecord decodes a sealed record. Anything it cannot decode, or a
// record of another version, yields the empty Record: losing progress only
// means asking again, whereas failing would strand the flow.
func DecodeRecord(b []byte) Record {
	var r Record
	if len(b) == 0 || json.Unmarshal(b, &r) != nil || r.V != RecordVersion {
		return Record{}
	}
	return r
}

// An Answer is what the tenant's webhook receives for one input.
type Answer struct {
	// Action is accept, decline, cancel or ActionUnsupported.
	Action string `json:"action"`

	// Content is the form content (form inputs), the CreateMessageResult
	// (sampling) or the ListRootsResult (roots), exactly as the client
	// sent it apart from whitespace. URL inputs have none.
	Content json.RawMessage `json:"content,omitempty"`
}

// A Resolution is the state of a call's declared inputs after one round.
type Resolution struct {
	// Done reports that every applicable input is resolved: the webhook
	// can be called with Answers. Otherwise Open holds the questions to
	// send back in an InputRequiredResult.
	Done bool

	// Answers holds the resolved inputs by name. Skipped inputs (whose
	// condition does not hold) are absent.
	Answers map[string]Answer

	// Open holds the questions to ask now, by input name: every open
	// question whose condition is already decided, batched.
	Open map[string]InputRequest

	// Record is the progress to seal into the next request state.
	Record Record

	// Refused lists, in declaration order, the required (non-optional)
	// inputs the user declined or cancelled. The call may proceed (the
	// webhook sees the decline in Answers) or fail; the caller decides.
	Refused []string
}

// ValidateInputs checks a tenant's input declarations when they are
// registered, so that a mistake is reported to the tenant then rather
// than to a user mid-call. The error, if any, is an *InputError locating
// the first problem.
func ValidateInputs(inputs []Input) error {
	_, err := compileInputs(inputs)
	return err
}

// Resolve runs one round of a call's declared inputs.
//
// args are the call's arguments (a JSON object; absent or null for none),
// prev the record from the verified request state (the zero Record on the
// first round), responses the request's inputResponses, and caps the
// capabilities the request declares.
//
// Every question is pinned by a digest of its rendered form. A recorded
// outcome is reused only while the input renders to the same question; a
// fresh response is used only if the question it answers is the one asked
// in the last round, as recorded in prev. An answer that arrives without
// the echoed state therefore is asked again, not consumed, and an edit to
// the tenant's catalogue mid-flow asks the reworded question again.
// Unknown response keys and recorded outcomes of undeclared inputs are
// ignored. A fresh answer of the wrong shape, or one that does not satisfy
// the form's schema, is asked again, form and URL questions with the
// reason appended to their message.
//
// Inputs are processed in declaration order, and the result depends only
// on the parameters, so every replica renders the same questions, digests
// and record.
//
// If a required open question needs a capability the client did not
// declare, Resolve returns a *MissingCapabilityError. Other errors mean
// the inputs or arguments are invalid.
func Resolve(inputs []Input, args json.RawMessage, prev Record, responses map[string]json.RawMessage, caps ClientCapabilities) (*Resolution, error) {
	ins, err := CompileInputs(inputs)
	if err != nil {
		return nil, fmt.Errorf("mrtr: resolve: invalid inputs: %w", err)
	}
	return ins.Resolve(args, prev, responses, caps)
}

// Inputs are declarations checked and compiled once (when a catalogue is
// loaded), so that resolving a round does not re-validate them. An Inputs
// is immutable and safe for concurrent use.
type Inputs struct {
	compiled []compiledInput
}

// CompileInputs checks and compiles declarations; the error is an
// *InputError, as from ValidateInputs.
func CompileInputs(inputs []Input) (*Inputs, error) {
	compiled, err := compileInputs(inputs)
	if err != nil {
		return nil, err
	}
	return &Inputs{compiled: compiled}, nil
}

// Len is the number of declared inputs.
func (ins *Inputs) Len() int {
	if ins == nil {
		return 0
	}
	return len(ins.compiled)
}

// Resolve is the package-level Resolve over compiled declarations.
func (ins *Inputs) Resolve(args json.RawMessage, prev Record, responses map[string]json.RawMessage, caps ClientCapabilities) (*Resolution, error) {
	compiled := ins.compiled
	var err error
	var argv map[string]any
	for i := range compiled {
		if compiled[i].usesArgs {
			if argv, err = decodeArgs(args); err != nil {
				return nil, fmt.Errorf("mrtr: resolve: %w", err)
			}
			break
		}
	}
	if prev.V != RecordVersion {
		prev = Record{}
	}

	res := &Resolution{
		Answers: make(map[string]Answer),
		Open:    make(map[string]InputRequest),
		Record:  Record{V: RecordVersion},
	}
	states := make([]inputProgress, len(compiled))
	var missing capNeed
	var missingBy []string
	for i := range compiled {
		c := &compiled[i]
		name := c.in.Name
		if c.dep >= 0 {
			switch states[c.dep] {
			case inputWaiting, inputAsked:
				states[i] = inputWaiting
				continue
			case inputSkipped:
				states[i] = inputSkipped
				continue
			}
			if !c.holds(res.Answers[compiled[c.dep].in.Name]) {
				states[i] = inputSkipped
				continue
			}
		}

		q, err := c.render(argv, "")
		if err != nil {
			return nil, fmt.Errorf("mrtr: resolve: input %q: %w", name, err)
		}

		// A recorded outcome for this very question.
		if o, ok := prev.Outcomes[name]; ok && o.Q == q.digest {
			if out, ok := c.restore(o); ok {
				res.resolve(c, out)
				states[i] = inputDone
				continue
			}
		}

		// A fresh answer to the question asked last round.
		ask, reason := q, ""
		if raw, ok := responses[name]; ok && prev.Asked[name] != "" {
			want := q.digest
			if r := prev.Rejected[name]; r != "" {
				rq, err := c.render(argv, r)
				if err != nil {
					return nil, fmt.Errorf("mrtr: resolve: input %q: %w", name, err)
				}
				want = rq.digest
			}
			if prev.Asked[name] == want {
				out, why := c.accept(raw)
				if why == "" {
					out.Q = q.digest
					res.resolve(c, out)
					states[i] = inputDone
					continue
				}
				if c.in.Kind == KindForm || c.in.Kind == KindURL {
					reason = why
					if ask, err = c.render(argv, reason); err != nil {
						return nil, fmt.Errorf("mrtr: resolve: input %q: %w", name, err)
					}
				}
			}
		}

		// Nothing usable: ask, if the client can be asked.
		if need := c.need.missingFrom(caps); need != (capNeed{}) {
			if c.in.Optional {
				res.Answers[name] = Answer{Action: ActionUnsupported}
				states[i] = inputDone
				continue
			}
			missing = missing.union(need)
			missingBy = append(missingBy, name)
			states[i] = inputAsked
			continue
		}
		res.Open[name] = ask.req
		if res.Record.Asked == nil {
			res.Record.Asked = make(map[string]string)
		}
		res.Record.Asked[name] = ask.digest
		if reason != "" {
			if res.Record.Rejected == nil {
				res.Record.Rejected = make(map[string]string)
			}
			res.Record.Rejected[name] = reason
		}
		states[i] = inputAsked
	}
	if len(missingBy) > 0 {
		return nil, &MissingCapabilityError{Required: missing.capabilities(), Inputs: missingBy}
	}
	res.Done = len(res.Open) == 0
	return res, nil
}

// resolve records c's outcome in r.
func (r *Resolution) resolve(c *compiledInput, o Outcome) {
	r.Answers[c.in.Name] = Answer{Action: o.Action, Content: o.Data}
	if r.Record.Outcomes == nil {
		r.Record.Outcomes = make(map[string]Outcome)
	}
	r.Record.Outcomes[c.in.Name] = o
	if !c.in.Optional && (o.Action == ActionDecline || o.Action == ActionCancel) {
		r.Refused = append(r.Refused, c.in.Name)
	}
}

// inputProgress is where an input stands within one Resolve pass.
type inputProgress uint8

const (
	inputWaiting inputProgress = iota // its condition depends on an unresolved input
	inputSkipped                      // its condition does not hold
	inputAsked                        // asked this round (or unaskable)
	inputDone                         // answered, recorded or unsupported
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
}

// compileInputs validates inputs and prepares them for Resolve.
func compileInputs(inputs []Input) ([]compiledInput, error) {
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

// A question is a rendered input request and its digest.
type question struct {
	req    InputRequest
	digest string
}

type formParams struct {
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requestedSchema"`
}

type urlParams struct {
	Mode    string `json:"mode"`
	Message string `json:"message"`
	URL     string `json:"url"`
}

// rootsParams is the params of roots/list: an empty object, as the
// conformance suite expects, rather than absent.
var rootsParams = json.RawMessage(`{}`)

// render renders c's question. A non-empty reason (why the previous
// answer was rejected) is appended to form and URL messages.
func (c *compiledInput) render(args map[string]any, reason string) (question, error) {
	var req InputRequest
	var err error
	switch c.in.Kind {
	case KindForm:
		req.Method = mcp.MethodElicit
		req.Params, err = marshalNoEscape(formParams{
			Message:         withReason(c.message.render(args), reason),
			RequestedSchema: c.schemaJS,
		})
	case KindURL:
		req.Method = mcp.MethodElicit
		req.Params, err = marshalNoEscape(urlParams{
			Mode:    "url",
			Message: withReason(c.message.render(args), reason),
			URL:     c.url.render(args),
		})
	case KindSampling:
		req.Method = mcp.MethodCreateMessage
		req.Params, err = c.sampling.render(args)
	case KindRoots:
		req.Method = mcp.MethodListRoots
		req.Params = rootsParams
	}
	if err != nil {
		return question{}, fmt.Errorf("rendering question: %w", err)
	}
	d, err := questionDigest(req)
	if err != nil {
		return question{}, err
	}
	return question{req: req, digest: d}, nil
}

func withReason(msg, reason string) string {
	if reason == "" {
		return msg
	}
	return msg + "\n\n(Previous answer rejected: " + reason + ")"
}

// questionDigest pins a question's identity:
// base64url-nopad(SHA-256(JCS({"method":…,"params":…}))[:16]), 22
// characters. Canonicalization makes it independent of how the params
// happen to be serialized, so replicas agree on it.
func questionDigest(req InputRequest) (string, error) {
	b, err := marshalNoEscape(struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}{req.Method, req.Params})
	if err != nil {
		return "", fmt.Errorf("digesting question: %w", err)
	}
	canon, err := Canonicalize(b)
	if err != nil {
		return "", fmt.Errorf("digesting question: %w", err)
	}
	sum := sha256.Sum256(canon)
	return base64.RawURLEncoding.EncodeToString(sum[:16]), nil
}

// restore checks a recorded outcome against the live declaration, as if
// it had just arrived: state is sealed, but a catalogue edit may have
// tightened the schema since.
func (c *compiledInput) restore(o Outcome) (Outcome, bool) {
	switch c.in.Kind {
	case KindForm:
		switch o.Action {
		case ActionAccept:
			return o, c.schema.checkContent(o.Data) == ""
		case ActionDecline, ActionCancel:
			return o, len(o.Data) == 0
		}
	case KindURL:
		switch o.Action {
		case ActionAccept, ActionDecline, ActionCancel:
			return o, len(o.Data) == 0
		}
	case KindSampling:
		return o, o.Action == ActionAccept && checkSamplingResult(o.Data) == ""
	case KindRoots:
		return o, o.Action == ActionAccept && checkRootsResult(o.Data) == ""
	}
	return o, false
}

// accept checks a fresh response for c. It returns the outcome (without
// Q), or a reason the response was rejected.
func (c *compiledInput) accept(raw json.RawMessage) (Outcome, string) {
	switch c.in.Kind {
	case KindForm, KindURL:
		obj, err := jsonObject(raw)
		if err != nil {
			return Outcome{}, "the answer is not an elicitation result"
		}
		action, err := jsonString(obj["action"])
		if err != nil || (action != ActionAccept && action != ActionDecline && action != ActionCancel) {
			return Outcome{}, "the answer's action must be accept, decline or cancel"
		}
		if c.in.Kind == KindURL || action != ActionAccept {
			// Content is defined only for an accepted form; ignore any.
			return Outcome{Action: action}, ""
		}
		content, ok := obj["content"]
		if !ok || bytes.Equal(bytes.TrimSpace(content), []byte("null")) {
			return Outcome{}, "the answer was accepted without content"
		}
		if why := c.schema.checkContent(content); why != "" {
			return Outcome{}, why
		}
		return Outcome{Action: ActionAccept, Data: compactJSON(content)}, ""
	case KindSampling:
		if why := checkSamplingResult(raw); why != "" {
			return Outcome{}, why
		}
		return Outcome{Action: ActionAccept, Data: compactJSON(raw)}, ""
	case KindRoots:
		if why := checkRootsResult(raw); why != "" {
			return Outcome{}, why
		}
		return Outcome{Action: ActionAccept, Data: compactJSON(raw)}, ""
	}
	return Outcome{}, "unknown input kind"
}

// compact strips insignificant whitespace from valid JSON, leaving every
// string (escapes included) as the client wrote it.
func compactJSON(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return append(json.RawMessage(nil), raw...)
	}
	return b.Bytes()
}

// marshalNoEscape is json.Marshal without HTML escaping, so that messages
// reach the client as written.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// A capNeed is a set of client capabilities.
type capNeed struct {
	form, url, sampling, samplingTools, samplingContext, roots bool
}

// missingFrom returns the part of n that caps does not declare.
func (n capNeed) missingFrom(caps ClientCapabilities) capNeed {
	var m capNeed
	m.form = n.form && !caps.CanElicitForm()
	m.url = n.url && !caps.CanElicitURL()
	if n.sampling && !caps.CanSample(false) {
		m.sampling = true
		m.samplingTools = n.samplingTools
		m.samplingContext = n.samplingContext
	} else if n.sampling {
		m.samplingTools = n.samplingTools && !caps.CanSample(true)
		m.samplingContext = n.samplingContext && caps.Sampling.Context == nil
		m.sampling = m.samplingTools || m.samplingContext
	}
	m.roots = n.roots && !caps.CanListRoots()
	return m
}

func (n capNeed) union(o capNeed) capNeed {
	return capNeed{
		form:            n.form || o.form,
		url:             n.url || o.url,
		sampling:        n.sampling || o.sampling,
		samplingTools:   n.samplingTools || o.samplingTools,
		samplingContext: n.samplingContext || o.samplingContext,
		roots:           n.roots || o.roots,
	}
}

// capabilities expresses n as the spec's requiredCapabilities object. Form
// elicitation alone is the bare {"elicitation":{}}, which means form.
func (n capNeed) capabilities() ClientCapabilities {
	var c ClientCapabilities
	if n.form || n.url {
		c.Elicitation = &ElicitationCapability{}
		if n.url {
			c.Elicitation.URL = &struct{}{}
			if n.form {
				c.Elicitation.Form = &struct{}{}
			}
		}
	}
	if n.sampling {
		c.Sampling = &SamplingCapability{}
		if n.samplingTools {
			c.Sampling.Tools = &struct{}{}
		}
		if n.samplingContext {
			c.Sampling.Context = &struct{}{}
		}
	}
	if n.roots {
		c.Roots = &RootsCapability{}
	}
	return c
}
