package endpoint

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/store"
)

// supportedVersions is what -32022 and server/discover report.
var supportedVersions = []string{mcp.Version}

// rpcError is a JSON-RPC error object, with the HTTP status it travels
// with on a plain JSON response.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
	status  int
	// challenge is a WWW-Authenticate header value to send with it.
	challenge string
}

func (e *rpcError) Error() string { return e.Message }

func newError(status, code int, msg string, data any) *rpcError {
	return &rpcError{Code: code, Message: msg, Data: data, status: status}
}

func errInvalidParams(msg string) *rpcError {
	return newError(http.StatusBadRequest, mcp.CodeInvalidParams, msg, nil)
}

func errInternal() *rpcError {
	return newError(http.StatusInternalServerError, mcp.CodeInternalError, "Internal error", nil)
}

// errInvalidState is the one frozen answer to every rejected requestState:
// the reason goes only to the log and the span.
func errInvalidState() *rpcError {
	return newError(http.StatusBadRequest, mcp.CodeInvalidParams, "Invalid or expired requestState",
		map[string]string{"reason": "invalid_request_state"})
}

// response is an outbound JSON-RPC response.
type response struct {
	JSONRPC string `json:"jsonrpc"`
	// ID is omitted, not null, when the request's id is unknown: the MCP
	// schema allows only strings and integers.
	ID     json.RawMessage `json:"id,omitempty"`
	Result any             `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

// notification is an outbound JSON-RPC notification.
type notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// writeJSON sends one JSON-RPC message as application/json.
func writeJSON(w http.ResponseWriter, status int, msg any) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(msg); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// writeError sends a JSON-RPC error response with its HTTP status.
func writeError(w http.ResponseWriter, id json.RawMessage, e *rpcError) {
	if e.challenge != "" {
		w.Header().Set("WWW-Authenticate", e.challenge)
	}
	status := e.status
	if status == 0 {
		status = http.StatusBadRequest
	}
	writeJSON(w, status, response{JSONRPC: "2.0", ID: id, Error: e})
}

// sseWriter streams JSON-RPC messages as server-sent events.
type sseWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
	started bool
	n       int
	// noIDs leaves event ids out (a legacy stream that cannot be
	// resumed); prefix starts the ids otherwise (prefix+n).
	noIDs  bool
	prefix string
	// log, when set, stores each event before it is written: a legacy
	// call's resumable stream, whose ids are the log's. primeID, when
	// set, is written (with a reconnection delay) before the first
	// event: a 2025-11-25 stream's priming.
	log     *callLog
	primeID string
	// detached says the client went away from a resumable stream: its
	// events are still stored, for the client to resume.
	detached bool
}

func newSSE(w http.ResponseWriter) *sseWriter {
	f, _ := w.(http.Flusher)
	return &sseWriter{w: w, flusher: f}
}

func (s *sseWriter) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// send writes one message as an event and flushes it. On a resumable
// stream it is stored first, and a client gone away is no error.
func (s *sseWriter) send(msg any) error {
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	var id string
	switch {
	case s.log != nil:
		_, final := msg.(response)
		id = eventID('c', s.log.id, s.log.write([][]byte{body}, nil, final))
	case !s.noIDs:
		s.n++
		id = s.prefix + strconv.Itoa(s.n)
	}
	return s.event(id, "", body)
}

// sendAll writes messages as events; on a resumable stream they are
// stored first in one write, with cp.
func (s *sseWriter) sendAll(msgs []any, cp *store.Checkpoint) error {
	if s.log == nil {
		for _, m := range msgs {
			if err := s.send(m); err != nil {
				return err
			}
		}
		return nil
	}
	bodies := make([][]byte, len(msgs))
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		bodies[i] = b
	}
	first := s.log.write(bodies, cp, false)
	for i, b := range bodies {
		if err := s.event(eventID('c', s.log.id, first+int64(i)), "", b); err != nil {
			return err
		}
	}
	return nil
}

// event writes one event: its id (none if empty), a reconnection delay
// in milliseconds (none if empty), and its data, a JSON-RPC message
// (none: a priming event, which only sets the id).
func (s *sseWriter) event(id, retry string, body []byte) error {
	if s.detached {
		return nil
	}
	s.start()
	var buf bytes.Buffer
	if s.primeID != "" {
		buf.WriteString("id: " + s.primeID + "\nretry: " + reconnectDelay + "\ndata: \n\n")
		s.primeID = ""
		if id == "" && body == nil {
			return s.flush(buf.Bytes()) // the priming alone
		}
	}
	if id != "" {
		buf.WriteString("id: ")
		buf.WriteString(id)
		buf.WriteString("\n")
	}
	if retry != "" {
		buf.WriteString("retry: ")
		buf.WriteString(retry)
		buf.WriteString("\n")
	}
	if body == nil {
		buf.WriteString("data: \n\n")
	} else {
		buf.WriteString("event: message\ndata: ")
		buf.Write(body)
		buf.WriteString("\n\n")
	}
	return s.flush(buf.Bytes())
}

// flush writes b and flushes it; on a resumable stream a failed write
// detaches the client instead of failing.
func (s *sseWriter) flush(b []byte) error {
	if _, err := s.w.Write(b); err != nil {
		if s.log != nil {
			s.detached = true
			return nil
		}
		return err
	}
	if s.flusher != nil {
		s.flusher.Flush()
	}
	return nil
}

// comment writes a keep-alive comment.
func (s *sseWriter) comment() error {
	if s.detached {
		return nil
	}
	s.start()
	return s.flush([]byte(": keep-alive\n\n"))
}
