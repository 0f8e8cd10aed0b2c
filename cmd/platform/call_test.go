package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
	"github.com/opsmcp/platform/webhook"
)

// testHook is a tenant webhook that verifies signatures and answers with
// the answers and arguments it was given.
type testHook struct {
	*platformtest.Backend
	mu   sync.Mutex
	last *webhook.Request
}

func newTestHook(t *testing.T) *testHook {
	h := &testHook{}
	h.Backend = platformtest.NewBackend(t, func(w http.ResponseWriter, _ *http.Request, req *webhook.Request) {
		h.mu.Lock()
		h.last = req
		h.mu.Unlock()
		var parts []string
		for _, k := range []string{"login", "who", "colour", "pitch", "where"} {
			if a, ok := req.Answers[k]; ok {
				parts = append(parts, fmt.Sprintf("%s=%s:%s", k, a.Action, a.Content))
			}
		}
		text := fmt.Sprintf("args %s; %s", req.Arguments, strings.Join(parts, "; "))
		if req.Kind == webhook.KindPrompt {
			fmt.Fprintf(w, `{"type":"complete","result":{"messages":[{"role":"user","content":{"type":"text","text":%q}}]}}`, text)
			return
		}
		fmt.Fprintf(w, `{"type":"complete","result":{"content":[{"type":"text","text":%q}]}}`, text)
	})
	return h
}

type obj2 = map[string]any

func formInput(name, message string, props obj2, required ...string) obj2 {
	s := obj2{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return obj2{"name": name, "kind": "form", "message": message, "requestedSchema": s}
}

// orderTool asks in three rounds: a login URL and a name form, then a
// colour (an enum), then a sampling request.
func orderTool(url string) obj2 {
	colour := formInput("colour", "Which colour?", obj2{"colour": obj2{"type": "string", "enum": []string{"red", "green", "blue"}}}, "colour")
	colour["when"] = obj2{"input": "who"}
	return obj2{"name": "order", "description": "Orders a thing after some questions",
		"inputSchema": obj2{"type": "object", "properties": obj2{
			"order": obj2{"type": "string", "x-mcp-header": "Order"},
			"count": obj2{"type": "integer"},
			"gift":  obj2{"type": "boolean"},
			"tags":  obj2{"$ref": "#/$defs/tags"},
		}, "$defs": obj2{"tags": obj2{"type": "array", "items": obj2{"type": "string"}}}},
		"handler": obj2{"url": url},
		"inputs": []obj2{
			{"name": "login", "kind": "url", "message": "Log in to Acme", "url": "https://idp.example/login?order={{args.order}}"},
			formInput("who", "Who is ordering?", obj2{
				"name": obj2{"type": "string", "title": "Name"},
				"age":  obj2{"type": "integer", "minimum": 0}}, "name"),
			colour,
			{"name": "pitch", "kind": "sampling", "when": obj2{"input": "colour"}, "sampling": obj2{"maxTokens": 30,
				"messages": []obj2{{"role": "user", "content": obj2{"type": "text", "text": "Describe order {{args.order}}"}}}}},
		}}
}

func callPlatform(t *testing.T) (string, *testHook, *platformtest.Platform) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.Tenant(t, "acme")
	h := newTestHook(t)
	h.SetSecrets(p.Tool(t, "acme", orderTool(h.URL)))
	return p.URL + "/t/acme/mcp", h, p
}

func runCallCmd(t *testing.T, stdin io.Reader, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	code := call(args, stdin, &out, &errb)
	return code, out.String(), errb.String()
}

