package mrtr_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
)

var (
	everyCap = mrtr.ClientCapabilities{
		Elicitation: &mrtr.ElicitationCapability{Form: &struct{}{}, URL: &struct{}{}},
		Sampling:    &mrtr.SamplingCapability{Tools: &struct{}{}, Context: &struct{}{}},
		Roots:       &mrtr.RootsCapability{},
	}
	bareElicitation = mrtr.ClientCapabilities{Elicitation: &mrtr.ElicitationCapability{}}
)

const nameFormSchema = `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`

func formQuestion(name, msg, schema string) mrtr.Input {
	return mrtr.Input{Name: name, Kind: mrtr.KindForm, Message: msg, RequestedSchema: json.RawMessage(schema)}
}

func rj(s string) json.RawMessage { return json.RawMessage(s) }

func answersFor(kv ...string) map[string]json.RawMessage {
	m := make(map[string]json.RawMessage)
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = rj(kv[i+1])
	}
	return m
}

// seal stands in for the sealing layer: the record crosses the wire as
// JSON and comes back decoded.
func sealRecord(t testing.TB, r mrtr.Record) mrtr.Record {
	t.Helper()
	b, err := mrtr.EncodeRecord(r)
	if err != nil {
		t.Fatalf("EncodeRecord: %v", err)
	}
	return mrtr.DecodeRecord(b)
}

func resolveOK(t testing.TB, inputs []mrtr.Input, args string, prev mrtr.Record, resp map[string]json.RawMessage, caps mrtr.ClientCapabilities) *mrtr.Resolution {
	t.Helper()
	var a json.RawMessage
	if args != "" {
		a = rj(args)
	}
	res, err := mrtr.Resolve(inputs, a, prev, resp, caps)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	return res
}

