package catalogue_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/opsmcp/platform/catalogue"
)

// problems returns the fields err names, in order, and their messages;
// nil for a nil error. Any other error fails the test.
func problems(t *testing.T, err error) ([]string, map[string]string) {
	t.Helper()
	if err == nil {
		return nil, nil
	}
	var ve *catalogue.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *ValidationError", err, err)
	}
	var fields []string
	msgs := map[string]string{}
	for _, f := range ve.Errors {
		if f.Field == "" || f.Message == "" {
			t.Fatalf("a field error without a field or message: %+v", f)
		}
		fields = append(fields, f.Field)
		msgs[f.Field] = f.Message
	}
	return fields, msgs
}

// check runs one table case: err must name exactly want, in order, and
// each message must contain its wanted text.
func check(t *testing.T, name string, err error, want []string, wantMsg map[string]string) {
	t.Helper()
	fields, msgs := problems(t, err)
	if !slices.Equal(fields, want) {
		t.Errorf("%s: fields %q, want %q (%v)", name, fields, want, err)
		return
	}
	for f, m := range wantMsg {
		if !strings.Contains(msgs[f], m) {
			t.Errorf("%s: %s: %q, want it to contain %q", name, f, msgs[f], m)
		}
	}
}

func TestNamesFollowTheMCPToolNamingRule(t *testing.T) {
	for _, ok := range []string{"a", "get_weather", "a.b-c_9", "UPPER", strings.Repeat("x", 128)} {
		if err := catalogue.ValidateName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", " ", "has space", "a/b", "a:b", "ü", "a\x00", "../x", strings.Repeat("x", 129), "tab\t"} {
		if err := catalogue.ValidateName(bad); err == nil || !strings.Contains(err.Error(), "1 to 128 characters") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// tool returns a valid tool, adjusted by f.
func tool(f func(*catalogue.Tool)) *catalogue.Tool {
	tl := &catalogue.Tool{Name: "weather", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`),
		Handler: &catalogue.Handler{URL: "https://hooks.example.com/mcp"}}
	if f != nil {
		f(tl)
	}
	return tl
}

func schema(s string) func(*catalogue.Tool) {
	return func(tl *catalogue.Tool) { tl.InputSchema = json.RawMessage(s) }
}

func TestToolValidationNamesEveryBadField(t *testing.T) {
	for _, tc := range []struct {
		name string
		tool *catalogue.Tool
		want []string
		msg  map[string]string
	}{
		{"valid", tool(nil), nil, nil},
		{"valid with everything", tool(func(tl *catalogue.Tool) {
			tl.Title, tl.Description = "Weather", "Current weather"
			tl.OutputSchema = json.RawMessage(`{"type":"object","properties":{"t":{"type":"number"}}}`)
			tl.Handler.TimeoutMs = catalogue.MaxTimeoutMs
			tl.Scopes = []string{"weather:read", "mcp"}
			tl.Inputs = json.RawMessage(`[{"name":"ok","kind":"form","message":"Sure?","requestedSchema":{"type":"object","properties":{"yes":{"type":"boolean"}}}}]`)
		}), nil, nil},
		{"bad name", tool(func(tl *catalogue.Tool) { tl.Name = "no spaces" }), []string{"name"}, nil},
		{"long title and description", tool(func(tl *catalogue.Tool) {
			tl.Title, tl.Description = strings.Repeat("t", 257), strings.Repeat("d", 16<<10+1)
		}), []string{"title", "description"}, map[string]string{"title": "at most 256 bytes", "description": "at most 16384 bytes"}},
		{"title and description at their limits", tool(func(tl *catalogue.Tool) {
			tl.Title, tl.Description = strings.Repeat("t", 256), strings.Repeat("d", 16<<10)
		}), nil, nil},
		{"no input schema", tool(schema(``)), []string{"inputSchema"}, map[string]string{"inputSchema": "is required"}},
		{"several problems at once", tool(func(tl *catalogue.Tool) {
			tl.Name, tl.InputSchema, tl.Handler = "", nil, nil
		}), []string{"name", "inputSchema", "handler"}, nil},
		{"scopes", tool(func(tl *catalogue.Tool) { tl.Scopes = []string{"ok", "", "two words", `q"uote`, `back\slash`} }),
			[]string{"scopes[1]", "scopes[2]", "scopes[3]", "scopes[4]"}, nil},
		{"inputs not an array", tool(func(tl *catalogue.Tool) { tl.Inputs = json.RawMessage(`{"name":"x"}`) }),
			[]string{"inputs"}, map[string]string{"inputs": "must be an array of input objects"}},
		{"inputs with an unknown field", tool(func(tl *catalogue.Tool) {
			tl.Inputs = json.RawMessage(`[{"name":"x","kind":"roots","colour":"red"}]`)
		}), []string{"inputs"}, map[string]string{"inputs": "colour"}},
		{"inputs the resolver refuses", tool(func(tl *catalogue.Tool) { tl.Inputs = json.RawMessage(`[{"name":"x","kind":"telepathy"}]`) }),
			[]string{"inputs"}, map[string]string{"inputs": "inputs[0]"}},
		{"null inputs are none", tool(func(tl *catalogue.Tool) { tl.Inputs = json.RawMessage(`null`) }), nil, nil},
	} {
		check(t, tc.name, tc.tool.Validate(), tc.want, tc.msg)
	}
}

func TestSchemasMustCompileAsJSONSchema2020AndErrorsNameThePointer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		schema string
		want   []string
		msg    map[string]string
	}{
		{"not JSON", `{"type":`, []string{"inputSchema"}, map[string]string{"inputSchema": "is not valid JSON"}},
		{"an array", `[{"type":"object"}]`, []string{"inputSchema"}, map[string]string{"inputSchema": "must be a JSON Schema object"}},
		{"a string", `"object"`, []string{"inputSchema"}, map[string]string{"inputSchema": "must be a JSON Schema object"}},
		{"another dialect", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`,
			[]string{"inputSchema/$schema"}, map[string]string{"inputSchema/$schema": "2020-12"}},
		{"the 2020-12 dialect named", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`, nil, nil},
		{"a keyword of the wrong type", `{"type":"object","properties":{"n":{"type":"integer","minimum":"five"}}}`,
			[]string{"inputSchema/properties/n/minimum"}, nil},
		{"an unknown type", `{"type":"object","properties":{"n":{"type":"int"}}}`,
			[]string{"inputSchema/properties/n/type"}, nil},
		{"a pointer through an escaped name", `{"type":"object","properties":{"a/b~c":{"type":7}}}`,
			[]string{"inputSchema/properties/a~1b~0c/type"}, nil},
		{"an external reference", `{"type":"object","properties":{"n":{"$ref":"https://example.com/n.json"}}}`,
			[]string{"inputSchema"}, map[string]string{"inputSchema": "example.com"}},
		{"a file reference", `{"type":"object","properties":{"n":{"$ref":"file:///etc/passwd"}}}`,
			[]string{"inputSchema"}, map[string]string{"inputSchema": "/etc/passwd"}},
		{"a local reference", `{"type":"object","$defs":{"n":{"type":"integer"}},"properties":{"n":{"$ref":"#/$defs/n"}}}`, nil, nil},
		{"a dangling local reference", `{"type":"object","properties":{"n":{"$ref":"#/$defs/missing"}}}`, []string{"inputSchema"}, nil},
		{"not an object schema", `{"type":"string"}`, []string{"inputSchema/type"}, map[string]string{"inputSchema/type": `must be "object"`}},
		{"no type at all", `{"properties":{}}`, []string{"inputSchema/type"}, nil},
		{"a boolean schema", `true`, []string{"inputSchema/type"}, nil},
		{"a type list", `{"type":["object","null"]}`, []string{"inputSchema/type"}, nil},
	} {
		check(t, tc.name, tool(schema(tc.schema)).Validate(), tc.want, tc.msg)
	}
	// The output schema follows the same rules, under its own field.
	for _, tc := range []struct {
		name, schema string
		want         []string
	}{
		{"output not an object", `{"type":"array"}`, []string{"outputSchema/type"}},
		{"output bad keyword", `{"type":"object","required":"all"}`, []string{"outputSchema/required"}},
		{"output not JSON", `{`, []string{"outputSchema"}},
	} {
		err := tool(func(tl *catalogue.Tool) { tl.OutputSchema = json.RawMessage(tc.schema) }).Validate()
		check(t, tc.name, err, tc.want, nil)
	}
}

