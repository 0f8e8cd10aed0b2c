package tenants

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/telemetry"
)

// webhookKeyPrefix marks the wire keys of input requests a webhook asked
// for. Declared input names never contain '.', so the two namespaces
// cannot collide.
const webhookKeyPrefix = "wh."

// KeyRings gives each tenant the codec its request state is sealed with.
// The keys package provides Vault-backed and local rings with scheduled
// rotation; without one, every tenant shares the configured ring.
type KeyRings interface {
	// Codec returns the tenant's current codec. An error means the tenant
	// has no usable ring: its rounds fail closed.
	Codec(ctx context.Context, tenantID string) (mrtr.Codec, error)
}

// staticRings serves one ring to every tenant; bindings still keep
// tenants apart (the tenant id is sealed into every state).
type staticRings struct{ ring *mrtr.Ring }

func (s staticRings) Codec(context.Context, string) (mrtr.Codec, error) { return s.ring, nil }

// flowEngine seals and opens request state for every tenant.
type flowEngine struct {
	rings KeyRings
	now   func() time.Time
}

func newFlowEngine(opts Options) (*flowEngine, error) {
	if opts.Keys != nil {
		return &flowEngine{rings: opts.Keys, now: time.Now}, nil
	}
	ring, err := ringFromConfig(opts.StateKeys)
	if err != nil {
		return nil, err
	}
	return &flowEngine{rings: staticRings{ring}, now: time.Now}, nil
}

// ringFromConfig builds the key ring from comma-separated base64 secrets,
// or a random per-process ring when none are given (a single replica, or
// a test; several replicas must share configured keys).
func ringFromConfig(keys string) (*mrtr.Ring, error) {
	if strings.TrimSpace(keys) == "" {
		return mrtr.Ephemeral(), nil
	}
	var secrets [][]byte
	for i, k := range strings.Split(keys, ",") {
		k = strings.TrimSpace(k)
		b, err := base64.StdEncoding.DecodeString(k)
		if err != nil {
			b, err = base64.RawURLEncoding.DecodeString(k)
		}
		if err != nil {
			return nil, fmt.Errorf("state-keys: key %d is not base64", i+1)
		}
		secrets = append(secrets, b)
	}
	ring, err := mrtr.NewRing(secrets...)
	if err != nil {
		return nil, fmt.Errorf("state-keys: %w", err)
	}
	return ring, nil
}

// sealer returns the tenant's sealing policy over its codec.
func (f *flowEngine) sealer(ctx context.Context, s *snapshot) (*mrtr.Sealer, error) {
	codec, err := f.rings.Codec(ctx, s.tenantID)
	if err != nil {
		return nil, err
	}
	return &mrtr.Sealer{
		Codec: codec,
		Policy: mrtr.Policy{
			TTL:           s.settings.StateTTL(),
			MaxStateBytes: s.settings.StateBytes(),
			MaxRounds:     s.settings.Rounds(),
		},
		Now: f.now,
	}, nil
}

// flowState is what the platform keeps for a flow between rounds, besides
// the declared-inputs record: the webhook's own state and the keys it
// asked for, so only answers to those reach it.
type flowState struct {
	Webhook string   `json:"s,omitempty"`
	Asked   []string `json:"k,omitempty"`
	// Served is the milliseconds the platform spent on the flow's rounds
	// so far, so the flow span can tell server time from client wait.
	Served int64 `json:"t,omitempty"`
}

// round is the state of one flow as this request continues it.
type round struct {
	flowID string
	number int // this request's round, 1 for a fresh call
	start  time.Time
	record mrtr.Record
	state  flowState
	keyID  string // the key that verified the inbound state, if any
	// arrived is when this round's request arrived; served is the server
	// time of the flow's earlier rounds; sealedKey is the key that sealed
	// the next round's state.
	arrived   time.Time
	served    time.Duration
	sealedKey string
}

func newFlowID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "fl_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// openRound verifies an inbound requestState and returns the round it
// continues, or a fresh first round when there is none. Any failure is
// the frozen rejection; the reason is logged, never sent.
func (reg *Registry) openRound(c *call, b mrtr.Binding) (*round, *rpcError) {
	tok, present, err := mrtr.TokenFromJSON(c.p.RequestState)
	if err == nil && !present {
		rd := &round{flowID: newFlowID(), number: 1, start: c.arrived(), arrived: c.arrived()}
		c.obs().fresh(rd)
		return rd, nil
	}
	var claims *mrtr.Claims
	if err == nil {
		var sealer *mrtr.Sealer
		if sealer, err = reg.flows.sealer(c.ctx(), c.snap); err != nil {
			// No usable key ring: fail closed, with the one frozen answer.
			reg.log.ErrorContext(c.ctx(), "no key ring for tenant", "tenant", c.snap.slug, "err", err)
			c.obs().rejected("no_key_ring")
			return nil, errInvalidState()
		}
		tenantID := c.snap.tenantID
		sealer.Revoked = func(_ context.Context, flowID string) bool { return reg.isRevoked(tenantID, flowID) }
		claims, err = sealer.Open(c.ctx(), tok, b)
	}
	if err != nil {
		reason := "codec_error"
		var rej *mrtr.Rejection
		if errors.As(err, &rej) {
			reason = rej.Reason
		}
		reg.log.WarnContext(c.ctx(), "requestState rejected", "tenant", c.snap.slug, "method", c.method, "reason", reason)
		c.obs().rejected(reason)
		return nil, errInvalidState()
	}
	rd := &round{
		flowID: claims.FlowID,
		number: claims.Round + 1,
		start:  claims.FlowStart,
		record: mrtr.DecodeRecord(claims.Resolver),
		keyID:  claims.KeyID,
	}
	rd.arrived = c.arrived()
	if len(claims.State) > 0 && json.Unmarshal(claims.State, &rd.state) != nil {
		// The platform sealed this itself, so this cannot happen short of
		// a format change; treat it like any other bad state.
		reg.log.WarnContext(c.ctx(), "requestState rejected", "tenant", c.snap.slug, "method", c.method, "reason", "flow_state")
		c.obs().rejected("flow_state")
		return nil, errInvalidState()
	}
	rd.served = time.Duration(rd.state.Served) * time.Millisecond
	c.obs().verified(rd, claims.KeyID, claims.Parent)
	return rd, nil
}

