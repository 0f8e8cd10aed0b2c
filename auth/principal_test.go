package auth_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/opsmcp/platform/auth"
)

func TestMachinePrincipalsAreClientsActingForThemselves(t *testing.T) {
	for _, tc := range []struct {
		p    auth.Principal
		want bool
	}{
		{auth.Principal{Issuer: "https://id.example", Subject: "alice", Client: "app"}, false},
		{auth.Principal{Issuer: "https://id.example", Subject: "", Client: "svc"}, true},
		{auth.Principal{Issuer: "https://id.example", Subject: "svc", Client: "svc"}, true},
		{auth.Principal{Issuer: "https://id.example", Subject: "svc", Client: "SVC"}, false}, // ids compare exactly
	} {
		if got := tc.p.Machine(); got != tc.want {
			t.Errorf("%+v: Machine() = %v, want %v", tc.p, got, tc.want)
		}
	}
}

func TestBindingsTellEveryIssuerSubjectAndClientApart(t *testing.T) {
	alice := &auth.Principal{Issuer: "https://id.example", Subject: "alice", Client: "app", Scopes: []string{"mcp"}}
	if got := alice.Binding(); got != `["https://id.example","alice","app"]` {
		t.Fatalf("Binding() = %s", got)
	}
	// Scopes are not part of the binding: a refreshed token with other
	// scopes continues the same flows.
	if again := (&auth.Principal{Issuer: alice.Issuer, Subject: "alice", Client: "app"}).Binding(); again != alice.Binding() {
		t.Fatalf("scopes changed the binding: %s", again)
	}
	// A machine principal binds client-only, however its subject is
	// spelled.
	svc := &auth.Principal{Issuer: "https://id.example", Subject: "svc", Client: "svc"}
	if got := svc.Binding(); got != `["https://id.example","","svc"]` || got != (&auth.Principal{Issuer: svc.Issuer, Client: "svc"}).Binding() {
		t.Fatalf("machine Binding() = %s", got)
	}
	// A public tenant's flows bind to nobody.
	var none *auth.Principal
	if none.Binding() != "" {
		t.Fatal("a nil principal binds to something")
	}
	// Every part counts, and no choice of values makes two principals
	// collide, separators and quotes included.
	principals := []*auth.Principal{
		alice,
		{Issuer: "https://id.example", Subject: "bob", Client: "app"},
		{Issuer: "https://id.example", Subject: "alice", Client: "other-app"},
		{Issuer: "https://id2.example", Subject: "alice", Client: "app"},
		{Issuer: "https://id.example", Subject: "alice\",\"app", Client: ""},
		{Issuer: "https://id.example\",\"alice", Subject: "app", Client: "x"},
		{Issuer: "https://id.example", Subject: "ali", Client: "ceapp"},
		{Issuer: "https://id.example|alice", Subject: "", Client: "app"},
		svc,
	}
	seen := map[string]int{}
	for i, p := range principals {
		b := p.Binding()
		if j, dup := seen[b]; dup {
			t.Errorf("principals %d and %d share the binding %s", j, i, b)
		}
		seen[b] = i
	}
}

func TestHasScopesListsWhatIsMissingInTheOrderAsked(t *testing.T) {
	p := &auth.Principal{Scopes: []string{"mcp", "deploy:write", "mcp"}}
	for _, tc := range []struct {
		want, missing []string
	}{
		{nil, nil},
		{[]string{"mcp"}, nil},
		{[]string{"deploy:write", "mcp"}, nil},
		{[]string{"audit:read"}, []string{"audit:read"}},
		{[]string{"z", "mcp", "a", "deploy:read"}, []string{"z", "a", "deploy:read"}},
		{[]string{"MCP"}, []string{"MCP"}}, // scopes compare exactly
	} {
		if got := p.HasScopes(tc.want); !slices.Equal(got, tc.missing) {
			t.Errorf("HasScopes(%q) = %q, want %q", tc.want, got, tc.missing)
		}
	}
	if got := (&auth.Principal{}).HasScopes([]string{"mcp"}); !slices.Equal(got, []string{"mcp"}) {
		t.Errorf("no scopes at all: missing %q", got)
	}
}

