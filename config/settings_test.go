package config_test

import (
	"bytes"
	"encoding/base64"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/opsmcp/platform/config"
)

// newFlagSet is a flag set that reports errors instead of exiting and
// prints nothing.
func newFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("platform serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// env is a getenv over a map.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// writeYAML writes settings to a YAML file and returns its path.
func writeYAML(t *testing.T, settings any) string {
	t.Helper()
	b, err := yaml.Marshal(settings)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, string(b))
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "platform.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// settings lists every setting Flags registers, but the config file's
// own name.
func settings() []*flag.Flag {
	fs := newFlagSet()
	config.Flags(fs)
	var out []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name != "config" {
			out = append(out, f)
		}
	})
	return out
}

// alternatives returns values of f's type other than its default, in
// the form its String method gives: two of them, or one for a bool.
// Settings of a type it does not know are tried with a pool of values
// (words, numbers, durations, addresses, URLs, keys), so that a new kind
// of setting is covered without teaching the test about it.
func alternatives(t *testing.T, f *flag.Flag) []string {
	t.Helper()
	var raw []string
	var d any
	if g, ok := f.Value.(flag.Getter); ok {
		d = g.Get()
	}
	switch d := d.(type) {
	case bool:
		raw = []string{strconv.FormatBool(!d)}
	case int:
		raw = []string{strconv.Itoa(d + 1024), strconv.Itoa(d + 2048)}
	case int64:
		raw = []string{strconv.FormatInt(d+1024, 10), strconv.FormatInt(d+2048, 10)}
	case uint:
		raw = []string{strconv.FormatUint(uint64(d)+1024, 10), strconv.FormatUint(uint64(d)+2048, 10)}
	case uint64:
		raw = []string{strconv.FormatUint(d+1024, 10), strconv.FormatUint(d+2048, 10)}
	case float64:
		raw = []string{strconv.FormatFloat(d+1.5, 'f', -1, 64), strconv.FormatFloat(d+2.5, 'f', -1, 64)}
	case time.Duration:
		raw = []string{(d + 3*time.Second).String(), (d + 7*time.Second).String()}
	case string:
		raw = []string{d + "alpha", d + "beta"}
	}
	pool := append(raw, "alpha", "beta", "4096", "8192", "3s", "7s", "10.0.0.0/8", "192.168.0.0/16", "127.0.0.1", "::1",
		"https://a.example", "https://b.example", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32)),
		base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32)))
	want := 2
	if _, isBool := d.(bool); isBool {
		want = 1
	}
	// The form the flag itself prints, so results compare as strings.
	var out []string
	for _, v := range pool {
		fs := newFlagSet()
		config.Flags(fs)
		if fs.Set(f.Name, v) != nil {
			continue
		}
		if got := fs.Lookup(f.Name).Value.String(); got != f.DefValue && !slices.Contains(out, got) {
			out = append(out, got)
		}
		if len(out) == want {
			return out
		}
	}
	t.Fatalf("--%s (%T): found %d values other than its default %q in the pool; add one it takes", f.Name, f.Value, len(out), f.DefValue)
	return nil
}

// sources is where one Load finds a setting.
type sources struct {
	flag, env, yaml string // "" when the source does not set it
}

// load runs Load with name set by the given sources and returns the
// value it ends up with. Validation may refuse the combination (a
// setting can depend on others); Load still returns what it read, which
// is what precedence is about. A parse error fails the test.
func load(t *testing.T, name string, s sources) string {
	t.Helper()
	var args []string
	vars := map[string]string{}
	if s.yaml != "" {
		args = append(args, "--config", writeYAML(t, map[string]string{name: s.yaml}))
	}
	if s.flag != "" {
		args = append(args, "--"+name+"="+s.flag)
	}
	if s.env != "" {
		vars[config.EnvName(name)] = s.env
	}
	fs := newFlagSet()
	c, err := config.Load(fs, args, env(vars))
	if c == nil {
		t.Fatalf("--%s from %+v: %v", name, s, err)
	}
	return fs.Lookup(name).Value.String()
}

