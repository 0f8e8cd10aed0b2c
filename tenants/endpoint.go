package tenants

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/opsmcp/platform/auth"
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

// call is one inbound request as it travels through the handler.
type call struct {
	w http.ResponseWriter
	r *http.Request
	// reqCtx is the request's context, carrying the request's span once
	// the observation has started it (kept here: copying the request
	// for it would cost an allocation of the whole request every call).
	reqCtx context.Context
	snap   *snapshot
	id     json.RawMessage
	method string
	p      params
	caps   mrtr.ClientCapabilities
	// rawCaps is the client's capabilities exactly as sent.
	rawCaps json.RawMessage
	// progressToken and logLevel decide whether the answer streams.
	progressToken json.RawMessage
	logLevel      string
	name          string // params.name, decoded
	uri           string // params.uri, decoded
	// principal is the verified caller; nil on a public tenant.
	principal *auth.Principal
}

// removed are methods of earlier revisions that 2026-07-28 dropped; they
// get the same 404 as unknown methods, so clients probing for a legacy
// server get an unambiguous modern answer.
var removed = map[string]bool{
	"initialize": true, "notifications/initialized": true, "ping": true, "logging/setLevel": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
}

// ServeHTTP serves POST /t/{slug}/mcp.
func (reg *Registry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w, ctx, ob := reg.observe(w, r)
	defer ob.end()
	slug, ok := slugOf(r.URL.Path)
	if !ok {
		writeError(w, nil, newError(http.StatusNotFound, codeInvalidRequest, "Not an MCP endpoint", nil))
		return
	}
	if r.Method != http.MethodPost {
		// The stateless revision has no GET stream and no session to
		// DELETE.
		w.Header().Set("Allow", "POST")
		writeError(w, nil, newError(http.StatusMethodNotAllowed, codeInvalidRequest, "Method not allowed: this endpoint accepts POST only", nil))
		return
	}
	snap, err := reg.lookup(ctx, slug)
	if err != nil {
		level := slog.LevelError
		if errors.As(err, new(errStillFailing)) {
			level = slog.LevelDebug // logged when the load failed
		}
		reg.log.Log(ctx, level, "tenant lookup failed", "tenant", slug, "err", err)
		writeError(w, nil, newError(http.StatusServiceUnavailable, codeInternal, "Tenant catalogue unavailable", nil))
		return
	}
	if snap == nil || snap.disabled {
		writeError(w, nil, newError(http.StatusNotFound, codeInvalidRequest, "Unknown MCP endpoint", nil))
		return
	}
	ob.tenant(snap)
	if !reg.originAllowed(r, snap) {
		writeError(w, nil, newError(http.StatusForbidden, codeInvalidRequest, "Origin not allowed", nil))
		return
	}
	principal, ok := reg.authenticate(ctx, w, r, snap)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, reg.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, nil, newError(http.StatusRequestEntityTooLarge, codeInvalidRequest,
				fmt.Sprintf("Request body exceeds %d bytes", reg.opts.MaxBodyBytes), nil))
			return
		}
		return // the client went away
	}
	c := &call{w: w, r: r, reqCtx: ctx, snap: snap, principal: principal}
	if e := c.parse(body); e != nil {
		writeError(w, c.id, e)
		return
	}
	if c.id == nil {
		// A notification: nothing in this revision needs an answer.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if e := c.checkEnvelope(); e != nil {
		writeError(w, c.id, e)
		return
	}
	ob.begin(c)
	reg.dispatch(c)
}

// authenticate verifies the bearer token against the issuers the tenant
// trusts. A missing or refused token gets 401 with a challenge naming the
// tenant's protected-resource metadata; the reason is logged, the token
// never is.
func (reg *Registry) authenticate(ctx context.Context, w http.ResponseWriter, r *http.Request, s *snapshot) (*auth.Principal, bool) {
	cfg := s.settings.Auth
	if cfg.Public {
		return nil, true
	}
	var p *auth.Principal
	var err error
	if tok, ok := auth.BearerToken(r.Header); ok || r.Header.Get("Authorization") == "" {
		p, err = reg.verifier.Verify(ctx, tok, cfg, reg.audience(s))
	} else {
		err = &auth.TokenError{Reason: "malformed"}
	}
	if err != nil {
		reason := "error"
		var te *auth.TokenError
		if errors.As(err, &te) {
			reason = te.Reason
		}
		if reason != "missing" {
			reg.log.WarnContext(ctx, "bearer token refused", "tenant", s.slug, "reason", reason)
		}
		w.Header().Set("WWW-Authenticate", auth.Challenge(reg.metadataURL(s), s.scopes))
		writeError(w, nil, newError(http.StatusUnauthorized, codeInvalidRequest, "Unauthorized: a valid bearer token for this endpoint is required", nil))
		return nil, false
	}
	return p, true
}

// metadataURL is where the tenant's protected-resource metadata lives.
func (reg *Registry) metadataURL(s *snapshot) string {
	return strings.TrimSuffix(reg.opts.PublicURL, "/") + "/.well-known/oauth-protected-resource/t/" + s.slug + "/mcp"
}