func TestTenantAuthPoliciesNameEveryBadField(t *testing.T) {
	ok := auth.Issuer{Issuer: "https://id.example"}
	for _, tc := range []struct {
		name string
		c    auth.Config
		want []string
		msg  string // in the first error
	}{
		{"nobody trusted", auth.Config{}, nil, ""},
		{"public", auth.Config{Public: true, Scopes: []string{"mcp"}}, nil, ""},
		{"full", auth.Config{AllowMachinePrincipals: true, Scopes: []string{"mcp", "deploy:write"}, Issuers: []auth.Issuer{
			{Issuer: "https://id.example/realms/acme", Audiences: []string{"https://mcp.example/t/acme/mcp"}, ClientClaim: "azp", Algorithms: []string{"RS256", "ES384", "PS512", "EdDSA"}},
			{Issuer: "https://other.example", ClientClaim: "client_id"},
		}}, nil, ""},
		{"local development issuers", auth.Config{Issuers: []auth.Issuer{
			{Issuer: "http://localhost:8081"}, {Issuer: "http://127.0.0.1:9000/realm"}, {Issuer: "http://[::1]:9000"},
		}}, nil, ""},
		{"public with issuers", auth.Config{Public: true, Issuers: []auth.Issuer{ok}}, []string{"settings.auth.public"}, "public tenant takes no tokens"},
		{"plain http elsewhere", auth.Config{Issuers: []auth.Issuer{{Issuer: "http://id.example"}}}, []string{"settings.auth.issuers[0].issuer"}, "must use https"},
		{"http to a name that resolves locally", auth.Config{Issuers: []auth.Issuer{{Issuer: "http://localhost.example.com"}}}, []string{"settings.auth.issuers[0].issuer"}, ""},
		{"another scheme", auth.Config{Issuers: []auth.Issuer{{Issuer: "ftp://id.example"}}}, []string{"settings.auth.issuers[0].issuer"}, ""},
		{"relative", auth.Config{Issuers: []auth.Issuer{{Issuer: "id.example"}}}, []string{"settings.auth.issuers[0].issuer"}, "absolute https URL"},
		{"empty", auth.Config{Issuers: []auth.Issuer{{}}}, []string{"settings.auth.issuers[0].issuer"}, ""},
		{"query", auth.Config{Issuers: []auth.Issuer{{Issuer: "https://id.example?tenant=1"}}}, []string{"settings.auth.issuers[0].issuer"}, "without query or fragment"},
		{"fragment", auth.Config{Issuers: []auth.Issuer{{Issuer: "https://id.example#x"}}}, []string{"settings.auth.issuers[0].issuer"}, ""},
		{"twice", auth.Config{Issuers: []auth.Issuer{ok, {Issuer: "https://other.example"}, ok}}, []string{"settings.auth.issuers[2].issuer"}, "listed twice"},
		{"blank audiences", auth.Config{Issuers: []auth.Issuer{{Issuer: "https://id.example", Audiences: []string{"a", "", " "}}}},
			[]string{"settings.auth.issuers[0].audiences[1]", "settings.auth.issuers[0].audiences[2]"}, "must not be empty"},
		{"client claim", auth.Config{Issuers: []auth.Issuer{{Issuer: "https://id.example", ClientClaim: "sub"}}},
			[]string{"settings.auth.issuers[0].clientClaim"}, `"azp" or "client_id"`},
		{"symmetric and unsigned algorithms", auth.Config{Issuers: []auth.Issuer{{Issuer: "https://id.example", Algorithms: []string{"RS256", "HS256", "none", "rs256", ""}}}},
			[]string{"settings.auth.issuers[0].algorithms[1]", "settings.auth.issuers[0].algorithms[2]", "settings.auth.issuers[0].algorithms[3]", "settings.auth.issuers[0].algorithms[4]"},
			`"HS256" is not an accepted asymmetric signing algorithm`},
		{"scopes", auth.Config{Scopes: []string{"mcp", "", "two words", `q"uote`, `back\slash`}},
			[]string{"settings.auth.scopes[1]", "settings.auth.scopes[2]", "settings.auth.scopes[3]", "settings.auth.scopes[4]"}, "non-empty scope token"},
		{"everything at once", auth.Config{Public: true, Issuers: []auth.Issuer{{Issuer: "http://x.example", ClientClaim: "x"}}, Scopes: []string{""}},
			[]string{"settings.auth.public", "settings.auth.issuers[0].issuer", "settings.auth.issuers[0].clientClaim", "settings.auth.scopes[0]"}, ""},
	} {
		errs := tc.c.Validate("settings.auth")
		var fields []string
		for _, e := range errs {
			fields = append(fields, e.Field)
			if e.Message == "" {
				t.Errorf("%s: %s has no message", tc.name, e.Field)
			}
		}
		if !slices.Equal(fields, tc.want) {
			t.Errorf("%s: fields %q, want %q", tc.name, fields, tc.want)
			continue
		}
		if tc.msg != "" && !strings.Contains(errs[0].Message, tc.msg) {
			t.Errorf("%s: %q does not say %q", tc.name, errs[0].Message, tc.msg)
		}
	}
	// The prefix is the caller's.
	if errs := (auth.Config{Scopes: []string{""}}).Validate(""); len(errs) != 1 || errs[0].Field != ".scopes[0]" {
		t.Errorf("empty prefix: %+v", errs)
	}
}