func TestEverySettingTakesTheFlagThenTheEnvironmentThenTheFileThenTheDefault(t *testing.T) {
	all := settings()
	if len(all) < 20 {
		t.Fatalf("only %d settings registered", len(all))
	}
	for _, f := range all {
		alt := alternatives(t, f)
		d, a := f.DefValue, alt[0]
		type step struct {
			s    sources
			want string
		}
		steps := []step{
			{sources{}, d},
			{sources{yaml: a}, a},
			{sources{env: a}, a},
			{sources{flag: a}, a},
		}
		if len(alt) > 1 { // two values beside the default
			b := alt[1]
			steps = append(steps,
				step{sources{env: a, yaml: b}, a},
				step{sources{flag: a, env: b}, a},
				step{sources{flag: a, yaml: b}, a},
				step{sources{flag: a, env: b, yaml: b}, a},
			)
		} else { // a bool: the default, set explicitly, must win over the other value
			steps = append(steps,
				step{sources{env: d, yaml: a}, d},
				step{sources{flag: d, env: a}, d},
				step{sources{flag: d, yaml: a}, d},
			)
		}
		for _, st := range steps {
			if got := load(t, f.Name, st.s); got != st.want {
				t.Errorf("--%s with flag %q, %s %q, file %q: got %q, want %q",
					f.Name, st.s.flag, config.EnvName(f.Name), st.s.env, st.s.yaml, got, st.want)
			}
		}
	}
}

func TestEverySettingHasItsOwnEnvironmentVariable(t *testing.T) {
	if got := config.EnvName("database-url"); got != "PLATFORM_DATABASE_URL" {
		t.Fatalf("EnvName(database-url) = %q", got)
	}
	shape := regexp.MustCompile(`^PLATFORM_[A-Z0-9]+(_[A-Z0-9]+)*$`)
	owner := map[string]string{}
	fs := newFlagSet()
	config.Flags(fs)
	var usage bytes.Buffer
	config.Usage(&usage, fs, "platform serve")
	fs.VisitAll(func(f *flag.Flag) {
		e := config.EnvName(f.Name)
		if !shape.MatchString(e) {
			t.Errorf("--%s: environment variable %q", f.Name, e)
		}
		if prev, dup := owner[e]; dup {
			t.Errorf("--%s and --%s share %s", prev, f.Name, e)
		}
		owner[e] = f.Name
		if f.Usage == "" {
			t.Errorf("--%s has no description", f.Name)
		}
		// --help names the flag, its variable and its default together.
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		if line := "--" + f.Name + "  (" + e + ", default " + def + ")"; !strings.Contains(usage.String(), line) {
			t.Errorf("usage lacks %q", line)
		}
	})
	if !strings.Contains(usage.String(), "Precedence: flag > environment > --config YAML file > default") {
		t.Error("usage does not state the precedence")
	}
}

func TestTheConfigFileIsNamedByFlagOrEnvironment(t *testing.T) {
	fromFlag := writeYAML(t, map[string]string{"listen": "127.0.0.1:1"})
	fromEnv := writeYAML(t, map[string]string{"listen": "127.0.0.1:2"})
	c, err := config.Load(newFlagSet(), nil, env(map[string]string{"PLATFORM_CONFIG": fromEnv}))
	if err != nil || c.Listen != "127.0.0.1:2" || c.ConfigFile != fromEnv {
		t.Fatalf("PLATFORM_CONFIG: %+v %v", c, err)
	}
	c, err = config.Load(newFlagSet(), []string{"--config", fromFlag}, env(map[string]string{"PLATFORM_CONFIG": fromEnv}))
	if err != nil || c.Listen != "127.0.0.1:1" || c.ConfigFile != fromFlag {
		t.Fatalf("--config over PLATFORM_CONFIG: %+v %v", c, err)
	}
}

func TestTheConfigFileTakesYAMLScalarsAndLists(t *testing.T) {
	k1 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	k2 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32))
	path := writeFile(t, `
listen: 0.0.0.0:9090
migrate: false
max-body-bytes: 2048
catalogue-refresh: 250ms
shutdown-timeout: 1m
secrets-keys: [`+k1+`, `+k2+`]
`)
	c, err := config.Load(newFlagSet(), []string{"--config", path}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "0.0.0.0:9090" || c.Migrate || c.MaxBodyBytes != 2048 || c.CatalogueRefresh != 250*time.Millisecond ||
		c.ShutdownTimeout != time.Minute || c.SecretsKeys != k1+","+k2 {
		t.Fatalf("from YAML: %+v", c)
	}
	keys, err := c.SecretKeys()
	if err != nil || len(keys) != 2 || keys[0][0] != 1 || keys[1][0] != 2 {
		t.Fatalf("SecretKeys() = %v, %v", keys, err)
	}
	// An empty file is no settings at all.
	if c, err := config.Load(newFlagSet(), []string{"--config", writeFile(t, "")}, env(nil)); err != nil || c.Listen != "127.0.0.1:8080" {
		t.Fatalf("empty file: %+v %v", c, err)
	}
}