// ServeMetadata answers GET /.well-known/oauth-protected-resource/t/{slug}/mcp
// (RFC 9728) for tenants that take tokens.
func (reg *Registry) ServeMetadata(w http.ResponseWriter, r *http.Request, slug string) {
	s, err := reg.lookup(r.Context(), slug)
	if err != nil {
		http.Error(w, "tenant catalogue unavailable", http.StatusServiceUnavailable)
		return
	}
	if s == nil || s.disabled || s.settings.Auth.Public {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeJSON(w, http.StatusOK, auth.Metadata(reg.audience(s), s.settings.Auth, s.scopes))
}

// slugOf extracts {slug} from /t/{slug}/mcp.
func slugOf(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/t/")
	if !ok {
		return "", false
	}
	slug, ok := strings.CutSuffix(rest, "/mcp")
	if !ok || slug == "" || strings.Contains(slug, "/") {
		return "", false
	}
	return slug, true
}

// originAllowed guards against DNS rebinding. The Host must be the
// platform's public host, a loopback name, or one the operator allows; a
// browser request (one with an Origin header) must come from the same
// host, the platform's public origin, or an origin the tenant allows.
func (reg *Registry) originAllowed(r *http.Request, s *snapshot) bool {
	if !reg.hostAllowed(r.Host) {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if s.origins[strings.TrimSuffix(origin, "/")] {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, r.Host) || strings.EqualFold(u.Host, reg.publicHost)
}

// hostAllowed reports whether a request's Host names this platform.
func (reg *Registry) hostAllowed(host string) bool {
	if host == "" {
		return false
	}
	if strings.EqualFold(host, reg.publicHost) || reg.allowedHosts[strings.ToLower(host)] {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.Trim(strings.ToLower(name), "[]")
	if reg.allowedHosts[name] {
		return true
	}
	switch name {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}

// parse decodes the JSON-RPC envelope and the params.
func (c *call) parse(body []byte) *rpcError {
	c.watch()
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return newError(http.StatusBadRequest, codeInvalidRequest, "Empty request body", nil)
	}
	if trimmed[0] == '[' {
		return newError(http.StatusBadRequest, codeInvalidRequest, "Batches are not supported: send one JSON-RPC message per POST", nil)
	}
	var req request
	if err := json.Unmarshal(trimmed, &req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return newError(http.StatusBadRequest, codeInvalidRequest, fmt.Sprintf("Invalid request: %s has the wrong type", fieldName(te)), nil)
		}
		return newError(http.StatusBadRequest, codeParseError, "Parse error: the body is not valid JSON", nil)
	}
	if req.ID != nil {
		switch req.ID[0] {
		case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			c.id = req.ID
		case 'n':
			return newError(http.StatusBadRequest, codeInvalidRequest, "Invalid request: id must be a string or a number, not null", nil)
		default:
			return newError(http.StatusBadRequest, codeInvalidRequest, "Invalid request: id must be a string or a number", nil)
		}
	}
	if req.JSONRPC != "2.0" {
		return newError(http.StatusBadRequest, codeInvalidRequest, `Invalid request: jsonrpc must be "2.0"`, nil)
	}
	if req.Result != nil || req.Error != nil {
		return newError(http.StatusBadRequest, codeInvalidRequest, "Invalid request: a client never sends responses in this revision", nil)
	}
	if req.Method == "" {
		return newError(http.StatusBadRequest, codeInvalidRequest, "Invalid request: method is required", nil)
	}
	c.method = req.Method
	if len(req.Params) > 0 && string(req.Params) != "null" {
		if req.Params[0] != '{' {
			return errInvalidParams("Invalid params: params must be an object")
		}
		if err := json.Unmarshal(req.Params, &c.p); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return errInvalidParams(fmt.Sprintf("Invalid params: %s has the wrong type", fieldName(te)))
			}
			return errInvalidParams("Invalid params")
		}
	}
	return nil
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
func (c *call) checkEnvelope() *rpcError {
	h := c.r.Header
	headerVersion, hasHeader := headerValue(h, "MCP-Protocol-Version")
	if !hasHeader {
		return headerMismatch("MCP-Protocol-Version", true)
	}
	if c.p.Meta == nil {
		return errInvalidParams("Invalid params: _meta is required, with " + metaProtocolVersion + " and " + metaClientCaps)
	}
	rawVersion, ok := c.p.Meta[metaProtocolVersion]
	if !ok {
		return errInvalidParams("Invalid params: _meta." + metaProtocolVersion + " is required")
	}
	var bodyVersion string
	if json.Unmarshal(rawVersion, &bodyVersion) != nil || bodyVersion == "" {
		return errInvalidParams("Invalid params: _meta." + metaProtocolVersion + " must be a non-empty string")
	}
	caps, ok := c.p.Meta[metaClientCaps]
	if !ok {
		return errInvalidParams("Invalid params: _meta." + metaClientCaps + " is required ({} for none)")
	}
	if len(caps) == 0 || caps[0] != '{' || json.Unmarshal(caps, &c.caps) != nil {
		return errInvalidParams("Invalid params: _meta." + metaClientCaps + " must be an object")
	}
	c.rawCaps = caps
	if headerVersion != bodyVersion {
		return headerMismatch("MCP-Protocol-Version", false)
	}
	if bodyVersion != ProtocolVersion {
		return newError(http.StatusBadRequest, codeUnsupportedVer, "Unsupported protocol version",
			map[string]any{"supported": supportedVersions, "requested": bodyVersion})
	}
	if m, ok := headerValue(h, "Mcp-Method"); !ok || m != c.method {
		return headerMismatch("Mcp-Method", !ok)
	}
	if err := c.decodeTarget(); err != nil {
		return err
	}
	if pt, ok := c.p.Meta["progressToken"]; ok && len(pt) > 0 && (pt[0] == '"' || pt[0] == '-' || (pt[0] >= '0' && pt[0] <= '9')) {
		c.progressToken = pt
	}
	if lv, ok := c.p.Meta[metaLogLevel]; ok {
		_ = json.Unmarshal(lv, &c.logLevel)
		if _, known := logLevels[c.logLevel]; !known {
			c.logLevel = ""
		}
	}
	return nil
}

// decodeTarget reads params.name or params.uri for the methods that name
// a target and checks Mcp-Name against it.
func (c *call) decodeTarget() *rpcError {
	var field string
	var raw json.RawMessage
	switch c.method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet:
		field, raw = "name", c.p.Name
	case mcp.MethodResourcesRead:
		field, raw = "uri", c.p.URI
	default:
		return nil
	}
	var v string
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil || v == "" {
		return errInvalidParams("Invalid params: " + field + " must be a non-empty string")
	}
	if field == "name" {
		c.name = v
	} else {
		c.uri = v
	}
	hv, present := headerValue(c.r.Header, "Mcp-Name")
	if !present || hv != v {
		return headerMismatch("Mcp-Name", !present)
	}
	return nil
}