func writeAnswers(t *testing.T, v any) string {
	b, _ := json.Marshal(v)
	p := filepath.Join(t.TempDir(), "answers.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCallListsToolsAndCallsOneWithAnswersByKeyAndByField(t *testing.T) {
	url, h, _ := callPlatform(t)
	code, out, errs := runCallCmd(t, nil, url, "tools")
	if code != 0 || !strings.Contains(out, "order  Orders a thing after some questions") {
		t.Fatalf("tools: %d %q %q", code, out, errs)
	}
	answers := writeAnswers(t, obj2{
		"login":  "accept",                                                     // by input key: an action
		"name":   "Ada",                                                        // by field name
		"age":    "36",                                                         // by field name, typed from the schema
		"colour": obj2{"action": "accept", "content": obj2{"colour": "green"}}, // by input key: a whole result
		"pitch":  "A green thing",                                              // a sampling reply
	})
	code, out, errs = runCallCmd(t, nil, url, "tool", "order", "--arg", "order=o-7", "--arg", "count=3", "--arg", "gift=true",
		"--arg", `tags=["a","b"]`, "--answers", answers, "--verbose")
	if code != 0 {
		t.Fatalf("call: %d %q", code, errs)
	}
	for _, want := range []string{`args {"count":3,"gift":true,"order":"o-7","tags":["a","b"]}`, "login=accept:", `who=accept:{"age":36,"name":"Ada"}`,
		`colour=accept:{"colour":"green"}`, `"text":"A green thing"`} {
		if !strings.Contains(out, want) {
			t.Errorf("result %q lacks %q", out, want)
		}
	}
	for _, want := range []string{"round 1: the server asks login, who", `login: elicitation/create (url) "Log in to Acme" https://idp.example/login?order=o-7`,
		"round 2: the server asks colour", "round 3: the server asks pitch", "round 3: answered in", "complete after 3 round(s)", "server opsmcp/acme test, protocol 2026-07-28"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if h.last == nil || h.last.Flow.Round != 4 {
		t.Fatal("the webhook was not called once the answers were in")
	}
}

func TestCallNamesTheUnansweredQuestionWithoutATerminal(t *testing.T) {
	url, _, _ := callPlatform(t)
	code, out, errs := runCallCmd(t, nil, url, "tool", "order", "--arg", "order=o-1", "--answers", writeAnswers(t, obj2{"login": "accept"}))
	if code != 1 || out != "" {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	want := `platform call: no answer for "Who is ordering?" (input "who"): add "who" (or the fields age, name) to the answers file`
	if !strings.Contains(errs, want+"\n") || strings.Count(strings.TrimSpace(errs), "\n") > 2 {
		t.Fatalf("stderr %q, want the line %q", errs, want)
	}
	// A required field missing from the answers is named too.
	code, _, errs = runCallCmd(t, nil, url, "tool", "order", "--arg", "order=o-1", "--answers", writeAnswers(t, obj2{"login": "accept", "age": 3}))
	if code != 1 || !strings.Contains(errs, `no answer for "Who is ordering?", field name (input "who")`) {
		t.Fatalf("%d %q", code, errs)
	}
	code, _, errs = runCallCmd(t, nil, url, "tool", "order", "--arg", "order=o-1", "--no-input")
	if code != 1 || !strings.Contains(errs, `no answer for "Log in to Acme" (open https://idp.example/login?order=o-1) (input "login")`) {
		t.Fatalf("%d %q", code, errs)
	}
}

func TestCallDeclinesAndCancelsFromTheAnswersFile(t *testing.T) {
	url, h, _ := callPlatform(t)
	answers := writeAnswers(t, obj2{"login": "decline", "who": obj2{"name": "Ada"}, "colour": "cancel", "pitch": "x"})
	code, out, errs := runCallCmd(t, nil, url, "tool", "order", "--arg", "order=o-1", "--answers", answers)
	// Decline and cancel are answers: they reach the webhook as outcomes,
	// and a cancelled colour means no sampling question.
	if code != 0 || out != `args {"order":"o-1"}; login=decline:; who=accept:{"name":"Ada"}; colour=cancel:`+"\n" {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	if strings.Contains(errs, "pitch") || h.last == nil {
		t.Fatalf("stderr %q", errs)
	}
	// A sampling answer cannot decline: declining ends the call, and
	// nothing is sent to the server.
	answers = writeAnswers(t, obj2{"login": "accept", "name": "Ada", "colour": "red", "pitch": "decline"})
	code, out, errs = runCallCmd(t, nil, url, "tool", "order", "--arg", "order=o-1", "--answers", answers)
	if code != 1 || out != "" || !strings.HasSuffix(errs, "platform call: the sampling request \"pitch\" was declined\n") {
		t.Fatalf("%d %q %q", code, out, errs)
	}
}

func TestCallGetsPromptsAndReadsResourcesAsTextOrJSON(t *testing.T) {
	url, h, p := callPlatform(t)
	h.SetSecrets(p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/prompts", obj2{"name": "brief", "description": "A brief", "handler": obj2{"url": h.URL},
		"arguments": []obj2{{"name": "topic", "required": true}},
		"inputs":    []obj2{formInput("who", "Who?", obj2{"name": obj2{"type": "string"}}, "name")}})["webhookSecret"].(string))
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/resources", obj2{"name": "readme", "uri": "docs://readme", "text": "hello docs", "description": "The readme"})
	code, out, errs := runCallCmd(t, nil, url, "prompts")
	if code != 0 || !strings.Contains(out, "brief  topic  A brief") {
		t.Fatalf("prompts: %d %q %q", code, out, errs)
	}
	code, out, errs = runCallCmd(t, nil, url, "prompt", "brief", "--arg", "topic=mrtr", "--answers", writeAnswers(t, obj2{"name": "Ada"}))
	if code != 0 || !strings.HasPrefix(out, `user: args {"topic":"mrtr"}; who=accept:{"name":"Ada"}`) {
		t.Fatalf("prompt: %d %q %q", code, out, errs)
	}
	code, out, _ = runCallCmd(t, nil, url, "resources")
	if code != 0 || !strings.Contains(out, "docs://readme  readme  The readme") {
		t.Fatalf("resources: %d %q", code, out)
	}
	code, out, _ = runCallCmd(t, nil, url, "resource", "docs://readme", "--output", "json")
	var res map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res["resultType"] != "complete" || !strings.Contains(out, "hello docs") {
		t.Fatalf("resource: %d %q", code, out)
	}
	code, out, _ = runCallCmd(t, nil, url, "resource", "docs://readme")
	if code != 0 || out != "hello docs\n" {
		t.Fatalf("resource text: %d %q", code, out)
	}
}

func TestCallTurnsRootFlagsIntoFileURIs(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.Tenant(t, "acme")
	h := newTestHook(t)
	h.SetSecrets(p.Tool(t, "acme", obj2{"name": "scan", "description": "Reads the roots", "inputSchema": obj2{"type": "object"},
		"handler": obj2{"url": h.URL}, "inputs": []obj2{{"name": "where", "kind": "roots"}}}))
	url := p.URL + "/t/acme/mcp"
	code, _, errs := runCallCmd(t, nil, url, "tool", "scan")
	if code != 1 || !strings.Contains(errs, "platform call: the server needs the client capabilities roots (offer roots with --root)") {
		t.Fatalf("%d %q", code, errs)
	}
	dir := t.TempDir()
	code, out, errs := runCallCmd(t, nil, url, "tool", "scan", "--root", dir, "--root", "file:///srv/app")
	if code != 0 || !strings.Contains(out, `"uri":"file://`+filepath.ToSlash(dir)+`"`) || !strings.Contains(out, `{"uri":"file:///srv/app","name":"app"}`) {
		t.Fatalf("%d %q %q", code, out, errs)
	}
}

func TestCallErrorsAreOneLineAndUsageErrorsExitTwo(t *testing.T) {
	url, _, _ := callPlatform(t)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{url}, 2, "want a URL and what to do"},
		{[]string{url, "dance"}, 2, `unknown action "dance"`},
		{[]string{url, "tool"}, 2, "tool takes exactly one name or URI"},
		{[]string{url, "tools", "--output", "yaml"}, 2, "--output must be text or json"},
		{[]string{"ftp://x", "tools"}, 1, "must be http:// or https://"},
		{[]string{"http://127.0.0.1:1/mcp", "tools"}, 1, "connection refused"},
		{[]string{url, "tool", "order", "--arg", "count=many"}, 1, `--arg count: "many" is not an integer`},
		{[]string{url, "tool", "order", "--json", "[1]"}, 1, "--json is not a JSON object"},
		{[]string{url, "tool", "nope"}, 1, "Unknown tool: nope"},
		{[]string{url, "tool", "order", "--answers", "/nonexistent/answers.json"}, 1, "reading the answers"},
	}
	for _, tc := range cases {
		code, _, errs := runCallCmd(t, nil, tc.args...)
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		if code != tc.code || !strings.Contains(errs, tc.want) || (tc.code == 1 && len(lines) != 1) || !strings.HasPrefix(lines[0], "platform call: ") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and one line with %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
}

// expect reads a pseudo-terminal's output in the background and waits
// for text to appear.
type expect struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	seen int
}