func TestBadConfigFilesAreRefusedNamingTheProblem(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          []string
	}{
		{"unknown setting", "listen: x\ncolour: red\n", []string{`unknown setting "colour"`}},
		{"misspelt setting", "databse-url: sqlite:x\n", []string{`unknown setting "databse-url"`}},
		{"the file naming another", "config: other.yaml\n", []string{`unknown setting "config"`}},
		{"an environment variable's name", "PLATFORM_LISTEN: x\n", []string{`unknown setting "PLATFORM_LISTEN"`}},
		{"a map", "listen:\n  host: x\n", []string{"listen", "want a scalar or a list"}},
		{"not YAML", "listen: [unclosed\n", []string{"config file"}},
		{"not a mapping", "- listen\n", []string{"config file"}},
		{"a bad duration", "shutdown-timeout: soon\n", []string{"shutdown-timeout", "config file"}},
		{"a bad integer", "max-body-bytes: lots\n", []string{"max-body-bytes", "config file"}},
		{"a bad bool", "migrate: perhaps\n", []string{"migrate", "config file"}},
	} {
		path := writeFile(t, tc.content)
		c, err := config.Load(newFlagSet(), []string{"--config", path}, env(nil))
		if err == nil || c != nil {
			t.Errorf("%s: accepted (%+v)", tc.name, c)
			continue
		}
		for _, w := range append(tc.want, path) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %q", tc.name, err, w)
			}
		}
	}
	if _, err := config.Load(newFlagSet(), []string{"--config", filepath.Join(t.TempDir(), "missing.yaml")}, env(nil)); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

func TestUnparsableValuesAreRefusedNamingTheSetting(t *testing.T) {
	for _, f := range settings() {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			continue // a type of its own: what it refuses is its own
		}
		switch g.Get().(type) {
		case bool, int, int64, uint, uint64, float64, time.Duration:
		default:
			continue // every string parses
		}
		const bad = "not-a-value"
		// The environment names its variable.
		c, err := config.Load(newFlagSet(), nil, env(map[string]string{config.EnvName(f.Name): bad}))
		if err == nil || c != nil || !strings.Contains(err.Error(), config.EnvName(f.Name)) {
			t.Errorf("%s=%s: %+v, %v", config.EnvName(f.Name), bad, c, err)
		}
		// The file names the file and the setting.
		path := writeYAML(t, map[string]string{f.Name: bad})
		c, err = config.Load(newFlagSet(), []string{"--config", path}, env(nil))
		if err == nil || c != nil || !strings.Contains(err.Error(), f.Name) || !strings.Contains(err.Error(), path) {
			t.Errorf("file %s: %s: %+v, %v", path, f.Name, c, err)
		}
		// The command line names the flag.
		c, err = config.Load(newFlagSet(), []string{"--" + f.Name + "=" + bad}, env(nil))
		if err == nil || c != nil || !strings.Contains(err.Error(), f.Name) {
			t.Errorf("--%s=%s: %+v, %v", f.Name, bad, c, err)
		}
	}
}

func TestUnknownFlagsAreRefused(t *testing.T) {
	if c, err := config.Load(newFlagSet(), []string{"--colour", "red"}, env(nil)); err == nil || c != nil || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("--colour: %+v %v", c, err)
	}
}

