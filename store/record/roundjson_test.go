package record

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestRoundsEncodeToWhatTheyDecodeFrom(t *testing.T) {
	exp := time.Date(2026, 12, 3, 12, 0, 0, 123456789, time.UTC)
	rounds := []Round{
		{N: 1, ArrivedAt: exp, EndedAt: exp.Add(time.Millisecond), ServerUS: 1500, ResultType: "input_required", KeyOut: "k1",
			StateExpiresAt: &exp, Asked: json.RawMessage(`[{"key":"q","kind":"form","params":{"message":"Sure?"}}]`),
			Client: json.RawMessage(`{"name":"c"}`), Replica: "r\"1\\\n\x01\u2028é", TraceID: "abc"},
		{N: 2, ArrivedAt: exp, EndedAt: exp, ClientWaitUS: 7, StateIn: "rejected", ErrorClass: "bad\xffutf8",
			Principal: json.RawMessage(`{"subject":"alice"}`), Webhook: json.RawMessage(`{"kind":"tool"}`), Answers: json.RawMessage(`{"q":1}`)},
		{N: 3},
		// A tenant's question with invalid UTF-8 in a string: PostgreSQL's
		// text refuses it, so it is stored as U+FFFD.
		{N: 4, Asked: json.RawMessage("[{\"key\":\"q\",\"params\":{\"message\":\"bad \xff\xfe byte\"}}]")},
	}
	// A flow's rounds as flow_rounds keeps them: an array of objects.
	b := []byte{'['}
	for i := range rounds {
		if i > 0 {
			b = append(b, ',')
		}
		b = rounds[i].appendJSON(b)
	}
	b = append(b, ']')
	if !json.Valid(b) {
		t.Fatalf("not JSON: %s", b)
	}
	var back []Round
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	rounds[1].ErrorClass = "bad\uFFFDutf8" // invalid UTF-8 is replaced, as encoding/json does
	rounds[3].Asked = json.RawMessage("[{\"key\":\"q\",\"params\":{\"message\":\"bad \uFFFD byte\"}}]")
	for i := range rounds {
		// Compare the embedded documents by value.
		for _, p := range []*json.RawMessage{&rounds[i].Asked, &back[i].Asked, &rounds[i].Client, &back[i].Client,
			&rounds[i].Principal, &back[i].Principal, &rounds[i].Webhook, &back[i].Webhook, &rounds[i].Answers, &back[i].Answers} {
			if len(*p) == 0 {
				*p = nil
			}
		}
		if !reflect.DeepEqual(rounds[i], back[i]) {
			t.Fatalf("round %d:\nwrote %+v\nread  %+v", i+1, rounds[i], back[i])
		}
	}
	std, _ := json.Marshal(rounds)
	var viaStd []Round
	_ = json.Unmarshal(std, &viaStd)
	if !reflect.DeepEqual(viaStd, back) {
		t.Fatal("the hand-written encoding reads back differently from encoding/json's")
	}
}
