package catalogue_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/opsmcp/platform/catalogue"
)

func TestURITemplatesParseLevelsOneToThree(t *testing.T) {
	for _, tc := range []struct {
		template string
		vars     []string
	}{
		{"docs://static", nil},
		{"docs://{id}", []string{"id"}},
		{"docs://{a,b}", []string{"a", "b"}},
		{"file:///{+path}", []string{"path"}},
		{"page{#section}", []string{"section"}},
		{"files://x/{name}{.ext}", []string{"name", "ext"}},
		{"api://{/version,resource}", []string{"version", "resource"}},
		{"map://point{;lat,long}", []string{"lat", "long"}},
		{"search://q{?term,page}", []string{"term", "page"}},
		{"search://q?fixed=1{&term}", []string{"term"}},
		{"x://{user.name}/{a_b9}", []string{"user.name", "a_b9"}},
		{"x://{a}/{b}/{c}", []string{"a", "b", "c"}},
		{"x://%7Euser/{id}", []string{"id"}},
		{"x://caf\u00e9/{id}", []string{"id"}}, // IRI characters are allowed in literals
		{"x://{a}-{b}", []string{"a", "b"}},
		{"x://{a}{/b}", []string{"a", "b"}}, // the operator tells the values apart
	} {
		tmpl, err := catalogue.ParseURITemplate(tc.template)
		if err != nil {
			t.Errorf("%s: %v", tc.template, err)
			continue
		}
		if !slices.Equal(tmpl.Vars(), tc.vars) || tmpl.String() != tc.template {
			t.Errorf("%s: vars %q, string %q", tc.template, tmpl.Vars(), tmpl.String())
		}
		for _, v := range tc.vars {
			if !tmpl.HasVar(v) {
				t.Errorf("%s: HasVar(%q) is false", tc.template, v)
			}
		}
		if tmpl.HasVar("nope") {
			t.Errorf("%s: HasVar(nope) is true", tc.template)
		}
	}
}

func TestURITemplatesThatCannotBeMatchedAreRefusedWithTheReason(t *testing.T) {
	for _, tc := range []struct {
		template, want string
	}{
		{"", "is required"},
		{"x://" + strings.Repeat("a", 2045), "at most 2048 characters"},
		{"x://{id", "unclosed '{' at offset 4"},
		{"x://id}", "unmatched '}' at offset 6"},
		{"x://{a}}", "unmatched '}' at offset 7"},
		{"x://{}", "empty expression {}"},
		{"x://{a{b}", `invalid variable name "a{b"`},
		// Level 4 modifiers.
		{"x://{id:3}", "prefix and explode modifiers are not supported"},
		{"x://{list*}", "prefix and explode modifiers are not supported"},
		{"x://{/list*}", "prefix and explode modifiers are not supported"},
		{"x://{?a,b:2}", "prefix and explode modifiers are not supported"},
		// Operators RFC 6570 reserves for future extensions.
		{"x://{=a}", `reserved operator "="`},
		{"x://{,a}", `reserved operator ","`},
		{"x://{!a}", `reserved operator "!"`},
		{"x://{@a}", `reserved operator "@"`},
		{"x://{|a}", `reserved operator "|"`},
		// Variable names.
		{"x://{a b}", `invalid variable name "a b"`},
		{"x://{a-b}", `invalid variable name "a-b"`},
		{"x://{a..b}", `invalid variable name "a..b"`},
		{"x://{.}", `invalid variable name ""`},
		{"x://{a,}", `invalid variable name ""`},
		{"x://{a}/{a}", `variable "a" appears twice`},
		{"x://{a,a}", `variable "a" appears twice`},
		// Expressions no URI could tell apart.
		{"x://{a}{b}", "nothing between them"},
		{"x://{a}{+b}", "nothing between them"},
		{"x://{/a}{b}", "nothing between them"},
		// Literals that are not URI text.
		{"x://a b/{id}", `character ' ' is not allowed in a URI at offset 5`},
		{"x://{id}/a\"b", `character '"' is not allowed in a URI at offset 10`},
		{"x://<{id}>", `character '<' is not allowed in a URI at offset 4`},
		{"x://\x00{id}", `is not allowed in a URI at offset 4`},
		{"x://100%/{id}", `'%' not followed by two hex digits at offset 7`},
		{"x://{id}%4", `'%' not followed by two hex digits at offset 8`},
		{"x://%zz{id}", `'%' not followed by two hex digits at offset 4`},
	} {
		tmpl, err := catalogue.ParseURITemplate(tc.template)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			name := tc.template
			if len(name) > 40 {
				name = name[:40] + "…"
			}
			t.Errorf("%q: err %v, want one containing %q", name, err, tc.want)
		}
		if tmpl != nil {
			t.Errorf("%q: a template was returned with the error", tc.template)
		}
	}
}

