package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/opsmcp/platform/client"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
)

const callUsage = `platform call: an MCP client for trying endpoints (protocol 2026-07-28).

Usage:
  platform call URL tools                       list the tools
  platform call URL tool NAME [--arg k=v ...] [--json '{...}']
                                                call a tool
  platform call URL prompts                     list the prompts
  platform call URL prompt NAME [--arg k=v ...] get a prompt
  platform call URL resources                   list resources and templates
  platform call URL resource URI                read a resource

When the server needs input mid-call, the questions are asked on the
terminal: form fields typed from the requested schema, URLs to open,
sampling requests to answer. Without a terminal (or with --no-input), the
answers come from --answers FILE: a JSON object whose members are input
keys (an elicitation result, or the form content, or "accept", "decline",
"cancel"; a sampling reply as text) or form field names.

Flags:
`

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type callFlags struct {
	token     string
	answers   string
	roots     stringList
	args      stringList
	json      string
	verbose   bool
	output    string
	noInput   bool
	maxRounds int
	timeout   time.Duration
}

// call runs "platform call". stdin is the terminal when interactive.
func call(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "platform call: internal error: %v\n", r)
			code = 1
		}
	}()
	var f callFlags
	fs := flag.NewFlagSet("platform call", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, callUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&f.token, "token", "", "bearer token (default $PLATFORM_TOKEN)")
	fs.StringVar(&f.answers, "answers", "", "JSON `file` of answers to the server's questions")
	fs.Var(&f.roots, "root", "a root to offer the server: a file:// URI or a path (repeatable)")
	fs.Var(&f.args, "arg", "an argument `k=v`, typed from the tool's schema (repeatable)")
	fs.StringVar(&f.json, "json", "", "arguments as a JSON object (--arg values override its members)")
	fs.BoolVar(&f.verbose, "verbose", false, "print each round's questions and timings to stderr")
	fs.StringVar(&f.output, "output", "text", "result format: text or json")
	fs.BoolVar(&f.noInput, "no-input", false, "never ask on the terminal; unanswered questions are errors")
	fs.IntVar(&f.maxRounds, "max-rounds", mrtr.DefaultMaxRounds, "most rounds of input one call may take")
	fs.DurationVar(&f.timeout, "timeout", 0, "bound on the whole call (0: none)")

	// Flags may come before, between or after the positional arguments.
	var pos []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		rest = fs.Args()
		if len(rest) == 0 {
			break
		}
		if rest[0] == "--" {
			pos = append(pos, rest[1:]...)
			break
		}
		pos = append(pos, rest[0])
		rest = rest[1:]
	}
	usageErr := func(msg string) int {
		fmt.Fprintf(stderr, "platform call: %s (see platform call --help)\n", msg)
		return 2
	}
	if len(pos) < 2 {
		return usageErr("want a URL and what to do")
	}
	if f.output != "text" && f.output != "json" {
		return usageErr("--output must be text or json")
	}
	endpoint, verb, rest := pos[0], pos[1], pos[2:]
	wantArgs := map[string]int{"tools": 0, "prompts": 0, "resources": 0, "tool": 1, "prompt": 1, "resource": 1}
	n, ok := wantArgs[verb]
	if !ok {
		return usageErr(fmt.Sprintf("unknown action %q", verb))
	}
	if len(rest) != n {
		if n == 0 {
			return usageErr(fmt.Sprintf("%s takes no further argument", verb))
		}
		return usageErr(fmt.Sprintf("%s takes exactly one name or URI", verb))
	}
	if (len(f.args) > 0 || f.json != "") && verb != "tool" && verb != "prompt" {
		return usageErr("--arg and --json apply to tool and prompt")
	}
	if f.json != "" && verb != "tool" {
		return usageErr("--json applies to tool")
	}

	err := runCall(endpoint, verb, rest, &f, stdin, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "platform call: "+oneLineErr(err))
		return 1
	}
	return 0
}

