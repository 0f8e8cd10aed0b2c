package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opsmcp/platform/catalogue"
	"github.com/opsmcp/platform/mcp"
)

// targetActivity answers GET /tenants/{slug}/activity: the tenant's
// calls over the last day by method and target, with how many failed or
// were refused (the catalogue view's failure rates).
func (s *Server) targetActivity(c *gin.Context) {
	t := tenantOf(c)
	if t == nil {
		writeProblem(c, probNotFound.with("tenant \""+c.Param("slug")+"\": not found"))
		return
	}
	if p := unknownParams(c, nil); len(p) > 0 {
		writeProblem(c, probMalformed.with("unknown parameters", p...))
		return
	}
	acts, err := s.opts.Record.TargetActivities(c.Request.Context(), t.ID, time.Now().Add(-targetWindow))
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	// Reads of a template's URIs count as the template's (a static
	// resource of the URI takes it first, as reads do).
	resources, templates, err := s.viewsOf(c, t.Slug)
	if err != nil {
		s.storeProblem(c, err)
		return
	}
	type item struct {
		Method      string  `json:"method"`
		Target      string  `json:"target"`
		Template    string  `json:"template,omitempty"`
		Calls       int64   `json:"calls"`
		Failed      int64   `json:"failed"`
		FailureRate float64 `json:"failureRate"`
	}
	out := make([]item, 0, len(acts))
	byTemplate := map[string]int{}
	for _, a := range acts {
		if a.Target == "" {
			continue // refused before its target was known
		}
		if a.Method == mcp.MethodResourcesRead && !resources[a.Target] {
			if name := matchTemplate(templates, a.Target); name != "" {
				i, ok := byTemplate[name]
				if !ok {
					i = len(out)
					byTemplate[name] = i
					out = append(out, item{Method: a.Method, Template: name})
				}
				out[i].Calls += a.Calls
				out[i].Failed += a.Failed
				continue
			}
		}
		out = append(out, item{Method: a.Method, Target: a.Target, Calls: a.Calls, Failed: a.Failed})
	}
	for i := range out {
		out[i].FailureRate = float64(out[i].Failed) / float64(max(out[i].Calls, 1))
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"window": targetWindow.String(), "items": out})
}

// namedTemplate is a resource template parsed, by name.
type namedTemplate struct {
	name string
	tmpl *catalogue.URITemplate
}

// viewsOf reads a tenant's static resources' URIs and its templates,
// parsed, in name order.
func (s *Server) viewsOf(c *gin.Context, slug string) (map[string]bool, []namedTemplate, error) {
	resources := map[string]bool{}
	var templates []namedTemplate
	for _, kind := range []catalogue.Kind{catalogue.KindResource, catalogue.KindResourceTemplate} {
		after := ""
		for {
			items, err := s.opts.Tenants.ListItems(c.Request.Context(), slug, string(kind), after, 200)
			if err != nil {
				return nil, nil, err
			}
			for _, it := range items {
				if kind == catalogue.KindResource {
					if it.URI != nil {
						resources[*it.URI] = true
					}
					continue
				}
				var rt catalogue.ResourceTemplate
				if json.Unmarshal([]byte(it.Spec), &rt) != nil {
					continue
				}
				if tmpl, err := catalogue.ParseURITemplate(rt.URITemplate); err == nil {
					templates = append(templates, namedTemplate{rt.Name, tmpl})
				}
			}
			if len(items) < 200 {
				break
			}
			after = items[len(items)-1].Name
		}
	}
	return resources, templates, nil
}

// matchTemplate is the first template (by name) uri expands from, "" for
// none.
func matchTemplate(templates []namedTemplate, uri string) string {
	for _, t := range templates {
		if _, ok := t.tmpl.Match(uri); ok {
			return t.name
		}
	}
	return ""
}

// targetWindow is the window of a tenant's failure rates by target.
const targetWindow = 24 * time.Hour