func newExpect(r io.Reader) *expect {
	e := &expect{}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := r.Read(b)
			e.mu.Lock()
			e.buf.Write(b[:n])
			e.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return e
}

func (e *expect) waitFor(t *testing.T, text string) {
	t.Helper()
	defer func() {
		if t.Failed() {
			e.mu.Lock()
			defer e.mu.Unlock()
			t.Logf("the terminal shows:\n%s", e.buf.String()[e.seen:])
		}
	}()
	testwait.Until(t, fmt.Sprintf("the terminal shows %q", text), func() bool {
		e.mu.Lock()
		s := e.buf.String()
		e.mu.Unlock()
		if i := strings.Index(s[e.seen:], text); i >= 0 {
			e.seen += i + len(text)
			return true
		}
		return false
	})
}

func TestCallAsksOnATerminalTypedFromTheRequestedSchema(t *testing.T) {
	url, h, _ := callPlatform(t)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	var stdout bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- call([]string{url, "tool", "order", "--arg", "order=o-9"}, tty, &stdout, tty) }()
	e := newExpect(ptmx)
	typeLine := func(s string) { _, _ = ptmx.Write([]byte(s + "\r")) }

	// Round 1: the login URL (key "login") is asked before "who".
	e.waitFor(t, "round 1: the server asks login, who")
	e.waitFor(t, "? Log in to Acme")
	e.waitFor(t, "Open: https://idp.example/login?order=o-9")
	e.waitFor(t, "[Enter] when done, d decline, c cancel: ")
	typeLine("")
	e.waitFor(t, "? Who is ordering?")
	e.waitFor(t, "Answer? [Enter] yes, d decline, c cancel: ")
	typeLine("")
	// Fields come in the order the server lists them (the platform sorts
	// them by name).
	e.waitFor(t, "age (integer, min 0): ")
	typeLine("thirty")
	e.waitFor(t, `! "thirty" is not a number`)
	e.waitFor(t, "age (integer, min 0): ")
	typeLine("-1")
	e.waitFor(t, "! -1 is out of range")
	typeLine("36")
	e.waitFor(t, "Name (name) (string, required): ")
	typeLine("") // required: asked again
	e.waitFor(t, "! an answer is required")
	e.waitFor(t, "Name (name) (string, required): ")
	typeLine("Ada Lovelace")
	// Round 2: an enum, chosen by number.
	e.waitFor(t, "round 2: the server asks colour")
	e.waitFor(t, "? Which colour?")
	typeLine("")
	e.waitFor(t, "colour (string, required) [1) red  2) green  3) blue]: ")
	typeLine("purple")
	e.waitFor(t, `! "purple" is not one of red, green, blue`)
	typeLine("2")
	// Round 3: the sampling request shows its messages; the person replies.
	e.waitFor(t, "round 3: the server asks pitch")
	e.waitFor(t, "user: Describe order o-9")
	e.waitFor(t, "Reply (or d to decline): ")
	typeLine("A fine green order")

	if code := testwait.Recv(t, done, "the call to finish"); code != 0 {
		t.Fatalf("exit %d; terminal:\n%s", code, e.buf.String())
	}
	out := stdout.String()
	for _, want := range []string{"login=accept:", `who=accept:{"age":36,"name":"Ada Lovelace"}`, `colour=accept:{"colour":"green"}`, `"text":"A fine green order"`} {
		if !strings.Contains(out, want) {
			t.Errorf("result %q lacks %q", out, want)
		}
	}
	if h.last == nil {
		t.Fatal("no delivery")
	}
}