func oneLineErr(err error) string {
	var ce *callError
	if errors.As(err, &ce) {
		return ce.msg
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// callError is an error already phrased for the person.
type callError struct{ msg string }

func (e *callError) Error() string { return e.msg }

func runCall(endpoint, verb string, rest []string, f *callFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	u := &ui{out: stderr, verbose: f.verbose}
	if file, ok := stdin.(*os.File); ok && !f.noInput && term.IsTerminal(int(file.Fd())) {
		u.in = newLineReader(file)
	}
	if f.answers != "" {
		b, err := os.ReadFile(f.answers)
		if err != nil {
			return fmt.Errorf("reading the answers: %w", err)
		}
		if err := json.Unmarshal(b, &u.answers); err != nil {
			return &callError{fmt.Sprintf("the answers file %s is not a JSON object: %v", f.answers, err)}
		}
	}
	roots, err := rootsFrom(f.roots)
	if err != nil {
		return err
	}
	token := f.token
	if token == "" {
		token = os.Getenv("PLATFORM_TOKEN")
	}
	opts := client.Options{
		ClientInfo: client.Implementation{Name: "platform-call", Version: version},
		ElicitForm: u.elicitForm,
		ElicitURL:  u.elicitURL,
		Sample:     u.sample,
		MaxRounds:  f.maxRounds,
		Observer:   u.observe,
	}
	if len(roots) > 0 {
		opts.Roots = client.StaticRoots(roots...)
	}
	if token != "" {
		opts.TokenSource = client.StaticToken(token)
	}
	c, err := client.New(endpoint, opts)
	if err != nil {
		return err
	}
	start := time.Now()
	d, err := c.Discover(ctx)
	switch {
	case client.IsCode(err, mcp.CodeMethodNotFound):
	case err != nil:
		return explain(err)
	case f.verbose:
		fmt.Fprintf(stderr, "server %s %s, protocol %s (%s)\n", d.ServerInfo.Name, d.ServerInfo.Version, c.ProtocolVersion(), ms(time.Since(start)))
	}
	out := &printer{w: stdout, json: f.output == "json"}
	switch verb {
	case "tools":
		res, err := c.AllTools(ctx)
		if err != nil {
			return explain(err)
		}
		for _, d := range c.DroppedTools() {
			fmt.Fprintf(stderr, "skipped tool %s: %s\n", d.Name, d.Reason)
		}
		return out.tools(res)
	case "prompts":
		res, err := c.AllPrompts(ctx)
		if err != nil {
			return explain(err)
		}
		return out.prompts(res)
	case "resources":
		res, err := c.AllResources(ctx)
		if err != nil {
			return explain(err)
		}
		tmpls, err := c.AllResourceTemplates(ctx)
		if err != nil && !client.IsCode(err, mcp.CodeMethodNotFound) {
			return explain(err)
		}
		return out.resources(res, tmpls)
	case "tool":
		tool, err := findTool(ctx, c, rest[0])
		if err != nil {
			return explain(err)
		}
		args, err := toolArguments(tool, f.json, f.args)
		if err != nil {
			return err
		}
		res, err := c.CallTool(ctx, rest[0], args)
		if err != nil {
			return explain(err)
		}
		if err := out.toolResult(res); err != nil {
			return err
		}
		if res.IsError {
			return &callError{fmt.Sprintf("the tool %s reported an error", rest[0])}
		}
		return nil
	case "prompt":
		args := map[string]string{}
		for _, kv := range f.args {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return &callError{fmt.Sprintf("--arg %q: want name=value", kv)}
			}
			args[k] = v
		}
		res, err := c.GetPrompt(ctx, rest[0], args)
		if err != nil {
			return explain(err)
		}
		return out.promptResult(res)
	case "resource":
		res, err := c.ReadResource(ctx, rest[0])
		if err != nil {
			return explain(err)
		}
		return out.resourceResult(res)
	}
	return nil
}

// explain adds what the person can do about an error.
func explain(err error) error {
	var re *client.RPCError
	if errors.As(err, &re) && re.Code == mcp.CodeMissingRequiredCapability {
		caps := re.RequiredCapabilities()
		hint := ""
		for _, c := range caps {
			if c == "roots" {
				hint = " (offer roots with --root)"
			}
		}
		return &callError{fmt.Sprintf("the server needs the client capabilities %s%s", strings.Join(caps, ", "), hint)}
	}
	if errors.Is(err, context.Canceled) {
		return &callError{"interrupted"}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &callError{"timed out"}
	}
	return err
}

// findTool returns the listed tool named name, or nil when the server did
// not list it (the call then goes ahead untyped).
func findTool(ctx context.Context, c *client.Client, name string) (*client.Tool, error) {
	tools, err := c.AllTools(ctx)
	if err != nil {
		return nil, err
	}
	for i := range tools {
		if tools[i].Name == name {
			return &tools[i], nil
		}
	}
	return nil, nil
}

// rootsFrom turns --root values into file:// roots.
func rootsFrom(values []string) ([]client.Root, error) {
	var roots []client.Root
	for _, v := range values {
		if strings.HasPrefix(v, "file://") {
			u, err := url.Parse(v)
			if err != nil {
				return nil, &callError{fmt.Sprintf("--root %q is not a URI: %v", v, err)}
			}
			roots = append(roots, client.Root{URI: v, Name: filepath.Base(u.Path)})
			continue
		}
		if strings.Contains(v, "://") {
			return nil, &callError{fmt.Sprintf("--root %q: roots are file:// URIs or paths", v)}
		}
		abs, err := filepath.Abs(v)
		if err != nil {
			return nil, err
		}
		u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
		roots = append(roots, client.Root{URI: u.String(), Name: filepath.Base(abs)})
	}
	return roots, nil
}

// toolArguments builds a tool's arguments from --json and --arg k=v,
// typing each value from the tool's input schema.
func toolArguments(tool *client.Tool, base string, kvs []string) (map[string]any, error) {
	args := map[string]any{}
	if base != "" {
		dec := json.NewDecoder(strings.NewReader(base))
		dec.UseNumber()
		if err := dec.Decode(&args); err != nil {
			return nil, &callError{fmt.Sprintf("--json is not a JSON object: %v", err)}
		}
	}
	var root map[string]any
	if tool != nil {
		_ = json.Unmarshal(tool.InputSchema, &root)
	}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, &callError{fmt.Sprintf("--arg %q: want name=value", kv)}
		}
		var prop map[string]any
		if props, ok := root["properties"].(map[string]any); ok {
			prop, _ = props[k].(map[string]any)
			prop = resolveLocalRef(root, prop)
		}
		val, err := typedValue(prop, v)
		if err != nil {
			return nil, &callError{fmt.Sprintf("--arg %s: %v", k, err)}
		}
		args[k] = val
	}
	return args, nil
}