func TestCompileSchemaReturnsAUsableValidator(t *testing.T) {
	s, err := catalogue.CompileSchema(json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for doc, ok := range map[string]bool{`{"n":3}`: true, `{"n":0}`: false, `{}`: false, `{"n":"3"}`: false} {
		var v any
		if err := json.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatal(err)
		}
		if got := s.Validate(v) == nil; got != ok {
			t.Errorf("%s valid = %v, want %v", doc, got, ok)
		}
	}
}

func TestHeaderParametersFollowTheSpecsLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		schema string
		want   []string
		msg    map[string]string
	}{
		{"string, integer and boolean", `{"type":"object","properties":{
			"s":{"type":"string","x-mcp-header":"Region"},
			"i":{"type":"integer","x-mcp-header":"Count"},
			"b":{"type":"boolean","x-mcp-header":"Dry-Run"}}}`, nil, nil},
		{"nested through properties", `{"type":"object","properties":{"o":{"type":"object","properties":{"s":{"type":"string","x-mcp-header":"Deep"}}}}}`, nil, nil},
		{"number", `{"type":"object","properties":{"n":{"type":"number","x-mcp-header":"N"}}}`,
			[]string{"inputSchema/properties/n/x-mcp-header"}, map[string]string{"inputSchema/properties/n/x-mcp-header": "string, integer or boolean"}},
		{"object", `{"type":"object","properties":{"o":{"type":"object","x-mcp-header":"O"}}}`,
			[]string{"inputSchema/properties/o/x-mcp-header"}, nil},
		{"a type list", `{"type":"object","properties":{"s":{"type":["string","null"],"x-mcp-header":"S"}}}`,
			[]string{"inputSchema/properties/s/x-mcp-header"}, nil},
		{"not a token", `{"type":"object","properties":{"s":{"type":"string","x-mcp-header":"Bad Name"}}}`,
			[]string{"inputSchema/properties/s/x-mcp-header"}, map[string]string{"inputSchema/properties/s/x-mcp-header": "RFC 9110"}},
		{"empty", `{"type":"object","properties":{"s":{"type":"string","x-mcp-header":""}}}`,
			[]string{"inputSchema/properties/s/x-mcp-header"}, nil},
		{"not a string", `{"type":"object","properties":{"s":{"type":"string","x-mcp-header":5}}}`,
			[]string{"inputSchema/properties/s/x-mcp-header"}, nil},
		{"a separator", `{"type":"object","properties":{"s":{"type":"string","x-mcp-header":"a:b"}}}`,
			[]string{"inputSchema/properties/s/x-mcp-header"}, nil},
		{"on the root", `{"type":"object","x-mcp-header":"Root","properties":{}}`,
			[]string{"inputSchema/x-mcp-header"}, nil},
		{"in items", `{"type":"object","properties":{"l":{"type":"array","items":{"type":"string","x-mcp-header":"L"}}}}`,
			[]string{"inputSchema/properties/l/items/x-mcp-header"}, map[string]string{"inputSchema/properties/l/items/x-mcp-header": `reached through "properties"`}},
		{"in anyOf", `{"type":"object","properties":{"u":{"anyOf":[{"type":"string","x-mcp-header":"U"}]}}}`,
			[]string{"inputSchema/properties/u/anyOf/0/x-mcp-header"}, nil},
		{"in $defs", `{"type":"object","$defs":{"d":{"type":"string","x-mcp-header":"D"}},"properties":{}}`,
			[]string{"inputSchema/$defs/d/x-mcp-header"}, nil},
		{"in additionalProperties", `{"type":"object","additionalProperties":{"type":"string","x-mcp-header":"A"}}`,
			[]string{"inputSchema/additionalProperties/x-mcp-header"}, nil},
		// Names are unique ignoring case; the property later in key order
		// is blamed, every time.
		{"duplicate ignoring case", `{"type":"object","properties":{
			"b":{"type":"string","x-mcp-header":"REGION"},
			"a":{"type":"string","x-mcp-header":"Region"}}}`,
			[]string{"inputSchema/properties/b/x-mcp-header"}, map[string]string{"inputSchema/properties/b/x-mcp-header": "/properties/a"}},
	} {
		for range 5 { // the same answer every time
			check(t, tc.name, tool(schema(tc.schema)).Validate(), tc.want, tc.msg)
		}
	}
}

