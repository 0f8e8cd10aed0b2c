package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/opsmcp/platform/client"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
)

// modernEra drives 2026-07-28 flows: stateless rounds, each a tools/call
// through the load balancer (so consecutive rounds land on whichever
// replica HAProxy picks), an InputRequiredResult answered by a retry
// with inputResponses and the requestState echoed byte for byte. It uses
// the project's client in manual mode, one round per call, so every
// round is timed and attributed on its own.
type modernEra struct {
	c            *client.Client
	roundTimeout time.Duration
	think        time.Duration
	maxRounds    int
}

func newModernEra(url string, conns int, roundTimeout, think time.Duration) (*modernEra, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = conns
	c, err := client.New(url, client.Options{
		HTTPClient: &http.Client{Transport: probeTransport{base: tr, method: "tools/call"}},
		ClientInfo: client.Implementation{Name: "opsmcp-fleet", Version: "1"},
		// Declaring form elicitation is what lets the platform ask.
		ElicitForm: func(context.Context, *client.ElicitRequest) (*client.ElicitResult, error) {
			return nil, fmt.Errorf("fleet: the driver answers in manual mode")
		},
	})
	if err != nil {
		return nil, err
	}
	return &modernEra{c: c, roundTimeout: roundTimeout, think: think, maxRounds: 6}, nil
}

func (m *modernEra) Name() string { return mcp.Version }

func (m *modernEra) Run(ctx context.Context, f *Flow) {
	args := map[string]any{"ref": f.Ref}
	var seed *mrtr.Seed
	for n := 1; n <= m.maxRounds; n++ {
		var res *client.CallToolResult
		var retry retrier
		for res == nil {
			rd, r := m.send(ctx, f, n, args, seed)
			f.add(rd)
			switch {
			case rd.Err == nil:
				res = r
			case retry.again(rd, m.roundTimeout):
				// Acted on: the same round again, with the same answers
				// and state, through HAProxy.
			default:
				f.fail(rd.Class, rd.Detail)
				return
			}
		}
		if res.InputRequired != nil {
			responses, err := answers(res.InputRequired, f)
			if err != nil {
				f.fail(ClassWrong, err.Error())
				return
			}
			seed = &mrtr.Seed{InputResponses: responses, RequestState: res.InputRequired.RequestState}
			think(m.think)
			continue
		}
		text := ""
		if len(res.Content) > 0 {
			text = res.Content[0].Text
		}
		if res.IsError {
			f.fail(ClassRejected, "tool error: "+text)
			return
		}
		if err := f.check(text, n); err != nil {
			f.fail(ClassWrong, err.Error())
		}
		return
	}
	f.fail(ClassWrong, fmt.Sprintf("still asking after %d rounds", m.maxRounds))
}

// send sends round n once, under a fresh span of the flow's trace.
func (m *modernEra) send(ctx context.Context, f *Flow, n int, args map[string]any, seed *mrtr.Seed) (Round, *client.CallToolResult) {
	rd := Round{N: n, ClientSpan: randomHex(8)}
	p := &probe{}
	rctx, cancel := context.WithTimeout(withProbe(ctx, p), m.roundTimeout)
	defer cancel()
	opts := []client.CallOption{client.Manual(), client.WithMeta("traceparent", traceparent(f.TraceID, rd.ClientSpan))}
	if seed != nil {
		opts = append(opts, client.WithSeed(*seed))
	}
	rd.Start = time.Now()
	res, err := m.c.CallTool(rctx, f.Tool, args, opts...)
	rd.End = time.Now()
	rd.Status, rd.Replica = p.get()
	switch {
	case err != nil:
		rd.Err = err
		rd.Class, rd.Detail = classify(rctx, err)
	case res.InputRequired != nil:
		rd.Result = "input_required"
	default:
		rd.Result = "complete"
	}
	return rd, res
}

// answers fills in the questions the fleet's tools ask: the declared
// "who" form (a name) and the webhook's confirmation (a nonce). Any
// other question is not this flow's.
func answers(p *mrtr.Pending, f *Flow) (map[string]json.RawMessage, error) {
	if len(p.InputRequests) == 0 {
		return nil, fmt.Errorf("an InputRequiredResult without questions")
	}
	out := make(map[string]json.RawMessage, len(p.InputRequests))
	for key, req := range p.InputRequests {
		if req.Method != "elicitation/create" {
			return nil, fmt.Errorf("question %s: unexpected %s", key, req.Method)
		}
		var params struct {
			RequestedSchema struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"requestedSchema"`
		}
		if err := json.Unmarshal(req.Params, &params); err != nil {
			return nil, fmt.Errorf("question %s: %w", key, err)
		}
		var content map[string]string
		switch props := params.RequestedSchema.Properties; {
		case props["name"] != nil && len(props) == 1:
			content = map[string]string{"name": f.Who}
		case props["nonce"] != nil && len(props) == 1:
			content = map[string]string{"nonce": f.Nonce}
		default:
			names := make([]string, 0, len(props))
			for k := range props {
				names = append(names, k)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("question %s asks for %s", key, strings.Join(names, ","))
		}
		b, _ := json.Marshal(map[string]any{"action": "accept", "content": content})
		out[key] = b
	}
	return out, nil
}

// check reads the last round's result: it must be this flow's (its tool,
// reference and answers), delivered in the round it arrived in, and it
// names the flow.
func (f *Flow) check(text string, round int) error {
	var r flowResult
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		return fmt.Errorf("result is not the backend's: %q", text)
	}
	want := f.Who
	if f.Tool != orderTool {
		want = ""
	}
	if r.Tool != f.Tool || r.Ref != f.Ref || r.Nonce != f.Nonce || r.Who != want || r.Round != round || !strings.HasPrefix(r.Flow, "fl_") {
		return fmt.Errorf("result %s is not this flow's (tool %s, ref %s, round %d)", text, f.Tool, f.Ref, round)
	}
	f.complete(r.Flow)
	return nil
}
