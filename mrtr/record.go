package mrtr

import (
	"encoding/json"
	"fmt"

	"github.com/opsmcp/platform/internal/jsontext"
)

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
	b, err := jsontext.Marshal(r)
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
