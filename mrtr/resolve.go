package mrtr

import (
	"encoding/json"
	"fmt"
)

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
