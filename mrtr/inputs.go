package mrtr

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// MaxInputs bounds the inputs one tool, prompt or template declares, so
// every round's questions (and a request's answers) are bounded too.
const MaxInputs = 32

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
