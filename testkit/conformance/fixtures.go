// Package conformance is the tenant the official MCP conformance suite is
// run against: the fixture catalogue (registered through the admin API
// like any tenant's) and the webhook backend that answers it, written
// from the suite's scenario descriptions.
package conformance

// Payloads the suite's scenarios expect (any valid base64 passes; these
// are a 1×1 PNG and a minimal WAV file).
const (
	pngBase64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
	wavBase64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
)

type obj = map[string]any

var emptyObject = obj{"type": "object", "properties": obj{}}

// tool returns a webhook tool definition.
func tool(name, description string, schema obj, inputs ...obj) obj {
	if schema == nil {
		schema = emptyObject
	}
	t := obj{"name": name, "description": description, "inputSchema": schema, "handler": obj{"url": "{{hook}}"}}
	if len(inputs) > 0 {
		t["inputs"] = inputs
	}
	return t
}

func form(name, message string, props obj, required ...string) obj {
	schema := obj{"type": "object", "properties": props}
	if len(required) > 0 {
		schema["required"] = required
	}
	return obj{"name": name, "kind": "form", "message": message, "requestedSchema": schema}
}

// Tools lists every fixture tool. Ordered by name, test_simple_text is not
// first, so the tool the header-validation probes call with {} is one
// that succeeds with {}: all of these do except json_schema_2020_12_tool,
// whose arguments error is still a result, not a protocol error.
func Tools() []obj {
	str := obj{"type": "string"}
	return []obj{
		tool("test_simple_text", "Returns a simple text response", nil),
		tool("test_image_content", "Returns an image", nil),
		tool("test_audio_content", "Returns audio", nil),
		tool("test_embedded_resource", "Returns an embedded resource", nil),
		tool("test_multiple_content_types", "Returns text, an image and a resource", nil),
		tool("test_error_handling", "Always fails with a tool error", nil),
		tool("test_tool_with_progress", "Reports progress three times", nil),
		tool("test_missing_capability", "Needs the client's sampling capability", nil,
			obj{"name": "model_answer", "kind": "sampling", "sampling": obj{
				"messages": []obj{{"role": "user", "content": obj{"type": "text", "text": "Say hello"}}}, "maxTokens": 20}}),
		tool("test_streaming_elicitation", "Answers with a plain result, never a server request on the stream", nil),
		tool("test_logging_tool", "Logs only when the request asks for a log level", nil),
		tool("test_trigger_tool_change", "Changes this tenant's tool list", nil),
		tool("test_trigger_prompt_change", "Changes this tenant's prompt list", nil),
		tool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", obj{
			"$schema": "https://json-schema.org/draft/2020-12/schema",
			"type":    "object",
			"$defs": obj{"address": obj{"$anchor": "addressDef", "type": "object",
				"properties": obj{"street": str, "city": str}}},
			"properties": obj{"name": str, "address": obj{"$ref": "#/$defs/address"},
				"contactMethod": obj{"type": "string", "enum": []string{"phone", "email"}}, "phone": str, "email": str},
			"allOf":                []obj{{"anyOf": []obj{{"required": []string{"phone"}}, {"required": []string{"email"}}}}},
			"if":                   obj{"properties": obj{"contactMethod": obj{"const": "phone"}}, "required": []string{"contactMethod"}},
			"then":                 obj{"required": []string{"phone"}},
			"else":                 obj{"required": []string{"email"}},
			"additionalProperties": false,
		}),
		tool("test_header_param", "Echoes a region passed in a header", obj{"type": "object",
			"properties": obj{"region": obj{"type": "string", "x-mcp-header": "Region"}}, "required": []string{"region"}}),

		// The 2025-11-25 set's fixtures (served to sessions; the flows are
		// bridged onto the session's stream).
		tool("test_tool_with_logging", "Sends three log messages while it runs", nil),
		tool("test_sampling", "Asks the client's model to answer a prompt", obj{"type": "object",
			"properties": obj{"prompt": obj{"type": "string", "description": "The prompt to send to the LLM"}}, "required": []string{"prompt"}},
			obj{"name": "llm", "kind": "sampling", "sampling": obj{
				"messages": []obj{{"role": "user", "content": obj{"type": "text", "text": "{{args.prompt}}"}}}, "maxTokens": 100}}),
		tool("test_elicitation", "Asks the user for a username and an email address", obj{"type": "object",
			"properties": obj{"message": obj{"type": "string", "description": "The message to show the user"}}, "required": []string{"message"}},
			form("user_info", "{{args.message}}", obj{
				"username": obj{"type": "string", "description": "User's response"},
				"email":    obj{"type": "string", "description": "User's email address"},
			}, "username", "email")),
		tool("test_elicitation_sep1034_defaults", "Asks for details, every field with a default", nil,
			form("details", "Please review your details", obj{
				"name":     obj{"type": "string", "default": "John Doe"},
				"age":      obj{"type": "integer", "default": 30},
				"score":    obj{"type": "number", "default": 95.5},
				"status":   obj{"type": "string", "enum": []string{"active", "inactive", "pending"}, "default": "active"},
				"verified": obj{"type": "boolean", "default": true},
			})),
		tool("test_elicitation_sep1330_enums", "Asks to pick options, in every enum form", nil,
			form("choices", "Please pick your options", obj{
				"untitledSingle": obj{"type": "string", "enum": []string{"option1", "option2", "option3"}},
				"titledSingle": obj{"type": "string", "oneOf": []obj{{"const": "value1", "title": "First Option"},
					{"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}}},
				"legacyEnum": obj{"type": "string", "enum": []string{"opt1", "opt2", "opt3"},
					"enumNames": []string{"Option One", "Option Two", "Option Three"}},
				"untitledMulti": obj{"type": "array", "items": obj{"type": "string", "enum": []string{"option1", "option2", "option3"}}},
				"titledMulti": obj{"type": "array", "items": obj{"anyOf": []obj{{"const": "value1", "title": "First Choice"},
					{"const": "value2", "title": "Second Choice"}, {"const": "value3", "title": "Third Choice"}}}},
			})),

		// Multi round-trip fixtures: declared inputs the platform gathers…
		tool("test_input_required_result_elicitation", "Asks for the user's name", nil,
			form("user_name", "What is your name?", obj{"name": str}, "name")),
		tool("test_input_required_result_sampling", "Asks the client's model a question", nil,
			obj{"name": "capital_question", "kind": "sampling", "sampling": obj{
				"messages": []obj{{"role": "user", "content": obj{"type": "text", "text": "What is the capital of France?"}}}, "maxTokens": 100}}),
		tool("test_input_required_result_list_roots", "Reads the client's roots", nil,
			obj{"name": "client_roots", "kind": "roots"}),
		tool("test_input_required_result_multiple_inputs", "Asks for a name, a greeting and the roots in one round", nil,
			form("user_name", "What is your name?", obj{"name": str}, "name"),
			obj{"name": "greeting", "kind": "sampling", "sampling": obj{
				"messages": []obj{{"role": "user", "content": obj{"type": "text", "text": "Write a greeting"}}}, "maxTokens": 50}},
			obj{"name": "client_roots", "kind": "roots"}),
		tool("test_input_required_result_multi_round", "Asks for a name, then a colour", nil,
			form("step1", "What is your name?", obj{"name": str}, "name"),
			obj{"name": "step2", "kind": "form", "message": "What is your favourite colour?",
				"requestedSchema": obj{"type": "object", "properties": obj{"color": str}, "required": []string{"color"}},
				"when":            obj{"input": "step1"}}),
		tool("test_input_required_result_capabilities", "Asks only what the client can answer", nil,
			obj{"name": "sample_input", "kind": "sampling", "sampling": obj{
				"messages": []obj{{"role": "user", "content": obj{"type": "text", "text": "Pick a number"}}}, "maxTokens": 10}},
			obj{"name": "confirm", "kind": "form", "optional": true, "message": "Confirm?",
				"requestedSchema": obj{"type": "object", "properties": obj{"ok": obj{"type": "boolean"}}, "required": []string{"ok"}}}),
		// …and webhook-driven input, where the backend asks and keeps state.
		tool("test_input_required_result_request_state", "The backend asks for confirmation and keeps its own state", nil),
		tool("test_input_required_result_tampered_state", "The backend asks for confirmation; a tampered state is refused", nil),
	}
}

// Prompts lists every fixture prompt.
func Prompts() []obj {
	text := func(t string) obj { return obj{"type": "text", "text": t} }
	return []obj{
		{"name": "test_simple_prompt", "description": "A simple prompt", "messages": []obj{
			{"role": "user", "content": text("This is a simple prompt for testing.")}}},
		{"name": "test_prompt_with_arguments", "description": "A prompt with two arguments",
			"arguments": []obj{
				{"name": "arg1", "description": "First test argument", "required": true, "completions": []string{"test", "testValue1", "other"}},
				{"name": "arg2", "description": "Second test argument", "required": true},
			},
			"messages": []obj{{"role": "user", "content": text("Prompt with arguments: arg1='{{arg1}}', arg2='{{arg2}}'")}}},
		{"name": "test_prompt_with_embedded_resource", "description": "A prompt that embeds a resource",
			"arguments": []obj{{"name": "resourceUri", "description": "The resource to embed", "required": true}},
			"messages": []obj{
				{"role": "user", "content": obj{"type": "resource", "resource": obj{"uri": "test://example-resource", "mimeType": "text/plain", "text": "Embedded resource content for testing."}}},
				{"role": "user", "content": text("Please process the embedded resource above.")},
			}},
		{"name": "test_prompt_with_image", "description": "A prompt with an image", "messages": []obj{
			{"role": "user", "content": obj{"type": "image", "data": pngBase64, "mimeType": "image/png"}},
			{"role": "user", "content": text("Please analyze the image above.")},
		}},
		{"name": "test_input_required_result_prompt", "description": "A prompt that asks the user for context first",
			"handler": obj{"url": "{{hook}}"},
			"inputs":  []obj{form("user_context", "What context should the prompt use?", obj{"context": obj{"type": "string"}}, "context")}},
	}
}

// Resources lists the static fixture resources.
func Resources() []obj {
	return []obj{
		{"name": "static-text", "uri": "test://static-text", "description": "A static text resource", "mimeType": "text/plain",
			"text": "This is the content of the static text resource."},
		{"name": "static-binary", "uri": "test://static-binary", "description": "A static binary resource", "mimeType": "image/png",
			"blob": pngBase64},
		{"name": "watched-resource", "uri": "test://watched-resource", "description": "A resource clients subscribe to", "mimeType": "text/plain",
			"text": "Watched resource content."},
	}
}

// ResourceTemplates lists the fixture templates.
func ResourceTemplates() []obj {
	return []obj{
		{"name": "template", "uriTemplate": "test://template/{id}/data", "title": "Resource Template",
			"description": "A resource template with parameter substitution", "mimeType": "application/json",
			"handler": obj{"url": "{{hook}}"}, "completions": obj{"id": []string{"123", "456"}}},
	}
}