func openNames(r *mrtr.Resolution) []string {
	keys := make([]string, 0, len(r.Open))
	for k := range r.Open {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func paramOf(t testing.TB, req mrtr.InputRequest, key string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(req.Params, &m); err != nil {
		t.Fatalf("params %s: %v", req.Params, err)
	}
	return m[key]
}

// drive plays a client that answers every question with answer(name, req),
// sealing the record between rounds, until mrtr.Resolve is done. It returns the
// final resolution and how many times each input was asked.
func driveFlow(t testing.TB, inputs []mrtr.Input, args string, answer func(string, mrtr.InputRequest) string) (*mrtr.Resolution, map[string]int) {
	t.Helper()
	asked := make(map[string]int)
	var rec mrtr.Record
	var resp map[string]json.RawMessage
	for round := 0; round < 10; round++ {
		res := resolveOK(t, inputs, args, rec, resp, everyCap)
		if res.Done {
			return res, asked
		}
		resp = make(map[string]json.RawMessage)
		for name, req := range res.Open {
			asked[name]++
			resp[name] = rj(answer(name, req))
		}
		rec = sealRecord(t, res.Record)
	}
	t.Fatal("flow did not finish in 10 rounds")
	return nil, nil
}

func TestFirstRoundReturnsTheQuestion(t *testing.T) {
	in := []mrtr.Input{formQuestion("user_name", "What is your name?", nameFormSchema)}
	res := resolveOK(t, in, "", mrtr.Record{}, nil, bareElicitation)
	if res.Done || len(res.Answers) != 0 {
		t.Fatalf("Done=%v Answers=%v, want an open question", res.Done, res.Answers)
	}
	q, ok := res.Open["user_name"]
	if !ok || q.Method != mcp.MethodElicit {
		t.Fatalf("Open = %v, want elicitation/create under user_name", res.Open)
	}
	// The schema keeps the tenant's own key order: clients show form
	// fields in it.
	want := `{"message":"What is your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}`
	if string(q.Params) != want {
		t.Errorf("params = %s\nwant %s", q.Params, want)
	}
	if paramOf(t, q, "mode") != nil {
		t.Error("form params carry mode; absent means form")
	}
	if d := res.Record.Asked["user_name"]; len(d) != 22 {
		t.Errorf("Record.Asked = %v, want a 22-char digest", res.Record.Asked)
	}
}

func TestEveryOutcomeIsHandled(t *testing.T) {
	in := []mrtr.Input{formQuestion("user_name", "What is your name?", nameFormSchema)}
	first := resolveOK(t, in, "", mrtr.Record{}, nil, bareElicitation)
	for _, tc := range []struct {
		resp, action, content string
		refused               bool
	}{
		{`{"action":"accept","content":{"name":"Alice"}}`, mrtr.ActionAccept, `{"name":"Alice"}`, false},
		{`{"action":"decline"}`, mrtr.ActionDecline, "", true},
		{`{"action":"cancel"}`, mrtr.ActionCancel, "", true},
		// Content is defined only for an accepted form; a decline's is ignored.
		{`{"action":"decline","content":{"name":"x"}}`, mrtr.ActionDecline, "", true},
	} {
		res := resolveOK(t, in, "", sealRecord(t, first.Record), answersFor("user_name", tc.resp), bareElicitation)
		got := res.Answers["user_name"]
		if !res.Done || got.Action != tc.action || string(got.Content) != tc.content {
			t.Errorf("%s: Done=%v answer=%+v", tc.resp, res.Done, got)
		}
		if (len(res.Refused) > 0) != tc.refused {
			t.Errorf("%s: Refused = %v", tc.resp, res.Refused)
		}
		if o := res.Record.Outcomes["user_name"]; o.Action != tc.action || o.Q != first.Record.Asked["user_name"] {
			t.Errorf("%s: recorded %+v, want action %s with the asked digest", tc.resp, o, tc.action)
		}
	}
}

func TestOptionalDeclineIsNotRefused(t *testing.T) {
	in := []mrtr.Input{formQuestion("a", "A?", nameFormSchema)}
	in[0].Optional = true
	first := resolveOK(t, in, "", mrtr.Record{}, nil, everyCap)
	res := resolveOK(t, in, "", sealRecord(t, first.Record), answersFor("a", `{"action":"decline"}`), everyCap)
	if !res.Done || res.Answers["a"].Action != mrtr.ActionDecline || res.Refused != nil {
		t.Errorf("Done=%v answers=%v refused=%v", res.Done, res.Answers, res.Refused)
	}
}

func TestEmptyRootsListCompletes(t *testing.T) {
	in := []mrtr.Input{{Name: "client_roots", Kind: mrtr.KindRoots}}
	first := resolveOK(t, in, "", mrtr.Record{}, nil, everyCap)
	q := first.Open["client_roots"]
	if q.Method != mcp.MethodListRoots || string(q.Params) != `{}` {
		t.Fatalf("question = %s %s, want roots/list {}", q.Method, q.Params)
	}
	res := resolveOK(t, in, "", sealRecord(t, first.Record), answersFor("client_roots", `{"roots":[]}`), everyCap)
	if !res.Done || string(res.Answers["client_roots"].Content) != `{"roots":[]}` {
		t.Errorf("Done=%v answer=%+v", res.Done, res.Answers["client_roots"])
	}
}

func TestEachQuestionIsAskedOnceWhilePendingOnesWait(t *testing.T) {
	in := []mrtr.Input{
		formQuestion("login", "GitHub login?", nameFormSchema),
		formQuestion("confirm", "Deploy as {{args.env}}?", `{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`),
		formQuestion("reason", "Why?", nameFormSchema),
	}
	in[1].When = &mrtr.Condition{Input: "login"}
	in[2].When = &mrtr.Condition{Input: "confirm", Field: "ok", Equals: rj(`true`)}
	res, asked := driveFlow(t, in, `{"env":"prod"}`, func(name string, _ mrtr.InputRequest) string {
		if name == "confirm" {
			return `{"action":"accept","content":{"ok":true}}`
		}
		return `{"action":"accept","content":{"name":"octocat"}}`
	})
	if want := map[string]int{"login": 1, "confirm": 1, "reason": 1}; !reflect.DeepEqual(asked, want) {
		t.Errorf("asked = %v, want each once: %v", asked, want)
	}
	if len(res.Answers) != 3 {
		t.Errorf("answers = %v", res.Answers)
	}
}

func TestIndependentQuestionsAreBatchedInOneRound(t *testing.T) {
	in := []mrtr.Input{
		formQuestion("user_name", "Name?", nameFormSchema),
		{Name: "greeting", Kind: mrtr.KindSampling, Sampling: rj(`{"messages":[{"role":"user","content":{"type":"text","text":"Say hi"}}],"maxTokens":50}`)},
		{Name: "client_roots", Kind: mrtr.KindRoots},
		{Name: "docs", Kind: mrtr.KindURL, Message: "Sign in", URL: "https://example.com/login"},
		formQuestion("later", "Later?", nameFormSchema),
	}
	in[4].When = &mrtr.Condition{Input: "user_name"}
	res := resolveOK(t, in, "", mrtr.Record{}, nil, everyCap)
	if got, want := openNames(res), []string{"client_roots", "docs", "greeting", "user_name"}; !slices.Equal(got, want) {
		t.Fatalf("open = %v, want the four independent questions %v", got, want)
	}
	methods := map[string]string{"user_name": mcp.MethodElicit, "greeting": mcp.MethodCreateMessage, "client_roots": mcp.MethodListRoots, "docs": mcp.MethodElicit}
	for name, m := range methods {
		if res.Open[name].Method != m {
			t.Errorf("%s method = %s, want %s", name, res.Open[name].Method, m)
		}
	}
	round2 := resolveOK(t, in, "", sealRecord(t, res.Record), answersFor(
		"user_name", `{"action":"accept","content":{"name":"Alice"}}`,
		"greeting", `{"role":"assistant","content":{"type":"text","text":"Hello there!"},"model":"m","stopReason":"endTurn"}`,
		"client_roots", `{"roots":[{"uri":"file:///test/root","name":"Test Root"}]}`,
		"docs", `{"action":"accept"}`,
	), everyCap)
	if got := openNames(round2); !slices.Equal(got, []string{"later"}) {
		t.Errorf("round 2 open = %v, want only the dependent question", got)
	}
	if len(round2.Answers) != 4 {
		t.Errorf("round 2 answers = %v", round2.Answers)
	}
}

func TestChainKeepsEarlyAnswersAcrossRounds(t *testing.T) {
	var in []mrtr.Input
	for i := range 5 {
		in = append(in, formQuestion(fmt.Sprintf("step%d", i), fmt.Sprintf("Step %d?", i), nameFormSchema))
		if i > 0 {
			in[i].When = &mrtr.Condition{Input: in[i-1].Name}
		}
	}
	var rec mrtr.Record
	var resp map[string]json.RawMessage
	for round := range 5 {
		res := resolveOK(t, in, "", rec, resp, bareElicitation)
		if got, want := openNames(res), []string{fmt.Sprintf("step%d", round)}; !slices.Equal(got, want) {
			t.Fatalf("round %d open = %v, want %v", round, got, want)
		}
		if len(res.Answers) != round || len(res.Record.Outcomes) != round {
			t.Fatalf("round %d kept %d answers, %d outcomes; want %d", round, len(res.Answers), len(res.Record.Outcomes), round)
		}
		rec = sealRecord(t, res.Record)
		resp = answersFor(fmt.Sprintf("step%d", round), fmt.Sprintf(`{"action":"accept","content":{"name":"n%d"}}`, round))
	}
	res := resolveOK(t, in, "", rec, resp, bareElicitation)
	if !res.Done || string(res.Answers["step0"].Content) != `{"name":"n0"}` {
		t.Errorf("Done=%v step0=%s", res.Done, res.Answers["step0"].Content)
	}
}

func TestDeclineIsPersistedAndNotReasked(t *testing.T) {
	in := []mrtr.Input{formQuestion("a", "A?", nameFormSchema), formQuestion("b", "B?", nameFormSchema)}
	first := resolveOK(t, in, "", mrtr.Record{}, nil, bareElicitation)
	// Only a is answered; b stays open.
	second := resolveOK(t, in, "", sealRecord(t, first.Record), answersFor("a", `{"action":"decline"}`), bareElicitation)
	if got := openNames(second); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("open = %v, want [b]", got)
	}
	if o := second.Record.Outcomes["a"]; o.Action != mrtr.ActionDecline || o.Q == "" {
		t.Fatalf("recorded %+v, want a decline with its digest", o)
	}
	third := resolveOK(t, in, "", sealRecord(t, second.Record), answersFor("b", `{"action":"accept","content":{"name":"x"}}`), bareElicitation)
	if !third.Done || third.Answers["a"].Action != mrtr.ActionDecline || !slices.Equal(third.Refused, []string{"a"}) {
		t.Errorf("Done=%v answers=%v refused=%v", third.Done, third.Answers, third.Refused)
	}
}

func TestSamplingOutcomePersistsAcrossRounds(t *testing.T) {
	in := []mrtr.Input{
		{Name: "cap", Kind: mrtr.KindSampling, Sampling: rj(`{"messages":[{"role":"user","content":{"type":"text","text":"Capital of {{args.country}}?"}}],"maxTokens":100}`)},
		formQuestion("ok", "Is {{args.country}} right?", nameFormSchema),
	}
	in[1].When = &mrtr.Condition{Input: "cap"}
	first := resolveOK(t, in, `{"country":"France"}`, mrtr.Record{}, nil, everyCap)
	msgs := paramOf(t, first.Open["cap"], "messages").([]any)
	if text := msgs[0].(map[string]any)["content"].(map[string]any)["text"]; text != "Capital of France?" {
		t.Fatalf("rendered text = %v", text)
	}
	result := `{"role":"assistant","content":{"type":"text","text":"Paris"},"model":"m","stopReason":"endTurn"}`
	second := resolveOK(t, in, `{"country":"France"}`, sealRecord(t, first.Record), answersFor("cap", result), everyCap)
	third := resolveOK(t, in, `{"country":"France"}`, sealRecord(t, second.Record), answersFor("ok", `{"action":"accept","content":{"name":"y"}}`), everyCap)
	if !third.Done || string(third.Answers["cap"].Content) != result || third.Answers["cap"].Action != mrtr.ActionAccept {
		t.Errorf("Done=%v cap=%+v", third.Done, third.Answers["cap"])
	}
}

func TestDecodeRecordToleratesMalformedRecords(t *testing.T) {
	for _, b := range []string{"", "null", "{", "[]", `"x"`, `{"v":2,"o":{"a":{"a":"accept","q":"x"}}}`, `{"v":"1"}`, `{"v":1,"o":[]}`, "\x00\xff"} {
		if r := mrtr.DecodeRecord([]byte(b)); !reflect.DeepEqual(r, mrtr.Record{}) {
			t.Errorf("DecodeRecord(%q) = %+v, want the empty record", b, r)
		}
	}
	in := []mrtr.Input{formQuestion("a", "A?", nameFormSchema)}
	res := resolveOK(t, in, "", mrtr.Record{V: 99, Outcomes: map[string]mrtr.Outcome{"a": {Action: mrtr.ActionAccept}}}, nil, bareElicitation)
	if res.Done || len(res.Open) != 1 {
		t.Errorf("a foreign-version record made progress: %+v", res)
	}
}

func TestRecordRoundTripsOutcomesAndDigests(t *testing.T) {
	r := mrtr.Record{
		V: mrtr.RecordVersion,
		Outcomes: map[string]mrtr.Outcome{
			"a": {Action: mrtr.ActionAccept, Data: rj(`{"name":"<b>&"}`), Q: "AAAAAAAAAAAAAAAAAAAAAA"},
			"b": {Action: mrtr.ActionDecline, Q: "BBBBBBBBBBBBBBBBBBBBBB"},
			"c": {Action: mrtr.ActionCancel, Q: "CCCCCCCCCCCCCCCCCCCCCC"},
		},
		Asked:    map[string]string{"d": "DDDDDDDDDDDDDDDDDDDDDD"},
		Rejected: map[string]string{"d": "name is required"},
	}
	b, err := mrtr.EncodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"<b>&"`)) {
		t.Errorf("record escapes HTML: %s", b)
	}
	if got := mrtr.DecodeRecord(b); !reflect.DeepEqual(got, r) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, r)
	}
}

func TestQuestionDigestPinsTheRenderedQuestion(t *testing.T) {
	// The digest is over JCS({"method","params"}), computed here by hand.
	in := []mrtr.Input{formQuestion("a", "Name?", `{ "type": "object", "properties": { "name": { "type": "string" } } }`)}
	res := resolveOK(t, in, "", mrtr.Record{}, nil, bareElicitation)
	canon := `{"method":"elicitation/create","params":{"message":"Name?","requestedSchema":{"properties":{"name":{"type":"string"}},"type":"object"}}}`
	sum := sha256.Sum256([]byte(canon))
	want := base64.RawURLEncoding.EncodeToString(sum[:16])
	if got := res.Record.Asked["a"]; got != want || len(got) != 22 {
		t.Errorf("digest = %q, want %q (22 chars)", got, want)
	}

	digest := func(in mrtr.Input, args string) string {
		return resolveOK(t, []mrtr.Input{in}, args, mrtr.Record{}, nil, everyCap).Record.Asked[in.Name]
	}
	base := formQuestion("a", "Hi {{args.who}}", nameFormSchema)
	reordered := formQuestion("a", "Hi {{args.who}}", `{"required":["name"],"properties":{"name":{"type":"string"}},"type":"object"}`)
	if digest(base, `{"who":"x"}`) != digest(reordered, `{"who":"x"}`) {
		t.Error("schema key order changed the digest")
	}
	if digest(base, `{"who":1.0}`) != digest(base, `{"who":1}`) {
		t.Error("number spelling in arguments changed the digest")
	}
	if digest(base, `{"who":"x"}`) == digest(base, `{"who":"y"}`) {
		t.Error("a different rendered message kept the digest")
	}
	renamed := base
	renamed.Name = "b"
	if digest(base, "") != digest(renamed, "") {
		t.Error("the digest depends on the key, not just the question")
	}
}

func TestRestoredAnswerWithMatchingDigestCompletes(t *testing.T) {
	in := []mrtr.Input{formQuestion("a", "A?", nameFormSchema), formQuestion("b", "B?", nameFormSchema)}
	first := resolveOK(t, in, "", mrtr.Record{}, nil, bareElicitation)
	second := resolveOK(t, in, "", sealRecord(t, first.Record), answersFor(
		"a", `{"action":"accept","content":{ "name" : "Ann" }}`,
		"b", `{"action":"cancel"}`), bareElicitation)
	if !second.Done {
		t.Fatalf("not done: %+v", second)
	}
	// A retry carrying only the record completes without asking again and
	// carries every outcome forward with its digest intact.
	third := resolveOK(t, in, "", sealRecord(t, second.Record), nil, bareElicitation)
	if !third.Done || len(third.Open) != 0 {
		t.Fatalf("restored record re-asked: %v", third.Open)
	}
	if !reflect.DeepEqual(third.Record.Outcomes, second.Record.Outcomes) {
		t.Errorf("outcomes changed:\n got %+v\nwant %+v", third.Record.Outcomes, second.Record.Outcomes)
	}
	for name, o := range third.Record.Outcomes {
		if o.Q != first.Record.Asked[name] {
			t.Errorf("%s: Q = %q, want the asked digest %q", name, o.Q, first.Record.Asked[name])
		}
	}
	if got := string(third.Answers["a"].Content); got != `{"name":"Ann"}` {
		t.Errorf("content = %s", got)
	}
}

func TestStateEntryWithoutDigestIsDroppedAndReasked(t *testing.T) {
	in := []mrtr.Input{formQuestion("a", "A?", nameFormSchema)}
	prev := mrtr.Record{V: mrtr.RecordVersion, Outcomes: map[string]mrtr.Outcome{"a": {Action: mrtr.ActionAccept, Data: rj(`{"name":"x"}`)}}}
	res := resolveOK(t, in, "", prev, nil, bareElicitation)
	if res.Done || len(res.Open) != 1 || len(res.Record.Outcomes) != 0 {
		t.Errorf("Done=%v open=%v outcomes=%v, want the entry dropped and re-asked", res.Done, res.Open, res.Record.Outcomes)
	}
}

func TestRewordedQuestionDropsStoredAnswerAndReasks(t *testing.T) {
	old := []mrtr.Input{formQuestion("a", "Old wording?", nameFormSchema)}
	first := resolveOK(t, old, "", mrtr.Record{}, nil, bareElicitation)
	second := resolveOK(t, old, "", sealRecord(t, first.Record), answersFor("a", `{"action":"accept","content":{"name":"x"}}`), bareElicitation)
	// The tenant edits the catalogue mid-flow.
	reworded := []mrtr.Input{formQuestion("a", "New wording?", nameFormSchema)}
	res := resolveOK(t, reworded, "", sealRecord(t, second.Record), nil, bareElicitation)
	if res.Done || paramOf(t, res.Open["a"], "message") != "New wording?" || len(res.Record.Outcomes) != 0 {
		t.Errorf("Done=%v open=%v outcomes=%v", res.Done, res.Open, res.Record.Outcomes)
	}
}

func TestDeclineOfRewordedQuestionDoesNotSuppressTheNewQuestion(t *testing.T) {
	old := []mrtr.Input{formQuestion("a", "Old?", nameFormSchema)}
	first := resolveOK(t, old, "", mrtr.Record{}, nil, bareElicitation)
	second := resolveOK(t, old, "", sealRecord(t, first.Record), answersFor("a", `{"action":"decline"}`), bareElicitation)
	res := resolveOK(t, []mrtr.Input{formQuestion("a", "New?", nameFormSchema)}, "", sealRecord(t, second.Record), nil, bareElicitation)
	if res.Done || len(res.Open) != 1 || res.Refused != nil {
		t.Errorf("Done=%v open=%v refused=%v", res.Done, res.Open, res.Refused)
	}
}

func TestRewordedQuestionReasksEvenWhenTheAnswerFirstArrives(t *testing.T) {
	first := resolveOK(t, []mrtr.Input{formQuestion("a", "Old?", nameFormSchema)}, "", mrtr.Record{}, nil, bareElicitation)
	reworded := []mrtr.Input{formQuestion("a", "New?", nameFormSchema)}
	res := resolveOK(t, reworded, "", sealRecord(t, first.Record), answersFor("a", `{"action":"accept","content":{"name":"x"}}`), bareElicitation)
	if res.Done || len(res.Answers) != 0 || paramOf(t, res.Open["a"], "message") != "New?" {
		t.Errorf("an answer to the old wording was consumed: %+v", res)
	}
}

func TestAnswerWithoutEchoedStateIsReaskedNotConsumed(t *testing.T) {
	in := []mrtr.Input{formQuestion("user_name", "What is your name?", nameFormSchema)}
	res := resolveOK(t, in, "", mrtr.Record{}, answersFor("user_name", `{"action":"accept","content":{"name":"Alice"}}`), bareElicitation)
	if res.Done || len(res.Answers) != 0 || len(res.Open) != 1 {
		t.Errorf("Done=%v answers=%v open=%v, want the question asked", res.Done, res.Answers, res.Open)
	}
}

func TestUnknownResponseKeysAndGhostEntriesAreIgnored(t *testing.T) {
	in := []mrtr.Input{formQuestion("user_name", "Name?", nameFormSchema)}
	first := resolveOK(t, in, "", mrtr.Record{}, nil, bareElicitation)
	prev := sealRecord(t, first.Record)
	prev.Outcomes = map[string]mrtr.Outcome{"ghost": {Action: mrtr.ActionAccept, Data: rj(`{"x":1}`), Q: "whatever"}}
	prev.Asked["ghost2"] = "zzz"
	res := resolveOK(t, in, "", prev, answersFor(
		"user_name", `{"action":"accept","content":{"name":"Alice"}}`,
		"unknown_extra_key", `{"action":"accept","content":{"data":"x"}}`,
		"another_unexpected", `12345`,
	), bareElicitation)
	if !res.Done || len(res.Answers) != 1 {
		t.Fatalf("Done=%v answers=%v", res.Done, res.Answers)
	}
	if _, ok := res.Record.Outcomes["ghost"]; ok || len(res.Record.Outcomes) != 1 || len(res.Record.Asked) != 0 {
		t.Errorf("ghost entries carried forward: %+v", res.Record)
	}
}

func TestForgedStateEntryFailingTheSchemaIsReasked(t *testing.T) {
	in := []mrtr.Input{formQuestion("age", "Age?", `{"type":"object","properties":{"age":{"type":"integer","minimum":0}},"required":["age"]}`)}
	first := resolveOK(t, in, "", mrtr.Record{}, nil, bareElicitation)
	q := first.Record.Asked["age"]
	for _, o := range []mrtr.Outcome{
		{Action: mrtr.ActionAccept, Data: rj(`{"age":"old"}`), Q: q},
		{Action: mrtr.ActionAccept, Data: rj(`{"age":-1}`), Q: q},
		{Action: mrtr.ActionAccept, Q: q},
		{Action: mrtr.ActionDecline, Data: rj(`{"age":3}`), Q: q},
		{Action: "maybe", Q: q},
	} {
		prev := mrtr.Record{V: mrtr.RecordVersion, Outcomes: map[string]mrtr.Outcome{"age": o}}
		res, err := mrtr.Resolve(in, nil, prev, nil, bareElicitation)
		if err != nil || res.Done || len(res.Open) != 1 {
			t.Errorf("%+v: err=%v res=%+v, want re-asked without error", o, err, res)
		}
	}
}

func TestWrongKindResponseIsReasked(t *testing.T) {
	form := formQuestion("f", "F?", nameFormSchema)
	for _, tc := range []struct {
		in     mrtr.Input
		resp   string
		reason string // appended to the re-asked message; "" for sampling and roots
	}{
		{form, `12345`, "the answer is not an elicitation result"},
		{form, `null`, "the answer is not an elicitation result"},
		{form, `{"action":"accept"}`, "the answer was accepted without content"},
		{form, `{"action":"accept","content":null}`, "the answer was accepted without content"},
		{form, `{"action":"accept","content":[1]}`, "the answer's content is not an object"},
		{form, `{"action":"ok"}`, "the answer's action must be accept, decline or cancel"},
		{form, `{"Action":"accept","content":{"name":"x"}}`, "the answer's action must be accept, decline or cancel"},
		{form, `{"roots":[]}`, "the answer's action must be accept, decline or cancel"},
		{mrtr.Input{Name: "u", Kind: mrtr.KindURL, Message: "Go", URL: "https://example.com/x"}, `{"roots":[]}`, "the answer's action must be accept, decline or cancel"},
		{mrtr.Input{Name: "s", Kind: mrtr.KindSampling, Sampling: rj(`{"messages":[{"role":"user","content":{"type":"text","text":"q"}}],"maxTokens":5}`)}, `{"action":"accept","content":{"name":"x"}}`, ""},
		{mrtr.Input{Name: "s", Kind: mrtr.KindSampling, Sampling: rj(`{"messages":[{"role":"user","content":{"type":"text","text":"q"}}],"maxTokens":5}`)}, `{"role":"assistant","content":{"type":"text","text":"x"}}`, ""},
		{mrtr.Input{Name: "r", Kind: mrtr.KindRoots}, `{"role":"assistant","content":{"type":"text","text":"x"},"model":"m"}`, ""},
		{mrtr.Input{Name: "r", Kind: mrtr.KindRoots}, `{"roots":[{"uri":"https://example.com"}]}`, ""},
	} {
		in := []mrtr.Input{tc.in}
		first := resolveOK(t, in, "", mrtr.Record{}, nil, everyCap)
		res := resolveOK(t, in, "", sealRecord(t, first.Record), answersFor(tc.in.Name, tc.resp), everyCap)
		q, open := res.Open[tc.in.Name]
		if res.Done || !open || len(res.Answers) != 0 {
			t.Errorf("%s %s: Done=%v answers=%v, want re-asked", tc.in.Kind, tc.resp, res.Done, res.Answers)
			continue
		}
		if tc.reason == "" {
			if !bytes.Equal(q.Params, first.Open[tc.in.Name].Params) {
				t.Errorf("%s %s: re-asked question changed: %s", tc.in.Kind, tc.resp, q.Params)
			}
			continue
		}
		if msg, _ := paramOf(t, q, "message").(string); !strings.HasSuffix(msg, "\n\n(Previous answer rejected: "+tc.reason+")") {
			t.Errorf("%s %s: message = %q, want reason %q", tc.in.Kind, tc.resp, msg, tc.reason)
		}
	}
}

func TestSchemaMismatchedAnswerIsReaskedWithTheReason(t *testing.T) {
	schema := `{"type":"object","properties":{
		"age":{"type":"integer","minimum":18,"maximum":130},
		"email":{"type":"string","format":"email"},
		"nick":{"type":"string","minLength":2,"maxLength":4},
		"color":{"type":"string","enum":["red","green"]},
		"size":{"type":"string","oneOf":[{"const":"s","title":"Small"},{"const":"l","title":"Large"}]},
		"tags":{"type":"array","items":{"type":"string","enum":["a","b"]},"maxItems":1},
		"ok":{"type":"boolean"},
		"born":{"type":"string","format":"date"},
		"at":{"type":"string","format":"date-time"},
		"site":{"type":"string","format":"uri"},
		"score":{"type":"number"}
	},"required":["age"]}`
	in := []mrtr.Input{formQuestion("p", "Profile?", schema)}
	first := resolveOK(t, in, "", mrtr.Record{}, nil, bareElicitation)
	for _, tc := range []struct{ content, reason string }{
		{`{"age":20.5}`, "age must be an integer"},
		{`{"age":"20"}`, "age must be a number"},
		{`{"age":17}`, "age must be at least 18"},
		{`{"age":131}`, "age must be at most 130"},
		{`{}`, "age is required"},
		{`{"age":20,"email":"not-an-address"}`, "email must be an email address"},
		{`{"age":20,"nick":"x"}`, "nick must be at least 2 characters"},
		{`{"age":20,"nick":"xxxxx"}`, "nick must be at most 4 characters"},
		{`{"age":20,"color":"blue"}`, "color must be one of the listed options"},
		{`{"age":20,"size":"m"}`, "size must be one of the listed options"},
		{`{"age":20,"tags":["a","b"]}`, "tags allows at most 1 selection(s)"},
		{`{"age":20,"tags":["c"]}`, "tags must contain only the listed options"},
		{`{"age":20,"tags":"a"}`, "tags must be a list of strings"},
		{`{"age":20,"ok":"yes"}`, "ok must be true or false"},
		{`{"age":20,"born":"2024-13-01"}`, "born must be a date (YYYY-MM-DD)"},
		{`{"age":20,"at":"yesterday"}`, "at must be a date-time (RFC 3339)"},
		{`{"age":20,"site":"example.com"}`, "site must be an absolute URI"},
		{`{"age":20,"score":null}`, "score must be a number"},
		{`{"age":20,"secret":"sauce"}`, "the answer contains fields the form does not ask for"},
	} {
		resp := answersFor("p", `{"action":"accept","content":`+tc.content+`}`)
		res := resolveOK(t, in, "", sealRecord(t, first.Record), resp, bareElicitation)
		q, ok := res.Open["p"]
		if !ok || res.Done {
			t.Errorf("%s: accepted", tc.content)
			continue
		}
		want := "Profile?\n\n(Previous answer rejected: " + tc.reason + ")"
		if msg := paramOf(t, q, "message"); msg != want {
			t.Errorf("%s: message = %q, want %q", tc.content, msg, want)
		}
		if res.Record.Asked["p"] == first.Record.Asked["p"] {
			t.Errorf("%s: the re-asked question kept its digest", tc.content)
		}
	}

	// The re-asked question's answer is consumed, and recorded under the
	// plain question's digest so that later rounds keep it.
	bad := resolveOK(t, in, "", sealRecord(t, first.Record), answersFor("p", `{"action":"accept","content":{"age":1}}`), bareElicitation)
	good := resolveOK(t, in, "", sealRecord(t, bad.Record), answersFor("p", `{"action":"accept","content":{"age":40,"email":"a@example.com","born":"2000-02-29","at":"2026-07-28T10:00:00Z","site":"https://x.example","tags":["b"],"score":1.5}}`), bareElicitation)
	if !good.Done {
		t.Fatalf("the answer to the re-asked question was not consumed: %+v", good.Open)
	}
	if good.Record.Outcomes["p"].Q != first.Record.Asked["p"] || good.Record.Rejected != nil {
		t.Errorf("record = %+v, want Q = the plain digest %q", good.Record, first.Record.Asked["p"])
	}
	if later := resolveOK(t, in, "", sealRecord(t, good.Record), nil, bareElicitation); !later.Done {
		t.Error("a later round re-asked the answered question")
	}
}

func TestRejectionReasonNeverEchoesTheAnswer(t *testing.T) {
	in := []mrtr.Input{formQuestion("color", "Color?", `{"type":"object","properties":{"c":{"type":"string","enum":["red"]}}}`)}
	first := resolveOK(t, in, "", mrtr.Record{}, nil, bareElicitation)
	res := resolveOK(t, in, "", sealRecord(t, first.Record), answersFor("color", `{"action":"accept","content":{"c":"SECRET-VALUE","SECRET-KEY":1}}`), bareElicitation)
	b, _ := mrtr.EncodeRecord(res.Record)
	if bytes.Contains(res.Open["color"].Params, []byte("SECRET")) || bytes.Contains(b, []byte("SECRET")) {
		t.Errorf("the rejected answer leaked: %s / %s", res.Open["color"].Params, b)
	}
}

func TestMissingCapabilityIsATypedErrorNamingIt(t *testing.T) {
	form := formQuestion("f", "F?", nameFormSchema)
	url := mrtr.Input{Name: "u", Kind: mrtr.KindURL, Message: "Go", URL: "https://example.com/x"}
	sample := mrtr.Input{Name: "s", Kind: mrtr.KindSampling, Sampling: rj(`{"messages":[{"role":"user","content":{"type":"text","text":"q"}}],"maxTokens":5}`)}
	sampleTools := mrtr.Input{Name: "t", Kind: mrtr.KindSampling, Sampling: rj(`{"messages":[{"role":"user","content":{"type":"text","text":"q"}}],"maxTokens":5,"tools":[{"name":"x","inputSchema":{"type":"object"}}]}`)}
	sampleCtx := mrtr.Input{Name: "c", Kind: mrtr.KindSampling, Sampling: rj(`{"messages":[{"role":"user","content":{"type":"text","text":"q"}}],"maxTokens":5,"includeContext":"thisServer"}`)}
	roots := mrtr.Input{Name: "r", Kind: mrtr.KindRoots}
	urlOnly := mrtr.ClientCapabilities{Elicitation: &mrtr.ElicitationCapability{URL: &struct{}{}}}
	plainSampling := mrtr.ClientCapabilities{Sampling: &mrtr.SamplingCapability{}}
	for _, tc := range []struct {
		name   string
		inputs []mrtr.Input
		caps   mrtr.ClientCapabilities
		want   string // requiredCapabilities JSON
		names  []string
	}{
		{"form", []mrtr.Input{form}, mrtr.ClientCapabilities{}, `{"elicitation":{}}`, []string{"f"}},
		{"form with url-only elicitation", []mrtr.Input{form}, urlOnly, `{"elicitation":{}}`, []string{"f"}},
		{"url with bare elicitation", []mrtr.Input{url}, bareElicitation, `{"elicitation":{"url":{}}}`, []string{"u"}},
		{"sampling", []mrtr.Input{sample}, bareElicitation, `{"sampling":{}}`, []string{"s"}},
		{"sampling.tools", []mrtr.Input{sampleTools}, plainSampling, `{"sampling":{"tools":{}}}`, []string{"t"}},
		{"sampling.context", []mrtr.Input{sampleCtx}, plainSampling, `{"sampling":{"context":{}}}`, []string{"c"}},
		{"roots", []mrtr.Input{roots}, bareElicitation, `{"roots":{}}`, []string{"r"}},
		{"merged", []mrtr.Input{form, url, sampleTools, roots}, mrtr.ClientCapabilities{}, `{"elicitation":{"form":{},"url":{}},"sampling":{"tools":{}},"roots":{}}`, []string{"f", "u", "t", "r"}},
	} {
		_, err := mrtr.Resolve(tc.inputs, nil, mrtr.Record{}, nil, tc.caps)
		var mce *mrtr.MissingCapabilityError
		if !errors.As(err, &mce) {
			t.Errorf("%s: err = %v, want *mrtr.MissingCapabilityError", tc.name, err)
			continue
		}
		if got, _ := json.Marshal(mce.Required); string(got) != tc.want {
			t.Errorf("%s: requiredCapabilities = %s, want %s", tc.name, got, tc.want)
		}
		if !slices.Equal(mce.Inputs, tc.names) {
			t.Errorf("%s: inputs = %v, want %v", tc.name, mce.Inputs, tc.names)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.names[0])) {
			t.Errorf("%s: message %q does not name the input", tc.name, err)
		}
	}
	// The capability check is per request: with it, the question is asked.
	if res := resolveOK(t, []mrtr.Input{form}, "", mrtr.Record{}, nil, bareElicitation); len(res.Open) != 1 {
		t.Error("a bare elicitation capability did not allow a form question")
	}
	if res := resolveOK(t, []mrtr.Input{sampleTools}, "", mrtr.Record{}, nil, everyCap); len(res.Open) != 1 {
		t.Error("sampling.tools did not allow a tool-using sampling question")
	}
}

func TestOptionalInputWithoutCapabilityResolvesUnsupported(t *testing.T) {
	roots := mrtr.Input{Name: "r", Kind: mrtr.KindRoots, Optional: true}
	after := formQuestion("why", "Why no roots?", nameFormSchema)
	after.When = &mrtr.Condition{Input: "r", Action: mrtr.ActionUnsupported}
	res := resolveOK(t, []mrtr.Input{roots, after}, "", mrtr.Record{}, nil, bareElicitation)
	if res.Answers["r"].Action != mrtr.ActionUnsupported || len(res.Record.Outcomes) != 0 {
		t.Errorf("answers=%v outcomes=%v, want r unsupported and unrecorded", res.Answers, res.Record.Outcomes)
	}
	if got := openNames(res); !slices.Equal(got, []string{"why"}) {
		t.Errorf("open = %v, want the question conditioned on unsupported", got)
	}
}

func TestConditionsDeferAndSkip(t *testing.T) {
	schema := `{"type":"object","properties":{"plan":{"type":"string","enum":["free","pro"]},"seats":{"type":"integer"}}}`
	in := []mrtr.Input{
		formQuestion("plan", "Plan?", schema),
		formQuestion("card", "Card?", nameFormSchema),
		formQuestion("why", "Why not?", nameFormSchema),
		formQuestion("after_card", "Receipt?", nameFormSchema),
	}
	in[1].When = &mrtr.Condition{Input: "plan", Field: "plan", Equals: rj(`"pro"`)}
	in[2].When = &mrtr.Condition{Input: "plan", Action: mrtr.ActionDecline}
	in[3].When = &mrtr.Condition{Input: "card"}
	first := resolveOK(t, in, "", mrtr.Record{}, nil, bareElicitation)
	if got := openNames(first); !slices.Equal(got, []string{"plan"}) {
		t.Fatalf("open = %v, want only plan (the rest wait on it)", got)
	}
	free := resolveOK(t, in, "", sealRecord(t, first.Record), answersFor("plan", `{"action":"accept","content":{"plan":"free"}}`), bareElicitation)
	if !free.Done || len(free.Answers) != 1 {
		t.Errorf("free plan: Done=%v answers=%v, want the rest skipped", free.Done, free.Answers)
	}
	pro := resolveOK(t, in, "", sealRecord(t, first.Record), answersFor("plan", `{"action":"accept","content":{"plan":"pro"}}`), bareElicitation)
	if got := openNames(pro); !slices.Equal(got, []string{"card"}) {
		t.Errorf("pro plan: open = %v, want [card]", got)
	}
	declined := resolveOK(t, in, "", sealRecord(t, first.Record), answersFor("plan", `{"action":"decline"}`), bareElicitation)
	if got := openNames(declined); !slices.Equal(got, []string{"why"}) {
		t.Errorf("declined plan: open = %v, want [why]", got)
	}
}

func TestTemplatesRenderArguments(t *testing.T) {
	in := []mrtr.Input{
		formQuestion("f", "Weather in {{args.city}} for {{ args.days }} days{{args.missing}}; opts {{args.opts}}", nameFormSchema),
		{Name: "u", Kind: mrtr.KindURL, Message: "Open {{args.city}}", URL: "https://example.com/c/{{args.city}}?q={{args.city}}#{{args.city}}"},
	}
	res := resolveOK(t, in, `{"city":"São Paulo/&?","days":3.0,"opts":{"b":true,"a":null}}`, mrtr.Record{}, nil, everyCap)
	if got, want := paramOf(t, res.Open["f"], "message"), `Weather in São Paulo/&? for 3 days; opts {"a":null,"b":true}`; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
	u := res.Open["u"]
	if got, want := paramOf(t, u, "url"), "https://example.com/c/S%C3%A3o%20Paulo%2F&%3F?q=S%C3%A3o+Paulo%2F%26%3F#S%C3%A3o%20Paulo%2F&%3F"; got != want {
		t.Errorf("url = %q\nwant %q", got, want)
	}
	if paramOf(t, u, "mode") != "url" {
		t.Errorf("url params = %s, want mode url", u.Params)
	}
	if _, err := mrtr.Resolve(in, rj(`[1]`), mrtr.Record{}, nil, everyCap); err == nil {
		t.Error("non-object arguments were accepted")
	}
}

func TestURLAnswerHasNoContent(t *testing.T) {
	in := []mrtr.Input{{Name: "u", Kind: mrtr.KindURL, Message: "Sign in", URL: "https://example.com/login"}}
	first := resolveOK(t, in, "", mrtr.Record{}, nil, everyCap)
	res := resolveOK(t, in, "", sealRecord(t, first.Record), answersFor("u", `{"action":"accept","content":{"x":1}}`), everyCap)
	if !res.Done || res.Answers["u"].Action != mrtr.ActionAccept || res.Answers["u"].Content != nil {
		t.Errorf("Done=%v answer=%+v", res.Done, res.Answers["u"])
	}
}

func TestResolveIsDeterministic(t *testing.T) {
	in := []mrtr.Input{
		formQuestion("a", "A {{args.x}}", `{"type":"object","properties":{"z":{"type":"string"},"y":{"type":"number"},"x":{"type":"boolean"}}}`),
		{Name: "s", Kind: mrtr.KindSampling, Sampling: rj(`{"maxTokens":9,"systemPrompt":"be {{args.x}}","messages":[{"role":"user","content":[{"type":"text","text":"{{args.x}}"},{"type":"image","data":"AA==","mimeType":"image/png"}]}],"metadata":{"k2":1,"k1":2}}`)},
		{Name: "r", Kind: mrtr.KindRoots},
		formQuestion("b", "B", nameFormSchema),
	}
	in[3].When = &mrtr.Condition{Input: "a"}
	render := func() string {
		res := resolveOK(t, in, `{"x":"v","w":[3,1]}`, mrtr.Record{}, nil, everyCap)
		rec, _ := mrtr.EncodeRecord(res.Record)
		open, _ := json.Marshal(res.Open)
		return string(open) + string(rec)
	}
	want := render()
	for range 50 {
		if got := render(); got != want {
			t.Fatalf("output varies between runs:\n%s\n%s", got, want)
		}
	}
	// Pinned bytes guard against drift between builds (replicas on
	// different versions must agree on digests).
	res := resolveOK(t, in, `{"x":"v"}`, mrtr.Record{}, nil, everyCap)
	if got := string(res.Open["s"].Params); got != `{"maxTokens":9,"messages":[{"content":[{"text":"v","type":"text"},{"data":"AA==","mimeType":"image/png","type":"image"}],"role":"user"}],"metadata":{"k1":2,"k2":1},"systemPrompt":"be v"}` {
		t.Errorf("sampling params = %s", got)
	}
}

func TestOddUnicodeInAnswersSurvives(t *testing.T) {
	in := []mrtr.Input{formQuestion("a", "A?", nameFormSchema), formQuestion("b", "B?", nameFormSchema)}
	in[1].When = &mrtr.Condition{Input: "a"}
	content := `{"name":"lone \ud800 surrogate, \u2028 separator, 😀, <&>, \u0000"}`
	first := resolveOK(t, in, "", mrtr.Record{}, nil, bareElicitation)
	second := resolveOK(t, in, "", sealRecord(t, first.Record), answersFor("a", `{"action":"accept","content":`+content+`}`), bareElicitation)
	third := resolveOK(t, in, "", sealRecord(t, second.Record), answersFor("b", `{"action":"accept","content":{"name":"x"}}`), bareElicitation)
	if !third.Done {
		t.Fatalf("not done: %+v", third.Open)
	}
	if got := string(third.Answers["a"].Content); got != content {
		t.Errorf("content = %s\nwant %s", got, content)
	}

	// Arguments are not I-JSON-checked here (the state binding digests
	// them): a lone surrogate renders as U+FFFD and still digests.
	greet := []mrtr.Input{formQuestion("g", "Hi {{args.who}}", nameFormSchema)}
	res := resolveOK(t, greet, `{"who":"\ud800 😀"}`, mrtr.Record{}, nil, bareElicitation)
	if got := paramOf(t, res.Open["g"], "message"); got != "Hi \ufffd 😀" {
		t.Errorf("message = %q", got)
	}
}

func TestValidateInputsAcceptsWellFormedDeclarations(t *testing.T) {
	in := []mrtr.Input{
		formQuestion("login", "GitHub login for {{args.repo}}?", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{
			"user":{"type":"string","title":"User","description":"d","minLength":1,"maxLength":39,"default":"octocat"},
			"mail":{"type":"string","format":"email"},
			"n":{"type":"number","minimum":0.5,"maximum":2,"default":1},
			"i":{"type":"integer","default":3},
			"b":{"type":"boolean","default":false},
			"e":{"type":"string","enum":["x","y"],"enumNames":["X","Y"],"default":"x"},
			"o":{"type":"string","oneOf":[{"const":"x","title":"X"}]},
			"m":{"type":"array","items":{"type":"string","enum":["p","q"]},"minItems":1,"maxItems":2,"default":["p"]},
			"t":{"type":"array","items":{"anyOf":[{"const":"p","title":"P"}]}}
		},"required":["user"]}`),
		{Name: "open-page", Kind: mrtr.KindURL, Message: "Authorize", URL: "https://auth.example.com/start?repo={{args.repo}}", Optional: true},
		{Name: "summary", Kind: mrtr.KindSampling, Sampling: rj(`{"messages":[{"role":"user","content":{"type":"text","text":"Summarize {{args.repo}}"}}],"maxTokens":200,"temperature":0.2,"stopSequences":["END"],"includeContext":"none","modelPreferences":{"hints":[{"name":"claude"}]},"toolChoice":{"mode":"auto"},"tools":[{"name":"grep","inputSchema":{"type":"object"}}]}`)},
		{Name: "roots_1", Kind: mrtr.KindRoots, When: &mrtr.Condition{Input: "login", Field: "m", Equals: rj(`["p"]`)}},
		{Name: "after", Kind: mrtr.KindRoots, When: &mrtr.Condition{Input: "open-page", Action: mrtr.ActionUnsupported}},
	}
	if err := mrtr.ValidateInputs(in); err != nil {
		t.Fatal(err)
	}
	if err := mrtr.ValidateInputs(nil); err != nil {
		t.Errorf("no inputs: %v", err)
	}
}

