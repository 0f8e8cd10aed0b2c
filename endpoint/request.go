package endpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"unicode/utf8"

	"github.com/opsmcp/platform/internal/jsontext"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
)

// params holds every field any method of ours reads from params. Unknown
// fields are ignored, as the protocol asks. parseRequest reads it in its
// one walk over the body (decode, below): the fields are slices of one
// copy of the body, not one allocation each.
type params struct {
	Meta           meta
	Name           json.RawMessage
	URI            json.RawMessage
	Arguments      json.RawMessage
	Cursor         json.RawMessage
	InputResponses json.RawMessage
	RequestState   json.RawMessage
	Ref            json.RawMessage
	Argument       json.RawMessage
	Context        json.RawMessage
	Notifications  json.RawMessage
	TaskID         json.RawMessage
	// Task is the 2025-11-25 revision's task request (params.task).
	Task json.RawMessage
}

// meta holds the params._meta values the platform reads, each as sent; a
// key is present when its field is non-nil. Keys match exactly and the
// last of duplicates wins, as they did when _meta was decoded into a map
// (a struct decoded by encoding/json would match keys case-insensitively).
type meta struct {
	// present: _meta is an object (absent or null is not).
	present            bool
	protocolVersion    json.RawMessage
	clientCapabilities json.RawMessage
	clientInfo         json.RawMessage
	progressToken      json.RawMessage
	logLevel           json.RawMessage
	// The trace context, read by telemetry (metaCarrier).
	traceparent, tracestate, baggage json.RawMessage
}

// field returns where _meta's key goes, or nil for a key not read.
// The key is bytes: converting a key longer than 32 bytes to a string
// argument would allocate; switching on string(key) does not.
func (m *meta) field(key []byte) *json.RawMessage {
	switch string(key) {
	case mcp.MetaProtocolVersion:
		return &m.protocolVersion
	case mcp.MetaClientCapabilities:
		return &m.clientCapabilities
	case mcp.MetaClientInfo:
		return &m.clientInfo
	case "progressToken":
		return &m.progressToken
	case mcp.MetaLogLevel:
		return &m.logLevel
	case "traceparent":
		return &m.traceparent
	case "tracestate":
		return &m.tracestate
	case "baggage":
		return &m.baggage
	}
	return nil
}

// field returns where params' key goes, or nil for a key not read: the
// exact name, else an ASCII case-insensitive match, as encoding/json
// matches struct fields (a key with non-ASCII bytes never reaches here).
func (p *params) field(key []byte) *json.RawMessage {
	switch string(key) {
	case "name":
		return &p.Name
	case "uri":
		return &p.URI
	case "arguments":
		return &p.Arguments
	case "cursor":
		return &p.Cursor
	case "inputResponses":
		return &p.InputResponses
	case "requestState":
		return &p.RequestState
	case "ref":
		return &p.Ref
	case "argument":
		return &p.Argument
	case "context":
		return &p.Context
	case "notifications":
		return &p.Notifications
	case "taskId":
		return &p.TaskID
	case "task":
		return &p.Task
	}
	for _, f := range paramFields {
		if bytes.EqualFold(key, []byte(f)) {
			return p.field([]byte(f))
		}
	}
	return nil
}

var paramFields = [...]string{"name", "uri", "arguments", "cursor", "inputResponses", "requestState", "ref", "argument", "context", "notifications", "taskId", "task"}

// errSlowPath makes parseRequest decode the body the general way
// (parseSlow): params that are not an object, a key with escapes or
// non-ASCII bytes, a _meta that is not an object. The general way then
// gives the answer, error or not, exactly as it always has.
var errSlowPath = errors.New("params need the general decoder")

// decode reads params from an object known to be valid JSON: one walk
// over its members, the values kept as slices of data. Two _meta objects
// in one params merge, as they did into a map, and a null _meta clears
// it.
func (p *params) decode(data []byte) error {
	it := members{data: data}
	for {
		key, value, ok := it.next()
		if !ok {
			return it.err
		}
		if !plainKey(key) {
			return errSlowPath
		}
		if string(key) == "_meta" || bytes.EqualFold(key, []byte("_meta")) {
			if err := p.Meta.decode(value); err != nil {
				return err
			}
			continue
		}
		if f := p.field(key); f != nil {
			*f = value
		}
	}
}