// resolveLocalRef follows $refs within the schema document ("#/…");
// other $refs are never fetched: the property stays untyped.
func resolveLocalRef(root, prop map[string]any) map[string]any {
	for range 10 {
		ref, ok := prop["$ref"].(string)
		if !ok {
			return prop
		}
		ptr, ok := strings.CutPrefix(ref, "#")
		if !ok {
			return nil
		}
		var cur any = root
		for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
			if tok == "" {
				continue
			}
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			m, ok := cur.(map[string]any)
			if !ok {
				return nil
			}
			cur = m[tok]
		}
		prop, _ = cur.(map[string]any)
	}
	return prop
}

// typedValue converts an --arg value by its property schema's type.
func typedValue(prop map[string]any, v string) (any, error) {
	typ, _ := prop["type"].(string)
	switch typ {
	case "string":
		return v, nil
	case "integer":
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", v)
		}
		return n, nil
	case "number":
		n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
			return nil, fmt.Errorf("%q is not a number", v)
		}
		return json.Number(strings.TrimSpace(v)), nil
	case "boolean":
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%q is not true or false", v)
		}
		return b, nil
	case "object", "array", "null":
		var x any
		if err := json.Unmarshal([]byte(v), &x); err != nil {
			return nil, fmt.Errorf("%q is not JSON (%s expected)", v, typ)
		}
		return json.RawMessage(v), nil
	}
	// Untyped: JSON when it parses as a number, boolean, null, object
	// or array; a string otherwise.
	t := strings.TrimSpace(v)
	if t != "" && json.Valid([]byte(t)) && !strings.HasPrefix(t, `"`) {
		return json.RawMessage(t), nil
	}
	return v, nil
}

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

type obj = map[string]any

// ui answers the server's questions: from the answers file, then, when
// interactive, on the terminal, one question at a time in key order.
type ui struct {
	in      *lineReader // nil when not interactive
	out     io.Writer
	verbose bool
	answers map[string]json.RawMessage

	mu    sync.Mutex
	turns map[string]chan struct{} // closed when the key before it is done
	order map[string]string        // key -> the key before it
}