func TestValidateInputsNamesTheOffendingPath(t *testing.T) {
	okForm := formQuestion("a", "A?", nameFormSchema)
	withSchema := func(s string) []mrtr.Input { return []mrtr.Input{okForm, formQuestion("b", "B?", s)} }
	sampling := func(s string) []mrtr.Input {
		return []mrtr.Input{{Name: "s", Kind: mrtr.KindSampling, Sampling: rj(s)}}
	}
	when := func(c mrtr.Condition) []mrtr.Input {
		b := formQuestion("b", "B?", nameFormSchema)
		b.When = &c
		return []mrtr.Input{formQuestion("a", "A?", `{"type":"object","properties":{"ok":{"type":"boolean"}}}`), b}
	}
	for _, tc := range []struct {
		inputs []mrtr.Input
		path   string
	}{
		{[]mrtr.Input{{Name: "", Kind: mrtr.KindRoots}}, "inputs[0].name"},
		{[]mrtr.Input{{Name: ".hidden", Kind: mrtr.KindRoots}}, "inputs[0].name"},
		{[]mrtr.Input{{Name: "a.b", Kind: mrtr.KindRoots}}, "inputs[0].name"},
		{[]mrtr.Input{{Name: strings.Repeat("x", 65), Kind: mrtr.KindRoots}}, "inputs[0].name"},
		{[]mrtr.Input{okForm, okForm}, "inputs[1].name"},
		{[]mrtr.Input{{Name: "a"}}, "inputs[0].kind"},
		{[]mrtr.Input{{Name: "a", Kind: "voice"}}, "inputs[0].kind"},
		{[]mrtr.Input{{Name: "a", Kind: mrtr.KindForm, RequestedSchema: rj(nameFormSchema)}}, "inputs[0].message"},
		{[]mrtr.Input{{Name: "a", Kind: mrtr.KindForm, Message: "M"}}, "inputs[0].requestedSchema"},
		{[]mrtr.Input{{Name: "a", Kind: mrtr.KindForm, Message: "Hi {{name}}", RequestedSchema: rj(nameFormSchema)}}, "inputs[0].message"},
		{[]mrtr.Input{{Name: "a", Kind: mrtr.KindForm, Message: "Hi {{args.a.b}}", RequestedSchema: rj(nameFormSchema)}}, "inputs[0].message"},
		{[]mrtr.Input{{Name: "a", Kind: mrtr.KindForm, Message: "Hi {{args.x", RequestedSchema: rj(nameFormSchema)}}, "inputs[0].message"},
		{[]mrtr.Input{{Name: "a", Kind: mrtr.KindForm, Message: "M", RequestedSchema: rj(nameFormSchema), URL: "https://x"}}, "inputs[0].url"},
		{[]mrtr.Input{{Name: "a", Kind: mrtr.KindRoots, Message: "M"}}, "inputs[0].message"},
		{withSchema(`[]`), "inputs[1].requestedSchema"},
		{withSchema(`{"type":"array","properties":{}}`), "inputs[1].requestedSchema.type"},
		{withSchema(`{"type":"object"}`), "inputs[1].requestedSchema.properties"},
		{withSchema(`{"type":"object","properties":{},"additionalProperties":false}`), "inputs[1].requestedSchema.additionalProperties"},
		{withSchema(`{"type":"object","properties":{"age":{"type":"object"}}}`), "inputs[1].requestedSchema.properties.age.type"},
		{withSchema(`{"type":"object","properties":{"age":{"type":"integer","pattern":"x"}}}`), "inputs[1].requestedSchema.properties.age.pattern"},
		{withSchema(`{"type":"object","properties":{"age":{"type":"integer","minimum":5,"maximum":1}}}`), "inputs[1].requestedSchema.properties.age.maximum"},
		{withSchema(`{"type":"object","properties":{"age":{"type":"integer","default":1.5}}}`), "inputs[1].requestedSchema.properties.age.default"},
		{withSchema(`{"type":"object","properties":{"s":{"type":"string","minLength":-1}}}`), "inputs[1].requestedSchema.properties.s.minLength"},
		{withSchema(`{"type":"object","properties":{"s":{"type":"string","format":"phone"}}}`), "inputs[1].requestedSchema.properties.s.format"},
		{withSchema(`{"type":"object","properties":{"s":{"type":"string","enum":[]}}}`), "inputs[1].requestedSchema.properties.s.enum"},
		{withSchema(`{"type":"object","properties":{"s":{"type":"string","enum":["a","a"]}}}`), "inputs[1].requestedSchema.properties.s.enum[1]"},
		{withSchema(`{"type":"object","properties":{"s":{"type":"string","enum":["a"],"enumNames":["A","B"]}}}`), "inputs[1].requestedSchema.properties.s.enumNames"},
		{withSchema(`{"type":"object","properties":{"s":{"type":"string","oneOf":[{"const":"a"}]}}}`), "inputs[1].requestedSchema.properties.s.oneOf[0].title"},
		{withSchema(`{"type":"object","properties":{"m":{"type":"array"}}}`), "inputs[1].requestedSchema.properties.m.items"},
		{withSchema(`{"type":"object","properties":{"m":{"type":"array","items":{"type":"integer","enum":["a"]}}}}`), "inputs[1].requestedSchema.properties.m.items.type"},
		{withSchema(`{"type":"object","properties":{"a":{"type":"string"}},"required":["b"]}`), "inputs[1].requestedSchema.required[0]"},
		{withSchema(`{"type":"object","properties":{"a":{"type":"string","title":"\ud800"}}}`), "inputs[1].requestedSchema"},
		{[]mrtr.Input{{Name: "u", Kind: mrtr.KindURL, Message: "M"}}, "inputs[0].url"},
		{[]mrtr.Input{{Name: "u", Kind: mrtr.KindURL, Message: "M", URL: "javascript:alert(1)"}}, "inputs[0].url"},
		{[]mrtr.Input{{Name: "u", Kind: mrtr.KindURL, Message: "M", URL: "https://{{args.host}}/x"}}, "inputs[0].url"},
		{[]mrtr.Input{{Name: "u", Kind: mrtr.KindURL, Message: "M", URL: "https://example.com{{args.p}}"}}, "inputs[0].url"},
		{sampling(`{"maxTokens":5}`), "inputs[0].sampling.messages"},
		{sampling(`{"messages":[{"role":"user","content":{"type":"text","text":"q"}}]}`), "inputs[0].sampling.maxTokens"},
		{sampling(`{"messages":[{"role":"user","content":{"type":"text","text":"q"}}],"maxTokens":0}`), "inputs[0].sampling.maxTokens"},
		{sampling(`{"messages":[{"role":"system","content":{"type":"text","text":"q"}}],"maxTokens":5}`), "inputs[0].sampling.messages[0].role"},
		{sampling(`{"messages":[{"role":"user","content":[{"type":"text","text":"{{bad}}"}]}],"maxTokens":5}`), "inputs[0].sampling.messages[0].content[0].text"},
		{sampling(`{"messages":[{"role":"user","content":{"type":"text","text":"q"}}],"maxTokens":5,"includeContext":"everything"}`), "inputs[0].sampling.includeContext"},
		{when(mrtr.Condition{Input: "b"}), "inputs[1].when.input"},
		{when(mrtr.Condition{Input: "zzz"}), "inputs[1].when.input"},
		{when(mrtr.Condition{Input: "a", Action: "maybe"}), "inputs[1].when.action"},
		{when(mrtr.Condition{Input: "a", Action: mrtr.ActionUnsupported}), "inputs[1].when.action"},
		{when(mrtr.Condition{Input: "a", Field: "ok"}), "inputs[1].when.equals"},
		{when(mrtr.Condition{Input: "a", Field: "nope", Equals: rj(`true`)}), "inputs[1].when.field"},
		{when(mrtr.Condition{Input: "a", Field: "ok", Equals: rj(`"yes"`)}), "inputs[1].when.equals"},
		{when(mrtr.Condition{Input: "a", Action: mrtr.ActionDecline, Field: "ok", Equals: rj(`true`)}), "inputs[1].when.field"},
	} {
		err := mrtr.ValidateInputs(tc.inputs)
		var ie *mrtr.InputError
		if !errors.As(err, &ie) {
			t.Errorf("want error at %s, got %v", tc.path, err)
			continue
		}
		if ie.Path != tc.path {
			t.Errorf("error %q has path %q, want %q", err, ie.Path, tc.path)
		}
		if !strings.HasPrefix(err.Error(), tc.path+": ") {
			t.Errorf("error %q does not start with its path", err)
		}
	}
	// mrtr.Resolve refuses invalid inputs with the same typed error.
	_, err := mrtr.Resolve([]mrtr.Input{{Name: "a", Kind: "voice"}}, nil, mrtr.Record{}, nil, everyCap)
	var ie *mrtr.InputError
	if !errors.As(err, &ie) || ie.Path != "inputs[0].kind" {
		t.Errorf("Resolve with invalid inputs: %v", err)
	}
}