func TestChallengesNameTheMetadataAndTheScopes(t *testing.T) {
	const meta = "https://mcp.example/.well-known/oauth-protected-resource/t/acme/mcp"
	for _, tc := range []struct {
		scopes []string
		want   string
	}{
		{nil, `Bearer resource_metadata="` + meta + `"`},
		{[]string{"mcp"}, `Bearer resource_metadata="` + meta + `", scope="mcp"`},
		{[]string{"mcp", "deploy:write"}, `Bearer resource_metadata="` + meta + `", scope="mcp deploy:write"`},
	} {
		if got := auth.Challenge(meta, tc.scopes); got != tc.want {
			t.Errorf("Challenge(%q) = %s, want %s", tc.scopes, got, tc.want)
		}
	}
	want := `Bearer error="insufficient_scope", scope="deploy:write audit:read", resource_metadata="` + meta + `"`
	if got := auth.InsufficientScope(meta, []string{"deploy:write", "audit:read"}); got != want {
		t.Errorf("InsufficientScope = %s, want %s", got, want)
	}
}

func TestProtectedResourceMetadataFollowsRFC9728(t *testing.T) {
	c := auth.Config{Issuers: []auth.Issuer{{Issuer: "https://b.example"}, {Issuer: "https://a.example"}}}
	m := auth.Metadata("https://mcp.example/t/acme/mcp", c, []string{"mcp", "deploy:write"})
	if m["resource"] != "https://mcp.example/t/acme/mcp" ||
		!slices.Equal(m["authorization_servers"].([]string), []string{"https://b.example", "https://a.example"}) ||
		!slices.Equal(m["bearer_methods_supported"].([]string), []string{"header"}) ||
		!slices.Equal(m["scopes_supported"].([]string), []string{"mcp", "deploy:write"}) || len(m) != 4 {
		t.Fatalf("metadata %v", m)
	}
	// Without scopes there is no scopes_supported, and without issuers an
	// empty list, never null.
	m = auth.Metadata("https://mcp.example/t/closed/mcp", auth.Config{}, nil)
	if _, ok := m["scopes_supported"]; ok {
		t.Fatalf("scopes_supported without scopes: %v", m)
	}
	if s, ok := m["authorization_servers"].([]string); !ok || s == nil || len(s) != 0 {
		t.Fatalf("authorization_servers without issuers: %#v", m["authorization_servers"])
	}
}
