package api

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gin-gonic/gin"

	"github.com/opsmcp/platform/catalogue"
	"github.com/opsmcp/platform/store"
)

// A tool may link to a view (MCP Apps: _meta.ui.resourceUri), a ui://
// resource of the same tenant, static or from a template. The link is
// checked in the write's transaction, on the catalogue the write leaves:
// a tool is not created linking to a view the tenant does not serve, and
// a view is not deleted or changed while a tool links to it.

// linkError is a write that would leave a tool's view unserved.
type linkError struct {
	// tool is the linking tool; field is set when the tool is the item
	// written (its own link is bad), else a view's write broke the link.
	tool, field, why string
}

func (e *linkError) Error() string { return e.why }

// linkCheck is the check an item write carries: a tool's own link must
// resolve; any other write (of a view, or a view's deletion) must leave
// every tool's link resolving. Prompts change no link and carry none.
func linkCheck(kind catalogue.Kind, def catalogue.Definition) store.CatalogueCheck {
	switch kind {
	case catalogue.KindTool:
		t, _ := def.(*catalogue.Tool)
		if t == nil || t.AppLink() == "" {
			return nil
		}
		field := t.AppLinkField()
		return func(v store.CatalogueView) error {
			templates, err := viewTemplates(v)
			if err != nil {
				return err
			}
			if err := resolveLink(v, templates, t.AppLink()); err != nil {
				return &linkError{tool: t.Name, field: field, why: err.Error()}
			}
			return nil
		}
	case catalogue.KindResource, catalogue.KindResourceTemplate:
		return everyLinkResolves
	}
	return nil
}

// everyLinkResolves checks that every tool's view is served.
func everyLinkResolves(v store.CatalogueView) error {
	tools, err := v.Items(string(catalogue.KindTool))
	if err != nil {
		return err
	}
	var templates []catalogue.ResourceTemplate
	loaded := false
	for _, it := range tools {
		var t catalogue.Tool
		if json.Unmarshal([]byte(it.Spec), &t) != nil || t.AppLink() == "" {
			continue
		}
		if !loaded {
			if templates, err = viewTemplates(v); err != nil {
				return err
			}
			loaded = true
		}
		if err := resolveLink(v, templates, t.AppLink()); err != nil {
			return &linkError{tool: t.Name, why: fmt.Sprintf("tool %q links to %s as its view, which this change would leave unserved (%v): change or delete the tool first", t.Name, t.AppLink(), err)}
		}
	}
	return nil
}

// viewTemplates are the tenant's resource templates, read once for a
// check however many links it resolves.
func viewTemplates(v store.CatalogueView) ([]catalogue.ResourceTemplate, error) {
	items, err := v.Items(string(catalogue.KindResourceTemplate))
	if err != nil {
		return nil, err
	}
	templates := make([]catalogue.ResourceTemplate, 0, len(items))
	for _, it := range items {
		var t catalogue.ResourceTemplate
		if json.Unmarshal([]byte(it.Spec), &t) == nil {
			templates = append(templates, t)
		}
	}
	return templates, nil
}

// resolveLink reports whether the tenant serves uri as a view: a static
// resource of that URI (one indexed read), else one of its templates.
func resolveLink(v store.CatalogueView, templates []catalogue.ResourceTemplate, uri string) error {
	it, err := v.Resource(uri)
	if err != nil {
		return err
	}
	var res *catalogue.Resource
	if it != nil {
		res = new(catalogue.Resource)
		if err := json.Unmarshal([]byte(it.Spec), res); err != nil {
			return fmt.Errorf("resource %q: %w", it.Name, err)
		}
	}
	return catalogue.AppViewServed(uri, func(string) *catalogue.Resource { return res }, templates)
}

// linkProblem answers a write a link check refused, and reports whether
// err was one.
func linkProblem(c *gin.Context, kind catalogue.Kind, err error) bool {
	var le *linkError
	if !errors.As(err, &le) {
		return false
	}
	if le.field != "" {
		writeProblem(c, probValidation.with("the tool's view is not served by this tenant", FieldError{Field: le.field, Message: le.why}))
		return true
	}
	writeProblem(c, probConflict.with(fmt.Sprintf("the %s is a tool's view: %s", kind, le.why)))
	return true
}