func BenchmarkResolve(b *testing.B) {
	in := []mrtr.Input{
		formQuestion("user_name", "Hello {{args.who}}, what is your name?", nameFormSchema),
		formQuestion("confirm", "Proceed?", `{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`),
	}
	args := rj(`{"who":"you"}`)
	first, err := mrtr.Resolve(in, args, mrtr.Record{}, nil, bareElicitation)
	if err != nil {
		b.Fatal(err)
	}
	prev := sealRecord(b, first.Record)
	resp := answersFor(
		"user_name", `{"action":"accept","content":{"name":"Alice"}}`,
		"confirm", `{"action":"accept","content":{"ok":true}}`,
	)
	b.ReportAllocs()
	for b.Loop() {
		res, err := mrtr.Resolve(in, args, prev, resp, bareElicitation)
		if err != nil || !res.Done {
			b.Fatal(err, res)
		}
	}
}

func TestFormFieldOrderIsTheTenantsAndDoesNotChangeTheDigest(t *testing.T) {
	ab := formQuestion("f", "Form?", `{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"string"}}}`)
	ba := formQuestion("f", "Form?", `{"properties":{"alpha":{"type":"string"},"zeta":{"type":"string"}},"type":"object"}`)
	r1 := resolveOK(t, []mrtr.Input{ab}, "", mrtr.Record{}, nil, bareElicitation)
	r2 := resolveOK(t, []mrtr.Input{ba}, "", mrtr.Record{}, nil, bareElicitation)
	if p := string(r1.Open["f"].Params); !strings.Contains(p, `"zeta":{"type":"string"},"alpha"`) {
		t.Fatalf("field order not kept: %s", p)
	}
	if r1.Record.Asked["f"] != r2.Record.Asked["f"] {
		t.Fatalf("the same question in another key order got another digest: %q vs %q", r1.Record.Asked["f"], r2.Record.Asked["f"])
	}
}

// BenchmarkResolveCompiled is Resolve as the platform calls it: over
// inputs compiled once per catalogue snapshot, a first round asking a
// fixed question and a second answering it.
func BenchmarkResolveCompiled(b *testing.B) {
	ins, err := mrtr.CompileInputs([]mrtr.Input{
		formQuestion("confirm", "Proceed?", `{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`),
	})
	if err != nil {
		b.Fatal(err)
	}
	first, err := ins.Resolve(nil, mrtr.Record{}, nil, bareElicitation)
	if err != nil {
		b.Fatal(err)
	}
	prev := sealRecord(b, first.Record)
	resp := answersFor("confirm", `{"action":"accept","content":{"ok":true}}`)
	b.Run("ask", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if res, err := ins.Resolve(nil, mrtr.Record{}, nil, bareElicitation); err != nil || res.Done {
				b.Fatal(err, res)
			}
		}
	})
	b.Run("answered", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if res, err := ins.Resolve(nil, prev, resp, bareElicitation); err != nil || !res.Done {
				b.Fatal(err, res)
			}
		}
	})
}
