package endpoint_test

import (
	"bufio"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/endpoint"
	"github.com/opsmcp/platform/testkit/platformtest"
	"github.com/opsmcp/platform/testkit/testwait"
)

// chainPlatform is a platform whose tenant acme has the three-question
// tool "order", answered by h.
func chainPlatform(t *testing.T) (*platformtest.Platform, *hook) {
	t.Helper()
	h := newHook(t, answersHook)
	p := setup(t, h)
	h.setSecret(p.Tool(t, "acme", chainTool("order", h.URL)))
	return p, h
}

// answeringClient is a 2025-11-25 session of acme that answers every
// question it reads.
func answeringClient(t *testing.T, p *platformtest.Platform) *legacyClient {
	t.Helper()
	c := newLegacyClient(t, legacyURL(p, "acme"))
	c.initialize("2025-11-25", legacyCaps)
	c.onRequest = answerEverything
	return c
}

// isQuestion says m is the server's request with that form field.
func isQuestion(field string) func(m map[string]any) bool {
	return func(m map[string]any) bool {
		if m["method"] != "elicitation/create" {
			return false
		}
		props, _ := m["params"].(map[string]any)["requestedSchema"].(map[string]any)["properties"].(map[string]any)
		return props[field] != nil
	}
}

// streamOf is the stream id of an event id, failing the test unless it
// is a call stream's.
func streamOf(t *testing.T, id string) (string, int64) {
	t.Helper()
	kind, s, seq, ok := endpoint.ParseEventID(id)
	if !ok || kind != 'c' {
		t.Fatalf("event id %q", id)
	}
	return s, seq
}

// ordered fails the test unless the messages' ids, from the first, are
// one stream's, each the one after the last.
func ordered(t *testing.T, from int64, msgs []map[string]any) {
	t.Helper()
	for i, m := range msgs {
		_, seq := streamOf(t, fmt.Sprint(m["__id"]))
		if seq != from+int64(i) {
			t.Fatalf("event %d has id %v, want sequence %d", i, m["__id"], from+int64(i))
		}
	}
}

func TestADroppedCallStreamResumesWhereItBroke(t *testing.T) {
	p, h := chainPlatform(t)

	for _, tc := range []struct {
		name string
		// drop says where the stream drops; answered that the client
		// answered that message before it dropped.
		drop     func(m map[string]any) bool
		answered bool
	}{
		{"mid-question", isQuestion("colour"), false},
		{"after the answer", isQuestion("colour"), true},
		{"before the response", func(m map[string]any) bool { _, ok := m["method"]; return !ok }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.count()
			c := answeringClient(t, p)
			var dropped map[string]any
			msg, _ := c.exchange("tools/call", obj{"name": "order", "arguments": obj{"order": "o-1"}}, func(m map[string]any) bool {
				if !tc.drop(m) {
					return false
				}
				dropped = m
				if tc.answered {
					c.answer(m["id"], m)
				}
				return true
			})
			if msg != nil || dropped == nil {
				t.Fatalf("the stream did not drop: %v", msg)
			}
			// The client resumes from the last event it had fully handled:
			// the question it did not answer is sent again, with its id.
			stream, seq := streamOf(t, dropped["__id"].(string))
			from := seq - 1 // the dropped message was not handled
			if tc.answered {
				from = seq
			}
			c.seen = nil
			msg, status := c.resume("", fmt.Sprintf("c.%s.%d", stream, from), nil)
			if status != 200 {
				t.Fatalf("resume: HTTP %d %v", status, msg)
			}
			res, _ := msg["result"].(map[string]any)
			if text := toolText(t, res); !strings.Contains(text, "Ada") || !strings.Contains(text, "red") || !strings.Contains(text, "L") {
				t.Fatalf("result %v", res)
			}
			ordered(t, from+1, c.seen)
			if s, _ := streamOf(t, c.seen[0]["__id"].(string)); s != stream {
				t.Fatalf("resumed stream %s, broke on %s", s, stream)
			}
			replayed := c.seen[0]
			switch {
			case dropped["method"] == nil:
				// Only the response was left: it is the one event.
				if len(c.seen) != 1 {
					t.Fatalf("after the response's drop, the stream replayed %v", c.seen)
				}
			case tc.answered:
				if isQuestion("colour")(replayed) {
					t.Fatalf("an answered question was asked again: %v", replayed)
				}
			default:
				if replayed["id"] != dropped["id"] || !isQuestion("colour")(replayed) {
					t.Fatalf("replayed %v, dropped at %v", replayed, dropped)
				}
			}
			// Exactly one delivery reached the backend.
			if n := h.count() - before; n != 1 {
				t.Fatalf("the webhook was called %d times", n)
			}
		})
	}
}