// headerValue reads a header, decoding the =?base64?…?= form.
func headerValue(h http.Header, name string) (string, bool) {
	vs := h.Values(name)
	if len(vs) == 0 {
		return "", false
	}
	v := vs[0]
	// Only a value with both markers is encoded; anything else is literal.
	if strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?=") && len(v) >= len("=?base64??=") {
		inner := v[len("=?base64?") : len(v)-len("?=")]
		b, err := base64.StdEncoding.Strict().DecodeString(inner)
		if err != nil {
			return "", true // present but undecodable: matches nothing
		}
		return string(b), true
	}
	return v, true
}

func headerMismatch(header string, missing bool) *rpcError {
	msg := "Header mismatch: " + header + " does not match the request body"
	if missing {
		msg = "Header mismatch: " + header + " is required"
	}
	return newError(http.StatusBadRequest, codeHeaderMismatch, msg, map[string]string{"header": header})
}

// dispatch routes a checked request to its method.
func (reg *Registry) dispatch(c *call) {
	var (
		result any
		e      *rpcError
	)
	switch c.method {
	case "server/discover":
		result = reg.discover(c)
	case "tools/list":
		result, e = reg.list(c, c.snap.toolList, "tools")
	case "prompts/list":
		result, e = reg.list(c, c.snap.promptLst, "prompts")
	case "resources/list":
		result, e = reg.list(c, c.snap.resList, "resources")
	case "resources/templates/list":
		result, e = reg.list(c, c.snap.tmplList, "resourceTemplates")
	case "completion/complete":
		result, e = reg.complete(c)
	case mcp.MethodToolsCall, mcp.MethodPromptsGet, mcp.MethodResourcesRead:
		reg.carrier(c)
		return
	case "subscriptions/listen":
		reg.listen(c)
		return
	default:
		msg := "Method not found: " + c.method
		if removed[c.method] {
			msg = "Method not found: " + c.method + " was removed in protocol " + ProtocolVersion
		}
		e = newError(http.StatusNotFound, codeMethodNotFound, msg, nil)
	}
	if e != nil {
		writeError(c.w, c.id, e)
		return
	}
	writeJSON(c.w, http.StatusOK, response{JSONRPC: "2.0", ID: c.id, Result: result})
}

// serverInfo is the _meta every result carries.
// It is built once per snapshot (read-only afterwards), not per request.
func (reg *Registry) serverInfo(s *snapshot) map[string]any {
	if s.info != nil {
		return s.info
	}
	return reg.newServerInfo(s)
}

func (reg *Registry) newServerInfo(s *snapshot) map[string]any {
	return map[string]any{metaServerInfo: map[string]string{
		"name": "opsmcp/" + s.slug, "title": s.displayName, "version": reg.opts.Version,
	}}
}

// ctx returns the request's context.
func (c *call) ctx() context.Context {
	if c.reqCtx != nil {
		return c.reqCtx
	}
	return c.r.Context()
}
