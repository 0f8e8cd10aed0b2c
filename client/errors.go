package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/opsmcp/platform/mcp"
)

// RPCError is a JSON-RPC error answered by the server.
type RPCError struct {
	Code    int
	Message string
	// Data is the error's data member, as sent (nil when absent).
	Data json.RawMessage
	// HTTPStatus is the status of the HTTP response that carried it (200
	// for an error inside an event stream).
	HTTPStatus int
}

func (e *RPCError) Error() string {
	msg := fmt.Sprintf("mcp: %s (code %d)", e.Message, e.Code)
	switch e.Code {
	case mcp.CodeMissingRequiredCapability:
		if caps := e.RequiredCapabilities(); len(caps) > 0 {
			msg += ": the server requires the client capabilities " + strings.Join(caps, ", ")
		}
	case mcp.CodeInvalidParams, mcp.CodeHeaderMismatch:
		if len(e.Data) > 0 && len(e.Data) < 300 {
			msg += ": " + string(e.Data)
		}
	}
	return msg
}

// RequiredCapabilities lists the capability names a -32021 error's
// data.requiredCapabilities names, sorted.
func (e *RPCError) RequiredCapabilities() []string {
	var d struct {
		Required map[string]json.RawMessage `json:"requiredCapabilities"`
	}
	if e.Code != mcp.CodeMissingRequiredCapability || json.Unmarshal(e.Data, &d) != nil {
		return nil
	}
	return sortedKeys(d.Required)
}

// IsCode reports whether err is an *RPCError with the given code.
func IsCode(err error, code int) bool {
	var re *RPCError
	return errors.As(err, &re) && re.Code == code
}

// HTTPError is an HTTP answer that carries no JSON-RPC message: a legacy
// or non-MCP server, a proxy, or an authorization failure.
type HTTPError struct {
	StatusCode int
	Header     http.Header
	// Body is the start of the response body.
	Body string
}

func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("mcp: HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if ch := e.Header.Get("WWW-Authenticate"); ch != "" {
		msg += " (" + ch + ")"
	} else if b := strings.Join(strings.Fields(e.Body), " "); b != "" {
		if len(b) > 200 {
			b = b[:200] + "…"
		}
		msg += ": " + b
	}
	return msg
}

// UnsupportedVersionError reports that the client and the server share no
// protocol version.
type UnsupportedVersionError struct {
	// Requested is the version the client sent.
	Requested string
	// ServerSupports lists what the server said it supports.
	ServerSupports []string
	// ClientSupports lists what this client speaks.
	ClientSupports []string
}

func (e *UnsupportedVersionError) Error() string {
	return fmt.Sprintf("mcp: no protocol version in common: the server supports %s, this client speaks %s",
		listOrNone(e.ServerSupports), listOrNone(e.ClientSupports))
}

func listOrNone(vs []string) string {
	if len(vs) == 0 {
		return "none it named"
	}
	return strings.Join(vs, ", ")
}

// UnsupportedInputError reports an input request this client has no
// handler for. The call fails without answering the server.
type UnsupportedInputError struct {
	Method string
	// Mode is the elicitation mode, for elicitation/create.
	Mode string
}

func (e *UnsupportedInputError) Error() string {
	what := e.Method
	if e.Mode != "" {
		what += " (" + e.Mode + " mode)"
	}
	return "mcp: this client cannot answer " + what + ": no handler is registered for it"
}

// InvalidToolError is returned when calling a tool the client dropped
// from tools/list because its x-mcp-header annotations are invalid.
type InvalidToolError struct {
	Name   string
	Reason string
}

func (e *InvalidToolError) Error() string {
	return fmt.Sprintf("mcp: tool %q is not callable: %s", e.Name, e.Reason)
}

// ProtocolError reports an answer that breaks the protocol: not JSON-RPC,
// a stream that ends before the response, a result of the wrong shape.
type ProtocolError struct {
	Msg string
}

func (e *ProtocolError) Error() string { return "mcp: " + e.Msg }
