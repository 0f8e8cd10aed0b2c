package flows

import (
	"github.com/opsmcp/platform/endpoint"
	"github.com/opsmcp/platform/internal/bounded"
	"github.com/opsmcp/platform/store/record"
)

// maxCause bounds a cause as recorded.
const maxCause = 300

// cause says in words why rd failed or was refused, for an operator
// reading the record: the refusal's reason, the webhook's own failure,
// the error the client was answered. "" for a round that went as asked,
// except a completed call some question of which the client declined or
// cancelled, which says so (the tool completed all the same). It holds
// no secret: reasons are the platform's words, a webhook's detail was
// bounded where it was made, and an error message is what the client
// was sent.
func cause(rd *endpoint.Round, state, detail string) string {
	switch {
	case rd.TokenRefused != "":
		return "bearer token refused: " + phrase(tokenReasons, rd.TokenRefused)
	case rd.StateIn.Outcome == endpoint.StateRejected:
		return "request state refused: " + phrase(stateReasons, rd.StateIn.Reason)
	case rd.Webhook != nil && rd.Webhook.Failed && rd.Answered:
		return bounded.String(webhookCause(rd.Webhook), maxCause)
	case rd.ErrorCode != 0:
		return bounded.String(rd.ErrorMessage, maxCause)
	case rd.Stopped != "":
		return bounded.String(rd.StopCause, maxCause)
	case rd.ToolError:
		return "the tool answered with an error result (isError)"
	case state == record.Failed && detail == "no_answer":
		return "the client went away before the answer"
	case state == record.Completed:
		for _, a := range []string{"decline", "cancel"} {
			if k := answeredWith(rd.Actions, a); k != "" {
				return bounded.String("completed after the client answered "+a+" to "+k, maxCause)
			}
		}
	}
	return ""
}

// answeredWith is the first key (in order) answered with action, "" for
// none.
func answeredWith(actions map[string]string, action string) string {
	first := ""
	for k, a := range actions {
		if a == action && (first == "" || k < first) {
			first = k
		}
	}
	return first
}

// phrase is reason in words, or the reason itself when it has none.
func phrase(words map[string]string, reason string) string {
	if w, ok := words[reason]; ok {
		return w
	}
	return bounded.String(reason, 64)
}

// webhookCause is a failed delivery in words.
func webhookCause(w *endpoint.WebhookCall) string {
	detail := w.Detail
	switch w.Outcome {
	case "contract":
		return "webhook answer outside the contract: " + detail
	case "invalid_json":
		return "webhook answer is " + detail
	case "oversize":
		return "webhook answer too large: " + detail
	case "refused_address":
		return "webhook not called: its URL resolves to a private, loopback or link-local address"
	}
	return "webhook " + detail
}

// tokenReasons are the auth package's refusal reasons in words.
var tokenReasons = map[string]string{
	"oversize":          "too long",
	"malformed":         "malformed (not a JWT, or not a Bearer header)",
	"untrusted_issuer":  "issued by an issuer the tenant does not trust",
	"discovery":         "its issuer's discovery document or keys could not be fetched",
	"issued_in_future":  "issued in the future (the issuer's clock is ahead?)",
	"audience":          "issued for another audience than this endpoint",
	"machine_principal": "a machine token, which the tenant does not accept",
	"anonymous":         "it names no subject",
	"expired":           "expired",
	"not_yet_valid":     "not valid yet",
	"error":             "it could not be verified",
}

// stateReasons are mrtr's rejection reasons, and the endpoint's own, in
// words.
var stateReasons = map[string]string{
	"malformed":       "not a state this platform sealed",
	"unknown_key":     "sealed under a key no longer in the tenant's ring",
	"authentication":  "altered or forged (its seal did not verify)",
	"non_string":      "not a JSON string",
	"future":          "issued in the future (clock skew between replicas?)",
	"expired":         "expired before the client came back",
	"lifetime":        "valid for longer than the tenant allows",
	"tenant":          "sealed for another tenant",
	"audience":        "sealed for another endpoint",
	"binding":         "bound to another method, target or arguments",
	"principal_drift": "bound to a signed-in caller but sent without one, or the reverse",
	"principal":       "bound to another principal",
	"revoked":         "the flow was cancelled",
	"oversize":        "longer than the tenant allows",
	"codec_error":     "it could not be opened (the key service unreachable?)",
	"internal":        "the state verifier is misconfigured",
	"replayed":        "already used: a round of a single-use tool sent again",
	"no_key_ring":     "the tenant has no usable key ring",
	"flow_state":      "its flow's state does not decode",
}