func TestURITemplatesMatchTheirExpansionsAndDecodeValues(t *testing.T) {
	for _, tc := range []struct {
		template, uri string
		want          map[string]string
	}{
		// Simple: unreserved characters as they are, the rest decoded.
		{"docs://{id}", "docs://42", map[string]string{"id": "42"}},
		{"docs://{id}", "docs://", map[string]string{"id": ""}},
		{"docs://{id}", "docs://a%20b%2Fc", map[string]string{"id": "a b/c"}},
		{"docs://{id}", "docs://caf%C3%A9", map[string]string{"id": "café"}},
		{"docs://{id}", "docs://a+b", map[string]string{"id": "a+b"}}, // '+' is not a space in a URI
		{"docs://{a,b}", "docs://1,2", map[string]string{"a": "1", "b": "2"}},
		{"x://{a}/{b}/{c}", "x://1/2/3", map[string]string{"a": "1", "b": "2", "c": "3"}},
		// Reserved: slashes stay in the value.
		{"file:///{+path}", "file:///etc/hosts", map[string]string{"path": "etc/hosts"}},
		{"file:///{+path}", "file:///a%20b/c", map[string]string{"path": "a b/c"}},
		{"file:///{+path}/raw", "file:///a/b/raw", map[string]string{"path": "a/b"}},
		// Fragment.
		{"page{#section}", "page#intro", map[string]string{"section": "intro"}},
		{"page{#a,b}", "page#x,y/z", map[string]string{"a": "x", "b": "y/z"}},
		// Label, path segments, path parameters.
		{"files://x/{name}{.ext}", "files://x/report.pdf", map[string]string{"name": "report", "ext": "pdf"}},
		{"v://{.a,b}", "v://.1.2", map[string]string{"a": "1", "b": "2"}},
		{"api://{/version,resource}", "api:///v2/users", map[string]string{"version": "v2", "resource": "users"}},
		{"x://{a}{/b}", "x://one/two", map[string]string{"a": "one", "b": "two"}},
		{"map://point{;lat,long}", "map://point;lat=51.5;long=-0.12", map[string]string{"lat": "51.5", "long": "-0.12"}},
		{"map://point{;lat}", "map://point;lat", map[string]string{"lat": ""}}, // an empty value is the name alone
		// Query and its continuation.
		{"search://q{?term,page}", "search://q?term=go%20lang&page=2", map[string]string{"term": "go lang", "page": "2"}},
		{"search://q{?term}", "search://q?term=", map[string]string{"term": ""}},
		{"search://q?fixed=1{&term}", "search://q?fixed=1&term=x", map[string]string{"term": "x"}},
		{"search://q{?a}{&b}", "search://q?a=1&b=2", map[string]string{"a": "1", "b": "2"}},
		// Several operators at once.
		{"repo://{owner}/{repo}{/path}{?ref}{#line}", "repo://acme/site/README.md?ref=main#L10",
			map[string]string{"owner": "acme", "repo": "site", "path": "README.md", "ref": "main", "line": "L10"}},
		// Characters that are special to regular expressions are literals.
		{"x://a.b(c)+[d]/{id}", "x://a.b(c)+[d]/7", map[string]string{"id": "7"}},
		{"x://%7Euser/{id}", "x://%7Euser/7", map[string]string{"id": "7"}},
	} {
		tmpl, err := catalogue.ParseURITemplate(tc.template)
		if err != nil {
			t.Errorf("%s: %v", tc.template, err)
			continue
		}
		got, ok := tmpl.Match(tc.uri)
		if !ok || !maps.Equal(got, tc.want) {
			t.Errorf("%s matching %s: %v %v, want %v", tc.template, tc.uri, got, ok, tc.want)
		}
	}
}

