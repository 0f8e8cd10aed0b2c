// Package web is the admin UI: a few static pages and plain JavaScript
// modules, embedded in the binary (go build needs nothing but Go), that
// talk to the rest of the platform only through the admin API and its
// live flow stream, with the signed-in admin's session cookie.
//
// It is deliberately build-free: no bundler, no framework, no generated
// assets. Each page is one ES module that fetches JSON and renders DOM;
// the browser caches the assets by content hash.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// UI serves the admin UI.
type UI struct {
	files map[string]asset
	index asset
}

type asset struct {
	body []byte
	etag string
	ct   string
}

// New loads the embedded assets once.
func New() (*UI, error) {
	u := &UI{files: map[string]asset{}}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		u.files[strings.TrimPrefix(p, "static/")] = asset{body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, ct: ct}
		return nil
	})
	if err != nil {
		return nil, err
	}
	u.index = u.files["index.html"]
	return u, nil
}

// Pages are the UI's routes under /admin/; each serves the same shell,
// whose script renders the page the path names.
// A flow opens by its id alone; /admin/flows/{tenant}/{flow} is a link
// from before, still served.
var Pages = []string{"/admin/", "/admin/flows", "/admin/flows/:flow", "/admin/flows/:flow/:older", "/admin/tenants", "/admin/tenants/:slug", "/admin/sessions", "/admin/keys", "/admin/audit"}

// StaticPrefix is where the assets are served.
const StaticPrefix = "/admin/static/"

// securityHeaders keep the UI's pages to their own scripts and styles
// and out of frames.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
}

// ServePage answers a page route with the shell.
func (u *UI) ServePage(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w.Header())
	w.Header().Set("Cache-Control", "no-cache")
	u.serve(w, r, u.index)
}

// ServeStatic answers GET /admin/static/{file}.
func (u *UI) ServeStatic(w http.ResponseWriter, r *http.Request) {
	a, ok := u.files[strings.TrimPrefix(r.URL.Path, StaticPrefix)]
	if !ok || strings.HasSuffix(r.URL.Path, ".html") {
		http.NotFound(w, r)
		return
	}
	securityHeaders(w.Header())
	w.Header().Set("Cache-Control", "no-cache") // revalidated by ETag: a new binary serves new assets at once
	u.serve(w, r, a)
}

func (u *UI) serve(w http.ResponseWriter, r *http.Request, a asset) {
	w.Header().Set("Content-Type", a.ct)
	w.Header().Set("ETag", a.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
