package main

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/opsmcp/platform/client"
)

// toolArguments builds a tool's arguments from --json and --arg k=v,
// typing each value from the tool's input schema.
func toolArguments(tool *client.Tool, base string, kvs []string) (map[string]any, error) {
	args := map[string]any{}
	if base != "" {
		dec := json.NewDecoder(strings.NewReader(base))
		dec.UseNumber()
		if err := dec.Decode(&args); err != nil {
			return nil, &callError{fmt.Sprintf("--json is not a JSON object: %v", err)}
		}
	}
	var root map[string]any
	if tool != nil {
		_ = json.Unmarshal(tool.InputSchema, &root)
	}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, &callError{fmt.Sprintf("--arg %q: want name=value", kv)}
		}
		var prop map[string]any
		if props, ok := root["properties"].(map[string]any); ok {
			prop, _ = props[k].(map[string]any)
			prop = resolveLocalRef(root, prop)
		}
		val, err := typedValue(prop, v)
		if err != nil {
			return nil, &callError{fmt.Sprintf("--arg %s: %v", k, err)}
		}
		args[k] = val
	}
	return args, nil
}

// resolveLocalRef follows $refs within the schema document ("#/…");
// other $refs are never fetched: the property stays untyped.
func resolveLocalRef(root, prop map[string]any) map[string]any {
	for range 10 {
		ref, ok := prop["$ref"].(string)
		if !ok {
			return prop
		}
		ptr, ok := strings.CutPrefix(ref, "#")
		if !ok {
			return nil
		}
		var cur any = root
		for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
			if tok == "" {
				continue
			}
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			m, ok := cur.(map[string]any)
			if !ok {
				return nil
			}
			cur = m[tok]
		}
		prop, _ = cur.(map[string]any)
	}
	return prop
}

// typedValue converts an --arg value by its property schema's type.
func typedValue(prop map[string]any, v string) (any, error) {
	typ, _ := prop["type"].(string)
	switch typ {
	case "string":
		return v, nil
	case "integer":
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", v)
		}
		return n, nil
	case "number":
		n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
			return nil, fmt.Errorf("%q is not a number", v)
		}
		return json.Number(strings.TrimSpace(v)), nil
	case "boolean":
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%q is not true or false", v)
		}
		return b, nil
	case "object", "array", "null":
		var x any
		if err := json.Unmarshal([]byte(v), &x); err != nil {
			return nil, fmt.Errorf("%q is not JSON (%s expected)", v, typ)
		}
		return json.RawMessage(v), nil
	}
	// Untyped: JSON when it parses as a number, boolean, null, object
	// or array; a string otherwise.
	t := strings.TrimSpace(v)
	if t != "" && json.Valid([]byte(t)) && !strings.HasPrefix(t, `"`) {
		return json.RawMessage(t), nil
	}
	return v, nil
}