// observe shows the rounds as they happen and orders the round's
// questions for the terminal.
func (u *ui) observe(r mrtr.Round) {
	switch r.Phase {
	case mrtr.PhaseAsked:
		u.mu.Lock()
		u.turns, u.order = map[string]chan struct{}{}, map[string]string{}
		prev := ""
		for _, k := range r.Keys {
			u.turns[k] = make(chan struct{})
			u.order[k] = prev
			prev = k
		}
		u.mu.Unlock()
		if len(r.Keys) == 0 {
			fmt.Fprintf(u.out, "round %d: the server asks to retry later\n", r.Number)
		} else {
			fmt.Fprintf(u.out, "round %d: the server asks %s\n", r.Number, strings.Join(r.Keys, ", "))
		}
		if u.verbose {
			if r.Server > 0 {
				fmt.Fprintf(u.out, "  the server answered in %s\n", ms(r.Server))
			}
			for _, k := range r.Keys {
				fmt.Fprintf(u.out, "  %s: %s\n", k, mrtr.DescribeRequest(r.Requests[k]))
			}
			if r.StateBytes > 0 {
				fmt.Fprintf(u.out, "  requestState: %d bytes\n", r.StateBytes)
			}
		}
	case mrtr.PhaseAnswered:
		if u.verbose {
			line := fmt.Sprintf("round %d: answered in %s", r.Number, ms(r.Elapsed))
			if r.Wait > 0 {
				line += fmt.Sprintf("; retrying in %s", ms(r.Wait))
			}
			fmt.Fprintln(u.out, line)
		}
	case mrtr.PhaseComplete:
		if u.verbose && r.Number > 0 {
			fmt.Fprintf(u.out, "complete after %d round(s) in %s\n", r.Number, ms(r.Elapsed))
		}
	}
}

func ms(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}

// turn waits until every question before key is done; the returned
// function marks key done.
func (u *ui) turn(ctx context.Context, key string) (func(), error) {
	u.mu.Lock()
	prev, ok := u.order[key]
	var wait, mine chan struct{}
	if ok {
		mine = u.turns[key]
		if prev != "" {
			wait = u.turns[prev]
		}
	}
	u.mu.Unlock()
	done := func() {
		if mine != nil {
			close(mine)
		}
	}
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			done()
			return nil, context.Cause(ctx)
		}
	}
	return done, nil
}

// unanswered is the error for a question nobody can answer.
func unanswered(key, what, hint string) error {
	return &callError{fmt.Sprintf("no answer for %s (input %q): %s", what, key, hint)}
}

func (u *ui) elicitForm(ctx context.Context, req *client.ElicitRequest) (*client.ElicitResult, error) {
	done, err := u.turn(ctx, req.Key)
	if err != nil {
		return nil, err
	}
	defer done()
	fields, required, err := formFields(req.RequestedSchema)
	if err != nil {
		return nil, fmt.Errorf("question %q: %w", req.Message, err)
	}
	if res, ok, err := u.formFromAnswers(req, fields, required); ok || err != nil {
		return res, err
	}
	if u.in == nil {
		var names []string
		for _, f := range fields {
			names = append(names, f.name)
		}
		hint := fmt.Sprintf("add %q to the answers file", req.Key)
		if len(names) > 0 {
			hint = fmt.Sprintf("add %q (or the fields %s) to the answers file", req.Key, strings.Join(names, ", "))
		}
		return nil, unanswered(req.Key, strconv.Quote(req.Message), hint)
	}
	fmt.Fprintf(u.out, "\n? %s\n", req.Message)
	choice, err := u.ask(ctx, "  Answer? [Enter] yes, d decline, c cancel: ")
	if err != nil {
		return nil, err
	}
	switch strings.ToLower(strings.TrimSpace(choice)) {
	case "d", "decline", "n", "no":
		return &client.ElicitResult{Action: "decline"}, nil
	case "c", "cancel":
		return &client.ElicitResult{Action: "cancel"}, nil
	}
	content := map[string]any{}
	for _, f := range fields {
		for {
			line, err := u.ask(ctx, "  "+f.prompt(required[f.name])+": ")
			if err != nil {
				return nil, err
			}
			v, set, err := f.parse(line, required[f.name])
			if err != nil {
				fmt.Fprintf(u.out, "  ! %v\n", err)
				continue
			}
			if set {
				content[f.name] = v
			}
			break
		}
	}
	return &client.ElicitResult{Action: "accept", Content: content}, nil
}

