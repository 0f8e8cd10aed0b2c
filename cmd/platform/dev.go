package main

import (
	"context"
	"crypto/ecdsa"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/opsmcp/platform/cmd/platform/internal/demo"
	"github.com/opsmcp/platform/cmd/platform/internal/devissuer"
	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/server"
)

const devUsage = `platform dev: the whole platform on this machine, in one process, for
trying it and building against it. It is for development only: its issuer
signs in anyone who reaches it, so it listens on loopback alone.

It starts the platform on SQLite in a data folder (kept across restarts),
per-tenant keys that rotate every few minutes, a development OpenID issuer
(the admin UI's one-click sign-in, and bearer tokens for tenants), and a
demo tenant whose tools a built-in backend answers over the real, signed
webhook contract. It then prints what to paste where.

Usage:
  platform dev [flags]               run it (Ctrl-C stops it)
  platform dev env [--data DIR]      print export lines: the admin API's URL and
                                     token, and a bearer token for the demo tenant
  platform dev token [--data DIR] [--ttl D] [TENANT]
                                     print a bearer token for TENANT's endpoint
                                     (default: the demo tenant)

Flags:
`

// What `platform dev` mounts beside the platform, and the identities it
// uses.
const (
	devIssuerPath = "/dev/oidc" // the development issuer
	devDemoPath   = "/dev/demo" // the demo tenant's backend
	// devAdminClient is the admin UI's client at the issuer.
	devAdminClient = "opsmcp-admin-ui"
	// devCLIClient is the client the printed bearer tokens name.
	devCLIClient = "opsmcp-dev"
	devTokenTTL  = 30 * 24 * time.Hour
	devDataDir   = "data/dev"
)

// devUser is the one account the development issuer signs in.
var devUser = devissuer.User{Subject: "dev", Name: "Dev Admin", Email: "dev@localhost", Roles: []string{"platform-admin"}}

func devCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "env":
			return devEnv(args[1:], stdout, stderr)
		case "token":
			return devToken(args[1:], stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("platform dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, devUsage)
		fs.PrintDefaults()
	}
	o := devOptions{}
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8080", "loopback address to listen on (port 0 picks a free one)")
	fs.StringVar(&o.data, "data", devDataDir, "data folder: database, keys and tokens, kept across restarts")
	fs.BoolVar(&o.reset, "reset", false, "remove the data folder first and start clean")
	fs.DurationVar(&o.rotation, "key-rotation", 10*time.Minute, "rotation period of new key rings, the demo tenant's among them (watch it on the admin UI's Keys page)")
	fs.StringVar(&o.traceURL, "trace-url", "", "trace link template for the admin UI, e.g. http://127.0.0.1:16686/trace/{traceId} (traces go where the OTEL_* variables say)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "platform dev: unexpected argument %q (see platform dev --help)\n", fs.Arg(0))
		return 2
	}
	if err := loopbackOnly(o.listen); err != nil {
		fmt.Fprintln(stderr, "platform dev:", err)
		return 2
	}
	return runDev(o, stdout, stderr)
}

type devOptions struct {
	listen, data, traceURL, logLevel string
	reset                            bool
	rotation                         time.Duration
}

// loopbackOnly refuses addresses other machines could reach: the
// development issuer signs in whoever reaches it.
func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: want host:port, like 127.0.0.1:8080", addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--listen %q: platform dev listens on loopback only (127.0.0.1, ::1 or localhost): its issuer signs in anyone who reaches it", addr)
}

// devPlatform is a running `platform dev`.
type devPlatform struct {
	base     string // http://host:port
	data     *devData
	keys     *devKeys
	issuer   *devissuer.Issuer
	backend  *demo.Backend
	srv      *server.Server
	log      *slog.Logger
	adminTok string
	rotation time.Duration
}

// endpoint is the demo tenant's MCP endpoint.
func (p *devPlatform) endpoint() string { return p.base + "/t/" + demo.Slug + "/mcp" }

