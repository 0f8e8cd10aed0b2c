package mrtr

import (
	"bytes"
	"encoding/json"

	"github.com/opsmcp/platform/mcp"
)

// CanElicitForm reports whether form elicitation may be asked.
func (c ClientCapabilities) CanElicitForm() bool {
	if c.Elicitation == nil {
		return false
	}
	// {} means form; an explicit url-only declaration does not.
	return c.Elicitation.Form != nil || c.Elicitation.URL == nil
}

// CanElicitURL reports whether URL elicitation may be asked.
func (c ClientCapabilities) CanElicitURL() bool {
	return c.Elicitation != nil && c.Elicitation.URL != nil
}

// CanSample reports whether sampling may be asked; withTools asks for the
// tools sub-capability too.
func (c ClientCapabilities) CanSample(withTools bool) bool {
	if c.Sampling == nil {
		return false
	}
	return !withTools || c.Sampling.Tools != nil
}

// Supports reports whether the client declared the extension id (an
// object of its settings; {} for none).
func (c ClientCapabilities) Supports(id string) bool {
	v, ok := c.Extensions[id]
	return ok && len(v) > 0 && v[0] == '{'
}

// CanListRoots reports whether roots/list may be asked.
func (c ClientCapabilities) CanListRoots() bool { return c.Roots != nil }

// Kind names what r asks for: "form" or "url" (elicitation), "sampling"
// or "roots"; "other" for a method no input request may carry.
func (r InputRequest) Kind() string {
	switch r.Method {
	case mcp.MethodElicit:
		if r.elicitsURL() {
			return KindURL
		}
		return KindForm
	case mcp.MethodCreateMessage:
		return KindSampling
	case mcp.MethodListRoots:
		return KindRoots
	}
	return "other"
}

func (r InputRequest) elicitsURL() bool {
	if !bytes.Contains(r.Params, []byte(`"url"`)) {
		return false
	}
	var p struct {
		Mode string `json:"mode"`
	}
	return json.Unmarshal(r.Params, &p) == nil && p.Mode == "url"
}

// MissingCapabilities returns what caps lacks to ask every one of reqs, in
// the shape of -32021's requiredCapabilities, and whether anything is
// missing.
func MissingCapabilities(reqs map[string]InputRequest, caps ClientCapabilities) (ClientCapabilities, bool) {
	var missing capNeed
	for _, r := range reqs {
		missing = missing.union(r.need().missingFrom(caps))
	}
	return missing.capabilities(), missing != (capNeed{})
}

// need is what asking r needs of the client.
func (r InputRequest) need() capNeed {
	var n capNeed
	switch r.Method {
	case mcp.MethodElicit:
		n.url = r.elicitsURL()
		n.form = !n.url
	case mcp.MethodCreateMessage:
		var p struct {
			Tools          json.RawMessage `json:"tools"`
			IncludeContext string          `json:"includeContext"`
		}
		_ = json.Unmarshal(r.Params, &p)
		n.sampling = true
		n.samplingTools = len(p.Tools) > 0 && string(p.Tools) != "null"
		n.samplingContext = p.IncludeContext != "" && p.IncludeContext != "none"
	case mcp.MethodListRoots:
		n.roots = true
	}
	return n
}

// A capNeed is a set of client capabilities.
type capNeed struct {
	form, url, sampling, samplingTools, samplingContext, roots bool
}

// missingFrom returns the part of n that caps does not declare.
func (n capNeed) missingFrom(caps ClientCapabilities) capNeed {
	var m capNeed
	m.form = n.form && !caps.CanElicitForm()
	m.url = n.url && !caps.CanElicitURL()
	if n.sampling && !caps.CanSample(false) {
		m.sampling = true
		m.samplingTools = n.samplingTools
		m.samplingContext = n.samplingContext
	} else if n.sampling {
		m.samplingTools = n.samplingTools && !caps.CanSample(true)
		m.samplingContext = n.samplingContext && caps.Sampling.Context == nil
		m.sampling = m.samplingTools || m.samplingContext
	}
	m.roots = n.roots && !caps.CanListRoots()
	return m
}

func (n capNeed) union(o capNeed) capNeed {
	return capNeed{
		form:            n.form || o.form,
		url:             n.url || o.url,
		sampling:        n.sampling || o.sampling,
		samplingTools:   n.samplingTools || o.samplingTools,
		samplingContext: n.samplingContext || o.samplingContext,
		roots:           n.roots || o.roots,
	}
}

// capabilities expresses n as the spec's requiredCapabilities object. Form
// elicitation alone is the bare {"elicitation":{}}, which means form.
func (n capNeed) capabilities() ClientCapabilities {
	var c ClientCapabilities
	if n.form || n.url {
		c.Elicitation = &ElicitationCapability{}
		if n.url {
			c.Elicitation.URL = &struct{}{}
			if n.form {
				c.Elicitation.Form = &struct{}{}
			}
		}
	}
	if n.sampling {
		c.Sampling = &SamplingCapability{}
		if n.samplingTools {
			c.Sampling.Tools = &struct{}{}
		}
		if n.samplingContext {
			c.Sampling.Context = &struct{}{}
		}
	}
	if n.roots {
		c.Roots = &RootsCapability{}
	}
	return c
}