func TestHandlersNeedAnHTTPURLAndATimeoutInRange(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    *catalogue.Handler
		want []string
		msg  map[string]string
	}{
		{"https", &catalogue.Handler{URL: "https://hooks.example.com/mcp?tenant=1"}, nil, nil},
		{"http with a port", &catalogue.Handler{URL: "http://10.0.0.5:8080/hook", TimeoutMs: 1}, nil, nil},
		{"webhook type named", &catalogue.Handler{Type: "webhook", URL: "https://h.example"}, nil, nil},
		{"unknown type", &catalogue.Handler{Type: "lambda", URL: "https://h.example"}, []string{"handler.type"}, map[string]string{"handler.type": `"lambda"`}},
		{"no URL", &catalogue.Handler{}, []string{"handler.url"}, map[string]string{"handler.url": "is required"}},
		{"another scheme", &catalogue.Handler{URL: "ftp://h.example/x"}, []string{"handler.url"}, map[string]string{"handler.url": "https or http"}},
		{"javascript", &catalogue.Handler{URL: "javascript:alert(1)"}, []string{"handler.url"}, nil},
		{"relative", &catalogue.Handler{URL: "/hook"}, []string{"handler.url"}, nil},
		{"no host", &catalogue.Handler{URL: "https:///hook"}, []string{"handler.url"}, map[string]string{"handler.url": "must name a host"}},
		{"port only", &catalogue.Handler{URL: "https://:443/hook"}, []string{"handler.url"}, map[string]string{"handler.url": "must name a host"}},
		{"credentials", &catalogue.Handler{URL: "https://user:pw@h.example/hook"}, []string{"handler.url"}, map[string]string{"handler.url": "credentials"}},
		{"user only", &catalogue.Handler{URL: "https://user@h.example/hook"}, []string{"handler.url"}, nil},
		{"fragment", &catalogue.Handler{URL: "https://h.example/hook#x"}, []string{"handler.url"}, map[string]string{"handler.url": "fragment"}},
		{"empty fragment", &catalogue.Handler{URL: "https://h.example/hook#"}, []string{"handler.url"}, nil},
		{"not a URL", &catalogue.Handler{URL: "https://h.example/%zz"}, []string{"handler.url"}, map[string]string{"handler.url": "not a valid URL"}},
		{"too long", &catalogue.Handler{URL: "https://h.example/" + strings.Repeat("a", 2048)}, []string{"handler.url"}, map[string]string{"handler.url": "2048"}},
		{"negative timeout", &catalogue.Handler{URL: "https://h.example", TimeoutMs: -1}, []string{"handler.timeoutMs"}, nil},
		{"timeout too long", &catalogue.Handler{URL: "https://h.example", TimeoutMs: catalogue.MaxTimeoutMs + 1}, []string{"handler.timeoutMs"},
			map[string]string{"handler.timeoutMs": "between 1 and 120000"}},
		{"everything wrong", &catalogue.Handler{Type: "x", URL: "ftp://x", TimeoutMs: -5}, []string{"handler.type", "handler.url", "handler.timeoutMs"}, nil},
	} {
		check(t, tc.name, tool(func(tl *catalogue.Tool) { tl.Handler = tc.h }).Validate(), tc.want, tc.msg)
	}
}