// seal mints the requestState for the next round of rd.
func (reg *Registry) seal(ctx context.Context, s *snapshot, b mrtr.Binding, rd *round) (string, error) {
	rd.state.Served = (rd.served + time.Since(rd.arrived)).Milliseconds()
	state, err := json.Marshal(rd.state)
	if err != nil {
		return "", err
	}
	rec, err := mrtr.EncodeRecord(rd.record)
	if err != nil {
		return "", err
	}
	claims := &mrtr.Claims{
		FlowID:    rd.flowID,
		Round:     rd.number,
		FlowStart: rd.start,
		Resolver:  rec,
		State:     state,
	}
	// The next round links to this one, whichever replica serves it.
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		claims.Parent = telemetry.Traceparent(span.SpanContext())
	}
	sealer, err := reg.flows.sealer(ctx, s)
	if err != nil {
		return "", fmt.Errorf("key ring: %w", err)
	}
	tok, keyID, err := sealer.Seal(ctx, b, claims)
	rd.sealedKey = keyID
	return tok, err
}

// splitResponses separates answers to declared inputs from answers to a
// webhook's own input requests (returned with the prefix removed, and
// only for the keys it asked).
func splitResponses(all map[string]json.RawMessage, asked []string) (declared, hook map[string]json.RawMessage) {
	for k, v := range all {
		if name, ok := strings.CutPrefix(k, webhookKeyPrefix); ok {
			for _, a := range asked {
				if a == name {
					if hook == nil {
						hook = map[string]json.RawMessage{}
					}
					hook[name] = v
				}
			}
			continue
		}
		if declared == nil {
			declared = map[string]json.RawMessage{}
		}
		declared[k] = v
	}
	return declared, hook
}

// parseResponses reads params.inputResponses: absent is none; anything
// but an object (null included) is invalid params.
func parseResponses(raw json.RawMessage) (map[string]json.RawMessage, *rpcError) {
	if len(raw) == 0 {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, errInvalidParams("Invalid params: inputResponses must be an object")
	}
	return m, nil
}

// webhookInputs checks the input requests a webhook asked for and turns
// them into wire input requests under the webhook's key namespace. A
// request the client's capabilities do not allow is -32021.
func webhookInputs(reqs map[string]json.RawMessage, caps mrtr.ClientCapabilities) (map[string]mrtr.InputRequest, []string, *rpcError, error) {
	out := make(map[string]mrtr.InputRequest, len(reqs))
	keys := make([]string, 0, len(reqs))
	var missing mrtr.ClientCapabilities
	lacking := false
	for k, raw := range reqs {
		if k == "" || len(k) > 64 {
			return nil, nil, nil, fmt.Errorf("input request key %q must be 1 to 64 characters", k)
		}
		var ir mrtr.InputRequest
		if err := json.Unmarshal(raw, &ir); err != nil {
			return nil, nil, nil, fmt.Errorf("input request %q is not {method, params}", k)
		}
		if len(ir.Params) > 0 && ir.Params[0] != '{' {
			return nil, nil, nil, fmt.Errorf("input request %q: params must be an object", k)
		}
		switch ir.Method {
		case mcp.MethodElicit:
			var p struct {
				Mode string `json:"mode"`
			}
			_ = json.Unmarshal(ir.Params, &p)
			if p.Mode == "url" {
				if !caps.CanElicitURL() {
					lacking = true
					missing.Elicitation = &mrtr.ElicitationCapability{URL: &struct{}{}}
				}
			} else if !caps.CanElicitForm() {
				lacking = true
				if missing.Elicitation == nil {
					missing.Elicitation = &mrtr.ElicitationCapability{}
				}
			}
		case mcp.MethodCreateMessage:
			var p struct {
				Tools json.RawMessage `json:"tools"`
			}
			_ = json.Unmarshal(ir.Params, &p)
			withTools := len(p.Tools) > 0 && string(p.Tools) != "null"
			if !caps.CanSample(withTools) {
				lacking = true
				missing.Sampling = &mrtr.SamplingCapability{}
				if withTools {
					missing.Sampling.Tools = &struct{}{}
				}
			}
		case mcp.MethodListRoots:
			if !caps.CanListRoots() {
				lacking = true
				missing.Roots = &mrtr.RootsCapability{}
			}
			if len(ir.Params) == 0 {
				ir.Params = json.RawMessage(`{}`)
			}
		default:
			return nil, nil, nil, fmt.Errorf("input request %q: method %q is not elicitation/create, sampling/createMessage or roots/list", k, ir.Method)
		}
		out[webhookKeyPrefix+k] = ir
		keys = append(keys, k)
	}
	if lacking {
		return nil, nil, errMissingCapability(missing), nil
	}
	return out, keys, nil, nil
}

func errMissingCapability(required mrtr.ClientCapabilities) *rpcError {
	return newError(400, codeMissingClientCap, "Missing required client capability",
		map[string]any{"requiredCapabilities": required})
}
