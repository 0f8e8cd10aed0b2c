package catalogue

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// MCP Apps (io.modelcontextprotocol/ui): a tool links to an interactive
// view, a ui:// resource of AppMimeType that hosts render in a sandboxed
// frame. The platform keeps the links and the views' metadata as the
// tenant registered them, and checks what can be checked: key names,
// shapes, sizes, origins, and that a link points to a view of the
// tenant's (see AppViewServed).
const (
	// AppMimeType is a view's type, exactly.
	AppMimeType = "text/html;profile=mcp-app"
	// appScheme starts a view's URI.
	appScheme = "ui://"
	// MaxViewBytes bounds a view's HTML (decoded, for a blob): a static
	// view lives in every replica's snapshot of its tenant, and admin
	// API bodies are capped at 1 MiB. A template handler's view is held
	// to it too.
	MaxViewBytes = 256 << 10
	// maxMeta bounds a definition's _meta, as JSON.
	maxMeta = 16 << 10
	// maxIcons bounds an item's icons; maxIconData a data: icon's URI.
	maxIcons    = 8
	maxIconData = 32 << 10
	// maxOrigins bounds each CSP list of a view.
	maxOrigins = 32
)

// Icon is an image a client may show for an item or the server: an
// https: URL (the platform never fetches it) or a bounded data: URI of
// an image.
type Icon struct {
	Src      string   `json:"src"`
	MimeType string   `json:"mimeType,omitempty"`
	Sizes    []string `json:"sizes,omitempty"`
	Theme    string   `json:"theme,omitempty"`
}

// IsAppURI reports whether uri names a view (its scheme is ui, however
// cased).
func IsAppURI(uri string) bool {
	return len(uri) >= len(appScheme) && strings.EqualFold(uri[:len(appScheme)], appScheme)
}

// isAppType reports whether a MIME type names the mcp-app profile of
// HTML, in any spelling (spaces, case, quotes); only AppMimeType itself
// is accepted on a definition.
func isAppType(t string) bool {
	typ, params, ok := strings.Cut(t, ";")
	if !ok || !strings.EqualFold(strings.TrimSpace(typ), "text/html") {
		return false
	}
	for _, p := range strings.Split(params, ";") {
		k, v, _ := strings.Cut(p, "=")
		if strings.EqualFold(strings.TrimSpace(k), "profile") && strings.EqualFold(strings.Trim(strings.TrimSpace(v), `"`), "mcp-app") {
			return true
		}
	}
	return false
}

// toolUI is a tool's _meta.ui.
type toolUI struct {
	ResourceURI string   `json:"resourceUri,omitempty"`
	Visibility  []string `json:"visibility,omitempty"`
}

// Tool visibilities: who may call a tool linked to a view.
const (
	VisibilityModel = "model"
	VisibilityApp   = "app"
)

// ui reads the tool's _meta.ui and the deprecated flat
// _meta["ui/resourceUri"], as validated (zero values when absent).
func (t *Tool) ui() (ui toolUI, flat string) {
	var m map[string]json.RawMessage
	if json.Unmarshal(t.Meta, &m) != nil {
		return ui, ""
	}
	ui = uiOfTool(m["ui"])
	_ = json.Unmarshal(m["ui/resourceUri"], &flat)
	return ui, flat
}

// uiOfTool reads a tool's _meta.ui by its exact keys, as hosts read it
// (encoding/json alone would take "ResourceUri" for "resourceUri").
func uiOfTool(raw json.RawMessage) (ui toolUI) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ui
	}
	_ = json.Unmarshal(m["resourceUri"], &ui.ResourceURI)
	_ = json.Unmarshal(m["visibility"], &ui.Visibility)
	return ui
}

// AppLink is the view a tool links to, "" for none.
func (t *Tool) AppLink() string {
	ui, flat := t.ui()
	if ui.ResourceURI != "" {
		return ui.ResourceURI
	}
	return flat
}

