package tenant

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/catalogue"
	"github.com/opsmcp/platform/mrtr"
)

// Settings is a tenant's policy, stored with the tenant as JSON and edited
// through the admin API. The zero value is a valid policy: every field
// falls back to a documented default.
type Settings struct {
	// Instructions are returned by server/discover.
	Instructions string `json:"instructions,omitempty"`
	// Icons are the server's, in its serverInfo: https: URLs or bounded
	// data: images, which clients fetch or show (the platform never
	// fetches them).
	Icons []catalogue.Icon `json:"icons,omitempty"`
	// StateTTLSeconds bounds how long a sealed requestState stays valid
	// (per round). Default 600.
	StateTTLSeconds int `json:"stateTtlSeconds,omitempty"`
	// MaxRounds bounds the rounds of one flow, whatever the client does.
	// Default 20.
	MaxRounds int `json:"maxRounds,omitempty"`
	// MaxStateBytes caps the sealed requestState. Default 65536.
	MaxStateBytes int `json:"maxStateBytes,omitempty"`
	// AllowedOrigins lists browser origins allowed to call the endpoint;
	// requests with any other Origin header get 403.
	AllowedOrigins []string `json:"allowedOrigins,omitempty"`
	// ListTTLMs is the ttlMs hint on list results. Default 60000.
	ListTTLMs *int `json:"listTtlMs,omitempty"`
	// TraceContent records tool call arguments and results on spans
	// (gen_ai.tool.call.arguments and .result, 8 KiB each at most). Off by
	// default: they may hold personal data.
	TraceContent bool `json:"traceContent,omitempty"`
	// RecordAnswers keeps the content of the client's answers in the flow
	// record (admins see what users answered). Off by default: answers
	// may hold personal data, and without it the record keeps only the
	// questions asked.
	RecordAnswers bool `json:"recordAnswers,omitempty"`
	// RecordCallSample is the share of successful one-round calls the
	// flow record keeps, from 0 to 1; unset, the operator's default
	// (--flow-record-sample, 1: every call). Failures, refusals and
	// flows of more than one round are always recorded.
	RecordCallSample *float64 `json:"recordCallSample,omitempty"`
	// RecordRetentionHours is how long the flow record keeps the
	// tenant's calls after their last change; 0, the operator's default
	// (--flow-retention, 7 days).
	RecordRetentionHours int `json:"recordRetentionHours,omitempty"`
	// MaxLiveTasks bounds the tenant's live tasks (working or waiting on
	// input), and MaxLiveTasksPerPrincipal those of one caller, so one
	// caller cannot take the tenant's share. Defaults 1000 and 100; a
	// call over either gets 429.
	MaxLiveTasks             int `json:"maxLiveTasks,omitempty"`
	MaxLiveTasksPerPrincipal int `json:"maxLiveTasksPerPrincipal,omitempty"`
	// Auth is who may call: public, or bearer tokens from trusted issuers.
	// The zero value trusts nobody, so a new tenant fails closed until it
	// names an issuer or is made explicitly public.
	Auth auth.Config `json:"auth"`
}

// Defaults for unset settings. The request-state ones are mrtr's, so the
// platform, the sealer and the client driver agree on one value each.
const (
	DefaultStateTTLSeconds = int(mrtr.DefaultTTL / time.Second)
	DefaultMaxRounds       = mrtr.DefaultMaxRounds
	DefaultMaxStateBytes   = mrtr.DefaultMaxStateBytes
	DefaultListTTLMs       = 60_000

	DefaultMaxLiveTasks             = 1000
	DefaultMaxLiveTasksPerPrincipal = 100

	// MaxRecordRetentionHours bounds a tenant's record retention: 400
	// days, a year's audit and then some.
	MaxRecordRetentionHours = 400 * 24
)

// CallSample returns the share of successful one-round calls to record:
// the tenant's, or else fallback (the operator's).
func (s Settings) CallSample(fallback float64) float64 {
	if s.RecordCallSample != nil {
		return *s.RecordCallSample
	}
	return fallback
}

// RecordRetention returns how long the record keeps the tenant's calls:
// the tenant's, or else fallback (the operator's).
func (s Settings) RecordRetention(fallback time.Duration) time.Duration {
	if s.RecordRetentionHours > 0 {
		return time.Duration(s.RecordRetentionHours) * time.Hour
	}
	return fallback
}

// LiveTasks returns the effective bounds on live tasks: the tenant's,
// and one principal's.
func (s Settings) LiveTasks() (perTenant, perPrincipal int) {
	perTenant, perPrincipal = s.MaxLiveTasks, s.MaxLiveTasksPerPrincipal
	if perTenant == 0 {
		perTenant = DefaultMaxLiveTasks
	}
	if perPrincipal == 0 {
		perPrincipal = DefaultMaxLiveTasksPerPrincipal
	}
	return perTenant, perPrincipal
}