func TestTheDefaultsAreValid(t *testing.T) {
	c, err := config.Load(newFlagSet(), nil, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8080" || c.DatabaseURL != "sqlite:data/platform.db" || !c.Migrate || c.MaxBodyBytes != 1<<20 ||
		c.MaxMCPBodyBytes != 4<<20 || c.ShutdownTimeout != 30*time.Second || c.CatalogueRefresh != time.Second ||
		c.AllowPrivateWebhooks || c.Keys.Provider != "static" || c.AdminRolesClaim != "roles" {
		t.Fatalf("defaults %+v", c)
	}
	if keys, err := c.SecretKeys(); keys != nil || err != nil {
		t.Fatalf("SecretKeys() without keys = %v, %v", keys, err)
	}
}

func TestInvalidSettingsAreRefusedNamingEach(t *testing.T) {
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	short := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 31))
	for _, tc := range []struct {
		name string
		args []string
		want []string // every one must be named; nil: valid
	}{
		{"body limit", []string{"--max-body-bytes=1023"}, []string{"max-body-bytes must be at least 1024"}},
		{"MCP body limit", []string{"--max-mcp-body-bytes=0"}, []string{"max-mcp-body-bytes must be at least 1024"}},
		{"log format", []string{"--log-format=xml"}, []string{`log-format must be auto, json or text, not "xml"`}},
		{"log level", []string{"--log-level=trace"}, []string{`log-level must be debug, info, warn or error, not "trace"`}},
		{"catalogue refresh", []string{"--catalogue-refresh=5ms"}, []string{"catalogue-refresh must be at least 10ms"}},
		{"memory limit, 48 MiB", []string{"--memory-limit-bytes=50331648"}, nil},
		{"negative memory limit", []string{"--memory-limit-bytes=-1"}, []string{"memory-limit-bytes must not be negative"}},
		{"shutdown timeout", []string{"--shutdown-timeout=0s"}, []string{"shutdown-timeout must be positive"}},
		{"secrets key not base64", []string{"--secrets-keys=" + key + ",%%%"}, []string{"secrets-keys: key 2 must be base64 of at least 32"}},
		{"secrets key too short", []string{"--secrets-keys=" + short}, []string{"secrets-keys: key 1"}},
		{"secrets keys with spaces", []string{"--secrets-keys=" + key + " , " + key}, nil},
		{"keys provider", []string{"--keys-provider=hsm"}, []string{`keys-provider must be static, local or vault, not "hsm"`}},
		{"local without a master key", []string{"--keys-provider=local"}, []string{"keys-provider=local needs keys-master-key"}},
		{"local with a short master key", []string{"--keys-provider=local", "--keys-master-key=" + short}, []string{"keys-master-key"}},
		{"local", []string{"--keys-provider=local", "--keys-master-key=" + key}, nil},
		{"local with transit", []string{"--keys-provider=local", "--keys-master-key=" + key, "--keys-custody=transit"}, []string{"keys-custody must be aes"}},
		{"vault without an address", []string{"--keys-provider=vault"}, []string{"keys-provider=vault needs vault-addr"}},
		{"vault auth", []string{"--keys-provider=vault", "--vault-addr=https://v.example", "--vault-auth=ldap"}, []string{`vault-auth must be token, approle or kubernetes, not "ldap"`}},
		{"vault", []string{"--keys-provider=vault", "--vault-addr=https://v.example", "--vault-auth=kubernetes", "--keys-custody=transit"}, nil},
		{"custody", []string{"--keys-custody=rot13"}, []string{`keys-custody must be aes or transit, not "rot13"`}},
		{"keys refresh", []string{"--keys-refresh=1ms"}, []string{"keys-refresh must be at least 10ms"}},
		{"clock skew", []string{"--keys-clock-skew=-1s"}, []string{"keys-clock-skew must not be negative"}},
		{"staleness", []string{"--keys-refresh=1m", "--keys-staleness=90s"}, []string{"keys-staleness must be at least twice keys-refresh"}},
		{"schedule interval", []string{"--keys-schedule-interval=1ms"}, []string{"keys-schedule-interval must be at least 10ms"}},
		{"rotation period", []string{"--keys-rotation-period=500ms"}, []string{"keys-rotation-period must be at least 1s"}},
		{"vault timeout", []string{"--vault-timeout=0s"}, []string{"vault-timeout must be positive"}},
		{"calls per legacy session", []string{"--legacy-calls-per-session=0"}, []string{"legacy-calls-per-session must be between 1 and 10000"}},
		{"calls per legacy session, too many", []string{"--legacy-calls-per-session=10001"}, []string{"legacy-calls-per-session must be between 1 and 10000"}},
		{"calls per legacy session, one", []string{"--legacy-calls-per-session=1"}, nil},
		{"every problem at once", []string{"--max-body-bytes=1", "--log-level=loud", "--keys-provider=vault", "--vault-timeout=-1s"},
			[]string{"max-body-bytes", "log-level", "keys-provider=vault needs vault-addr", "vault-timeout"}},
	} {
		c, err := config.Load(newFlagSet(), tc.args, env(nil))
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.name, err, w)
			}
		}
		if c == nil {
			t.Errorf("%s: no config returned with the validation error", tc.name)
		}
		// A key is never echoed back.
		if strings.Contains(err.Error(), key) || strings.Contains(err.Error(), short) {
			t.Errorf("%s: the error repeats key material: %v", tc.name, err)
		}
	}
}