func TestHandlerTimeoutDefaultsWhenUnset(t *testing.T) {
	for _, tc := range []struct {
		h    *catalogue.Handler
		want int
	}{{nil, catalogue.DefaultTimeoutMs}, {&catalogue.Handler{}, catalogue.DefaultTimeoutMs}, {&catalogue.Handler{TimeoutMs: 2500}, 2500}} {
		if got := tc.h.Timeout(); got != tc.want {
			t.Errorf("Timeout() of %+v = %d, want %d", tc.h, got, tc.want)
		}
	}
}

func TestPromptValidation(t *testing.T) {
	text := json.RawMessage(`{"type":"text","text":"Hello {{name}}"}`)
	msgs := []catalogue.PromptMessage{{Role: "user", Content: text}}
	hook := &catalogue.Handler{URL: "https://h.example"}
	for _, tc := range []struct {
		name string
		p    *catalogue.Prompt
		want []string
		msg  map[string]string
	}{
		{"messages", &catalogue.Prompt{Name: "greet", Arguments: []catalogue.PromptArgument{{Name: "name", Required: true}}, Messages: msgs}, nil, nil},
		{"handler", &catalogue.Prompt{Name: "greet", Handler: hook}, nil, nil},
		{"neither", &catalogue.Prompt{Name: "greet"}, []string{"messages"}, nil},
		{"both", &catalogue.Prompt{Name: "greet", Messages: msgs, Handler: hook}, []string{"handler"}, map[string]string{"handler": "not both"}},
		{"bad handler", &catalogue.Prompt{Name: "greet", Handler: &catalogue.Handler{URL: "ftp://x"}}, []string{"handler.url"}, nil},
		{"arguments", &catalogue.Prompt{Name: "greet", Messages: msgs, Arguments: []catalogue.PromptArgument{
			{Name: "a"}, {Name: ""}, {Name: "a"}, {Name: strings.Repeat("n", 129)}}},
			[]string{"arguments[1].name", "arguments[2].name", "arguments[3].name"}, map[string]string{"arguments[2].name": `duplicate argument "a"`}},
		{"roles", &catalogue.Prompt{Name: "greet", Messages: []catalogue.PromptMessage{{Role: "system", Content: text}, {Role: "assistant", Content: text}}},
			[]string{"messages[0].role"}, nil},
		{"content blocks", &catalogue.Prompt{Name: "greet", Messages: []catalogue.PromptMessage{
			{Role: "user", Content: json.RawMessage(`"just text"`)},
			{Role: "user", Content: json.RawMessage(`{"type":"text"}`)},
			{Role: "user", Content: json.RawMessage(`{"type":"image","data":"%%%"}`)},
			{Role: "user", Content: json.RawMessage(`{"type":"audio","mimeType":"audio/wav","data":"UklGRg=="}`)},
			{Role: "user", Content: json.RawMessage(`{"type":"resource","resource":"docs://x"}`)},
			{Role: "user", Content: json.RawMessage(`{"type":"resource_link","uri":"no-scheme"}`)},
			{Role: "user", Content: json.RawMessage(`{"type":"video"}`)},
		}}, []string{"messages[0].content", "messages[1].content.text", "messages[2].content.mimeType", "messages[2].content.data",
			"messages[4].content.resource", "messages[5].content.uri", "messages[6].content.type"}, nil},
		{"inputs", &catalogue.Prompt{Name: "greet", Handler: hook, Inputs: json.RawMessage(`[{"name":"x","kind":"nope"}]`)}, []string{"inputs"}, nil},
	} {
		check(t, tc.name, tc.p.Validate(), tc.want, tc.msg)
	}
}

