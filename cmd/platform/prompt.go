package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opsmcp/platform/client"
	"github.com/opsmcp/platform/mrtr"
)

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
	fields, err := formFields(req.RequestedSchema)
	if err != nil {
		return nil, fmt.Errorf("question %q: %w", req.Message, err)
	}
	if res, ok, err := u.formFromAnswers(req, fields); ok || err != nil {
		return res, err
	}
	if u.in == nil {
		var names []string
		for _, f := range fields {
			names = append(names, f.Name)
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
			line, err := u.ask(ctx, "  "+f.prompt()+": ")
			if err != nil {
				return nil, err
			}
			v, set, err := f.parse(line, f.Required)
			if err != nil {
				fmt.Fprintf(u.out, "  ! %v\n", err)
				continue
			}
			if set {
				content[f.Name] = v
			}
			break
		}
	}
	return &client.ElicitResult{Action: "accept", Content: content}, nil
}

// formFromAnswers answers a form from the answers file: by input key
// (an elicitation result, the content, or an action), else by field
// names. ok is false when the file says nothing about this question.
func (u *ui) formFromAnswers(req *client.ElicitRequest, fields []field) (*client.ElicitResult, bool, error) {
	if raw, ok := u.answers[req.Key]; ok {
		var action string
		if json.Unmarshal(raw, &action) == nil {
			switch action {
			case "accept", "decline", "cancel":
				if action != "accept" {
					return &client.ElicitResult{Action: action}, true, nil
				}
				res, _, err := u.formFromFields(req, fields, true)
				return res, true, err
			}
			if !hasField(fields, req.Key) {
				return nil, true, &callError{fmt.Sprintf("answer %q for %q: want accept, decline, cancel or an object", action, req.Key)}
			}
			// The key also names one of the form's fields: a field answer.
			return u.formFromFields(req, fields, false)
		}
		if !strings.HasPrefix(strings.TrimSpace(string(raw)), "{") && hasField(fields, req.Key) {
			return u.formFromFields(req, fields, false)
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
			if v, ok := m[f.Name]; ok {
				val, err := f.fromJSON(v)
				if err != nil {
					return nil, true, &callError{fmt.Sprintf("answer for %q, field %s: %v", req.Key, f.Name, err)}
				}
				content[f.Name] = val
			} else if f.def != nil {
				content[f.Name] = f.def
			} else if f.Required {
				return nil, true, unanswered(req.Key, fmt.Sprintf("%q, field %s", req.Message, f.Name), fmt.Sprintf("add %q to its answer", f.Name))
			}
		}
		return &client.ElicitResult{Action: "accept", Content: content}, true, nil
	}
	return u.formFromFields(req, fields, false)
}

func hasField(fields []field, name string) bool {
	for _, f := range fields {
		if f.Name == name {
			return true
		}
	}
	return false
}

// formFromFields answers a form from top-level answers named like its
// fields. Without any such answer (and not forced) it says nothing.
func (u *ui) formFromFields(req *client.ElicitRequest, fields []field, force bool) (*client.ElicitResult, bool, error) {
	content := map[string]any{}
	found := false
	var missing []string
	for _, f := range fields {
		raw, ok := u.answers[f.Name]
		switch {
		case ok:
			val, err := f.fromJSON(raw)
			if err != nil {
				return nil, true, &callError{fmt.Sprintf("answer %s for %q: %v", f.Name, req.Message, err)}
			}
			content[f.Name] = val
			found = true
		case f.def != nil:
			content[f.Name] = f.def
		case f.Required:
			missing = append(missing, f.Name)
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

// task shows a task's progress as it changes: its status and message,
// one line each time either moves.
func (u *ui) task(t *client.Task) {
	u.mu.Lock()
	defer u.mu.Unlock()
	line := "task " + t.ID + ": " + t.Status
	if t.StatusMessage != "" {
		line += " (" + t.StatusMessage + ")"
	}
	fmt.Fprintln(u.out, line)
}
