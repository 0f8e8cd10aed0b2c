package mrtr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/opsmcp/platform/internal/jsontext"
)

// A samplingTemplate is a sampling input's CreateMessageRequestParams
// whose text content blocks and systemPrompt are templates.
type samplingTemplate struct {
	canon   json.RawMessage // the params, canonicalized
	texts   []textTemplate  // in render order: message text blocks, then systemPrompt
	args    bool            // some template reads an argument
	tools   bool            // asks for tool use: needs sampling.tools
	context bool            // includeContext other than "none": needs sampling.context
}

func (s *samplingTemplate) hasArgs() bool { return s.args }

// parseSampling checks CreateMessageRequestParams. Keys this package does
// not know are passed through, since the params go to the client as is.
func parseSampling(raw json.RawMessage, path string) (*samplingTemplate, error) {
	canon, err := Canonicalize(raw)
	if err != nil {
		return nil, &InputError{Path: path, Err: err}
	}
	obj, err := jsonObject(canon)
	if err != nil {
		return nil, newInputError(path, "must be a JSON object")
	}
	s := &samplingTemplate{canon: canon}

	var msgs []json.RawMessage
	if err := json.Unmarshal(obj["messages"], &msgs); err != nil || len(msgs) == 0 {
		return nil, newInputError(path+".messages", "must be a non-empty array of sampling messages")
	}
	for i, m := range msgs {
		p := fmt.Sprintf("%s.messages[%d]", path, i)
		msg, err := jsonObject(m)
		if err != nil {
			return nil, newInputError(p, "must be a JSON object")
		}
		if role, err := jsonString(msg["role"]); err != nil || (role != "user" && role != "assistant") {
			return nil, newInputError(p+".role", `must be "user" or "assistant"`)
		}
		if err := s.parseContent(msg["content"], p+".content"); err != nil {
			return nil, err
		}
	}

	n, err := jsonValue(obj["maxTokens"])
	num, isNum := n.(json.Number)
	if err != nil || !isNum {
		return nil, newInputError(path+".maxTokens", "is required and must be a positive integer")
	}
	if x, err := num.Float64(); err != nil || x < 1 || x != math.Trunc(x) {
		return nil, newInputError(path+".maxTokens", "must be a positive integer")
	}

	if v, ok := obj["systemPrompt"]; ok {
		sp, err := jsonString(v)
		if err != nil {
			return nil, newInputError(path+".systemPrompt", "must be a string")
		}
		t, err := parseTemplate(sp)
		if err != nil {
			return nil, &InputError{Path: path + ".systemPrompt", Err: err}
		}
		s.addText(t)
	}
	if v, ok := obj["includeContext"]; ok {
		ic, err := jsonString(v)
		if err != nil || (ic != "none" && ic != "thisServer" && ic != "allServers") {
			return nil, newInputError(path+".includeContext", "must be none, thisServer or allServers")
		}
		s.context = ic != "none"
	}
	if v, ok := obj["temperature"]; ok {
		if x, err := jsonValue(v); err != nil || !isJSONNumber(x) {
			return nil, newInputError(path+".temperature", "must be a number")
		}
	}
	if v, ok := obj["stopSequences"]; ok {
		var seqs []string
		if json.Unmarshal(v, &seqs) != nil || seqs == nil {
			return nil, newInputError(path+".stopSequences", "must be an array of strings")
		}
	}
	for _, k := range []string{"metadata", "modelPreferences"} {
		if v, ok := obj[k]; ok {
			if _, err := jsonObject(v); err != nil {
				return nil, newInputError(path+"."+k, "must be a JSON object")
			}
		}
	}
	if v, ok := obj["tools"]; ok {
		var tools []json.RawMessage
		if json.Unmarshal(v, &tools) != nil || tools == nil {
			return nil, newInputError(path+".tools", "must be an array of tools")
		}
		for i, t := range tools {
			tool, err := jsonObject(t)
			if err != nil {
				return nil, newInputError(fmt.Sprintf("%s.tools[%d]", path, i), "must be a JSON object")
			}
			if name, err := jsonString(tool["name"]); err != nil || name == "" {
				return nil, newInputError(fmt.Sprintf("%s.tools[%d].name", path, i), "must be a non-empty string")
			}
		}
		s.tools = len(tools) > 0
	}
	if v, ok := obj["toolChoice"]; ok {
		tc, err := jsonObject(v)
		if err != nil {
			return nil, newInputError(path+".toolChoice", "must be a JSON object")
		}
		if m, ok := tc["mode"]; ok {
			if mode, err := jsonString(m); err != nil || (mode != "auto" && mode != "required" && mode != "none") {
				return nil, newInputError(path+".toolChoice.mode", "must be auto, required or none")
			}
		}
		s.tools = true
	}
	return s, nil
}