func TestResourceValidation(t *testing.T) {
	text := "hello"
	for _, tc := range []struct {
		name string
		r    *catalogue.Resource
		want []string
	}{
		{"text", &catalogue.Resource{Name: "readme", URI: "docs://readme", Text: &text}, nil},
		{"empty text", &catalogue.Resource{Name: "empty", URI: "docs://empty", Text: new(string)}, nil},
		{"blob", &catalogue.Resource{Name: "logo", URI: "https://example.com/logo.png", Blob: "iVBORw0KGgo=", Annotations: json.RawMessage(`{"priority":1}`)}, nil},
		{"no uri", &catalogue.Resource{Name: "r", Text: &text}, []string{"uri"}},
		{"relative uri", &catalogue.Resource{Name: "r", URI: "readme", Text: &text}, []string{"uri"}},
		{"neither", &catalogue.Resource{Name: "r", URI: "docs://r"}, []string{"text"}},
		{"both", &catalogue.Resource{Name: "r", URI: "docs://r", Text: &text, Blob: "aGk="}, []string{"blob"}},
		{"bad base64", &catalogue.Resource{Name: "r", URI: "docs://r", Blob: "not base64!"}, []string{"blob"}},
		{"unpadded base64", &catalogue.Resource{Name: "r", URI: "docs://r", Blob: "aGk"}, []string{"blob"}},
		{"annotations not an object", &catalogue.Resource{Name: "r", URI: "docs://r", Text: &text, Annotations: json.RawMessage(`[1]`)}, []string{"annotations"}},
		{"everything", &catalogue.Resource{Name: "bad name"}, []string{"name", "uri", "text"}},
	} {
		check(t, tc.name, tc.r.Validate(), tc.want, nil)
	}
}