func TestCallOnATerminalCanDeclineAndCancel(t *testing.T) {
	url, _, _ := callPlatform(t)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	var stdout bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- call([]string{url, "tool", "order", "--arg", "order=o-2"}, tty, &stdout, tty) }()
	e := newExpect(ptmx)
	e.waitFor(t, "[Enter] when done, d decline, c cancel: ")
	_, _ = ptmx.Write([]byte("d\r"))
	e.waitFor(t, "Answer? [Enter] yes, d decline, c cancel: ")
	_, _ = ptmx.Write([]byte("c\r"))
	// Decline and cancel are answers the webhook receives; a cancelled
	// "who" means no colour question.
	if code := testwait.Recv(t, done, "the call to finish"); code != 0 || stdout.String() != `args {"order":"o-2"}; login=decline:; who=cancel:`+"\n" {
		t.Fatalf("exit %d; terminal:\n%s\nstdout %q", code, e.buf.String(), stdout.String())
	}
}

func TestTypedValuesFollowTheSchemaAndLocalRefsOnly(t *testing.T) {
	root := map[string]any{"$defs": map[string]any{"n": map[string]any{"type": "integer"}}}
	cases := []struct {
		prop map[string]any
		in   string
		want string
	}{
		{map[string]any{"type": "integer"}, "42", "42"},
		{map[string]any{"type": "number"}, "2.5", "2.5"},
		{map[string]any{"type": "boolean"}, "false", "false"},
		{map[string]any{"type": "string"}, "42", `"42"`},
		{map[string]any{"type": "object"}, `{"a":1}`, `{"a":1}`},
		{resolveLocalRef(root, map[string]any{"$ref": "#/$defs/n"}), "7", "7"},
		{resolveLocalRef(root, map[string]any{"$ref": "https://example.com/schema.json"}), "7", "7"},
		{nil, "hello", `"hello"`},
		{nil, "true", "true"},
	}
	for _, tc := range cases {
		v, err := typedValue(tc.prop, tc.in)
		b, _ := json.Marshal(v)
		if err != nil || string(b) != tc.want {
			t.Errorf("%v %q: %s %v, want %s", tc.prop, tc.in, b, err, tc.want)
		}
	}
}

