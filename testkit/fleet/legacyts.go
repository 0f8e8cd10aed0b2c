package fleet

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The legacy stream fault: an independent 2025-11-25 client, the
// official TypeScript SDK v1 (ts/legacy.mjs, on the system's Node with
// the SDK scripts/ts-sdk installs), calls quickTool through HAProxy and
// takes its time answering the question; meanwhile the cycle's SIGKILL
// goes to the replica holding the call's stream. The client resumes the
// stream at another replica (HAProxy redispatching the refused
// connection), which takes the call over; the call must complete, once:
// the backend sees one final delivery for it.

//go:embed ts/legacy.mjs
var legacyScript []byte

// The client answers when the fleet tells it to: tsAnswerAfter after
// the SIGKILL strikes, while the killed replica is down (the user read
// the question meanwhile). The call's state (the fleet tenant's live
// 10 s) outlives the question's wait, that second and the lease the dead
// replica held (5 s) before the call is taken over. tsQuestionWait
// bounds how long the fleet waits for the question to show in the
// record (Node's start and the SDK's import take seconds on a busy
// machine; the SIGKILL waits for it); tsMaxWait is the client's own
// bound, should the word never come.
const (
	tsAnswerAfter  = time.Second
	tsQuestionWait = 20 * time.Second
	tsMaxWait      = time.Minute
)

// tsCall is one run of the TypeScript client.
type tsCall struct {
	ref    string
	holder string // the replica holding its stream when the fault struck
	killed bool   // the SIGKILL went to its holder
	answer func() // tells the client to answer its question
	done   chan struct{}
	out    []byte
	err    error
}

// startTSCall runs the TypeScript client in the background, once the
// SDK is installed, and says which replica holds its stream once the
// question waits (nil when the client cannot run here).
func (fl *fleet) startTSCall(ctx context.Context, cycle int) (*tsCall, error) {
	if fl.cfg.TSSDK == "" {
		return nil, fmt.Errorf("no TypeScript SDK (OPSMCP_TS_SDK): the legacy stream fault cannot run")
	}
	dir := filepath.Join(fl.cfg.Dir, fmt.Sprintf("ts-%d", cycle))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.Symlink(filepath.Join(fl.cfg.TSSDK, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		return nil, err
	}
	script := filepath.Join(dir, "legacy.mjs")
	if err := os.WriteFile(script, legacyScript, 0o644); err != nil {
		return nil, err
	}
	c := &tsCall{ref: fmt.Sprintf("ts-%d-%s", cycle, randomHex(4)), done: make(chan struct{})}
	cmd := exec.CommandContext(ctx, "node", script, fl.lb.URL()+"/t/"+tenantSlug+"/mcp", quickTool, c.ref, fmt.Sprint(tsMaxWait.Milliseconds()))
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	var once sync.Once
	c.answer = func() {
		once.Do(func() {
			stdin.Write([]byte("answer\n"))
			stdin.Close()
		})
	}
	go func() {
		defer close(c.done)
		c.out, c.err = cmd.Output()
		if c.err != nil {
			c.err = fmt.Errorf("%v: %s %s", c.err, bytes.TrimSpace(c.out), strings.TrimSpace(stderr.String()))
		}
	}()
	// The question waits once the record shows the flow awaiting input,
	// and which replica serves it.
	deadline := time.Now().Add(tsQuestionWait)
	for time.Now().Before(deadline) {
		var list struct {
			Items []struct {
				State   string `json:"state"`
				Replica string `json:"replica"`
				Client  struct {
					Name string `json:"name"`
				} `json:"client"`
			} `json:"items"`
		}
		if _, err := fl.admin.call(ctx, "GET", "/tenants/"+tenantSlug+"/flows?state=awaiting_input&q=opsmcp-fleet-ts", nil, &list); err == nil {
			for _, f := range list.Items {
				if f.Client.Name == "opsmcp-fleet-ts" && f.State == "awaiting_input" {
					c.holder = f.Replica
				}
			}
		}
		if c.holder != "" {
			return c, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return c, fmt.Errorf("the TypeScript client's question never showed as awaiting input")
}

// tsResult is what the client printed.
type tsResult struct {
	Error  string `json:"error"`
	Asked  int    `json:"asked"`
	Result struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
}

// checkTSCalls asserts legacy-stream-survives-kill: every TypeScript
// client whose stream's replica was killed completed its call with the
// right result, the backend saw one final delivery for it, and returns
// the summary's figures.
func (fl *fleet) checkTSCalls(a *assertion) string {
	fl.mu.Lock()
	calls := append([]*tsCall(nil), fl.tsCalls...)
	fl.mu.Unlock()
	completed, duplicates := 0, 0
	for _, c := range calls {
		a.checked++
		select {
		case <-c.done:
		case <-time.After(2 * time.Minute):
			a.fail("the TypeScript client of %s never finished", c.ref)
			continue
		}
		if !c.killed {
			a.fail("the SIGKILL did not go to the replica holding %s's stream (%s)", c.ref, c.holder)
		}
		var res tsResult
		if c.err != nil || json.Unmarshal(bytes.TrimSpace(c.out), &res) != nil || res.Error != "" || res.Result.IsError || len(res.Result.Content) != 1 {
			a.fail("the TypeScript client of %s did not complete its call after its stream's replica was killed: %v %s", c.ref, c.err, c.out)
			continue
		}
		var r flowResult
		if json.Unmarshal([]byte(res.Result.Content[0].Text), &r) != nil || r.Ref != c.ref || r.Nonce != "ts-"+c.ref || r.Round != 2 {
			a.fail("the TypeScript client of %s got another result: %s", c.ref, res.Result.Content[0].Text)
			continue
		}
		if res.Asked != 1 {
			a.fail("the TypeScript client of %s was asked %d times: a question was asked again", c.ref, res.Asked)
		}
		completed++
		if n := fl.hook.finals(c.ref); n != 1 {
			duplicates += max(n-1, 0)
			a.fail("the backend saw %d final deliveries of %s", n, c.ref)
		}
	}
	return fmt.Sprintf("legacy streams killed mid-question: %d, completed %d, duplicate deliveries %d", len(calls), completed, duplicates)
}
