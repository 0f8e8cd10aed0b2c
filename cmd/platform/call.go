package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
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
  platform call URL task get|wait|cancel ID     read, follow to its end, or cancel a task

A tool may answer with a task (work longer than one request): the call
follows it to its end, showing its progress on stderr and asking its
questions as they come; with --no-wait it prints the task's id at once,
for "task wait" or "task get" later.

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
	noWait    bool
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
	fs.BoolVar(&f.noWait, "no-wait", false, "a tool call that becomes a task prints the task's id at once instead of following it")

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
	wantArgs := map[string]int{"tools": 0, "prompts": 0, "resources": 0, "tool": 1, "prompt": 1, "resource": 1, "task": 2}
	n, ok := wantArgs[verb]
	if !ok {
		return usageErr(fmt.Sprintf("unknown action %q", verb))
	}
	if len(rest) != n {
		switch n {
		case 0:
			return usageErr(fmt.Sprintf("%s takes no further argument", verb))
		case 2:
			return usageErr("task takes get, wait or cancel, and a task id")
		}
		return usageErr(fmt.Sprintf("%s takes exactly one name or URI", verb))
	}
	if verb == "task" && rest[0] != "get" && rest[0] != "wait" && rest[0] != "cancel" {
		return usageErr(fmt.Sprintf("task %q: want get, wait or cancel", rest[0]))
	}
	if f.noWait && verb != "tool" {
		return usageErr("--no-wait applies to tool")
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
		OnTask:     u.task,
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
		var opts []client.CallOption
		if f.noWait {
			opts = append(opts, client.NoWait())
		}
		res, err := c.CallTool(ctx, rest[0], args, opts...)
		if err != nil {
			return explain(err)
		}
		if res.Task != nil && !res.Task.Done() {
			return out.task(res.Task)
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
	case "task":
		return taskVerb(ctx, c, out, rest[0], rest[1])
	}
	return nil
}

// taskVerb acts on a task: get prints it, wait follows it to its end and
// prints its result, cancel cancels it.
func taskVerb(ctx context.Context, c *client.Client, out *printer, verb, id string) error {
	switch verb {
	case "get":
		t, err := c.GetTask(ctx, id)
		if err != nil {
			return explain(err)
		}
		return out.task(t)
	case "cancel":
		if err := c.CancelTask(ctx, id); err != nil {
			return explain(err)
		}
		t, err := c.GetTask(ctx, id)
		if err != nil {
			return explain(err)
		}
		return out.task(t)
	}
	res, err := c.WaitTask(ctx, id)
	if err != nil {
		return explain(err)
	}
	if err := out.toolResult(res); err != nil {
		return err
	}
	if res.IsError {
		return &callError{"the task's tool reported an error"}
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
	if errors.Is(err, client.ErrTaskCancelled) {
		return &callError{"the task was cancelled"}
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
