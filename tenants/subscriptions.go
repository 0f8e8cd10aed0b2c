package tenants

import (
	"bytes"
	"encoding/json"
	"sync"
)

// listChanges says which lists of a tenant changed, and whether the
// content of a static resource did (which legacy sessions subscribed to
// it are told of).
type listChanges struct {
	tools, prompts, resources bool
	contents                  bool
}

func (c listChanges) any() bool { return c.tools || c.prompts || c.resources || c.contents }

// changes compares two snapshots' rendered lists and resources.
func changes(old, cur *snapshot) listChanges {
	return listChanges{
		tools:     !sameList(old.toolList, cur.toolList),
		prompts:   !sameList(old.promptLst, cur.promptLst),
		resources: !sameList(old.resList, cur.resList) || !sameList(old.tmplList, cur.tmplList),
		contents:  !sameResources(old.resources, cur.resources),
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

// hub fans catalogue changes out to open subscriptions/listen streams.
type hub struct {
	mu     sync.Mutex
	subs   map[string]map[chan listChanges]struct{}
	closed bool
}

func newHub() *hub { return &hub{subs: map[string]map[chan listChanges]struct{}{}} }

// subscribe returns a channel of changes for slug; it is closed when the
// hub closes. cancel unsubscribes.
func (h *hub) subscribe(slug string) (ch chan listChanges, cancel func()) {
	ch = make(chan listChanges, 8)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(ch)
		return ch, func() {}
	}
	if h.subs[slug] == nil {
		h.subs[slug] = map[chan listChanges]struct{}{}
	}
	h.subs[slug][ch] = struct{}{}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[slug][ch]; ok {
			delete(h.subs[slug], ch)
			close(ch)
		}
	}
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
				ch <- listChanges{prev.tools || c.tools, prev.prompts || c.prompts, prev.resources || c.resources, prev.contents || c.contents}
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