func TestURIsThatAreNotExpansionsDoNotMatch(t *testing.T) {
	for _, tc := range []struct{ template, uri string }{
		{"docs://{id}", "doc://42"},               // another scheme
		{"docs://{id}", "docs://a/b"},             // a simple value cannot hold '/'
		{"docs://{id}", "docs://a?b"},             // nor '?'
		{"docs://{id}", "docs://a#b"},             // nor '#'
		{"docs://{id}", "docs://a,b"},             // nor ','
		{"docs://{id}", "xdocs://42"},             // anchored at the start
		{"docs://{id}/raw", "docs://42/raw/more"}, // and at the end
		{"docs://{id}", "docs://%zz"},             // a bad percent-encoding
		{"docs://{id}", "docs://%4"},
		{"docs://{a,b}", "docs://1"}, // every variable is needed
		{"file:///{+path}", "file:///a?b"},
		{"file:///{+path}", "file:///a#b"},
		{"page{#section}", "page"},
		{"page{#section}", "pagesection"},
		{"files://x/{name}{.ext}", "files://x/report"},
		{"files://x/{name}{.ext}", "files://x/a/b.pdf"},
		{"api://{/version,resource}", "api:///v2"},
		{"map://point{;lat}", "map://point;long=1"},
		{"map://point{;lat}", "map://point;latitude=1"},
		{"map://point{;lat}", "map://point;lat=1/2"},
		{"search://q{?term}", "search://q?other=1"},
		{"search://q{?term}", "search://q?terms=1"},
		{"search://q{?term}", "search://q?term"},
		{"search://q{?term}", "search://q?term=a&page=2"},
		{"search://q{?term,page}", "search://q?page=2&term=a"}, // order is the template's
		{"search://q?fixed=1{&term}", "search://q?fixed=2&term=x"},
		{"x://a.b/{id}", "x://aXb/7"}, // '.' is a literal, not "any character"
		{"x://%7Euser/{id}", "x://~user/7"},
	} {
		tmpl, err := catalogue.ParseURITemplate(tc.template)
		if err != nil {
			t.Errorf("%s: %v", tc.template, err)
			continue
		}
		if got, ok := tmpl.Match(tc.uri); ok || got != nil {
			t.Errorf("%s matched %s: %v", tc.template, tc.uri, got)
		}
	}
}

func TestAmbiguousURIsSplitTheSameWayEveryTime(t *testing.T) {
	// Where a URI could split between variables in more than one way, the
	// earlier variable takes as much as it can.
	for _, tc := range []struct {
		template, uri string
		want          map[string]string
	}{
		{"files://x/{name}{.ext}", "files://x/archive.tar.gz", map[string]string{"name": "archive.tar", "ext": "gz"}},
		{"x://{a}-{b}", "x://1-2-3", map[string]string{"a": "1-2", "b": "3"}},
		{"file:///{+dir}/{file}", "file:///a/b/c", map[string]string{"dir": "a/b", "file": "c"}},
		{"x://{a}{;b}", "x://1;b=2;b=3", map[string]string{"a": "1;b=2", "b": "3"}},
	} {
		tmpl, err := catalogue.ParseURITemplate(tc.template)
		if err != nil {
			t.Fatalf("%s: %v", tc.template, err)
		}
		for range 3 {
			if got, ok := tmpl.Match(tc.uri); !ok || !maps.Equal(got, tc.want) {
				t.Fatalf("%s matching %s: %v %v, want %v", tc.template, tc.uri, got, ok, tc.want)
			}
		}
	}
}
