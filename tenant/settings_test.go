package tenant

import (
	"strings"
	"testing"
	"time"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/mrtr"
)

func TestZeroSettingsTakeTheSealersDefaults(t *testing.T) {
	var s Settings
	if s.StateTTL() != mrtr.DefaultTTL {
		t.Errorf("StateTTL() = %v, want mrtr.DefaultTTL %v", s.StateTTL(), mrtr.DefaultTTL)
	}
	if s.Rounds() != mrtr.DefaultMaxRounds {
		t.Errorf("Rounds() = %d, want mrtr.DefaultMaxRounds %d", s.Rounds(), mrtr.DefaultMaxRounds)
	}
	if s.StateBytes() != mrtr.DefaultMaxStateBytes {
		t.Errorf("StateBytes() = %d, want mrtr.DefaultMaxStateBytes %d", s.StateBytes(), mrtr.DefaultMaxStateBytes)
	}
	if s.ListTTL() != DefaultListTTLMs {
		t.Errorf("ListTTL() = %d, want %d", s.ListTTL(), DefaultListTTLMs)
	}
	zero := 0
	if (Settings{ListTTLMs: &zero}).ListTTL() != 0 {
		t.Error("an explicit listTtlMs of 0 is kept, not replaced by the default")
	}
	if got := (Settings{StateTTLSeconds: 30}).StateTTL(); got != 30*time.Second {
		t.Errorf("StateTTL() of 30 s = %v", got)
	}
}

func TestValidateNamesEveryBadField(t *testing.T) {
	neg := -1
	big := 86_400_001
	for _, tc := range []struct {
		name string
		s    Settings
		want []string // fields, in order
	}{
		{"zero is valid", Settings{}, nil},
		{"limits at their bounds", Settings{StateTTLSeconds: 86400, MaxRounds: 1000, MaxStateBytes: 1024}, nil},
		{"ttl negative", Settings{StateTTLSeconds: -1}, []string{"settings.stateTtlSeconds"}},
		{"ttl too long", Settings{StateTTLSeconds: 86401}, []string{"settings.stateTtlSeconds"}},
		{"rounds", Settings{MaxRounds: 1001}, []string{"settings.maxRounds"}},
		{"state bytes too small", Settings{MaxStateBytes: 1023}, []string{"settings.maxStateBytes"}},
		{"state bytes too large", Settings{MaxStateBytes: 1<<20 + 1}, []string{"settings.maxStateBytes"}},
		{"list ttl negative", Settings{ListTTLMs: &neg}, []string{"settings.listTtlMs"}},
		{"list ttl too long", Settings{ListTTLMs: &big}, []string{"settings.listTtlMs"}},
		{"instructions", Settings{Instructions: strings.Repeat("x", 16<<10+1)}, []string{"settings.instructions"}},
		{"origins", Settings{AllowedOrigins: []string{"https://ok.example", "ftp://x", "https://a.example/path", "https://a.example?q", "no-scheme"}},
			[]string{"settings.allowedOrigins[1]", "settings.allowedOrigins[2]", "settings.allowedOrigins[3]", "settings.allowedOrigins[4]"}},
		{"auth errors are prefixed", Settings{Auth: auth.Config{Public: true, Issuers: []auth.Issuer{{Issuer: "https://id.example"}}}}, []string{"settings.auth.public"}},
		{"several at once", Settings{StateTTLSeconds: -5, MaxRounds: -1}, []string{"settings.stateTtlSeconds", "settings.maxRounds"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.s.Validate()
			var got []string
			for _, e := range errs {
				got = append(got, e.Field)
				if e.Message == "" {
					t.Errorf("%s has no message", e.Field)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("fields %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseSettings(t *testing.T) {
	s, err := ParseSettings(`{"stateTtlSeconds":42,"auth":{"public":true}}`)
	if err != nil || s.StateTTLSeconds != 42 || !s.Auth.Public {
		t.Fatalf("ParseSettings = %+v, %v", s, err)
	}
	if s, err := ParseSettings(""); err != nil || s.StateTTL() != mrtr.DefaultTTL {
		t.Fatalf("empty settings: %+v, %v", s, err)
	}
	if _, err := ParseSettings(`{"stateTtlSeconds":"long"}`); err == nil {
		t.Fatal("a settings document of the wrong shape parsed")
	}
}

func TestValidSlug(t *testing.T) {
	for slug, want := range map[string]bool{
		"acme": true, "a": true, "a-b": true, "0": true, strings.Repeat("a", 63): true,
		"": false, "-a": false, "a-": false, "Acme": false, "a_b": false, "a.b": false,
		strings.Repeat("a", 64): false, "a/b": false, "ä": false, "a b": false,
	} {
		if ValidSlug(slug) != want {
			t.Errorf("ValidSlug(%q) = %v, want %v", slug, !want, want)
		}
	}
}