func runDev(o devOptions, stdout, stderr io.Writer) int {
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(stderr, "platform dev: "+format+"\n", args...)
		return code
	}
	data, err := openDevData(o.data, o.reset)
	if err != nil {
		return fail(1, "%v", err)
	}
	keys, err := data.keys()
	if err != nil {
		return fail(1, "keys: %v", err)
	}
	ikey, err := devissuer.LoadOrCreateKey(data.path("issuer-key.pem"))
	if err != nil {
		return fail(1, "%v", err)
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fail(1, "%v (is another platform dev running? choose another address with --listen)", err)
	}
	p := &devPlatform{base: "http://" + ln.Addr().String(), data: data, keys: keys, rotation: o.rotation}
	cfg, err := p.config(o)
	if err != nil {
		ln.Close()
		return fail(2, "%v", err)
	}
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel))
	p.log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if p.srv, err = server.New(ctx, cfg, p.log, version); err != nil {
		ln.Close()
		return fail(1, "start: %v", err)
	}
	defer p.srv.Close()
	if err := p.mount(ikey); err != nil {
		ln.Close()
		return fail(1, "%v", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- p.srv.Serve(ctx, ln) }()

	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	err = p.setUp(sctx)
	scancel()
	if err != nil {
		cancel()
		<-served
		return fail(1, "setting up the demo tenant: %v", err)
	}
	token, expires, err := p.issuer.AccessToken(p.endpoint(), devCLIClient, devTokenTTL)
	if err != nil {
		cancel()
		<-served
		return fail(1, "minting the demo token: %v", err)
	}
	if err := data.saveState(devState{URL: p.base, Issuer: p.issuer.URL()}); err != nil {
		p.log.Warn("platform dev env will not know this address", "err", err)
	}
	p.banner(stdout, o, token, expires)
	if err := <-served; err != nil {
		return fail(1, "%v", err)
	}
	return 0
}

