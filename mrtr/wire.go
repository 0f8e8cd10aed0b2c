package mrtr

import "encoding/json"

// InputRequest is one embedded server-to-client request: just its method
// and params, with no JSON-RPC id.
type InputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// InputRequiredResult asks the client for input before the request can
// complete. At least one of InputRequests and RequestState is set.
type InputRequiredResult struct {
	ResultType    string                  `json:"resultType"`
	InputRequests map[string]InputRequest `json:"inputRequests,omitempty"`
	RequestState  string                  `json:"requestState,omitempty"`
	Meta          map[string]any          `json:"_meta,omitempty"`
}

// ElicitResult is the client's answer to elicitation/create.
type ElicitResult struct {
	Action  string         `json:"action"` // accept, decline or cancel
	Content map[string]any `json:"content,omitempty"`
}

// Elicitation actions.
const (
	ActionAccept  = "accept"
	ActionDecline = "decline"
	ActionCancel  = "cancel"
)

// ClientCapabilities is the subset of the client's per-request
// capabilities that decides what may be asked.
type ClientCapabilities struct {
	Elicitation *ElicitationCapability `json:"elicitation,omitempty"`
	Sampling    *SamplingCapability    `json:"sampling,omitempty"`
	Roots       *RootsCapability       `json:"roots,omitempty"`
	// Extensions are the extensions the client supports, by identifier
	// (each one's settings as sent).
	Extensions map[string]json.RawMessage `json:"extensions,omitempty"`
}

// ElicitationCapability declares form and URL elicitation. A bare
// elicitation object ({}) means form mode only.
type ElicitationCapability struct {
	Form *struct{} `json:"form,omitempty"`
	URL  *struct{} `json:"url,omitempty"`
}

// SamplingCapability declares sampling and its optional sub-capabilities.
type SamplingCapability struct {
	Context *struct{} `json:"context,omitempty"`
	Tools   *struct{} `json:"tools,omitempty"`
}

// RootsCapability declares roots support.
type RootsCapability struct {
	ListChanged bool `json:"listChanged,omitempty"`
}