// decode reads _meta's value into m, keeping what an earlier _meta of
// the same params set (a map decoded twice merges).
func (m *meta) decode(value []byte) error {
	switch value[0] {
	case 'n':
		*m = meta{}
		return nil
	case '{':
	default:
		return errSlowPath
	}
	m.present = true
	it := members{data: value}
	for {
		key, v, ok := it.next()
		if !ok {
			return it.err
		}
		if bytes.IndexByte(key, '\\') >= 0 {
			return errSlowPath
		}
		// Non-ASCII keys match none of ours, decoded or not.
		if f := m.field(key); f != nil {
			*f = v
		}
	}
}

// plainKey reports whether a key is printable ASCII without escapes: one
// whose bytes are its name, and that encoding/json folds as ASCII.
func plainKey(key []byte) bool {
	for _, c := range key {
		if c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// members walks the members of a JSON object that is known to be valid;
// any surprise ends the walk with errSlowPath rather than a panic.
type members struct {
	data []byte
	i    int
	err  error
}

// next returns the next member's key (between its quotes, unescaped
// bytes as sent) and value; false at the end or on a surprise (err set).
func (it *members) next() (key, value []byte, ok bool) {
	d := it.data
	i := skipSpace(d, it.i)
	if it.i == 0 {
		if i >= len(d) || d[i] != '{' {
			it.err = errSlowPath
			return nil, nil, false
		}
		i = skipSpace(d, i+1)
	} else if i < len(d) && d[i] == ',' {
		i = skipSpace(d, i+1)
	}
	if i >= len(d) || d[i] == '}' {
		it.i = len(d)
		return nil, nil, false
	}
	if d[i] != '"' {
		it.err = errSlowPath
		return nil, nil, false
	}
	end := stringEnd(d, i)
	if end < 0 {
		it.err = errSlowPath
		return nil, nil, false
	}
	key = d[i+1 : end-1]
	i = skipSpace(d, end)
	if i >= len(d) || d[i] != ':' {
		it.err = errSlowPath
		return nil, nil, false
	}
	i = skipSpace(d, i+1)
	end = valueEnd(d, i)
	if end < 0 {
		it.err = errSlowPath
		return nil, nil, false
	}
	it.i = end
	return key, d[i:end:end], true
}

func skipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the string starting at d[i] ('"'),
// or -1.
func stringEnd(d []byte, i int) int {
	for i++; i < len(d); i++ {
		switch d[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// valueEnd returns the index after the value starting at d[i], or -1.
// Nesting is counted, not recursed into: depth costs no stack.
func valueEnd(d []byte, i int) int {
	if i >= len(d) {
		return -1
	}
	switch d[i] {
	case '"':
		return stringEnd(d, i)
	case '{', '[':
		depth := 0
		for ; i < len(d); i++ {
			switch d[i] {
			case '"':
				e := stringEnd(d, i)
				if e < 0 {
					return -1
				}
				i = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	}
	for ; i < len(d); i++ {
		switch d[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
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
	taskID        string // params.taskId, decoded (tasks/*)
	// v1Task says a legacy session's tools/call asked for a task
	// (params.task), v1TTL the ttl it asked for (0: none).
	v1Task bool
	v1TTL  int64
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
//
// A well-formed request is checked (jsontext.Valid) and read in one walk
// over its members, the values kept as slices of one copy of the body.
// Anything that walk does not take (invalid JSON, a field of the wrong
// type, params that are not an object, keys with escapes or non-ASCII
// bytes) is decoded again by parseSlow, the envelope then the params,
// which names the first thing wrong in the order clients rely on:
// envelope before params. FuzzParseRequestOnePass holds the two to the
// same answer for any body.
func parseRequest(body []byte) (*request, *rpcError) {
	q := &request{}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return q, newError(http.StatusBadRequest, mcp.CodeInvalidRequest, "Empty request body", nil)
	}
	if trimmed[0] == '[' {
		return q, newError(http.StatusBadRequest, mcp.CodeInvalidRequest, "Batches are not supported: send one JSON-RPC message per POST", nil)
	}
	if trimmed[0] != '{' || !jsontext.Valid(trimmed) {
		return parseSlow(trimmed)
	}
	var (
		id              json.RawMessage
		method, version string
		response        bool
	)
	// The body is the caller's for this call only; one copy holds every
	// field.
	it := members{data: bytes.Clone(trimmed)}
	for {
		key, value, ok := it.next()
		if !ok {
			if it.err != nil {
				return parseSlow(trimmed)
			}
			break
		}
		if !plainKey(key) {
			return parseSlow(trimmed)
		}
		// Members match as encoding/json matches a struct's fields: the
		// exact name, else ASCII case-insensitively; the last of
		// duplicates wins.
		switch envelopeField(key) {
		case "jsonrpc":
			if version, ok = plainString(value); !ok {
				return parseSlow(trimmed)
			}
		case "method":
			if method, ok = plainString(value); !ok {
				return parseSlow(trimmed)
			}
		case "id":
			// Its own copy, as encoding/json gave it: a request's id may
			// outlive the request (a task's, a stream's), and a slice of
			// the body would keep all of it.
			id = bytes.Clone(value)
		case "params":
			// Each params replaces the one before, whole; null clears it.
			q.p = params{}
			switch value[0] {
			case 'n':
			case '{':
				if q.p.decode(value) != nil {
					return parseSlow(trimmed)
				}
			default:
				return parseSlow(trimmed)
			}
		case "result", "error":
			response = true
		}
	}
	if rerr := q.envelope(id, method, version, response); rerr != nil {
		// The envelope is checked before the params, here as in
		// parseSlow: the params, decoded already, are not looked at.
		q.p = params{}
		return q, rerr
	}
	return q, nil
}

// envelopeFields are the envelope's members the platform reads.
var envelopeFields = [...]string{"jsonrpc", "id", "method", "params", "result", "error"}

// envelopeField returns which of envelopeFields key names, or "".
func envelopeField(key []byte) string {
	for _, f := range envelopeFields {
		if string(key) == f {
			return f
		}
	}
	for _, f := range envelopeFields {
		if bytes.EqualFold(key, []byte(f)) {
			return f
		}
	}
	return ""
}

// plainString is a JSON string without escapes whose bytes are valid
// UTF-8, as the string it holds: the one spelling whose bytes are its
// value. "2.0" and tools/call, in nearly every request, are not copied.
func plainString(v []byte) (string, bool) {
	n := len(v)
	if n < 2 || v[0] != '"' || v[n-1] != '"' {
		return "", false
	}
	s := v[1 : n-1]
	if bytes.IndexByte(s, '\\') >= 0 || !utf8.Valid(s) {
		return "", false
	}
	switch string(s) {
	case "2.0":
		return "2.0", true
	case mcp.MethodToolsCall:
		return mcp.MethodToolsCall, true
	}
	return string(s), true
}

// envelope applies the envelope's rules, in order.
func (q *request) envelope(id json.RawMessage, method, version string, response bool) *rpcError {
	if id != nil {
		switch id[0] {
		case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			q.id = id
		case 'n':
			return newError(http.StatusBadRequest, mcp.CodeInvalidRequest, "Invalid request: id must be a string or a number, not null", nil)
		default:
			return newError(http.StatusBadRequest, mcp.CodeInvalidRequest, "Invalid request: id must be a string or a number", nil)
		}
	}
	q.method = method
	if version != "2.0" {
		return newError(http.StatusBadRequest, mcp.CodeInvalidRequest, `Invalid request: jsonrpc must be "2.0"`, nil)
	}
	if response {
		return newError(http.StatusBadRequest, mcp.CodeInvalidRequest, "Invalid request: a client never sends responses in this revision", nil)
	}
	if method == "" {
		return newError(http.StatusBadRequest, mcp.CodeInvalidRequest, "Invalid request: method is required", nil)
	}
	return nil
}

// slowParams is params as parseSlow decodes them, _meta into a map.
type slowParams struct {
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
	TaskID         json.RawMessage            `json:"taskId"`
	Task           json.RawMessage            `json:"task"`
}

// parseSlow is parseRequest the general way: the envelope with the
// params raw, then the params. trimmed is neither empty nor a batch.
func parseSlow(trimmed []byte) (*request, *rpcError) {
	q := &request{}
	var m wrapped
	if err := json.Unmarshal(trimmed, &m); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return q, newError(http.StatusBadRequest, mcp.CodeInvalidRequest, fmt.Sprintf("Invalid request: %s has the wrong type", fieldName(te)), nil)
		}
		return q, newError(http.StatusBadRequest, mcp.CodeParseError, "Parse error: the body is not valid JSON", nil)
	}
	if rerr := q.envelope(m.ID, m.Method, m.JSONRPC, m.Result != nil || m.Error != nil); rerr != nil {
		return q, rerr
	}
	if len(m.Params) > 0 && string(m.Params) != "null" {
		if m.Params[0] != '{' {
			return q, errInvalidParams("Invalid params: params must be an object")
		}
		var p slowParams
		if err := json.Unmarshal(m.Params, &p); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return q, errInvalidParams(fmt.Sprintf("Invalid params: %s has the wrong type", fieldName(te)))
			}
			return q, errInvalidParams("Invalid params")
		}
		q.p = params{Name: p.Name, URI: p.URI, Arguments: p.Arguments, Cursor: p.Cursor, InputResponses: p.InputResponses,
			RequestState: p.RequestState, Ref: p.Ref, Argument: p.Argument, Context: p.Context, Notifications: p.Notifications,
			TaskID: p.TaskID, Task: p.Task}
		if p.Meta != nil {
			q.p.Meta.present = true
			for k, v := range p.Meta {
				if f := q.p.Meta.field([]byte(k)); f != nil {
					*f = v
				}
			}
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
	headerVersion, hasHeader := headerValue(h, versionHeader)
	if !hasHeader {
		return headerMismatch(mcp.HeaderProtocolVersion, true)
	}
	md := &q.p.Meta
	if !md.present {
		return errInvalidParams("Invalid params: _meta is required, with " + mcp.MetaProtocolVersion + " and " + mcp.MetaClientCapabilities)
	}
	if md.protocolVersion == nil {
		return errInvalidParams("Invalid params: _meta." + mcp.MetaProtocolVersion + " is required")
	}
	var ok bool
	if q.version, ok = jsonString(md.protocolVersion); !ok || q.version == "" {
		return errInvalidParams("Invalid params: _meta." + mcp.MetaProtocolVersion + " must be a non-empty string")
	}
	caps := md.clientCapabilities
	if caps == nil {
		return errInvalidParams("Invalid params: _meta." + mcp.MetaClientCapabilities + " is required ({} for none)")
	}
	if len(caps) == 0 || caps[0] != '{' || capsDecoded.decode(caps, &q.caps) != nil {
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
	if info := md.clientInfo; len(info) > 0 && info[0] == '{' {
		_ = clientsDecoded.decode(info, &q.client)
	}
	q.progressToken = md.token()
	if lv := md.logLevel; lv != nil {
		q.logLevel, _ = jsonString(lv)
		if _, known := logLevels[q.logLevel]; !known {
			q.logLevel = ""
		}
	}
	return nil
}

// token is _meta's progressToken when it is a string or a number.
func (m *meta) token() json.RawMessage {
	if pt := m.progressToken; len(pt) > 0 && (pt[0] == '"' || pt[0] == '-' || (pt[0] >= '0' && pt[0] <= '9')) {
		return pt
	}
	return nil
}

// jsonString decodes a JSON value known to be valid as a string, and
// reports whether it is one (null decodes to "" and counts, as with
// json.Unmarshal). A string without escapes whose bytes are valid UTF-8
// is its own bytes; any other goes through json.Unmarshal, which
// unescapes and turns invalid UTF-8 into U+FFFD.
func jsonString(raw json.RawMessage) (string, bool) {
	if s, ok := plainString(raw); ok {
		return s, true
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err == nil
}

// decodeTarget reads params.name or params.uri for the methods that name
// a target and checks Mcp-Name against it.
func (q *request) decodeTarget(h http.Header) *rpcError {
	v, err := q.readTarget(false)
	if err != nil || v == "" {
		return err
	}
	hv, present := headerValue(h, mcp.HeaderName)
	if !present || hv != v {
		return headerMismatch(mcp.HeaderName, !present)
	}
	return nil
}

// readTarget reads params.name or params.uri, for the methods that name
// one, into q.name or q.uri and returns it; "" when the method names
// none. A legacy session's resources/subscribe and unsubscribe name a
// resource too.
func (q *request) readTarget(legacy bool) (string, *rpcError) {
	var field string
	var raw json.RawMessage
	switch q.method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet:
		field, raw = "name", q.p.Name
	case mcp.MethodResourcesRead:
		field, raw = "uri", q.p.URI
	case mcp.MethodTasksGet, mcp.MethodTasksUpdate, mcp.MethodTasksCancel:
		field, raw = "taskId", q.p.TaskID
	case mcp.MethodTasksResult:
		if !legacy {
			return "", nil // removed in 2026-07-28: -32601, whatever it names
		}
		field, raw = "taskId", q.p.TaskID
	case mcp.MethodSubscribe, mcp.MethodUnsubscribe:
		if !legacy {
			return "", nil
		}
		field, raw = "uri", q.p.URI
	default:
		return "", nil
	}
	v, ok := jsonString(raw)
	if len(raw) == 0 || !ok || v == "" {
		return "", errInvalidParams("Invalid params: " + field + " must be a non-empty string")
	}
	switch field {
	case "name":
		q.name = v
	case "uri":
		q.uri = v
	default:
		q.taskID = v
	}
	return v, nil
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

// A client sends its capabilities and its name and version in every
// request's _meta, the same bytes each time: decoded once, they are
// looked up after (two decodes a round, 1.2% of a bearer round's CPU by
// bench-peers' profile, before).
var (
	capsDecoded    decodeCache[mrtr.ClientCapabilities]
	clientsDecoded decodeCache[ClientInfo]
)

// Bounds of a decodeCache: what any client sends may be a key, so the
// cache holds at most decodeCacheEntries values of at most
// decodeCacheKey bytes each, and starts over when full.
const (
	decodeCacheEntries = 1024
	decodeCacheKey     = 1024
)

// decodeCache decodes JSON values into T, remembering each by its exact
// bytes: a hit is what decoding them again would give. Values in it are
// shared by every request that sent the same bytes, so nothing may
// change what a decoded T points to.
type decodeCache[T any] struct {
	mu sync.RWMutex
	m  map[string]T
}

// decode sets *v to raw decoded, from the cache when raw was decoded
// before. Errors are not remembered.
func (c *decodeCache[T]) decode(raw []byte, v *T) error {
	if len(raw) > decodeCacheKey {
		return json.Unmarshal(raw, v)
	}
	c.mu.RLock()
	got, ok := c.m[string(raw)]
	c.mu.RUnlock()
	if ok {
		*v = got
		return nil
	}
	var fresh T
	if err := json.Unmarshal(raw, &fresh); err != nil {
		return err
	}
	*v = fresh
	c.mu.Lock()
	if c.m == nil || len(c.m) >= decodeCacheEntries {
		c.m = make(map[string]T)
	}
	c.m[string(raw)] = fresh
	c.mu.Unlock()
	return nil
}

// len is how many values c holds.
func (c *decodeCache[T]) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