// config is `platform serve`'s configuration with the development
// choices made: only flags of `platform dev` count, never PLATFORM_*
// variables, so a shell set up for a real deployment cannot point dev at
// it (the OTEL_* variables still apply).
func (p *devPlatform) config(o devOptions) (*config.Config, error) {
	fs := flag.NewFlagSet("platform dev", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg, err := config.Load(fs, nil, func(string) string { return "" })
	if err != nil {
		return nil, err
	}
	cfg.Listen = strings.TrimPrefix(p.base, "http://")
	cfg.PublicURL = p.base
	cfg.DatabaseURL = p.data.DatabaseURL()
	// The issuer and the demo backend are on loopback, like everything.
	cfg.AllowPrivateTargets = true
	cfg.StateKeys = p.keys.StateKey
	cfg.SecretsKeys = p.keys.SecretsKey
	cfg.AdminSessionKey = p.keys.SessionKey
	cfg.AdminIssuer = p.base + devIssuerPath
	cfg.AdminClientID = devAdminClient
	cfg.Keys.Provider = "local"
	cfg.Keys.MasterKey = p.keys.KeysMaster
	cfg.Keys.Period = o.rotation
	cfg.Flows.TraceURL = o.traceURL
	cfg.Flows.Replica = "dev"
	cfg.LogFormat = "text"
	cfg.LogLevel = o.logLevel
	cfg.ShutdownTimeout = 5 * time.Second
	return cfg, cfg.Validate()
}

// mount adds the development issuer and the demo backend to the
// platform's listener.
func (p *devPlatform) mount(key *ecdsa.PrivateKey) error {
	var err error
	p.issuer, err = devissuer.New(devissuer.Options{
		Issuer: p.base + devIssuerPath, Key: key, User: devUser,
		Clients: []devissuer.Client{{ID: devAdminClient, Name: "the opsmcp admin UI", RedirectURIs: []string{p.base + "/admin/callback"}}},
	})
	if err != nil {
		return err
	}
	if p.backend, err = demo.New(p.base+devDemoPath, p.log); err != nil {
		return err
	}
	p.srv.Mount(devIssuerPath+"/", p.issuer)
	p.srv.Mount(devDemoPath+"/", p.backend)
	return nil
}

// banner says what runs where and what to paste where.
func (p *devPlatform) banner(w io.Writer, o devOptions, token string, expires time.Time) {
	self := selfCommand()
	ep := p.endpoint()
	legacy := fmt.Sprintf(`{"mcpServers":{"opsmcp-demo":{"type":"http","url":%q,"headers":{"Authorization":"Bearer %s"}}}}`, ep, token)
	fmt.Fprintf(w, `
platform dev is running on %[1]s
  data: %[2]s (a restart keeps it; --reset starts clean)

Demo tenant's MCP endpoint
  %[3]s

Admin UI (one-click sign-in through the development issuer)
  %[1]s/admin/login?next=/admin/flows

Bearer token for the demo tenant (valid until %[4]s; platform dev env prints a fresh one)
  export PLATFORM_TOKEN=%[5]s

Run a flow, answering its questions on the terminal (with PLATFORM_TOKEN exported as above)
  %[6]s call %[3]s tool provision --arg service=checkout

2026-07-28 clients (platform call, package client, the Go SDK): the endpoint and the bearer token above; in Go
  client.New(%[7]q, client.Options{TokenSource: client.StaticToken(os.Getenv("PLATFORM_TOKEN"))})

Legacy (2025-11-25) desktop and IDE clients: add to their MCP servers configuration
  %[8]s

Admin API (curl, platform keys, the guides in docs/)
  export PLATFORM_ADMIN_URL=%[1]s PLATFORM_ADMIN_TOKEN=%[9]s

Ctrl-C stops it.
`, p.base, o.data, ep, expires.UTC().Format("2006-01-02 15:04 MST"), token, self, ep, legacy, p.adminTok)
}

// selfCommand is how to run this binary again: `go run ./cmd/platform`
// when it was built by go run (or go test), else the name it was run by.
func selfCommand() string {
	exe, err := os.Executable()
	if err == nil && strings.Contains(filepath.ToSlash(exe), "/go-build") {
		return "go run ./cmd/platform"
	}
	if p, err := exec.LookPath("platform"); err == nil && exe != "" {
		if a, err1 := os.Stat(p); err1 == nil {
			if b, err2 := os.Stat(exe); err2 == nil && os.SameFile(a, b) {
				return "platform"
			}
		}
	}
	return os.Args[0]
}

// devEnv prints export lines for a shell: eval "$(platform dev env)".
func devEnv(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("platform dev env", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data", devDataDir, "the data folder of platform dev")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	d, st, issuer, err := devIssuerFromData(*dir)
	if err != nil {
		fmt.Fprintln(stderr, "platform dev env:", err)
		return 1
	}
	adminTok, err := d.readSecret("admin-token")
	if err != nil || adminTok == "" {
		fmt.Fprintln(stderr, "platform dev env: no admin token yet: start platform dev first")
		return 1
	}
	tok, _, err := issuer.AccessToken(st.URL+"/t/"+demo.Slug+"/mcp", devCLIClient, devTokenTTL)
	if err != nil {
		fmt.Fprintln(stderr, "platform dev env:", err)
		return 1
	}
	fmt.Fprintf(stdout, "export PLATFORM_URL=%s\nexport PLATFORM_ADMIN_URL=%s\nexport PLATFORM_ADMIN_TOKEN=%s\nexport PLATFORM_DEV_ISSUER=%s\nexport PLATFORM_TOKEN=%s\n",
		st.URL, st.URL, adminTok, st.Issuer, tok)
	return 0
}

// devToken prints a bearer token for a tenant's endpoint, from the
// development issuer; the tenant must trust that issuer to accept it.
func devToken(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("platform dev token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data", devDataDir, "the data folder of platform dev")
	ttl := fs.Duration("ttl", devTokenTTL, "how long the token is valid")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	slug := demo.Slug
	if fs.NArg() > 1 {
		fmt.Fprintln(stderr, "platform dev token: want at most one tenant")
		return 2
	}
	if fs.NArg() == 1 {
		slug = fs.Arg(0)
	}
	if *ttl < time.Minute || *ttl > 366*24*time.Hour {
		fmt.Fprintln(stderr, "platform dev token: --ttl must be between 1m and 8784h")
		return 2
	}
	_, st, issuer, err := devIssuerFromData(*dir)
	if err != nil {
		fmt.Fprintln(stderr, "platform dev token:", err)
		return 1
	}
	tok, _, err := issuer.AccessToken(st.URL+"/t/"+slug+"/mcp", devCLIClient, *ttl)
	if err != nil {
		fmt.Fprintln(stderr, "platform dev token:", err)
		return 1
	}
	fmt.Fprintln(stdout, tok)
	return 0
}

// devIssuerFromData rebuilds the development issuer of a data folder, to
// mint tokens while (or before) platform dev runs.
func devIssuerFromData(dir string) (*devData, *devState, *devissuer.Issuer, error) {
	d, err := readDevData(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := d.state()
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := devissuer.LoadOrCreateKey(d.path("issuer-key.pem"))
	if err != nil {
		return nil, nil, nil, err
	}
	is, err := devissuer.New(devissuer.Options{Issuer: st.Issuer, Key: key, User: devUser})
	return d, st, is, err
}

// decodeKey is a base64 key of the data folder.
func decodeKey(s string) []byte {
	b, _ := base64.StdEncoding.DecodeString(s)
	return b
}
