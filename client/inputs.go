package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
)

// dispatch answers one input request through the handler registered for
// it. It is the driver's DispatchFunc.
func (c *Client) dispatch(ctx context.Context, key string, req mrtr.InputRequest) (json.RawMessage, error) {
	switch req.Method {
	case mcp.MethodElicit:
		return c.elicit(ctx, key, req.Params)
	case mcp.MethodCreateMessage:
		return c.sample(ctx, key, req.Params)
	case mcp.MethodListRoots:
		if c.opts.Roots == nil {
			return nil, &UnsupportedInputError{Method: req.Method}
		}
		roots, err := c.opts.Roots(ctx)
		if err != nil {
			return nil, err
		}
		if roots == nil {
			roots = []Root{}
		}
		return marshalNoEscape(map[string]any{"roots": roots})
	}
	return nil, &UnsupportedInputError{Method: req.Method}
}

func (c *Client) elicit(ctx context.Context, key string, params json.RawMessage) (json.RawMessage, error) {
	var p struct {
		Mode            string          `json:"mode"`
		Message         string          `json:"message"`
		RequestedSchema json.RawMessage `json:"requestedSchema"`
		URL             string          `json:"url"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, fmt.Errorf("malformed elicitation params: %w", err)
	}
	if p.Mode == "" {
		p.Mode = "form"
	}
	var h ElicitHandler
	switch p.Mode {
	case "form":
		h = c.opts.ElicitForm
	case "url":
		h = c.opts.ElicitURL
		if p.URL == "" {
			return nil, errors.New("a URL elicitation without a url")
		}
	}
	if h == nil {
		return nil, &UnsupportedInputError{Method: mcp.MethodElicit, Mode: p.Mode}
	}
	res, err := h(ctx, &ElicitRequest{Key: key, Mode: p.Mode, Message: p.Message, RequestedSchema: p.RequestedSchema, URL: p.URL, Params: params})
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, errors.New("the elicitation handler returned no result")
	}
	out := *res
	switch out.Action {
	case mrtr.ActionAccept:
		if p.Mode == "url" {
			out.Content = nil
		} else if out.Content == nil {
			out.Content = map[string]any{}
		}
	case mrtr.ActionDecline, mrtr.ActionCancel:
		out.Content = nil
	default:
		return nil, fmt.Errorf("the elicitation handler answered action %q (want accept, decline or cancel)", out.Action)
	}
	return marshalNoEscape(out)
}

func (c *Client) sample(ctx context.Context, key string, params json.RawMessage) (json.RawMessage, error) {
	if c.opts.Sample == nil {
		return nil, &UnsupportedInputError{Method: mcp.MethodCreateMessage}
	}
	var req SamplingRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, fmt.Errorf("malformed sampling params: %w", err)
	}
	req.Key, req.Params = key, params
	res, err := c.opts.Sample(ctx, &req)
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, errors.New("the sampling handler returned no result")
	}
	out := *res
	if out.Role == "" {
		out.Role = "assistant"
	}
	if out.Model == "" {
		return nil, errors.New("the sampling handler's result names no model")
	}
	if out.Content.Type == "" && len(out.Content.Raw) == 0 {
		return nil, errors.New("the sampling handler's result has no content")
	}
	return marshalNoEscape(out)
}