// AppLinkField names the field a tool's link is in: the nested one, or
// the deprecated flat key when only it is given.
func (t *Tool) AppLinkField() string {
	if ui, _ := t.ui(); ui.ResourceURI == "" {
		return "_meta.ui/resourceUri"
	}
	return "_meta.ui.resourceUri"
}

// AppOnly reports whether a tool is for views only (its visibility
// leaves the model out). Hosts hide it from the model; the platform
// authorizes its calls as any other's.
func (t *Tool) AppOnly() bool {
	ui, _ := t.ui()
	return len(ui.Visibility) > 0 && !slices.Contains(ui.Visibility, VisibilityModel)
}

// metaKey is the _meta key naming rule: an optional prefix (dot-separated
// labels, then a slash) and a name.
var metaKey = regexp.MustCompile(`^(?:[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*/)?(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?$`)

// reservedMetaKey says why a valid key is MCP's, not a tenant's: its
// prefix's second label is modelcontextprotocol or mcp, or it is one of
// the trace context's unprefixed keys.
func reservedMetaKey(k string) string {
	prefix, _, ok := strings.Cut(k, "/")
	if !ok {
		switch k {
		case "traceparent", "tracestate", "baggage":
			return "is reserved for trace context"
		}
		return ""
	}
	if labels := strings.Split(prefix, "."); len(labels) > 1 {
		if l := strings.ToLower(labels[1]); l == "modelcontextprotocol" || l == "mcp" {
			return "has a prefix reserved for MCP"
		}
	}
	return ""
}

// meta checks a definition's _meta: an object of at most maxMeta bytes
// whose keys follow the naming rule and are not MCP's; it returns the
// members (nil when absent or not an object).
func (p *problems) meta(field string, raw json.RawMessage) map[string]json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	if len(raw) > maxMeta {
		p.add(field, "must be at most %d bytes of JSON", maxMeta)
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		p.add(field, "must be an object (leave it out for none)")
		return nil
	}
	if k := repeatedKey(raw); k != "" {
		p.add(field, "has the key %q twice: clients would read one or the other", k)
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch {
		case k == "" || !metaKey.MatchString(k):
			p.add(field, "key %q is not a valid _meta key (an optional reverse-DNS prefix and a slash, then a name of letters, digits, '-', '_' and '.')", k)
		case reservedMetaKey(k) != "":
			p.add(field, "key %q %s", k, reservedMetaKey(k))
		}
	}
	return m
}

// repeatedKey is a key an object (or any object inside it) has twice,
// "" for none. encoding/json keeps the last, and matches struct fields
// without regard to case; other readers may keep the first.
func repeatedKey(raw json.RawMessage) string {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	var walk func() string
	walk = func() string {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return ""
				}
				k, _ := kt.(string)
				if seen[k] {
					return k
				}
				seen[k] = true
				if r := walk(); r != "" {
					return r
				}
			}
			_, _ = dec.Token()
		case json.Delim('['):
			for dec.More() {
				if r := walk(); r != "" {
					return r
				}
			}
			_, _ = dec.Token()
		}
		return ""
	}
	return walk()
}

// exactKeys reports a key of the object raw that is not one of known,
// compared exactly (encoding/json would take "CSP" for "csp"), "" for
// none.
func exactKeys(raw json.RawMessage, known ...string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(known, k) {
			return k
		}
	}
	return ""
}