// formFromAnswers answers a form from the answers file: by input key
// (an elicitation result, the content, or an action), else by field
// names. ok is false when the file says nothing about this question.
func (u *ui) formFromAnswers(req *client.ElicitRequest, fields []field, required map[string]bool) (*client.ElicitResult, bool, error) {
	if raw, ok := u.answers[req.Key]; ok {
		var action string
		if json.Unmarshal(raw, &action) == nil {
			switch action {
			case "accept", "decline", "cancel":
				if action != "accept" {
					return &client.ElicitResult{Action: action}, true, nil
				}
				res, _, err := u.formFromFields(req, fields, required, true)
				return res, true, err
			}
			if !hasField(fields, req.Key) {
				return nil, true, &callError{fmt.Sprintf("answer %q for %q: want accept, decline, cancel or an object", action, req.Key)}
			}
			// The key also names one of the form's fields: a field answer.
			return u.formFromFields(req, fields, required, false)
		}
		if !strings.HasPrefix(strings.TrimSpace(string(raw)), "{") && hasField(fields, req.Key) {
			return u.formFromFields(req, fields, required, false)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, true, &callError{fmt.Sprintf("answer for %q: want an object or an action", req.Key)}
		}
		if a, ok := m["action"]; ok {
			var res client.ElicitResult
			if err := json.Unmarshal(raw, &res); err != nil || json.Unmarshal(a, new(string)) != nil {
				return nil, true, &callError{fmt.Sprintf("answer for %q is not an elicitation result", req.Key)}
			}
			return &res, true, nil
		}
		content := map[string]any{}
		for _, f := range fields {
			if v, ok := m[f.name]; ok {
				val, err := f.fromJSON(v)
				if err != nil {
					return nil, true, &callError{fmt.Sprintf("answer for %q, field %s: %v", req.Key, f.name, err)}
				}
				content[f.name] = val
			} else if f.def != nil {
				content[f.name] = f.def
			} else if required[f.name] {
				return nil, true, unanswered(req.Key, fmt.Sprintf("%q, field %s", req.Message, f.name), fmt.Sprintf("add %q to its answer", f.name))
			}
		}
		return &client.ElicitResult{Action: "accept", Content: content}, true, nil
	}
	return u.formFromFields(req, fields, required, false)
}

func hasField(fields []field, name string) bool {
	for _, f := range fields {
		if f.name == name {
			return true
		}
	}
	return false
}

// formFromFields answers a form from top-level answers named like its
// fields. Without any such answer (and not forced) it says nothing.
func (u *ui) formFromFields(req *client.ElicitRequest, fields []field, required map[string]bool, force bool) (*client.ElicitResult, bool, error) {
	content := map[string]any{}
	found := false
	var missing []string
	for _, f := range fields {
		raw, ok := u.answers[f.name]
		switch {
		case ok:
			val, err := f.fromJSON(raw)
			if err != nil {
				return nil, true, &callError{fmt.Sprintf("answer %s for %q: %v", f.name, req.Message, err)}
			}
			content[f.name] = val
			found = true
		case f.def != nil:
			content[f.name] = f.def
		case required[f.name]:
			missing = append(missing, f.name)
		}
	}
	if !found && !force {
		return nil, false, nil
	}
	if len(missing) > 0 {
		if u.in != nil && !force {
			return nil, false, nil // ask on the terminal
		}
		return nil, true, unanswered(req.Key, fmt.Sprintf("%q, field %s", req.Message, missing[0]), fmt.Sprintf("add %q to the answers file", missing[0]))
	}
	return &client.ElicitResult{Action: "accept", Content: content}, true, nil
}