func TestAResumptionGetsOnlyItsOwnStream(t *testing.T) {
	p, h := chainPlatform(t)
	c := answeringClient(t, p)
	msg, _ := c.exchange("tools/call", obj{"name": "order", "arguments": obj{"order": "o-1"}}, isQuestion("name"))
	if msg != nil {
		t.Fatal(msg)
	}
	stream, _ := streamOf(t, c.lastID)
	// Another session of the same tenant, and of another caller, cannot
	// resume it, by any spelling; nor can this session with ids this
	// server never wrote.
	other := newLegacyClient(t, legacyURL(p, "acme"))
	other.initialize("2025-11-25", legacyCaps)
	if m, status := other.resume("", "c."+stream+".0", nil); status != 404 {
		t.Fatalf("another session resumed the stream: %d %v", status, m)
	}
	for _, id := range []string{
		"c." + stream + ".01", "c." + stream + ".+1", "c." + stream + ".-1", "c." + stream + ".1e0",
		"c." + stream + ". 1", "c." + stream + ".0x1", "c." + strings.ToUpper(stream) + ".1",
		"c." + stream, "c." + stream + ".1.2", "x." + stream + ".1", "c." + stream[:23] + ".1",
		"c." + stream + "0.1", "c." + stream + ".99999999999999", "c..1", ".", "1", "c.%2e.1",
		"c." + stream + ".9223372036854775808",
	} {
		if m, status := c.resume("", id, nil); status != 400 && status != 404 {
			t.Errorf("Last-Event-ID %q: HTTP %d %v", id, status, m)
		}
	}
	// An id past what the stream sent is refused too.
	if m, status := c.resume("", "c."+stream+".99", nil); status != 400 {
		t.Errorf("an id past the stream: HTTP %d %v", status, m)
	}
	// None of it touched the call: resumed properly, it completes.
	msg, status := c.resume("", "c."+stream+".0", nil)
	res, _ := msg["result"].(map[string]any)
	if status != 200 || !strings.Contains(toolText(t, res), "Ada") {
		t.Fatalf("HTTP %d %v", status, msg)
	}
	if h.count() != 1 {
		t.Fatalf("the webhook was called %d times", h.count())
	}
}

func TestAResumptionPastTheKeptEventsIsToldOfTheGap(t *testing.T) {
	defer endpoint.SetCallKeptEvents(1)()
	p, h := chainPlatform(t)
	c := answeringClient(t, p)
	// The client answers the first question as its stream drops; the
	// second question, sent while it is away, pushes the first out.
	msg, _ := c.exchange("tools/call", obj{"name": "order", "arguments": obj{"order": "o-1"}}, func(m map[string]any) bool {
		if isQuestion("name")(m) {
			c.answer(m["id"], m)
			return true
		}
		return false
	})
	if msg != nil {
		t.Fatal(msg)
	}
	stream, _ := streamOf(t, c.lastID)
	db := platformtest.SQL(t, p.DatabaseURL)
	testwait.Until(t, "the second question is stored", func() bool {
		n := db.Strings(t, "SELECT CAST(next_seq AS TEXT) FROM legacy_calls WHERE id = ?", stream)
		return len(n) == 1 && n[0] == "3"
	})
	msg, status := c.resume("", "c."+stream+".0", nil)
	e, _ := msg["error"].(map[string]any)
	if status != 200 || e == nil || !strings.Contains(fmt.Sprint(e["message"]), "no longer kept") || msg["id"] != float64(c.nextID) {
		t.Fatalf("resumption past the bound: HTTP %d %v", status, msg)
	}
	if d, _ := e["data"].(map[string]any); d["lastEventId"] != "c."+stream+".0" {
		t.Fatalf("the error does not name the gap: %v", e)
	}
	// The call was stopped: it never completes, and the record says so.
	var id string
	testwait.Until(t, "the flow ends", func() bool {
		items := p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/flows", nil)["items"].([]any)
		if len(items) != 1 {
			return false
		}
		f := items[0].(map[string]any)
		id, _ = f["id"].(string)
		return f["state"] != "awaiting_input"
	})
	if flow, _ := flowOf(t, p, id, "failed"); flow["detail"] != "no_answer" {
		t.Fatalf("flow %v", flow)
	}
	if h.count() != 0 {
		t.Fatal("the stopped call reached the webhook")
	}
}

// firstEvent reads the raw first event of a stream.
func firstEvent(t *testing.T, resp *http.Response) string {
	t.Helper()
	r := bufio.NewReader(resp.Body)
	var b strings.Builder
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream: %v after %q", err, b.String())
		}
		if line == "\n" {
			if strings.HasPrefix(b.String(), ":") { // a comment
				b.Reset()
				continue
			}
			return b.String()
		}
		b.WriteString(line)
	}
}

