package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// admin calls the platform's admin API (through the load balancer, like
// any operator) with the bootstrap token.
type admin struct {
	base  string
	token string
	http  *http.Client
}

// do sends body (when not nil) as JSON and decodes a 2xx answer into out
// (when not nil); any other status is an error naming it and the
// problem's text.
func (a *admin) do(ctx context.Context, method, path string, body, out any) error {
	_, err := a.call(ctx, method, path, body, out)
	return err
}

// call is do that also returns the status, for callers that expect a
// particular refusal (409 while a rotation runs).
func (a *admin) call(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base+"/api/v1"+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		if len(b) > 300 {
			b = b[:300]
		}
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// keyRing is the part of GET …/keys the fleet reads.
type keyRing struct {
	Phase string `json:"phase"`
	Keys  []struct {
		ID    string `json:"id"`
		Mints bool   `json:"mints"`
		State string `json:"state"`
	} `json:"keys"`
	Generation int64 `json:"generation"`
}

func (k *keyRing) minter() string {
	for _, key := range k.Keys {
		if key.Mints {
			return key.ID
		}
	}
	return ""
}

func (k *keyRing) ids() []string {
	var ids []string
	for _, key := range k.Keys {
		ids = append(ids, key.ID)
	}
	return ids
}

// flowRecord is GET /tenants/{slug}/flows/{flow}.
type flowRecord struct {
	Flow struct {
		ID     string `json:"id"`
		State  string `json:"state"`
		Rounds int    `json:"rounds"`
		Era    string `json:"era"`
		Target string `json:"target"`
	} `json:"flow"`
	Rounds []recordRound `json:"rounds"`
}

type recordRound struct {
	N          int    `json:"n"`
	ResultType string `json:"resultType"`
	ErrorClass string `json:"errorClass"`
	Replica    string `json:"replica"`
	TraceID    string `json:"traceId"`
	SpanID     string `json:"spanId"`
}
