package tenants

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
)

// params holds every field any method of ours reads from params. Unknown
// fields are ignored, as the protocol asks.
type params struct {
	Meta           map[string]json.RawMessage `json:"_meta"`
	Name           json.RawMessage            `json:"name"`
	URI            json.RawMessage            `json:"uri"`
	Arguments      json.RawMessage            `json:"arguments"`
	Cursor         json.RawMessage            `json:"cursor"`
	InputResponses json.RawMessage            `json:"inputResponses"`
	RequestState   json.RawMessage            `json:"requestState"`
	Ref            json.RawMessage            `json:"ref"`
	Argument       json.RawMessage            `json:"argument"`
	Context        json.RawMessage            `json:"context"`
	Notifications  json.RawMessage            `json:"notifications"`
}

// request is one inbound JSON-RPC request, decoded and, once
// checkEnvelope passed, checked against its headers. Decoding and
// checking only fill in this value; they have no other effect.
type request struct {
	id     json.RawMessage
	method string
	p      params
	// version is _meta's protocol version as sent.
	version string
	caps    mrtr.ClientCapabilities
	// rawCaps is the client's capabilities exactly as sent.
	rawCaps json.RawMessage
	client  ClientInfo
	// progressToken and logLevel decide whether the answer streams.
	progressToken json.RawMessage
	logLevel      string
	name          string // params.name, decoded
	uri           string // params.uri, decoded
}

// wrapped is a JSON-RPC message as it arrives.
type wrapped struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
	// Result and Error are present only on responses, which a client must
	// never POST at 2026-07-28.
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// parseRequest decodes the JSON-RPC envelope and the params. On error
// the returned request still carries what was read (the id, the
// method), so the error can be answered and recorded.
func parseRequest(body []byte) (*request, *rpcError) {
	q := &request{}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return q, newError(http.StatusBadRequest, mcp.CodeInvalidRequest, "Empty request body", nil)
	}
	if trimmed[0] == '[' {
		return q, newError(http.StatusBadRequest, mcp.CodeInvalidRequest, "Batches are not supported: send one JSON-RPC message per POST", nil)
	}
	var m wrapped
	if err := json.Unmarshal(trimmed, &m); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return q, newError(http.StatusBadRequest, mcp.CodeInvalidRequest, fmt.Sprintf("Invalid request: %s has the wrong type", fieldName(te)), nil)
		}
		return q, newError(http.StatusBadRequest, mcp.CodeParseError, "Parse error: the body is not valid JSON", nil)
	}
	if m.ID != nil {
		switch m.ID[0] {
		case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			q.id = m.ID
		case 'n':
			return q, newError(http.StatusBadRequest, mcp.CodeInvalidRequest, "Invalid request: id must be a string or a number, not null", nil)
		default:
			return q, newError(http.StatusBadRequest, mcp.CodeInvalidRequest, "Invalid request: id must be a string or a number", nil)
		}
	}
	q.method = m.Method
	if m.JSONRPC != "2.0" {
		return q, newError(http.StatusBadRequest, mcp.CodeInvalidRequest, `Invalid request: jsonrpc must be "2.0"`, nil)
	}
	if m.Result != nil || m.Error != nil {
		return q, newError(http.StatusBadRequest, mcp.CodeInvalidRequest, "Invalid request: a client never sends responses in this revision", nil)
	}
	if m.Method == "" {
		return q, newError(http.StatusBadRequest, mcp.CodeInvalidRequest, "Invalid request: method is required", nil)
	}
	if len(m.Params) > 0 && string(m.Params) != "null" {
		if m.Params[0] != '{' {
			return q, errInvalidParams("Invalid params: params must be an object")
		}
		if err := json.Unmarshal(m.Params, &q.p); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return q, errInvalidParams(fmt.Sprintf("Invalid params: %s has the wrong type", fieldName(te)))
			}
			return q, errInvalidParams("Invalid params")
		}
	}
	return q, nil
}

func fieldName(te *json.UnmarshalTypeError) string {
	if te.Field == "" {
		return "a value"
	}
	return te.Field
}