func (u *ui) elicitURL(ctx context.Context, req *client.ElicitRequest) (*client.ElicitResult, error) {
	done, err := u.turn(ctx, req.Key)
	if err != nil {
		return nil, err
	}
	defer done()
	if raw, ok := u.answers[req.Key]; ok {
		var action string
		var res client.ElicitResult
		switch {
		case json.Unmarshal(raw, &action) == nil && (action == "accept" || action == "decline" || action == "cancel"):
			return &client.ElicitResult{Action: action}, nil
		case string(raw) == "true":
			return &client.ElicitResult{Action: "accept"}, nil
		case json.Unmarshal(raw, &res) == nil && res.Action != "":
			return &res, nil
		}
		return nil, &callError{fmt.Sprintf("answer for %q: want accept, decline or cancel", req.Key)}
	}
	if u.in == nil {
		return nil, unanswered(req.Key, fmt.Sprintf("%q (open %s)", req.Message, req.URL), fmt.Sprintf("add %q: \"accept\" to the answers file once done", req.Key))
	}
	fmt.Fprintf(u.out, "\n? %s\n  Open: %s\n", req.Message, req.URL)
	for {
		line, err := u.ask(ctx, "  [Enter] when done, d decline, c cancel: ")
		if err != nil {
			return nil, err
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "", "y", "yes", "a", "accept":
			return &client.ElicitResult{Action: "accept"}, nil
		case "d", "decline", "n", "no":
			return &client.ElicitResult{Action: "decline"}, nil
		case "c", "cancel":
			return &client.ElicitResult{Action: "cancel"}, nil
		}
	}
}

// errDeclined ends a call whose sampling request the person refused: a
// sampling answer cannot decline, and errors are never sent as answers.
var errDeclined = errors.New("declined")

func (u *ui) sample(ctx context.Context, req *client.SamplingRequest) (*client.SamplingResult, error) {
	done, err := u.turn(ctx, req.Key)
	if err != nil {
		return nil, err
	}
	defer done()
	reply := func(text string) *client.SamplingResult {
		return &client.SamplingResult{Role: "assistant", Content: client.TextContent(text), Model: "human (platform call)", StopReason: "endTurn"}
	}
	if raw, ok := u.answers[req.Key]; ok {
		var text string
		if json.Unmarshal(raw, &text) == nil {
			if text == "decline" {
				return nil, &callError{fmt.Sprintf("the sampling request %q was declined", req.Key)}
			}
			return reply(text), nil
		}
		var res client.SamplingResult
		if err := json.Unmarshal(raw, &res); err != nil || res.Content.Type == "" {
			return nil, &callError{fmt.Sprintf("answer for %q: want the reply's text or a sampling result", req.Key)}
		}
		if res.Model == "" {
			res.Model = "human (platform call)"
		}
		return &res, nil
	}
	if u.in == nil {
		return nil, unanswered(req.Key, "a sampling request", fmt.Sprintf("add %q with the reply's text to the answers file", req.Key))
	}
	fmt.Fprintf(u.out, "\n? The server asks for a model reply (%s, at most %d tokens):\n", req.Key, req.MaxTokens)
	if req.SystemPrompt != "" {
		fmt.Fprintf(u.out, "  system: %s\n", req.SystemPrompt)
	}
	for _, m := range req.Messages {
		for _, c := range m.Content {
			fmt.Fprintf(u.out, "  %s: %s\n", m.Role, describeContent(c))
		}
	}
	for {
		line, err := u.ask(ctx, "  Reply (or d to decline): ")
		if err != nil {
			return nil, err
		}
		switch strings.TrimSpace(line) {
		case "":
			continue
		case "d", "D":
			return nil, fmt.Errorf("the sampling request %q: %w", req.Key, errDeclined)
		}
		return reply(line), nil
	}
}

// ask prints a prompt and reads one line.
func (u *ui) ask(ctx context.Context, prompt string) (string, error) {
	fmt.Fprint(u.out, prompt)
	line, err := u.in.readLine(ctx)
	if errors.Is(err, io.EOF) {
		return "", &callError{"the input ended before every question was answered"}
	}
	return line, err
}

// lineReader reads lines from the terminal in the background, so that a
// question can be abandoned when its call is cancelled.
type lineReader struct {
	lines chan string
	err   error
	once  sync.Once
	r     *bufio.Reader
	done  chan struct{}
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{lines: make(chan string), r: bufio.NewReader(r), done: make(chan struct{})}
}

func (l *lineReader) start() {
	go func() {
		for {
			line, err := l.r.ReadString('\n')
			if line != "" || err == nil {
				l.lines <- strings.TrimRight(line, "\r\n")
			}
			if err != nil {
				l.err = err
				close(l.done)
				return
			}
		}
	}()
}