// StateTTL returns the effective state lifetime.
func (s Settings) StateTTL() time.Duration {
	if s.StateTTLSeconds <= 0 {
		return time.Duration(DefaultStateTTLSeconds) * time.Second
	}
	return time.Duration(s.StateTTLSeconds) * time.Second
}

// Rounds returns the effective round bound.
func (s Settings) Rounds() int {
	if s.MaxRounds == 0 {
		return DefaultMaxRounds
	}
	return s.MaxRounds
}

// StateBytes returns the effective state size cap.
func (s Settings) StateBytes() int {
	if s.MaxStateBytes == 0 {
		return DefaultMaxStateBytes
	}
	return s.MaxStateBytes
}

// ListTTL returns the effective ttlMs for list results.
func (s Settings) ListTTL() int {
	if s.ListTTLMs == nil {
		return DefaultListTTLMs
	}
	return *s.ListTTLMs
}

// SettingsError names an invalid setting.
type SettingsError struct {
	Field   string
	Message string
}

func (e *SettingsError) Error() string { return e.Field + ": " + e.Message }

// Validate reports every invalid setting.
func (s Settings) Validate() []SettingsError {
	var out []SettingsError
	bad := func(f, format string, args ...any) {
		out = append(out, SettingsError{Field: "settings." + f, Message: fmt.Sprintf(format, args...)})
	}
	if s.StateTTLSeconds < 0 || s.StateTTLSeconds > 86400 {
		bad("stateTtlSeconds", "must be between 1 and 86400 (0 means the default %d)", DefaultStateTTLSeconds)
	}
	if s.MaxRounds < 0 || s.MaxRounds > 1000 {
		bad("maxRounds", "must be between 1 and 1000 (0 means the default %d)", DefaultMaxRounds)
	}
	if s.MaxStateBytes < 0 || (s.MaxStateBytes > 0 && s.MaxStateBytes < 1024) || s.MaxStateBytes > 1<<20 {
		bad("maxStateBytes", "must be between 1024 and 1048576 (0 means the default %d)", DefaultMaxStateBytes)
	}
	if s.ListTTLMs != nil && (*s.ListTTLMs < 0 || *s.ListTTLMs > 86_400_000) {
		bad("listTtlMs", "must be between 0 and 86400000")
	}
	if s.MaxLiveTasks < 0 || s.MaxLiveTasks > 1_000_000 {
		bad("maxLiveTasks", "must be between 1 and 1000000 (0 means the default %d)", DefaultMaxLiveTasks)
	}
	if s.MaxLiveTasksPerPrincipal < 0 || s.MaxLiveTasksPerPrincipal > 1_000_000 {
		bad("maxLiveTasksPerPrincipal", "must be between 1 and 1000000 (0 means the default %d)", DefaultMaxLiveTasksPerPrincipal)
	}
	if p := s.RecordCallSample; p != nil && !(*p >= 0 && *p <= 1) {
		bad("recordCallSample", "must be between 0 and 1")
	}
	if s.RecordRetentionHours < 0 || s.RecordRetentionHours > MaxRecordRetentionHours {
		bad("recordRetentionHours", "must be between 1 and %d (0 means the operator's --flow-retention)", MaxRecordRetentionHours)
	}
	if len(s.Instructions) > 16<<10 {
		bad("instructions", "must be at most 16384 bytes")
	}
	for _, e := range catalogue.ValidateIcons("icons", s.Icons) {
		bad(e.Field, "%s", e.Message)
	}
	for _, e := range s.Auth.Validate("auth") {
		bad(e.Field, "%s", e.Message)
	}
	for i, o := range s.AllowedOrigins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			bad(fmt.Sprintf("allowedOrigins[%d]", i), "must be an origin like https://app.example.com")
		}
	}
	return out
}

var slugPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidSlug reports whether slug is a lowercase DNS label, the form a
// tenant's slug takes in /t/{slug}/mcp.
func ValidSlug(slug string) bool { return slugPattern.MatchString(slug) }

// ParseSettings reads settings as stored with a tenant. Stored settings
// were validated when written; a document that no longer parses (written
// by a newer version, say) is an error the caller reports.
func ParseSettings(raw string) (Settings, error) {
	var s Settings
	if raw == "" {
		return s, nil
	}
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return Settings{}, fmt.Errorf("tenant settings: %w", err)
	}
	return s, nil
}
