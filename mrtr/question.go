package mrtr

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/opsmcp/platform/internal/jsontext"
	"github.com/opsmcp/platform/mcp"
)

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
	if c.static != nil && reason == "" {
		return *c.static, nil
	}
	var req InputRequest
	var err error
	switch c.in.Kind {
	case KindForm:
		req.Method = mcp.MethodElicit
		req.Params, err = jsontext.Marshal(formParams{
			Message:         withReason(c.message.render(args), reason),
			RequestedSchema: c.schemaJS,
		})
	case KindURL:
		req.Method = mcp.MethodElicit
		req.Params, err = jsontext.Marshal(urlParams{
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
	b, err := jsontext.Marshal(struct {
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
