package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

const keysUsage = `platform keys: manage tenants' request-state key rings through the admin API.

Usage:
  platform keys show    TENANT                    the ring: key ids, ages, phase, next transition
  platform keys rotate  TENANT                    rotate now: stage a new key at once
  platform keys period  TENANT DURATION           set the rotation period (e.g. 720h, 30d)
  platform keys custody TENANT aes|transit        custody of keys staged from now on
  platform keys create  TENANT [aes|transit]      give a tenant without a ring a fresh one
  platform keys revoke  TENANT KEY --confirm KEY  retire KEY at once (flows sealed under it are refused)

Flags (before the verb's arguments):
  --url URL      platform base URL (PLATFORM_ADMIN_URL, default http://127.0.0.1:8080)
  --token TOKEN  admin bearer token (PLATFORM_ADMIN_TOKEN, else PLATFORM_BOOTSTRAP_TOKEN)
  --json         print the answer as JSON
`

// keysCmd runs `platform keys VERB …`.
func keysCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("platform keys", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, keysUsage) }
	base := fs.String("url", envOr("PLATFORM_ADMIN_URL", "http://127.0.0.1:8080"), "platform base URL")
	token := fs.String("token", envOr("PLATFORM_ADMIN_TOKEN", os.Getenv("PLATFORM_BOOTSTRAP_TOKEN")), "admin bearer token")
	asJSON := fs.Bool("json", false, "print JSON")
	confirm := fs.String("confirm", "", "revoke: repeat the key id")
	if len(args) == 0 {
		fmt.Fprint(stderr, keysUsage)
		return 2
	}
	verb := args[0]
	if verb == "help" || verb == "-h" || verb == "--help" {
		fmt.Fprint(stdout, keysUsage)
		return 0
	}
	// Flags may come before or after the positional arguments.
	var pos []string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "platform keys %s: "+format+"\n", append([]any{verb}, a...)...)
		return 2
	}
	if len(pos) == 0 {
		return fail("name the tenant (its slug)")
	}
	c := &adminClient{base: strings.TrimSuffix(*base, "/"), token: *token}
	path := "/api/v1/tenants/" + url.PathEscape(pos[0]) + "/keys"
	var (
		method = http.MethodGet
		body   any
	)
	switch verb {
	case "show":
		if len(pos) != 1 {
			return fail("takes TENANT only")
		}
	case "rotate":
		if len(pos) != 1 {
			return fail("takes TENANT only")
		}
		method, path = http.MethodPost, path+"/rotate"
	case "period":
		if len(pos) != 2 {
			return fail("takes TENANT DURATION")
		}
		d, err := parsePeriod(pos[1])
		if err != nil {
			return fail("%v", err)
		}
		method, body = http.MethodPatch, map[string]any{"rotationPeriodSeconds": int64(d / time.Second)}
	case "custody":
		if len(pos) != 2 {
			return fail("takes TENANT aes|transit")
		}
		method, body = http.MethodPatch, map[string]any{"custody": pos[1]}
	case "create":
		if len(pos) > 2 {
			return fail("takes TENANT [aes|transit]")
		}
		method, body = http.MethodPost, map[string]any{}
		if len(pos) == 2 {
			body = map[string]any{"custody": pos[1]}
		}
	case "revoke":
		if len(pos) != 2 {
			return fail("takes TENANT KEY --confirm KEY")
		}
		if *confirm != pos[1] {
			return fail("revocation is immediate and refuses every in-flight flow sealed under the key: repeat the key id with --confirm %s", pos[1])
		}
		method, path = http.MethodPost, path+"/"+url.PathEscape(pos[1])+"/revoke"
		body = map[string]any{"confirm": *confirm}
	default:
		fmt.Fprintf(stderr, "platform keys: unknown verb %q\n\n%s", verb, keysUsage)
		return 2
	}
	status, raw, err := c.do(method, path, body)
	if err != nil {
		fmt.Fprintf(stderr, "platform keys %s: %v\n", verb, err)
		return 1
	}
	if status >= 300 {
		var p struct {
			Title, Detail string
			Errors        []struct{ Field, Message string }
		}
		if json.Unmarshal(raw, &p) == nil && p.Title != "" {
			fmt.Fprintf(stderr, "platform keys %s: %s (HTTP %d): %s\n", verb, p.Title, status, p.Detail)
			for _, e := range p.Errors {
				fmt.Fprintf(stderr, "  %s: %s\n", e.Field, e.Message)
			}
		} else {
			fmt.Fprintf(stderr, "platform keys %s: HTTP %d: %s\n", verb, status, bytes.TrimSpace(raw))
		}
		return 1
	}
	if *asJSON {
		var out bytes.Buffer
		if json.Indent(&out, raw, "", "  ") != nil {
			out.Write(raw)
		}
		fmt.Fprintln(stdout, out.String())
		return 0
	}
	if err := printRing(stdout, pos[0], raw); err != nil {
		fmt.Fprintf(stderr, "platform keys %s: %v\n", verb, err)
		return 1
	}
	return 0
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// parsePeriod reads a Go duration or a number of days ("30d").
func parsePeriod(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days <= 0 {
			return 0, fmt.Errorf("bad period %q: want a duration like 720h or a number of days like 30d", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second {
		return 0, fmt.Errorf("bad period %q: want a duration like 720h or a number of days like 30d", s)
	}
	return d, nil
}

// adminClient calls the admin API.
type adminClient struct {
	base, token string
}

func (c *adminClient) do(method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, raw, err
}

// ringView is the part of the admin API's key ring view printed.
type ringView struct {
	Provider                 string    `json:"provider"`
	Custody                  string    `json:"custody"`
	Phase                    string    `json:"phase"`
	PhaseSince               time.Time `json:"phaseSince"`
	RotationPeriodSeconds    int64     `json:"rotationPeriodSeconds"`
	PropagationMarginSeconds float64   `json:"propagationMarginSeconds"`
	StateTTLSeconds          int64     `json:"stateTtlSeconds"`
	Next                     struct {
		Transition string    `json:"transition"`
		At         time.Time `json:"at"`
	} `json:"next"`
	Keys []struct {
		ID         string    `json:"id"`
		Kind       string    `json:"kind"`
		State      string    `json:"state"`
		Mints      bool      `json:"mints"`
		Created    time.Time `json:"created"`
		AgeSeconds int64     `json:"ageSeconds"`
	} `json:"keys"`
}

func printRing(w io.Writer, tenant string, raw []byte) error {
	var v ringView
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("unexpected answer: %w", err)
	}
	fmt.Fprintf(w, "tenant %s: %s provider, %s custody, phase %s since %s\n", tenant, v.Provider, v.Custody, v.Phase, v.PhaseSince.UTC().Format(time.RFC3339))
	in := time.Until(v.Next.At).Round(time.Second)
	when := "due now"
	if in > 0 {
		when = "in " + in.String()
	}
	fmt.Fprintf(w, "next: %s at %s (%s); period %s, state TTL %s, propagation margin %s\n\n", v.Next.Transition,
		v.Next.At.UTC().Format(time.RFC3339), when, time.Duration(v.RotationPeriodSeconds)*time.Second,
		time.Duration(v.StateTTLSeconds)*time.Second, time.Duration(v.PropagationMarginSeconds*float64(time.Second)))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tKIND\tSTATE\tMINTS\tAGE\tCREATED")
	for _, k := range v.Keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%s\n", k.ID, k.Kind, k.State, k.Mints,
			(time.Duration(k.AgeSeconds) * time.Second).String(), k.Created.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}