func TestOnlyA20251125SessionsStreamsArePrimed(t *testing.T) {
	p, h := chainPlatform(t)
	for _, v := range []string{"2025-11-25", "2025-06-18", "2025-03-26"} {
		t.Run(v, func(t *testing.T) {
			c := newLegacyClient(t, legacyURL(p, "acme"))
			c.initialize(v, legacyCaps)
			// The call's stream.
			req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"order","arguments":{}}}`))
			req.Header = c.header()
			call, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer call.Body.Close()
			first := firstEvent(t, call)
			// The standalone stream.
			get, _ := http.NewRequest(http.MethodGet, c.url, nil)
			get.Header = c.header()
			get.Header.Set("Accept", "text/event-stream")
			sa, err := http.DefaultClient.Do(get)
			if err != nil {
				t.Fatal(err)
			}
			defer sa.Body.Close()
			p.Tool(t, "acme", echoTool("echo-"+strings.ReplaceAll(v, "-", ""), h.URL))
			standalone := firstEvent(t, sa)
			if v == "2025-11-25" {
				if !strings.HasPrefix(first, "id: c.") || !strings.HasSuffix(first, ".0\nretry: 1000\ndata: \n") {
					t.Fatalf("call stream begins %q", first)
				}
				if !strings.HasPrefix(standalone, "id: g.") || !strings.HasSuffix(standalone, ".0\nretry: 1000\ndata: \n") {
					t.Fatalf("standalone stream begins %q", standalone)
				}
				return
			}
			// Earlier clients take an event without data for a broken
			// message: their streams begin with a message, with its id.
			if !strings.HasPrefix(first, "id: c.") || !strings.Contains(first, ".1\nevent: message\ndata: {") || strings.Contains(first, "retry") {
				t.Fatalf("call stream begins %q", first)
			}
			if !strings.HasPrefix(standalone, "id: g.") || !strings.Contains(standalone, ".1\nevent: message\ndata: {") {
				t.Fatalf("standalone stream begins %q", standalone)
			}
		})
	}
}

func TestAResumedStandaloneStreamSaysWhatMayHaveChanged(t *testing.T) {
	h := newHook(t, answersHook)
	p := setup(t, h)
	p.MustAdmin(t, 201, "POST", "/api/v1/tenants/acme/resources", obj{"name": "doc", "uri": "test://doc", "mimeType": "text/plain", "text": "v1"})
	c := newLegacyClient(t, legacyURL(p, "acme"))
	c.initialize("2025-11-25", legacyCaps)
	if got := c.result("resources/subscribe", obj{"uri": "test://doc"}); len(got) != 0 {
		t.Fatalf("subscribe %v", got)
	}
	// A stream that followed an older catalogue version.
	var methods []string
	c.resume("", "g.01234567"+"0000000000000000"+".3", func(m map[string]any) bool {
		methods = append(methods, fmt.Sprint(m["method"]))
		if _, _, seq, ok := endpoint.ParseEventID(fmt.Sprint(m["__id"])); !ok || seq != int64(len(methods)) {
			t.Errorf("event %v", m)
		}
		return len(methods) == 4
	})
	want := "notifications/tools/list_changed notifications/prompts/list_changed notifications/resources/list_changed notifications/resources/updated"
	if strings.Join(methods, " ") != want {
		t.Fatalf("resumed standalone stream sent %v", methods)
	}
	// A stream of the current catalogue, resumed, says nothing until
	// something changes: then only what did.
	get, _ := http.NewRequest(http.MethodGet, c.url, nil)
	get.Header = c.header()
	get.Header.Set("Accept", "text/event-stream")
	sa, err := http.DefaultClient.Do(get)
	if err != nil {
		t.Fatal(err)
	}
	primed := firstEvent(t, sa)
	sa.Body.Close()
	id := strings.TrimPrefix(strings.SplitN(primed, "\n", 2)[0], "id: ")
	methods = nil
	var changing atomic.Bool // the catalogue change has begun
	go func() {
		time.Sleep(200 * time.Millisecond)
		changing.Store(true)
		p.Tool(t, "acme", echoTool("echo2", h.URL))
	}()
	early := false
	c.resume("", id, func(m map[string]any) bool {
		methods = append(methods, fmt.Sprint(m["method"]))
		early = !changing.Load()
		return true
	})
	if early || strings.Join(methods, " ") != "notifications/tools/list_changed" {
		t.Fatalf("a stream resumed on the current catalogue sent %v first (before the change: %v)", methods, early)
	}
}

func TestACallStreamResumesOnAnotherReplicaAndIsTakenOverWhenItsHolderLeaves(t *testing.T) {
	keys := key()
	db := platformtest.PostgresSchemaURL(t)
	a := platformtest.Start(t, db, platformtest.WithStateKeys(keys))
	b := platformtest.Start(t, db, platformtest.WithStateKeys(keys), platformtest.WithConfig(func(c *config.Config) { c.PublicURL = a.URL }))
	h := newHook(t, answersHook)
	a.Tenant(t, "acme")
	h.setSecret(a.Tool(t, "acme", chainTool("order", h.URL)))
	testwait.Until(t, "b serves the tenant", func() bool {
		return newLegacyClient(t, legacyURL(b, "acme")).post(legacyURL(b, "acme"), obj{"jsonrpc": "2.0", "id": 1, "method": "ping"}).Status != 404
	})
	c := newLegacyClient(t, legacyURL(a, "acme"))
	c.initialize("2025-11-25", legacyCaps)
	c.onRequest = answerEverything
	c.answerTo = legacyURL(b, "acme")

	// The stream, held by a, drops at the first question; the client
	// resumes at b, which follows a's events while a serves the call,
	// and drops again at the second question.
	if msg, _ := c.exchange("tools/call", obj{"name": "order", "arguments": obj{"order": "o-1"}}, isQuestion("name")); msg != nil {
		t.Fatal(msg)
	}
	stream, seq := streamOf(t, c.lastID)
	if msg, _ := c.resume(legacyURL(b, "acme"), fmt.Sprintf("c.%s.%d", stream, seq-1), isQuestion("colour")); msg != nil {
		t.Fatal(msg)
	}
	// a shuts down while the call waits: it leaves the call to whichever
	// replica the client resumes at, which takes it over at once.
	a.Stop()
	_, seq = streamOf(t, c.lastID)
	msg, status := c.resume(legacyURL(b, "acme"), fmt.Sprintf("c.%s.%d", stream, seq-1), nil)
	res, _ := msg["result"].(map[string]any)
	if status != 200 || !strings.Contains(toolText(t, res), "Ada") || !strings.Contains(toolText(t, res), "red") {
		t.Fatalf("HTTP %d %v", status, msg)
	}
	if h.count() != 1 {
		t.Fatalf("the webhook was called %d times", h.count())
	}
	var flow map[string]any
	testwait.Until(t, "the flow is recorded completed", func() bool {
		items := b.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/flows", nil)["items"].([]any)
		flow = items[0].(map[string]any)
		return len(items) == 1 && flow["state"] == "completed"
	})
	if flow["rounds"] != float64(4) {
		t.Fatalf("flow %v", flow)
	}
}

// TestTheSessionsAPICountsEachSessionsOpenStreams: a session's open
// streams (its standalone GET stream and a call stream waiting on its
// question) are counted in the sessions API, another session's are
// not; each stops counting once its client goes away, the call stream
// too although its call still waits to be resumed.
func TestTheSessionsAPICountsEachSessionsOpenStreams(t *testing.T) {
	h := newHook(t, answersHook)
	p := setup(t, h, platformtest.WithServer(func(o *endpoint.Options) { o.Legacy.TouchEvery = 100 * time.Millisecond }))
	h.setSecret(p.Tool(t, "acme", chainTool("order", h.URL)))
	c := newLegacyClient(t, legacyURL(p, "acme"))
	c.initialize("2025-11-25", legacyCaps)
	other := newLegacyClient(t, legacyURL(p, "acme"))
	other.initialize("2025-11-25", legacyCaps)
	nonce := func(c *legacyClient) string { return strings.SplitN(c.session, ".", 2)[0] }
	streams := func() map[string]any {
		out := map[string]any{}
		for _, it := range p.MustAdmin(t, 200, "GET", "/api/v1/tenants/acme/sessions", nil)["items"].([]any) {
			s := it.(map[string]any)
			out[s["id"].(string)] = s["openStreams"]
		}
		return out
	}
	want := func(what string, n float64) {
		t.Helper()
		testwait.Until(t, what, func() bool {
			got := streams()
			return got[nonce(c)] == n && got[nonce(other)] == float64(0)
		})
	}
	want("no stream yet", 0)

	get, _ := http.NewRequest(http.MethodGet, c.url, nil)
	get.Header = c.header()
	get.Header.Set("Accept", "text/event-stream")
	standalone, err := http.DefaultClient.Do(get)
	if err != nil {
		t.Fatal(err)
	}
	firstEvent(t, standalone)
	asked, leave := make(chan struct{}), make(chan struct{})
	go c.exchange("tools/call", obj{"name": "order", "arguments": obj{}}, func(m map[string]any) bool {
		if m["method"] != "elicitation/create" {
			return false
		}
		close(asked)
		<-leave
		return true // the client goes away, its question unanswered
	})
	testwait.Recv(t, asked, "the call's question")
	want("the GET stream and the call's stream", 2)
	standalone.Body.Close()
	want("the call's stream, once the GET stream's client went away", 1)
	close(leave)
	want("none, once the call's client went away too", 0)
}