func TestCallSendsTheBearerTokenFromTheFlagOrTheEnvironment(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&env)
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		res := `{"resultType":"complete","tools":[],"ttlMs":0,"cacheScope":"private"}`
		if env.Method == "server/discover" {
			res = `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{},"ttlMs":0,"cacheScope":"private"}`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, env.ID, res)
	}))
	defer srv.Close()
	if code, _, errs := runCallCmd(t, nil, srv.URL, "tools", "--token", "flag-token"); code != 0 {
		t.Fatalf("%d %s", code, errs)
	}
	t.Setenv("PLATFORM_TOKEN", "env-token")
	if code, _, errs := runCallCmd(t, nil, srv.URL, "tools"); code != 0 {
		t.Fatalf("%d %s", code, errs)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != "Bearer flag-token,Bearer flag-token,Bearer env-token,Bearer env-token" {
		t.Fatalf("Authorization headers %q", seen)
	}
}

// taskHook accepts every call offered as a task, asks one question from
// the task, and completes it with the answer; it records cancels.
type taskHook struct {
	*platformtest.Backend
	mu        sync.Mutex
	offers    map[string]*webhook.Task
	cancelled []string
}

func newTaskHook(t *testing.T) *taskHook {
	h := &taskHook{offers: map[string]*webhook.Task{}}
	h.Backend = platformtest.NewBackend(t, func(w http.ResponseWriter, _ *http.Request, req *webhook.Request) {
		switch req.Kind {
		case webhook.KindTaskCancel:
			h.mu.Lock()
			h.cancelled = append(h.cancelled, req.Task.ID)
			h.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
			return
		case webhook.KindTaskInput:
			go func() {
				text := fmt.Sprintf("cut over: %s", req.InputResponses["cutover"])
				result, _ := json.Marshal(obj2{"content": []obj2{{"type": "text", "text": text}}})
				_, _ = webhook.SendReport(t.Context(), nil, h.offer(req.Task.ID), &webhook.Report{Seq: 2, Type: webhook.ReportComplete, Result: result})
			}()
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.mu.Lock()
		h.offers[req.Task.ID] = req.Task
		h.mu.Unlock()
		go func() {
			time.Sleep(300 * time.Millisecond) // after the task's creation is answered
			_, _ = webhook.SendReport(t.Context(), nil, req.Task, &webhook.Report{Seq: 1, Type: webhook.ReportInputRequired, Message: "asking",
				InputRequests: map[string]json.RawMessage{"cutover": json.RawMessage(`{"method":"elicitation/create","params":{"mode":"form","message":"Cut over?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}`)}})
		}()
		fmt.Fprint(w, `{"type":"accepted","message":"queued"}`)
	})
	return h
}

func (h *taskHook) offer(id string) *webhook.Task {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.offers[id]
}

// TestCallFollowsATaskOrLeavesItRunning: a tool that becomes a task is
// followed to its end (its progress on stderr, its question answered from
// the answers file); with --no-wait the task's id is printed at once, and
// "task get", "task wait" and "task cancel" act on it by id.
func TestCallFollowsATaskOrLeavesItRunning(t *testing.T) {
	p := platformtest.Start(t, platformtest.SQLiteURL(t))
	p.Tenant(t, "acme")
	h := newTaskHook(t)
	h.SetSecrets(p.Tool(t, "acme", obj2{"name": "migrate", "description": "long", "inputSchema": obj2{"type": "object"},
		"handler": obj2{"url": h.URL}, "task": obj2{"mode": "must", "pollIntervalMs": 100}}))
	url := p.URL + "/t/acme/mcp"
	answers := writeAnswers(t, obj2{"cutover": obj2{"action": "accept", "content": obj2{"ok": true}}})
	code, out, errs := runCallCmd(t, nil, url, "tool", "migrate", "--answers", answers)
	if code != 0 || !strings.Contains(out, `cut over: {"action":"accept","content":{"ok":true}}`) {
		t.Fatalf("followed: %d %q %q", code, out, errs)
	}
	for _, want := range []string{": working (queued)", ": input_required (asking)", ": completed"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}

	code, out, errs = runCallCmd(t, nil, url, "tool", "migrate", "--no-wait")
	id, _, _ := strings.Cut(strings.TrimPrefix(out, "task "), ":")
	if code != 0 || !strings.HasPrefix(id, "tk_") || !strings.Contains(out, ": working (queued)") {
		t.Fatalf("--no-wait: %d %q %q", code, out, errs)
	}
	testwait.Until(t, "the task asks", func() bool {
		_, out, _ := runCallCmd(t, nil, url, "task", "get", id)
		return strings.Contains(out, "input_required") && strings.Contains(out, "asks cutover: elicitation/create")
	})
	code, out, errs = runCallCmd(t, nil, url, "task", "cancel", id)
	if code != 0 || !strings.Contains(out, "task "+id+": cancelled") {
		t.Fatalf("task cancel: %d %q %q", code, out, errs)
	}
	testwait.Until(t, "the cancel reaches the backend", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.cancelled) == 1 && h.cancelled[0] == id
	})
	code, _, errs = runCallCmd(t, nil, url, "task", "wait", id)
	if code != 1 || !strings.Contains(errs, "the task was cancelled") {
		t.Fatalf("task wait on a cancelled task: %d %q", code, errs)
	}
	code, _, errs = runCallCmd(t, nil, url, "task", "get", "tk_nosuchtasknosuchtask")
	if code != 1 || !strings.Contains(errs, "no such task") {
		t.Fatalf("an unknown task: %d %q", code, errs)
	}
	if code, _, errs = runCallCmd(t, nil, url, "task", "list", id); code != 2 {
		t.Fatalf("task list: %d %q", code, errs)
	}
}
