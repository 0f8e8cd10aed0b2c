package endpoint

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/mcp"
)

// listChanges says which lists of a tenant changed, and whether the
// content of a static resource did (which legacy sessions subscribed to
// it are told of), and whether the tenant itself did (its settings,
// disabled, deleted): then every stream re-checks it may go on.
type listChanges struct {
	tools, prompts, resources bool
	// legacyTools: the tool list legacy sessions see changed (a tool's
	// task mode shows there alone).
	legacyTools bool
	contents    bool
	tenant      bool
}

// everything is the change of a tenant that is gone.
var everything = listChanges{tools: true, prompts: true, resources: true, legacyTools: true, tenant: true}

func (c listChanges) any() bool {
	return c.tools || c.prompts || c.resources || c.legacyTools || c.contents || c.tenant
}

func (c listChanges) merge(o listChanges) listChanges {
	return listChanges{c.tools || o.tools, c.prompts || o.prompts, c.resources || o.resources,
		c.legacyTools || o.legacyTools, c.contents || o.contents, c.tenant || o.tenant}
}

// changes compares two snapshots' rendered lists and resources; any new
// snapshot is a change of the tenant for the streams to re-check.
func changes(old, cur *snapshot) listChanges {
	return listChanges{
		tools:       !sameList(old.toolList, cur.toolList),
		prompts:     !sameList(old.promptLst, cur.promptLst),
		resources:   !sameList(old.resList, cur.resList) || !sameList(old.tmplList, cur.tmplList),
		legacyTools: !sameList(old.legacyToolList, cur.legacyToolList),
		contents:    !sameResources(old.resources, cur.resources),
		tenant:      true,
	}
}

func sameList(a, b []json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// hub fans catalogue changes out to open subscriptions/listen streams,
// and bounds how many a tenant, and a principal of it, may hold.
type hub struct {
	perTenant, perPrincipal int

	mu     sync.Mutex
	subs   map[string]map[chan listChanges]struct{}
	held   map[string]int // streams per tenant slug + "\x00" + principal binding
	closed bool
}

func newHub(perTenant, perPrincipal int) *hub {
	return &hub{perTenant: perTenant, perPrincipal: perPrincipal, subs: map[string]map[chan listChanges]struct{}{}, held: map[string]int{}}
}

// errTooManyStreams is a subscription over a tenant's or a principal's
// limit of open streams.
type errTooManyStreams struct{ whose string }

func (e errTooManyStreams) Error() string { return "too many open streams for this " + e.whose }

// subscribe returns a channel of changes for slug, held by principal (its
// binding, "" for none); it is closed when the hub closes. cancel
// unsubscribes. A tenant or principal at its limit of open streams gets
// errTooManyStreams.
func (h *hub) subscribe(slug, principal string) (ch chan listChanges, cancel func(), err error) {
	ch = make(chan listChanges, 8)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(ch)
		return ch, func() {}, nil
	}
	byPrincipal := slug + "\x00" + principal
	switch {
	case len(h.subs[slug]) >= h.perTenant:
		return nil, nil, errTooManyStreams{"tenant"}
	case principal != "" && h.held[byPrincipal] >= h.perPrincipal:
		return nil, nil, errTooManyStreams{"principal"}
	}
	if h.subs[slug] == nil {
		h.subs[slug] = map[chan listChanges]struct{}{}
	}
	h.subs[slug][ch] = struct{}{}
	h.held[byPrincipal]++
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[slug][ch]; ok {
			delete(h.subs[slug], ch)
			if len(h.subs[slug]) == 0 {
				delete(h.subs, slug)
			}
			if h.held[byPrincipal]--; h.held[byPrincipal] <= 0 {
				delete(h.held, byPrincipal)
			}
			close(ch)
		}
	}, nil
}

// streaming reports whether a stream of slug is open here (its tenant
// stays cached: its changes must reach the stream).
func (h *hub) streaming(slug string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[slug]) > 0
}