func (l *lineReader) readLine(ctx context.Context) (string, error) {
	l.once.Do(l.start)
	select {
	case line := <-l.lines:
		return line, nil
	case <-l.done:
		return "", l.err
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

// field is one property of a form's requested schema.
type field struct {
	name, title, desc, typ, format string
	enum                           []string // allowed values
	labels                         []string // titles of enum values
	multi                          bool     // array of enum values
	def                            any
	min, max                       *float64
	minLen, maxLen                 *int
}

// formFields reads a requested schema's properties, in their order.
func formFields(schema json.RawMessage) ([]field, map[string]bool, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return nil, nil, nil
	}
	var s struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, nil, fmt.Errorf("the requested schema is not an object schema: %w", err)
	}
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	names, err := objectKeys(s.Properties)
	if err != nil {
		return nil, nil, err
	}
	var props map[string]json.RawMessage
	_ = json.Unmarshal(s.Properties, &props)
	var fields []field
	for _, name := range names {
		var p struct {
			Type        string                          `json:"type"`
			Title       string                          `json:"title"`
			Description string                          `json:"description"`
			Format      string                          `json:"format"`
			Enum        []string                        `json:"enum"`
			EnumNames   []string                        `json:"enumNames"`
			OneOf       []struct{ Const, Title string } `json:"oneOf"`
			Items       *struct {
				Enum  []string                        `json:"enum"`
				AnyOf []struct{ Const, Title string } `json:"anyOf"`
			} `json:"items"`
			Default   any      `json:"default"`
			Minimum   *float64 `json:"minimum"`
			Maximum   *float64 `json:"maximum"`
			MinLength *int     `json:"minLength"`
			MaxLength *int     `json:"maxLength"`
			MinItems  *int     `json:"minItems"`
			MaxItems  *int     `json:"maxItems"`
		}
		if err := json.Unmarshal(props[name], &p); err != nil {
			return nil, nil, fmt.Errorf("property %s: %w", name, err)
		}
		f := field{name: name, title: p.Title, desc: p.Description, typ: p.Type, format: p.Format, def: p.Default,
			min: p.Minimum, max: p.Maximum, minLen: p.MinLength, maxLen: p.MaxLength}
		switch {
		case len(p.Enum) > 0:
			f.enum, f.labels = p.Enum, p.EnumNames
		case len(p.OneOf) > 0:
			for _, o := range p.OneOf {
				f.enum = append(f.enum, o.Const)
				f.labels = append(f.labels, o.Title)
			}
		}
		if p.Type == "array" && p.Items != nil {
			f.multi = true
			f.enum = p.Items.Enum
			for _, o := range p.Items.AnyOf {
				f.enum = append(f.enum, o.Const)
				f.labels = append(f.labels, o.Title)
			}
			if p.MinItems != nil {
				v := float64(*p.MinItems)
				f.min = &v
			}
			if p.MaxItems != nil {
				v := float64(*p.MaxItems)
				f.max = &v
			}
		}
		fields = append(fields, f)
	}
	return fields, required, nil
}

// objectKeys returns a JSON object's keys in document order.
func objectKeys(raw json.RawMessage) ([]string, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("properties is not an object")
	}
	var keys []string
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k := t.(string)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
		if !seen[k] {
			keys = append(keys, k)
			seen[k] = true
		}
	}
	return keys, nil
}

// prompt renders the field's question line.
func (f *field) prompt(required bool) string {
	label := f.name
	if f.title != "" && f.title != f.name {
		label = f.title + " (" + f.name + ")"
	}
	var hints []string
	typ := f.typ
	if f.multi {
		typ = "choose any, comma-separated"
	}
	if typ != "" {
		hints = append(hints, typ)
	}
	if f.format != "" {
		hints = append(hints, f.format)
	}
	if required {
		hints = append(hints, "required")
	}
	if f.min != nil {
		hints = append(hints, "min "+strconv.FormatFloat(*f.min, 'f', -1, 64))
	}
	if f.max != nil {
		hints = append(hints, "max "+strconv.FormatFloat(*f.max, 'f', -1, 64))
	}
	s := label
	if f.desc != "" {
		s += " - " + f.desc
	}
	if len(hints) > 0 {
		s += " (" + strings.Join(hints, ", ") + ")"
	}
	if len(f.enum) > 0 {
		var opts []string
		for i, e := range f.enum {
			o := fmt.Sprintf("%d) %s", i+1, e)
			if i < len(f.labels) && f.labels[i] != "" && f.labels[i] != e {
				o += " " + f.labels[i]
			}
			opts = append(opts, o)
		}
		s += " [" + strings.Join(opts, "  ") + "]"
	}
	if f.typ == "boolean" {
		s += " [y/n]"
	}
	if f.def != nil {
		s += fmt.Sprintf(" (default %v)", f.def)
	}
	return s
}