// checkEnvelope applies the per-request rules of 2026-07-28 in the order
// clients and the conformance suite rely on: the version header is
// present (-32020); the required _meta is present (-32602); header and
// _meta agree (-32020); the version is supported (-32022); Mcp-Method and
// Mcp-Name agree with the body (-32020).
func (q *request) checkEnvelope(h http.Header) *rpcError {
	headerVersion, hasHeader := headerValue(h, mcp.HeaderProtocolVersion)
	if !hasHeader {
		return headerMismatch(mcp.HeaderProtocolVersion, true)
	}
	if q.p.Meta == nil {
		return errInvalidParams("Invalid params: _meta is required, with " + mcp.MetaProtocolVersion + " and " + mcp.MetaClientCapabilities)
	}
	rawVersion, ok := q.p.Meta[mcp.MetaProtocolVersion]
	if !ok {
		return errInvalidParams("Invalid params: _meta." + mcp.MetaProtocolVersion + " is required")
	}
	if json.Unmarshal(rawVersion, &q.version) != nil || q.version == "" {
		return errInvalidParams("Invalid params: _meta." + mcp.MetaProtocolVersion + " must be a non-empty string")
	}
	caps, ok := q.p.Meta[mcp.MetaClientCapabilities]
	if !ok {
		return errInvalidParams("Invalid params: _meta." + mcp.MetaClientCapabilities + " is required ({} for none)")
	}
	if len(caps) == 0 || caps[0] != '{' || json.Unmarshal(caps, &q.caps) != nil {
		return errInvalidParams("Invalid params: _meta." + mcp.MetaClientCapabilities + " must be an object")
	}
	q.rawCaps = caps
	if headerVersion != q.version {
		return headerMismatch(mcp.HeaderProtocolVersion, false)
	}
	if q.version != mcp.Version {
		return newError(http.StatusBadRequest, mcp.CodeUnsupportedVersion, "Unsupported protocol version",
			map[string]any{"supported": supportedVersions, "requested": q.version})
	}
	if m, ok := headerValue(h, mcp.HeaderMethod); !ok || m != q.method {
		return headerMismatch(mcp.HeaderMethod, !ok)
	}
	if err := q.decodeTarget(h); err != nil {
		return err
	}
	if info, ok := q.p.Meta[mcp.MetaClientInfo]; ok && len(info) > 0 && info[0] == '{' {
		_ = json.Unmarshal(info, &q.client)
	}
	if pt, ok := q.p.Meta["progressToken"]; ok && len(pt) > 0 && (pt[0] == '"' || pt[0] == '-' || (pt[0] >= '0' && pt[0] <= '9')) {
		q.progressToken = pt
	}
	if lv, ok := q.p.Meta[mcp.MetaLogLevel]; ok {
		_ = json.Unmarshal(lv, &q.logLevel)
		if _, known := logLevels[q.logLevel]; !known {
			q.logLevel = ""
		}
	}
	return nil
}

// decodeTarget reads params.name or params.uri for the methods that name
// a target and checks Mcp-Name against it.
func (q *request) decodeTarget(h http.Header) *rpcError {
	var field string
	var raw json.RawMessage
	switch q.method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet:
		field, raw = "name", q.p.Name
	case mcp.MethodResourcesRead:
		field, raw = "uri", q.p.URI
	default:
		return nil
	}
	var v string
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil || v == "" {
		return errInvalidParams("Invalid params: " + field + " must be a non-empty string")
	}
	if field == "name" {
		q.name = v
	} else {
		q.uri = v
	}
	hv, present := headerValue(h, mcp.HeaderName)
	if !present || hv != v {
		return headerMismatch(mcp.HeaderName, !present)
	}
	return nil
}

// wantsEvents reports whether the client asked for progress or log
// messages, which makes a webhook's answer stream.
func (q *request) wantsEvents() bool { return q.progressToken != nil || q.logLevel != "" }

// headerValue reads a header, decoding the =?base64?…?= form; a value
// that claims the form but does not decode is present and matches
// nothing.
func headerValue(h http.Header, name string) (string, bool) {
	vs := h.Values(name)
	if len(vs) == 0 {
		return "", false
	}
	v, ok := mcp.DecodeHeaderValue(vs[0])
	if !ok {
		// A lone 0xFF byte: no string decoded from JSON holds one (invalid
		// UTF-8 decodes to U+FFFD), so it matches nothing.
		return "\xff", true
	}
	return v, true
}

func headerMismatch(header string, missing bool) *rpcError {
	msg := "Header mismatch: " + header + " does not match the request body"
	if missing {
		msg = "Header mismatch: " + header + " is required"
	}
	return newError(http.StatusBadRequest, mcp.CodeHeaderMismatch, msg, map[string]string{"header": header})
}
