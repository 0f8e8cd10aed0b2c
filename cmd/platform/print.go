package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/opsmcp/platform/client"
)

// printer writes results.
type printer struct {
	w    io.Writer
	json bool
}

func (p *printer) raw(raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		buf.Reset()
		buf.Write(raw)
	}
	buf.WriteByte('\n')
	_, err := p.w.Write(buf.Bytes())
	return err
}

func (p *printer) asJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(p.w, "%s\n", b)
	return err
}

// task prints a task: its id, status and message, and what it asks or
// ended with.
func (p *printer) task(t *client.Task) error {
	if p.json {
		return p.raw(t.Raw)
	}
	fmt.Fprintf(p.w, "task %s: %s", t.ID, t.Status)
	if t.StatusMessage != "" {
		fmt.Fprintf(p.w, " (%s)", t.StatusMessage)
	}
	fmt.Fprintln(p.w)
	for key, req := range t.InputRequests {
		fmt.Fprintf(p.w, "  asks %s: %s\n", key, req.Method)
	}
	if t.Error != nil {
		fmt.Fprintf(p.w, "  error %d: %s\n", t.Error.Code, t.Error.Message)
	}
	return nil
}

func (p *printer) tools(tools []client.Tool) error {
	if p.json {
		return p.asJSON(obj{"tools": tools})
	}
	tw := newColumns(p.w)
	for _, t := range tools {
		tw.row(t.Name, firstLine(t.Description))
	}
	return tw.flush()
}

func (p *printer) prompts(prompts []client.Prompt) error {
	if p.json {
		return p.asJSON(obj{"prompts": prompts})
	}
	tw := newColumns(p.w)
	for _, pr := range prompts {
		var args []string
		for _, a := range pr.Arguments {
			if a.Required {
				args = append(args, a.Name)
			} else {
				args = append(args, "["+a.Name+"]")
			}
		}
		tw.row(pr.Name, strings.Join(args, " "), firstLine(pr.Description))
	}
	return tw.flush()
}

func (p *printer) resources(res []client.Resource, tmpls []client.ResourceTemplate) error {
	if p.json {
		return p.asJSON(obj{"resources": res, "resourceTemplates": tmpls})
	}
	tw := newColumns(p.w)
	for _, r := range res {
		tw.row(r.URI, r.Name, firstLine(r.Description))
	}
	for _, t := range tmpls {
		tw.row(t.URITemplate, t.Name+" (template)", firstLine(t.Description))
	}
	return tw.flush()
}

func (p *printer) toolResult(res *client.CallToolResult) error {
	if p.json {
		return p.raw(res.Raw)
	}
	for _, c := range res.Content {
		fmt.Fprintln(p.w, describeContent(c))
	}
	if len(res.Content) == 0 && len(res.StructuredContent) > 0 {
		return p.raw(res.StructuredContent)
	}
	return nil
}

func (p *printer) promptResult(res *client.GetPromptResult) error {
	if p.json {
		return p.raw(res.Raw)
	}
	if res.Description != "" {
		fmt.Fprintln(p.w, res.Description)
	}
	for _, m := range res.Messages {
		fmt.Fprintf(p.w, "%s: %s\n", m.Role, describeContent(m.Content))
	}
	return nil
}

func (p *printer) resourceResult(res *client.ReadResourceResult) error {
	if p.json {
		return p.raw(res.Raw)
	}
	for _, c := range res.Contents {
		fmt.Fprintln(p.w, describeResource(c))
	}
	return nil
}

func describeContent(c client.Content) string {
	switch c.Type {
	case "text":
		return c.Text
	case "image", "audio":
		return fmt.Sprintf("[%s %s, %d bytes]", c.Type, c.MimeType, len(c.Data)*3/4)
	case "resource_link":
		return fmt.Sprintf("[link %s %s]", c.Name, c.URI)
	case "resource":
		if c.Resource != nil {
			return describeResource(*c.Resource)
		}
	}
	return string(c.Raw)
}

func describeResource(r client.ResourceContents) string {
	if r.Blob != "" {
		return fmt.Sprintf("[%s %s, %d bytes]", r.URI, r.MimeType, len(r.Blob)*3/4)
	}
	return r.Text
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// columns aligns rows of text.
type columns struct {
	w    io.Writer
	rows [][]string
}

func newColumns(w io.Writer) *columns { return &columns{w: w} }

func (c *columns) row(cells ...string) { c.rows = append(c.rows, cells) }

func (c *columns) flush() error {
	var widths []int
	for _, r := range c.rows {
		for i, cell := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	for _, r := range c.rows {
		var b strings.Builder
		for i, cell := range r {
			b.WriteString(cell)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-len([]rune(cell))+2))
			}
		}
		if _, err := fmt.Fprintln(c.w, strings.TrimRight(b.String(), " ")); err != nil {
			return err
		}
	}
	return nil
}

// obj is a JSON object being built.
type obj = map[string]any