// parse reads a typed answer; set is false when an optional field was
// left empty.
func (f *field) parse(line string, required bool) (any, bool, error) {
	v := strings.TrimSpace(line)
	if f.typ == "string" && !f.multi && len(f.enum) == 0 {
		v = strings.TrimRight(line, "\r\n") // keep a string's own spaces
		if strings.TrimSpace(v) == "" {
			v = ""
		}
	}
	if v == "" {
		switch {
		case f.def != nil:
			return f.def, true, nil
		case required:
			return nil, false, errors.New("an answer is required")
		}
		return nil, false, nil
	}
	if f.multi {
		var out []string
		for _, part := range strings.Split(v, ",") {
			choice, err := f.choice(strings.TrimSpace(part))
			if err != nil {
				return nil, false, err
			}
			out = append(out, choice)
		}
		if f.min != nil && float64(len(out)) < *f.min || f.max != nil && float64(len(out)) > *f.max {
			return nil, false, errors.New("choose between the minimum and maximum number of values")
		}
		return out, true, nil
	}
	if len(f.enum) > 0 {
		c, err := f.choice(v)
		return c, err == nil, err
	}
	switch f.typ {
	case "boolean":
		switch strings.ToLower(v) {
		case "y", "yes", "true", "t", "1":
			return true, true, nil
		case "n", "no", "false", "f", "0":
			return false, true, nil
		}
		return nil, false, errors.New("answer y or n")
	case "integer", "number":
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
			return nil, false, fmt.Errorf("%q is not a number", v)
		}
		if f.typ == "integer" && n != math.Trunc(n) {
			return nil, false, fmt.Errorf("%q is not a whole number", v)
		}
		if f.min != nil && n < *f.min || f.max != nil && n > *f.max {
			return nil, false, fmt.Errorf("%s is out of range", v)
		}
		if f.typ == "integer" {
			return int64(n), true, nil
		}
		return n, true, nil
	}
	n := len([]rune(v))
	if f.minLen != nil && n < *f.minLen || f.maxLen != nil && n > *f.maxLen {
		return nil, false, errors.New("the answer's length is out of range")
	}
	return v, true, nil
}

// choice maps a typed choice (a value or its number) to an enum value.
func (f *field) choice(v string) (string, error) {
	for _, e := range f.enum {
		if e == v {
			return e, nil
		}
	}
	if i, err := strconv.Atoi(v); err == nil && i >= 1 && i <= len(f.enum) {
		return f.enum[i-1], nil
	}
	for i, l := range f.labels {
		if l != "" && strings.EqualFold(l, v) && i < len(f.enum) {
			return f.enum[i], nil
		}
	}
	return "", fmt.Errorf("%q is not one of %s", v, strings.Join(f.enum, ", "))
}

// fromJSON checks an answer from the answers file, converting a string
// where the field wants a number or boolean.
func (f *field) fromJSON(raw json.RawMessage) (any, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil && f.typ != "string" && !f.multi {
		v, _, err := f.parse(s, true)
		return v, err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case string:
		if len(f.enum) > 0 {
			return f.choice(x)
		}
		return x, nil
	case bool:
		if f.typ != "boolean" && f.typ != "" {
			return nil, fmt.Errorf("%v is not a %s", x, f.typ)
		}
	case float64:
		if f.typ != "number" && f.typ != "integer" && f.typ != "" {
			return nil, fmt.Errorf("%v is not a %s", x, f.typ)
		}
		if f.typ == "integer" && x != math.Trunc(x) {
			return nil, fmt.Errorf("%v is not a whole number", x)
		}
	case []any:
		var out []string
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, errors.New("want a list of strings")
			}
			c, err := f.choice(s)
			if err != nil && len(f.enum) > 0 {
				return nil, err
			}
			if err != nil {
				c = s
			}
			out = append(out, c)
		}
		return out, nil
	}
	return v, nil
}
