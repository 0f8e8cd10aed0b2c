package fleet

import (
	"encoding/hex"
	"strings"
	"sync"

	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/opsmcp/platform/testkit/otlpreceiver"
)

// spanFacts is what the fleet keeps of one exported span.
type spanFacts struct {
	TraceID, SpanID, Parent string
	Name                    string
	FlowID                  string
	Round                   int64
	Rounds                  int64 // flow spans: opsmcp.flow.rounds
	Links                   []spanRef
	Replica                 string // the exporting replica's service.instance.id
}

type spanRef struct{ TraceID, SpanID string }

// spanIndex keeps, as exports arrive at the OTLP receiver, the SERVER
// spans of the fleet's rounds (by the client span they are children of)
// and the flow spans (by flow id), and counts the rest. It keeps only
// what the checks read, so a long run does not hold every span.
type spanIndex struct {
	mu       sync.Mutex
	byParent map[string][]spanFacts // client span id → server spans under it
	flows    map[string][]spanFacts // flow id → flow spans
	total    int
}

func newSpanIndex() *spanIndex {
	return &spanIndex{byParent: map[string][]spanFacts{}, flows: map[string][]spanFacts{}}
}

// receiver returns an OTLP receiver feeding the index.
func (x *spanIndex) receiver() *otlpreceiver.Receiver {
	return &otlpreceiver.Receiver{OnSpans: x.add}
}

func (x *spanIndex) add(res *resourcepb.Resource, spans []*tracepb.Span) {
	instance := otlpreceiver.StringAttr(res.GetAttributes(), "service.instance.id")
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, s := range spans {
		x.total++
		isRound := s.Kind == tracepb.Span_SPAN_KIND_SERVER && strings.HasPrefix(s.Name, "tools/call ")
		isFlow := s.Kind == tracepb.Span_SPAN_KIND_INTERNAL && strings.HasPrefix(s.Name, "flow ")
		if !isRound && !isFlow {
			continue
		}
		f := spanFacts{
			TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId), Parent: hex.EncodeToString(s.ParentSpanId),
			Name: s.Name, FlowID: otlpreceiver.StringAttr(s.Attributes, "opsmcp.flow.id"), Replica: instance,
		}
		f.Round, _ = otlpreceiver.IntAttr(s.Attributes, "opsmcp.flow.round")
		f.Rounds, _ = otlpreceiver.IntAttr(s.Attributes, "opsmcp.flow.rounds")
		for _, l := range s.Links {
			f.Links = append(f.Links, spanRef{hex.EncodeToString(l.TraceId), hex.EncodeToString(l.SpanId)})
		}
		if isRound {
			x.byParent[f.Parent] = append(x.byParent[f.Parent], f)
		} else {
			x.flows[f.FlowID] = append(x.flows[f.FlowID], f)
		}
	}
}

func (x *spanIndex) round(clientSpan string) []spanFacts {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.byParent[clientSpan]
}

func (x *spanIndex) flow(id string) []spanFacts {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.flows[id]
}

func (x *spanIndex) count() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.total
}

func (f spanFacts) linksTo(s spanFacts) bool {
	for _, l := range f.Links {
		if l.TraceID == s.TraceID && l.SpanID == s.SpanID {
			return true
		}
	}
	return false
}