// parseContent checks a sampling message's content: one content block or
// an array of them. Text blocks' text is a template.
func (s *samplingTemplate) parseContent(raw json.RawMessage, path string) error {
	blocks, single, err := contentBlocks(raw)
	if err != nil {
		return newInputError(path, "must be a content block or a non-empty array of content blocks")
	}
	for i, b := range blocks {
		p := path
		if !single {
			p = fmt.Sprintf("%s[%d]", path, i)
		}
		typ, err := jsonString(b["type"])
		if err != nil || typ == "" {
			return newInputError(p+".type", "must be a non-empty string")
		}
		if typ != "text" {
			continue
		}
		text, err := jsonString(b["text"])
		if err != nil {
			return newInputError(p+".text", "must be a string")
		}
		t, err := parseTemplate(text)
		if err != nil {
			return &InputError{Path: p + ".text", Err: err}
		}
		s.addText(t)
	}
	return nil
}

func (s *samplingTemplate) addText(t textTemplate) {
	s.texts = append(s.texts, t)
	s.args = s.args || t.hasArgs()
}

// contentBlocks decodes content that is one block or a non-empty array of
// blocks; single reports the former.
func contentBlocks(raw json.RawMessage) (blocks []map[string]json.RawMessage, single bool, err error) {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) > 0 && raw[0] == '[' {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, false, err
		}
		if len(list) == 0 {
			return nil, false, fmt.Errorf("empty content")
		}
		for _, item := range list {
			b, err := jsonObject(item)
			if err != nil {
				return nil, false, err
			}
			blocks = append(blocks, b)
		}
		return blocks, false, nil
	}
	b, err := jsonObject(raw)
	if err != nil {
		return nil, false, err
	}
	return []map[string]json.RawMessage{b}, true, nil
}

// render renders the params with args substituted into the templates.
func (s *samplingTemplate) render(args map[string]any) (json.RawMessage, error) {
	if !s.args {
		return s.canon, nil
	}
	v, err := jsonValue(s.canon)
	if err != nil {
		return nil, err
	}
	obj := v.(map[string]any)
	k := 0
	next := func() string {
		out := s.texts[k].render(args)
		k++
		return out
	}
	setText := func(b any) {
		if block, ok := b.(map[string]any); ok && block["type"] == "text" {
			block["text"] = next()
		}
	}
	for _, m := range obj["messages"].([]any) {
		switch c := m.(map[string]any)["content"].(type) {
		case []any:
			for _, b := range c {
				setText(b)
			}
		default:
			setText(c)
		}
	}
	if _, ok := obj["systemPrompt"]; ok {
		obj["systemPrompt"] = next()
	}
	return jsontext.Marshal(obj)
}

func isJSONNumber(v any) bool {
	_, ok := v.(json.Number)
	return ok
}

// checkSamplingResult checks that raw looks like a CreateMessageResult.
func checkSamplingResult(raw json.RawMessage) string {
	const wrong = "the answer is not a sampling result"
	obj, err := jsonObject(raw)
	if err != nil {
		return wrong
	}
	if role, err := jsonString(obj["role"]); err != nil || (role != "user" && role != "assistant") {
		return wrong
	}
	blocks, _, err := contentBlocks(obj["content"])
	if err != nil {
		return wrong
	}
	for _, b := range blocks {
		if typ, err := jsonString(b["type"]); err != nil || typ == "" {
			return wrong
		}
	}
	if model, err := jsonString(obj["model"]); err != nil || model == "" {
		return wrong
	}
	if v, ok := obj["stopReason"]; ok {
		if _, err := jsonString(v); err != nil {
			return wrong
		}
	}
	return ""
}

// checkRootsResult checks that raw looks like a ListRootsResult whose
// roots are file:// URIs.
func checkRootsResult(raw json.RawMessage) string {
	const wrong = "the answer is not a roots list"
	obj, err := jsonObject(raw)
	if err != nil {
		return wrong
	}
	var roots []json.RawMessage
	if json.Unmarshal(obj["roots"], &roots) != nil || roots == nil {
		return wrong
	}
	for _, r := range roots {
		root, err := jsonObject(r)
		if err != nil {
			return wrong
		}
		uri, err := jsonString(root["uri"])
		if err != nil || !strings.HasPrefix(uri, "file://") {
			return wrong
		}
		if v, ok := root["name"]; ok {
			if _, err := jsonString(v); err != nil {
				return wrong
			}
		}
	}
	return ""
}
