package endpoint

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/textproto"

	"github.com/opsmcp/platform/mcp"
)

// One URL serves both protocol eras, decided per request: a request
// claiming 2026-07-28 (by header or by its params._meta) is served
// statelessly; anything else, when legacy serving is on, goes to the
// initialization era (legacy*.go). The check lives here, apart from both,
// so the stateless round never runs legacy code to learn it is not
// legacy.

// legacyStream reports whether a GET or DELETE is a legacy session's:
// it names a session and no 2026-07-28 version.
func (e *Handler) legacyStream(r *http.Request) bool {
	return e.legacy != nil && (r.Method == http.MethodGet || r.Method == http.MethodDelete) &&
		r.Header.Get(mcp.HeaderSessionID) != "" && r.Header.Get(mcp.HeaderProtocolVersion) != mcp.Version
}

// legacyRequest reports whether a request is served in the
// initialization era.
func (e *Handler) legacyRequest(r *http.Request, body []byte) bool {
	if e.legacy == nil {
		return false
	}
	return r.Method != http.MethodPost || legacyBody(r.Header, body)
}

var (
	metaVersionKey = []byte(`"` + mcp.MetaProtocolVersion + `"`)
	// versionHeader is the header's canonical key, so the stateless
	// path's check allocates nothing.
	versionHeader = textproto.CanonicalMIMEHeaderKey(mcp.HeaderProtocolVersion)
)

// legacyBody reports whether a POST is of the initialization era: its
// headers do not name 2026-07-28 and its params._meta claims no version.
// The body is scanned, and decoded only when it holds the claim's key.
func legacyBody(h http.Header, body []byte) bool {
	if vs := h[versionHeader]; len(vs) > 0 && vs[0] == mcp.Version {
		return false
	}
	if !bytes.Contains(body, metaVersionKey) {
		return true
	}
	var probe struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &probe) != nil {
		return false // the stateless path names what is wrong with it
	}
	_, claimed := probe.Params.Meta[mcp.MetaProtocolVersion]
	return !claimed
}
