package api

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/opsmcp/platform/catalogue"
)

// previewView answers GET /tenants/{slug}/resources/{name}/preview: a
// static view's HTML as a host would render it, for the admin UI's
// preview frame. The Content Security Policy is the one a host builds
// from the view's metadata, and it sandboxes the document (scripts
// only): the view runs in an opaque origin, so it can read none of the
// admin's cookies or storage, reaches nothing its metadata does not
// declare (the admin API included), and cannot navigate the page.
func (s *Server) previewView(c *gin.Context) {
	// Only as a frame's document (or read by the UI's own fetch): a
	// view opened as a page of its own, by a link it lured an admin to,
	// would run at the top of a tab.
	if dest := c.GetHeader("Sec-Fetch-Dest"); dest != "" && dest != "iframe" && dest != "empty" {
		writeProblem(c, probForbidden.with("a view is previewed in the admin UI's frame, not as a page of its own"))
		return
	}
	it, err := s.opts.Tenants.GetItem(c.Request.Context(), c.Param("slug"), string(catalogue.KindResource), c.Param("name"))
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	var r catalogue.Resource
	if err := json.Unmarshal([]byte(it.Spec), &r); err != nil {
		s.storeProblem(c, fmt.Errorf("resource %q: %w", it.Name, err))
		return
	}
	if r.MimeType != catalogue.AppMimeType || !catalogue.IsAppURI(r.URI) {
		writeProblem(c, probConflict.with(fmt.Sprintf("resource %q is not a view (a ui:// resource of type %s)", r.Name, catalogue.AppMimeType)))
		return
	}
	var body []byte
	switch {
	case r.Text != nil:
		body = []byte(*r.Text)
	default:
		if body, err = base64.StdEncoding.DecodeString(r.Blob); err != nil {
			s.storeProblem(c, fmt.Errorf("resource %q: %w", it.Name, err))
			return
		}
	}
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", "sandbox allow-scripts; "+catalogue.ViewCSP(catalogue.ViewUIOf(r.Meta))+"; frame-ancestors 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	c.Data(http.StatusOK, "text/html; charset=utf-8", body)
}