// strict decodes raw into v, refusing unknown fields and trailing data.
func strict(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// toolMeta checks a tool's _meta: the view link in ui (resourceUri,
// visibility) and the deprecated flat ui/resourceUri, which must agree.
func (p *problems) toolMeta(t *Tool) {
	m := p.meta("_meta", t.Meta)
	if m == nil {
		return
	}
	var ui toolUI
	if raw, ok := m["ui"]; ok {
		var probe map[string]json.RawMessage
		switch {
		case json.Unmarshal(raw, &probe) != nil || probe == nil:
			p.add("_meta.ui", "must be an object with resourceUri and/or visibility")
		default:
			for _, k := range []string{"csp", "permissions", "domain", "prefersBorder"} {
				if _, ok := probe[k]; ok {
					p.add("_meta.ui."+k, "belongs on the view's resource, not on the tool")
					delete(probe, k)
				}
			}
			for _, k := range slices.Sorted(maps.Keys(probe)) {
				if k != "resourceUri" && k != "visibility" {
					p.add("_meta.ui."+k, "is not a field of a tool's ui (resourceUri, visibility)")
				}
			}
			var uri string
			var vis []string
			if v, ok := probe["resourceUri"]; ok && json.Unmarshal(v, &uri) != nil {
				p.add("_meta.ui", "resourceUri must be a string and visibility an array of strings")
				break
			}
			if v, ok := probe["visibility"]; ok && json.Unmarshal(v, &vis) != nil {
				p.add("_meta.ui", "resourceUri must be a string and visibility an array of strings")
				break
			}
			ui = uiOfTool(raw)
			if len(probe) == 0 {
				p.add("_meta.ui", "must name a resourceUri or a visibility")
			}
			if _, ok := probe["resourceUri"]; ok {
				p.appURI("_meta.ui.resourceUri", ui.ResourceURI)
			}
			if _, ok := probe["visibility"]; ok {
				p.visibility(ui.Visibility)
			}
		}
	}
	if raw, ok := m["ui/resourceUri"]; ok {
		var flat string
		switch {
		case json.Unmarshal(raw, &flat) != nil:
			p.add("_meta.ui/resourceUri", "must be a string (the deprecated spelling of _meta.ui.resourceUri)")
		case ui.ResourceURI != "" && flat != ui.ResourceURI:
			p.add("_meta.ui/resourceUri", "must equal _meta.ui.resourceUri (%q) when both are given", ui.ResourceURI)
		default:
			p.appURI("_meta.ui/resourceUri", flat)
		}
	}
}

// appURI checks a link to a view.
func (p *problems) appURI(field, uri string) {
	if err := validateURI(uri); err != nil {
		p.add(field, "%v", err)
		return
	}
	if !IsAppURI(uri) {
		p.add(field, "must be a ui:// URI, not %q", uri)
	}
}

func (p *problems) visibility(v []string) {
	if len(v) == 0 {
		p.add("_meta.ui.visibility", "must list %q, %q or both (or be left out: both)", VisibilityModel, VisibilityApp)
	}
	seen := map[string]bool{}
	for i, s := range v {
		switch {
		case s != VisibilityModel && s != VisibilityApp:
			p.add(fmt.Sprintf("_meta.ui.visibility[%d]", i), "must be %q or %q, not %q", VisibilityModel, VisibilityApp, s)
		case seen[s]:
			p.add(fmt.Sprintf("_meta.ui.visibility[%d]", i), "repeats %q", s)
		}
		seen[s] = true
	}
}

// viewUI is a view's _meta.ui, on its resource (or template) and on what
// a read returns.
type viewUI struct {
	CSP *struct {
		ConnectDomains  []string `json:"connectDomains,omitempty"`
		ResourceDomains []string `json:"resourceDomains,omitempty"`
		FrameDomains    []string `json:"frameDomains,omitempty"`
		BaseURIDomains  []string `json:"baseUriDomains,omitempty"`
	} `json:"csp,omitempty"`
	Permissions map[string]json.RawMessage `json:"permissions,omitempty"`
	Domain      *string                    `json:"domain,omitempty"`
	// PrefersBorder is a pointer: an explicit false is kept.
	PrefersBorder *bool `json:"prefersBorder,omitempty"`
}

// viewPermissions are those a view may ask the host for.
var viewPermissions = []string{"camera", "microphone", "geolocation", "clipboardWrite"}

// viewMeta checks a view's _meta (on a resource or template): its ui
// only on a view (isView), with the fields the extension defines.
func (p *problems) viewMeta(field string, raw json.RawMessage, isView bool) {
	m := p.meta(field, raw)
	uiRaw, ok := m["ui"]
	if !ok {
		return
	}
	if !isView {
		p.add(field+".ui", "belongs only on a view (a ui:// resource of type %s)", AppMimeType)
		return
	}
	p.uiOfView(field+".ui", uiRaw)
}

// uiOfView checks a view's _meta.ui: csp lists of origins, permissions
// among those a host knows (each {}), a domain, prefersBorder. Unknown
// fields are refused, so a misspelt one is not silently ignored.
func (p *problems) uiOfView(field string, raw json.RawMessage) {
	var ui viewUI
	if err := strict(raw, &ui); err != nil {
		p.add(field, "must be an object of csp, permissions, domain and prefersBorder: %v", err)
		return
	}
	// Hosts read the keys exactly: a key spelt in another case would pass
	// encoding/json's matching unchecked.
	if k := exactKeys(raw, "csp", "permissions", "domain", "prefersBorder"); k != "" {
		p.add(field, "%q is not a field of a view's ui (csp, permissions, domain, prefersBorder; exactly so spelt)", k)
		return
	}
	// A key twice was refused with the whole _meta (meta).
	var parts struct {
		CSP json.RawMessage `json:"csp"`
	}
	_ = json.Unmarshal(raw, &parts)
	if len(parts.CSP) > 0 && string(parts.CSP) != "null" {
		if k := exactKeys(parts.CSP, "connectDomains", "resourceDomains", "frameDomains", "baseUriDomains"); k != "" {
			p.add(field+".csp", "%q is not a list of a view's CSP (connectDomains, resourceDomains, frameDomains, baseUriDomains; exactly so spelt)", k)
			return
		}
	}
	if ui.CSP != nil {
		for _, l := range []struct {
			name string
			list []string
		}{{"connectDomains", ui.CSP.ConnectDomains}, {"resourceDomains", ui.CSP.ResourceDomains},
			{"frameDomains", ui.CSP.FrameDomains}, {"baseUriDomains", ui.CSP.BaseURIDomains}} {
			if len(l.list) > maxOrigins {
				p.add(field+".csp."+l.name, "must list at most %d origins", maxOrigins)
				continue
			}
			for i, o := range l.list {
				if err := validateOrigin(o); err != nil {
					p.add(fmt.Sprintf("%s.csp.%s[%d]", field, l.name, i), "%v", err)
				} else if l.name != "connectDomains" && strings.HasPrefix(o, "wss:") {
					p.add(fmt.Sprintf("%s.csp.%s[%d]", field, l.name, i), "%q: wss: origins belong in connectDomains (WebSockets) only", o)
				}
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(ui.Permissions)) {
		if !slices.Contains(viewPermissions, k) {
			p.add(field+".permissions."+k, "is not a permission a host grants (%s)", strings.Join(viewPermissions, ", "))
		} else if strings.TrimSpace(string(ui.Permissions[k])) != "{}" {
			p.add(field+".permissions."+k, "must be {}")
		}
	}
	if ui.Domain != nil {
		if d := *ui.Domain; d == "" || len(d) > 253 || strings.ContainsAny(d, ":/?#@ ") || !hostLike(strings.TrimPrefix(d, "*.")) {
			p.add(field+".domain", "must be a host name, as the host's documentation gives it (no scheme, path or port)")
		}
	}
}

// validateOrigin checks one origin of a view's CSP lists: https: or
// wss:, a host (its leftmost label may be * for any subdomain) and an
// optional port, nothing else. A bare * would allow everything.
func validateOrigin(o string) error {
	if o == "*" || strings.Contains(o, "'") {
		return fmt.Errorf("%q is not an origin: list each origin (https://host or wss://host, *.host for its subdomains)", o)
	}
	u, err := url.Parse(o)
	switch {
	case err != nil || len(o) > 2048:
		return fmt.Errorf("%q is not an origin", o)
	case u.Scheme != "https" && u.Scheme != "wss":
		return fmt.Errorf("%q: the scheme must be https or wss", o)
	case u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(o, "#?") || u.Opaque != "":
		return fmt.Errorf("%q: an origin has no user, path, query or fragment", o)
	}
	host := u.Hostname()
	if strings.HasSuffix(u.Host, ":") {
		return fmt.Errorf("%q: the port must be a number from 1 to 65535", o)
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strings.Trim(port, "0123456789") != "" {
			return fmt.Errorf("%q: the port must be a number from 1 to 65535", o)
		}
	}
	if strings.Contains(host, ":") {
		return fmt.Errorf("%q: a CSP source cannot name an IPv6 address", o)
	}
	if net.ParseIP(host) != nil {
		return nil
	}
	if !hostLike(strings.TrimPrefix(host, "*.")) {
		return fmt.Errorf("%q: the host must be a DNS name (its leftmost label may be *)", o)
	}
	return nil
}

// hostLike reports whether h is a DNS name: labels of letters, digits
// and hyphens, not starting or ending with a hyphen.
func hostLike(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// view checks what makes a resource a view: a ui:// URI and AppMimeType
// go together, and the view's HTML is bounded.
func (p *problems) view(uriField, uri, mimeType, sizeField string, size int) {
	app, typed := IsAppURI(uri), isAppType(mimeType)
	switch {
	case app && mimeType != AppMimeType:
		p.add("mimeType", "a ui:// resource is a view: its mimeType must be exactly %q", AppMimeType)
	case !app && typed:
		p.add(uriField, "a view (mimeType %s) must have a ui:// URI", AppMimeType)
	}
	if typed && mimeType != AppMimeType {
		p.add("mimeType", "must be spelt exactly %q", AppMimeType)
	}
	if app && size > MaxViewBytes {
		p.add(sizeField, "a view's HTML must be at most %d bytes (it is %d)", MaxViewBytes, size)
	}
}

// icons checks an item's icons.
func (p *problems) icons(field string, icons []Icon) {
	if len(icons) > maxIcons {
		p.add(field, "must list at most %d icons", maxIcons)
		return
	}
	for i, ic := range icons {
		f := fmt.Sprintf("%s[%d]", field, i)
		if err := validateIconSrc(ic.Src); err != nil {
			p.add(f+".src", "%v", err)
		}
		if ic.MimeType != "" && (!strings.HasPrefix(ic.MimeType, "image/") || len(ic.MimeType) > 100 || strings.ContainsAny(ic.MimeType, " ;,")) {
			p.add(f+".mimeType", "must be an image type, such as image/png")
		}
		if len(ic.Sizes) > maxIcons {
			p.add(f+".sizes", "must list at most %d sizes", maxIcons)
		}
		for j, s := range ic.Sizes {
			if !iconSize.MatchString(s) {
				p.add(fmt.Sprintf("%s.sizes[%d]", f, j), "must be WxH (such as 48x48) or any")
			}
		}
		if ic.Theme != "" && ic.Theme != "light" && ic.Theme != "dark" {
			p.add(f+".theme", "must be light or dark")
		}
	}
}

// ValidateIcons checks a list of icons (the server's, in a tenant's
// settings), naming each problem under field.
func ValidateIcons(field string, icons []Icon) []FieldError {
	var p problems
	p.icons(field, icons)
	return p
}

var iconSize = regexp.MustCompile(`^(?:any|[1-9][0-9]{0,3}x[1-9][0-9]{0,3})$`)

// iconTypes are the image types a data: icon may have.
var iconTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml", "image/x-icon", "image/vnd.microsoft.icon"}

// validateIconSrc checks an icon's source: an https: URL, or a data: URI
// of an image, base64, at most maxIconData bytes. The platform never
// fetches an icon; clients do.
func validateIconSrc(src string) error {
	if rest, ok := strings.CutPrefix(src, "data:"); ok {
		if len(src) > maxIconData {
			return fmt.Errorf("a data: icon must be at most %d bytes", maxIconData)
		}
		head, data, ok := strings.Cut(rest, ",")
		typ, enc, _ := strings.Cut(head, ";")
		if !ok || !strings.EqualFold(enc, "base64") || !slices.Contains(iconTypes, strings.ToLower(typ)) {
			return fmt.Errorf("a data: icon must be data:<image type>;base64,… with one of %s", strings.Join(iconTypes, ", "))
		}
		if _, err := base64.StdEncoding.Strict().DecodeString(data); err != nil || data == "" || strings.ContainsAny(data, "\r\n") {
			return errors.New("a data: icon's data must be standard base64")
		}
		return nil
	}
	if len(src) > maxURI {
		return fmt.Errorf("must be at most %d bytes", maxURI)
	}
	u, err := url.Parse(src)
	switch {
	case err != nil || u.Scheme != "https" || u.Host == "" || u.Hostname() == "":
		return errors.New("must be an https: URL or a data: URI of an image")
	case u.User != nil:
		return errors.New("must not carry credentials")
	}
	return nil
}

// AppViewServed reports whether the tenant serves uri as a view: a
// static resource of that URI (resource finds it) or, failing one, the
// first template (by name) whose URI template matches it; either must be
// a view (AppMimeType). The error says what is missing.
func AppViewServed(uri string, resource func(uri string) *Resource, templates []ResourceTemplate) error {
	if r := resource(uri); r != nil {
		if r.MimeType != AppMimeType {
			return fmt.Errorf("resource %q (%s) is not a view: its mimeType is %q, not %q", r.Name, uri, r.MimeType, AppMimeType)
		}
		return nil
	}
	sorted := slices.Clone(templates)
	slices.SortFunc(sorted, func(a, b ResourceTemplate) int { return strings.Compare(a.Name, b.Name) })
	for _, t := range sorted {
		tmpl, err := ParseURITemplate(t.URITemplate)
		if err != nil {
			continue
		}
		if _, ok := tmpl.Match(uri); ok {
			if t.MimeType != AppMimeType {
				return fmt.Errorf("resource template %q serves %s but is not a view: its mimeType is %q, not %q", t.Name, uri, t.MimeType, AppMimeType)
			}
			return nil
		}
	}
	return fmt.Errorf("no resource or resource template of this tenant serves %s", uri)
}

// ViewCSP is the Content Security Policy a host builds for a view from
// its _meta.ui (the csp lists; absent lists allow nothing), as the
// extension describes, with one difference: no 'self', since a preview
// shares no dedicated origin. Origins were validated at registration;
// anything else found in a list is left out.
func ViewCSP(ui json.RawMessage) string {
	var v viewUI
	_ = json.Unmarshal(ui, &v)
	var csp struct{ connect, resource, frame, base []string }
	if v.CSP != nil {
		keep := func(list []string) []string {
			var out []string
			for _, o := range list {
				if validateOrigin(o) == nil {
					out = append(out, o)
				}
			}
			return out
		}
		csp.connect, csp.resource, csp.frame, csp.base = keep(v.CSP.ConnectDomains), keep(v.CSP.ResourceDomains), keep(v.CSP.FrameDomains), keep(v.CSP.BaseURIDomains)
	}
	or := func(list []string, none string) string {
		if len(list) == 0 {
			return none
		}
		return strings.Join(list, " ")
	}
	res := strings.Join(csp.resource, " ")
	with := func(first string) string { return strings.TrimSpace(first + " " + res) }
	return strings.Join([]string{
		"default-src 'none'",
		with("script-src 'unsafe-inline'"),
		with("style-src 'unsafe-inline'"),
		with("img-src data:"),
		with("font-src data:"),
		with("media-src data:"),
		"connect-src " + or(csp.connect, "'none'"),
		"frame-src " + or(csp.frame, "'none'"),
		"base-uri " + or(csp.base, "'none'"),
		"form-action 'none'",
		"object-src 'none'",
	}, "; ")
}

// ViewUIOf is the ui member of a view's _meta, by its exact key (nil
// for none).
func ViewUIOf(meta json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(meta, &m)
	return m["ui"]
}

// ValidateViewMeta checks a view's _meta as a template handler returned
// it with a read: an object, no key twice, and its ui (by its exact key)
// as a registered view's is checked.
func ValidateViewMeta(meta json.RawMessage) error {
	var p problems
	if m := p.meta("_meta", meta); m != nil {
		if ui, ok := m["ui"]; ok {
			p.uiOfView("_meta.ui", ui)
		}
	}
	return p.err()
}