func TestResourceTemplateValidation(t *testing.T) {
	hook := &catalogue.Handler{URL: "https://h.example"}
	for _, tc := range []struct {
		name string
		rt   *catalogue.ResourceTemplate
		want []string
		msg  map[string]string
	}{
		{"valid", &catalogue.ResourceTemplate{Name: "doc", URITemplate: "docs://{id}{?rev}", Handler: hook,
			Completions: map[string][]string{"id": {"a", "b"}, "rev": {"1"}}}, nil, nil},
		{"no handler", &catalogue.ResourceTemplate{Name: "doc", URITemplate: "docs://{id}"}, []string{"handler"}, nil},
		{"bad template", &catalogue.ResourceTemplate{Name: "doc", URITemplate: "docs://{id*}", Handler: hook},
			[]string{"uriTemplate"}, map[string]string{"uriTemplate": "explode"}},
		{"completions of unknown variables, in name order", &catalogue.ResourceTemplate{Name: "doc", URITemplate: "docs://{id}", Handler: hook,
			Completions: map[string][]string{"zeta": nil, "id": {"1"}, "alpha": nil}}, []string{"completions.alpha", "completions.zeta"}, nil},
		{"inputs", &catalogue.ResourceTemplate{Name: "doc", URITemplate: "docs://{id}", Handler: hook, Inputs: json.RawMessage(`5`)}, []string{"inputs"}, nil},
	} {
		check(t, tc.name, tc.rt.Validate(), tc.want, tc.msg)
	}
}

func TestDefinitionsOfEveryKind(t *testing.T) {
	for _, k := range []catalogue.Kind{catalogue.KindTool, catalogue.KindPrompt, catalogue.KindResource, catalogue.KindResourceTemplate} {
		d := catalogue.New(k)
		if d == nil || d.Kind() != k {
			t.Fatalf("New(%q) = %#v", k, d)
		}
		// An empty definition is never valid, and says at least why its
		// name is not.
		fields, _ := problems(t, d.Validate())
		if len(fields) == 0 || fields[0] != "name" {
			t.Errorf("%s: empty definition problems %q", k, fields)
		}
	}
	if catalogue.New("widget") != nil {
		t.Fatal("New of an unknown kind is not nil")
	}
	r := &catalogue.Resource{Name: "r", URI: "docs://r"}
	if r.ItemName() != "r" || r.ItemURI() != "docs://r" || r.WebhookHandler() != nil {
		t.Fatalf("resource accessors: %q %q %v", r.ItemName(), r.ItemURI(), r.WebhookHandler())
	}
	tl := tool(nil)
	if tl.ItemName() != "weather" || tl.ItemURI() != "" || tl.WebhookHandler() != tl.Handler {
		t.Fatal("tool accessors")
	}
}

func TestWebhookSecretsAreFreshAndOpaque(t *testing.T) {
	a, b := catalogue.NewWebhookSecret(), catalogue.NewWebhookSecret()
	if a == b || !strings.HasPrefix(a, "whsec_") || len(a) != len("whsec_")+43 {
		t.Fatalf("secrets %q %q", a, b)
	}
}

