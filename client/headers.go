package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/opsmcp/platform/mcp"
)

// HeaderParam is a tool argument mirrored into an Mcp-Param-{Header}
// header, because its schema property carries x-mcp-header.
type HeaderParam struct {
	// Header is the x-mcp-header value: the header is "Mcp-Param-"+Header.
	Header string
	// Path is the argument's location: property names from the root,
	// through "properties" only.
	Path []string
	// Type is the property's JSON Schema type: string, integer or boolean.
	Type string
}

// schema keywords whose values are subschemas (by kind of container),
// walked to find x-mcp-header annotations in places they are not allowed.
var (
	subschemaKeywords = []string{"items", "additionalProperties", "not", "if", "then", "else", "contains",
		"propertyNames", "unevaluatedItems", "unevaluatedProperties", "additionalItems"}
	subschemaListKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	subschemaMapKeywords  = []string{"$defs", "definitions", "patternProperties", "dependentSchemas"}
)

// headerParams reads the x-mcp-header annotations of a tool's input
// schema and checks them (MCP 2026-07-28, SEP-2243): each is a non-empty
// RFC 9110 token, on a string, integer or boolean property reached from
// the root through "properties" only, and unique ignoring case. It
// returns the reason the tool is invalid, or "". $refs are not followed:
// an annotation behind a $ref is not reached through properties.
func headerParams(schema json.RawMessage) ([]HeaderParam, string) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return nil, ""
	}
	var out []HeaderParam
	seen := map[string]string{}
	var problem string
	var walk func(raw json.RawMessage, path []string, viaProperties bool)
	walk = func(raw json.RawMessage, path []string, viaProperties bool) {
		if problem != "" {
			return
		}
		var s map[string]json.RawMessage
		if json.Unmarshal(raw, &s) != nil {
			return // true, false or not a schema: nothing to find
		}
		if h, ok := s["x-mcp-header"]; ok {
			where := "the schema root"
			if len(path) > 0 {
				where = "property " + strings.Join(path, ".")
			}
			var name string
			var typ string
			typeErr := json.Unmarshal(s["type"], &typ)
			switch {
			case json.Unmarshal(h, &name) != nil:
				problem = fmt.Sprintf("x-mcp-header of %s is not a string", where)
			case name == "":
				problem = fmt.Sprintf("x-mcp-header of %s is empty", where)
			case !mcp.ValidHeaderName(name):
				problem = fmt.Sprintf("x-mcp-header %q of %s is not a valid header name", name, where)
			case len(path) == 0 || !viaProperties:
				problem = fmt.Sprintf("x-mcp-header %q of %s is not on a property reached through properties", name, where)
			case typeErr != nil || (typ != "string" && typ != "integer" && typ != "boolean"):
				problem = fmt.Sprintf("x-mcp-header %q is on %s, which is not of type string, integer or boolean", name, where)
			default:
				key := strings.ToLower(name)
				if prev, dup := seen[key]; dup {
					problem = fmt.Sprintf("x-mcp-header %q of %s duplicates that of %s (names are compared ignoring case)", name, where, prev)
					return
				}
				seen[key] = where
				out = append(out, HeaderParam{Header: name, Path: append([]string(nil), path...), Type: typ})
			}
			if problem != "" {
				return
			}
		}
		if props, ok := s["properties"]; ok {
			var m map[string]json.RawMessage
			if json.Unmarshal(props, &m) == nil {
				for _, name := range sortedKeys(m) {
					walk(m[name], append(path[:len(path):len(path)], name), viaProperties)
				}
			}
		}
		for _, k := range subschemaKeywords {
			if v, ok := s[k]; ok {
				walk(v, append(path[:len(path):len(path)], k), false)
			}
		}
		for _, k := range subschemaListKeywords {
			var list []json.RawMessage
			if json.Unmarshal(s[k], &list) == nil {
				for i, v := range list {
					walk(v, append(path[:len(path):len(path)], fmt.Sprintf("%s[%d]", k, i)), false)
				}
			}
		}
		for _, k := range subschemaMapKeywords {
			var m map[string]json.RawMessage
			if json.Unmarshal(s[k], &m) == nil {
				for _, name := range sortedKeys(m) {
					walk(m[name], append(path[:len(path):len(path)], k, name), false)
				}
			}
		}
	}
	walk(schema, nil, true)
	if problem != "" {
		return nil, problem
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Header < out[j].Header })
	return out, ""
}

// setHeaderParams adds the Mcp-Param-* headers of a tools/call with
// arguments args (raw JSON) to h. A null or absent argument sends no
// header; strings are sent per mcp.EncodeHeaderValue, numbers as decimals,
// booleans as true or false.
func setHeaderParams(h http.Header, params []HeaderParam, args json.RawMessage) {
	if len(params) == 0 || len(args) == 0 {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var root any
	if dec.Decode(&root) != nil {
		return
	}
	for _, p := range params {
		v, ok := lookup(root, p.Path)
		if !ok {
			continue
		}
		if s, ok := headerString(v); ok {
			h.Set("Mcp-Param-"+p.Header, mcp.EncodeHeaderValue(s))
		}
	}
}

func lookup(v any, path []string) (any, bool) {
	for _, name := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[name]; !ok {
			return nil, false
		}
	}
	return v, true
}

// headerString renders an argument value for a header; false for null,
// objects and arrays, which are not sent.
func headerString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case json.Number:
		return decimal(x), true
	}
	return "", false
}

// decimal writes a JSON number in plain decimal notation: integers
// without a fraction or exponent, others in their shortest form.
func decimal(n json.Number) string {
	s := n.String()
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return s
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) {
		if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
			return strconv.FormatInt(int64(f), 10)
		}
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	if r, ok := new(big.Rat).SetString(s); ok {
		if r.IsInt() {
			return r.Num().String()
		}
		return r.FloatString(20)
	}
	return s
}
