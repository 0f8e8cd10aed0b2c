// Command export is a tenant backend whose tool runs longer than one
// delivery: it accepts the call as a task and reports on it later, with
// package webhook. export.py beside it is the same backend in Python;
// docs/tasks.md walks through both.
//
// The export tool exports a month of orders: it reports its progress,
// asks which format to write midway, and finishes with the file's
// summary. A cancel stops it.
//
//	WEBHOOK_SECRET=whsec_… go run ./examples/export 127.0.0.1:9100
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/opsmcp/platform/webhook"
)

// step is how long each step of an export takes.
var step = 500 * time.Millisecond

func main() {
	addr := "127.0.0.1:9100"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	secrets := strings.Split(os.Getenv("WEBHOOK_SECRET"), ",")
	b := &backend{exports: map[string]*export{}}
	http.HandleFunc("POST /hook", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil || !verified(secrets, r.Header.Get(webhook.SignatureHeader), body) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var req webhook.Request
		if err := json.Unmarshal(body, &req); err != nil || req.Version != webhook.Version {
			http.Error(w, "not a v1 delivery", http.StatusBadRequest)
			return
		}
		out := b.deliver(&req)
		if out == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	log.Printf("export backend on http://%s/hook", addr)
	srv := &http.Server{Addr: addr, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

func verified(secrets []string, header string, body []byte) bool {
	for _, s := range secrets {
		if s != "" && webhook.Verify(s, header, body, time.Now(), webhook.DefaultTolerance) == nil {
			return true
		}
	}
	return false
}

// backend keeps the exports it accepted, by task id.
type backend struct {
	mu      sync.Mutex
	exports map[string]*export
}

// export is one accepted export: the task the platform offered, and what
// the client has told it since (its answers, a cancel).
type export struct {
	task     webhook.Task
	month    string
	seq      int64
	answers  chan json.RawMessage
	canceled chan struct{}
	once     sync.Once
}

func (b *backend) deliver(req *webhook.Request) *webhook.Response {
	switch req.Kind {
	case webhook.KindTaskInput: // the client answered the task's question
		if e := b.find(req.Task.ID); e != nil {
			select {
			case e.answers <- req.InputResponses["format"]:
			default:
			}
		}
		return nil
	case webhook.KindTaskCancel: // the client or an admin cancelled it
		if e := b.find(req.Task.ID); e != nil {
			e.once.Do(func() { close(e.canceled) })
		}
		return nil
	}
	if req.Task == nil { // not offered as a task: the client cannot follow one
		return result(true, "An export runs only as a task.")
	}
	var args struct{ Month string }
	_ = json.Unmarshal(req.Arguments, &args)
	e := &export{task: *req.Task, month: args.Month, answers: make(chan json.RawMessage, 1), canceled: make(chan struct{})}
	b.mu.Lock()
	b.exports[e.task.ID] = e
	b.mu.Unlock()
	go e.run()
	return &webhook.Response{Type: webhook.TypeAccepted, Message: "Export of " + e.month + " queued"}
}

func (b *backend) find(id string) *export {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.exports[id]
}

// report sends the export's next report. Reports go in order, each with
// the next seq: sent again, one the platform already applied is
// acknowledged and ignored, so a report the platform could not take
// (HTTP 5xx, a timeout) is sent again until it is, for up to a minute.
func (e *export) report(r webhook.Report) {
	e.seq++
	r.Seq = e.seq
	for wait := time.Second; wait < time.Minute; wait *= 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := webhook.SendReport(ctx, nil, &e.task, &r)
		cancel()
		var refused *webhook.ReportRefused
		if err == nil || errors.As(err, &refused) && refused.Final() {
			return // taken, or never will be (409: the task is over)
		}
		log.Printf("task %s: %v; sending it again", e.task.ID, err)
		time.Sleep(wait)
	}
}

func (e *export) run() {
	for i, what := range []string{"orders read", "totals computed"} {
		select {
		case <-time.After(step):
		case <-e.canceled:
			return
		}
		progress, total := float64(i+1), 3.0
		e.report(webhook.Report{Type: webhook.ReportProgress, Progress: &progress, Total: &total, Message: e.month + ": " + what})
	}
	ask, _ := json.Marshal(map[string]any{"method": "elicitation/create", "params": map[string]any{
		"mode": "form", "message": "Write the " + e.month + " export as?",
		"requestedSchema": map[string]any{"type": "object", "required": []string{"format"}, "properties": map[string]any{
			"format": map[string]any{"type": "string", "enum": []string{"csv", "json"}, "title": "Format"}}},
	}})
	e.report(webhook.Report{Type: webhook.ReportInputRequired, Message: "Which format?",
		InputRequests: map[string]json.RawMessage{"format": ask}})
	var answer struct {
		Action  string
		Content struct{ Format string }
	}
	select {
	case raw := <-e.answers:
		_ = json.Unmarshal(raw, &answer)
	case <-e.canceled:
		return
	}
	if answer.Action != "accept" {
		e.report(webhook.Report{Type: webhook.ReportComplete, Result: result(false, "Export stopped: no format chosen.").Result})
		return
	}
	select {
	case <-time.After(step):
	case <-e.canceled:
		return
	}
	text := fmt.Sprintf("Exported %s as %s: 1,204 orders, 88 KB.", e.month, answer.Content.Format)
	e.report(webhook.Report{Type: webhook.ReportComplete, Result: result(false, text).Result})
}

func result(isError bool, text string) *webhook.Response {
	raw, _ := json.Marshal(map[string]any{"content": []map[string]any{{"type": "text", "text": text}}, "isError": isError})
	return &webhook.Response{Type: webhook.TypeComplete, Result: raw}
}
