package config

import (
	"flag"
	"strings"
	"testing"
)

// load runs Load with env as the environment and no arguments.
func load(env map[string]string, args ...string) (*Config, error) {
	return Load(flag.NewFlagSet("test", flag.ContinueOnError), args, func(k string) string { return env[k] })
}

// TestBootstrapTokenRules: a bootstrap token needs 32 characters, and
// is refused once an admin issuer is configured unless kept explicitly;
// the refusal says what to do and never echoes the token.
func TestBootstrapTokenRules(t *testing.T) {
	long := strings.Repeat("k", 32)
	for _, c := range []struct {
		name string
		env  map[string]string
		want string // "" accepts
	}{
		{"none", map[string]string{}, ""},
		{"31 characters", map[string]string{"PLATFORM_BOOTSTRAP_TOKEN": long[:31]}, "at least 32 characters"},
		{"one character", map[string]string{"PLATFORM_BOOTSTRAP_TOKEN": "Q"}, "at least 32 characters"},
		{"32 characters", map[string]string{"PLATFORM_BOOTSTRAP_TOKEN": long}, ""},
		{"with an issuer", map[string]string{"PLATFORM_BOOTSTRAP_TOKEN": long, "PLATFORM_ADMIN_ISSUER": "https://id.example", "PLATFORM_ADMIN_CLIENT_ID": "c"}, "PLATFORM_KEEP_BOOTSTRAP_TOKEN=true"},
		{"with an issuer, kept", map[string]string{"PLATFORM_BOOTSTRAP_TOKEN": long, "PLATFORM_ADMIN_ISSUER": "https://id.example", "PLATFORM_ADMIN_CLIENT_ID": "c", "PLATFORM_KEEP_BOOTSTRAP_TOKEN": "true"}, ""},
		{"with an issuer, kept, short", map[string]string{"PLATFORM_BOOTSTRAP_TOKEN": "short", "PLATFORM_ADMIN_ISSUER": "https://id.example", "PLATFORM_ADMIN_CLIENT_ID": "c", "PLATFORM_KEEP_BOOTSTRAP_TOKEN": "true"}, "at least 32 characters"},
		{"an issuer alone", map[string]string{"PLATFORM_ADMIN_ISSUER": "https://id.example", "PLATFORM_ADMIN_CLIENT_ID": "c"}, ""},
		{"an issuer without a client", map[string]string{"PLATFORM_ADMIN_ISSUER": "https://id.example"}, "admin-issuer needs admin-client-id"},
	} {
		_, err := load(c.env)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		case err != nil && c.env["PLATFORM_BOOTSTRAP_TOKEN"] != "" && strings.Contains(err.Error(), c.env["PLATFORM_BOOTSTRAP_TOKEN"]):
			t.Errorf("%s: the error echoes the token", c.name)
		}
	}
	// The same rules hold for a configuration built in code.
	c, err := load(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.BootstrapToken = "short"
	if err := c.Validate(); err == nil {
		t.Fatal("Validate accepted a short token")
	}
}