// publish delivers c to every subscriber of slug without blocking: a slow
// subscriber's pending changes are merged instead of queued.
func (h *hub) publish(slug string, c listChanges) {
	if !c.any() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[slug] {
		select {
		case ch <- c:
		default:
			// The buffer is full: the subscriber will still learn that
			// lists changed from the changes already queued, except for a
			// kind only this one names, so drain one and merge.
			select {
			case prev := <-ch:
				ch <- prev.merge(c)
			default:
			}
		}
	}
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, subs := range h.subs {
		for ch := range subs {
			close(ch)
		}
	}
	h.subs = map[string]map[chan listChanges]struct{}{}
}

// streamHold is what a long-lived stream (subscriptions/listen, a legacy
// session's GET) holds: its place among the tenant's and the caller's
// streams, the tenant's changes, and the time it must end by.
type streamHold struct {
	changes chan listChanges
	ending  *time.Timer
	leave   func()
}

func (h *streamHold) release() {
	h.ending.Stop()
	h.leave()
}

// holdStream takes a stream's place for principal p (nil: none) on the
// tenant, or answers 429 when the tenant or the caller holds as many as
// it may. The stream must end at its maximum lifetime or when the
// caller's token expires, whichever comes first: ending fires then.
func (e *Handler) holdStream(x *exchange, snap *snapshot, p *auth.Principal) (*streamHold, bool) {
	ch, leave, err := e.hub.subscribe(snap.slug, p.Binding())
	if err != nil {
		x.fail(newError(http.StatusTooManyRequests, mcp.CodeInvalidRequest, "Too many open streams: "+err.Error()+"; close one first", nil))
		return nil, false
	}
	// The tenant is pinned in the cache from now on; if it was evicted
	// since the request looked it up, a change made meanwhile is one the
	// stream would never hear of: load it again and tell the stream.
	if cur, _, _ := e.catalogues.known(snap.slug); cur == nil {
		if cur, err := e.catalogues.lookup(x.ctx, snap.slug); err == nil && cur != nil && cur.version != snap.version {
			e.hub.publish(snap.slug, everything)
		}
	}
	deadline := time.Now().Add(e.opts.StreamMaxLifetime)
	if p != nil && !p.Expires.IsZero() && p.Expires.Before(deadline) {
		deadline = p.Expires
	}
	return &streamHold{changes: ch, ending: time.NewTimer(time.Until(deadline)), leave: leave}, true
}

// mayStay reports whether a stream opened by p on the tenant of snap may
// stay open as the tenant is now: it still exists and is enabled, and
// the caller's token would still be accepted by it (same issuer trusted,
// audience, machine consent), or the tenant is public. The verifier
// remembers the token, so the re-check costs no signature.
func (e *Handler) mayStay(x *exchange, snap *snapshot, p *auth.Principal) bool {
	cur, err := e.catalogues.lookup(x.ctx, snap.slug)
	if err != nil || cur == nil || cur.disabled || cur.tenantID != snap.tenantID {
		return false
	}
	if cur.settings.Auth.Public {
		return true
	}
	tok, ok := auth.BearerToken(x.req.Header)
	if !ok {
		return false
	}
	now, err := e.verifier.Verify(x.ctx, tok, cur.settings.Auth, cur.audience)
	return err == nil && now.Binding() == p.Binding()
}

// sameResource reports whether a static resource is unchanged between two
// snapshots, content included (nil: absent).
func sameResource(a, b *resourceEntry) bool {
	if a == nil || b == nil {
		return a == b
	}
	ra, _ := json.Marshal(a.def)
	rb, _ := json.Marshal(b.def)
	return bytes.Equal(ra, rb)
}

// sameResources reports whether two snapshots hold the same static
// resources, content included.
func sameResources(a, b map[string]*resourceEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for uri, r := range a {
		if !sameResource(r, b[uri]) {
			return false
		}
	}
	return true
}