// TestAcceptsAnyObjectOnlyWhereTheValidatorWould: the schemas a tool
// without arguments declares accept any object, so the platform skips
// validating their arguments; every schema that constrains an object in
// any way, or that it cannot read, does not. Each answer is checked
// against the validator itself on objects of every kind: a schema said
// to accept any object accepts each, and each constraining one refuses
// one of them.
func TestAcceptsAnyObjectOnlyWhereTheValidatorWould(t *testing.T) {
	objects := []string{`{}`, `{"a":1}`, `{"n":null,"s":"x","b":true,"o":{"p":[1,2]}}`, `{"":""}`, `{"$ref":"#"}`,
		`{"type":"object"}`, `{"a":1,"b":2,"c":3,"d":4}`}
	for _, c := range []struct {
		schema          string
		any, constrains bool
	}{
		{`{"type":"object"}`, true, false},
		{` { "type" : "object" } `, true, false},
		{`{"type":"object","properties":{}}`, true, false},
		{`{"type":"object","properties":{},"required":[]}`, true, false},
		{`{"type":"object","additionalProperties":true}`, true, false},
		{`{"type":"object","additionalProperties":{}}`, true, false},
		{`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","title":"No arguments","description":"d","$comment":"c"}`, true, false},
		{`{}`, true, false},
		// Constraints, each refusing some object.
		{`{"type":"object","properties":{"a":{"type":"string"}}}`, false, true},
		{`{"type":"object","required":["a"]}`, false, true},
		{`{"type":"object","additionalProperties":false}`, false, true},
		{`{"type":"object","additionalProperties":{"type":"string"}}`, false, true},
		{`{"type":"object","minProperties":1}`, false, true},
		{`{"type":"object","maxProperties":3}`, false, true},
		{`{"type":"object","propertyNames":{"maxLength":0}}`, false, true},
		{`{"type":"object","patternProperties":{"^a":{"type":"string"}}}`, false, true},
		{`{"type":"object","not":{"required":["a"]}}`, false, true},
		{`{"type":"object","allOf":[{"required":["a"]}]}`, false, true},
		{`{"type":"object","$ref":"#/$defs/x","$defs":{"x":{"required":["a"]}}}`, false, true},
		{`{"type":"object","dependentRequired":{"a":["zz"]}}`, false, true},
		{`{"type":"object","unevaluatedProperties":false}`, false, true},
		{`{"type":"object","enum":[{}]}`, false, true},
		{`{"type":"object","const":{}}`, false, true},
		{`{"type":"object","if":{"required":["a"]},"then":{"required":["zz"]}}`, false, true},
		{`{"type":["object","null"],"required":["a"]}`, false, true},
		{`{"type":"object","title":"t","required":["a"]}`, false, true},
		{`{"type":"object","required":[],"required":["a"]}`, false, true},
		// Not read as any object, though the validator might accept all:
		// false is always safe.
		{`{"type":["object"]}`, false, false},
		{`{"type":"object","examples":[{}]}`, false, false},
		{`{"type":"object","properties":null}`, false, false},
		{`{"type":"object","required":null}`, false, false},
		{`{"type":"object","additionalProperties":"yes"}`, false, false},
		{`{"type":"object","title":1}`, false, false},
		{`{"type":"object","$schema":"http://json-schema.org/draft-07/schema#"}`, false, false},
		{`{"type":"string"}`, false, false},
		{`true`, false, false},
		{`[]`, false, false},
		{`null`, false, false},
		{`not json`, false, false},
		{`{"type":"object"`, false, false},
	} {
		if got := catalogue.AcceptsAnyObject(json.RawMessage(c.schema)); got != c.any {
			t.Errorf("AcceptsAnyObject(%s) = %v, want %v", c.schema, got, c.any)
			continue
		}
		s, err := catalogue.CompileSchema(json.RawMessage(c.schema))
		if err != nil {
			if c.any {
				t.Errorf("%s: said to accept any object, but does not compile: %v", c.schema, err)
			}
			continue
		}
		refused := ""
		for _, o := range objects {
			var v any
			if err := json.Unmarshal([]byte(o), &v); err != nil {
				t.Fatal(err)
			}
			if s.Validate(v) != nil {
				refused = o
				break
			}
		}
		switch {
		case c.any && refused != "":
			t.Errorf("%s: said to accept any object, but the validator refuses %s", c.schema, refused)
		case c.constrains && refused == "":
			t.Errorf("%s: constrains objects, but the validator refused none of the test's", c.schema)
		}
	}
}
