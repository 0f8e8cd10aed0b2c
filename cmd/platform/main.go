// Command platform runs the hosted multi-tenant MCP platform.
//
//	platform serve            run a replica
//	platform dev              the whole platform, a demo tenant and the admin UI on this machine
//	platform migrate          apply pending database migrations and exit
//	platform reseal-secrets   seal stored webhook secrets under the first of --secrets-keys
//	platform call             call an MCP endpoint from the terminal, answering its questions
//	platform keys             show, rotate or revoke a tenant's keys
//	platform version          print the version
//
// The replica itself is package server; this command parses settings and
// runs it. Beside that, by file: main.go (the commands, serve, migrate,
// reseal-secrets); dev.go, devdata.go and devsetup.go (platform dev: its
// data folder, the development issuer and demo tenant of internal/, the
// admin UI's sign-in, set up through the admin API like any admin
// would); call.go, args.go, form.go, prompt.go and print.go (platform
// call: a terminal MCP client on package client, typing arguments from
// the tool's schema and asking the person the server's questions);
// keys.go (platform keys, over the admin API).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/internal/memlimit"
	"github.com/opsmcp/platform/server"
	"github.com/opsmcp/platform/store"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `platform: a hosted, multi-tenant MCP platform.

Usage:
  platform dev [flags]       the whole platform on this machine: a demo tenant, the admin UI,
                             a development sign-in (see platform dev --help)
  platform serve [flags]     run a replica (see platform serve --help)
  platform migrate [flags]   apply pending database migrations and exit
  platform reseal-secrets [flags]
                             seal stored webhook secrets under the first of --secrets-keys
  platform call URL ...      call an MCP endpoint (see platform call --help)
  platform keys VERB ...     show, rotate or revoke a tenant's keys (see platform keys help)
  platform version           print the version
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "dev":
		return devCmd(args[1:], stdout, stderr)
	case "migrate":
		return migrate(args[1:], stdout, stderr)
	case "reseal-secrets":
		return resealSecrets(args[1:], stdout, stderr)
	case "keys":
		return keysCmd(args[1:], stdout, stderr)
	case "call":
		return call(args[1:], os.Stdin, stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "platform", version)
		return 0
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "platform: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// load parses a command's settings, printing help or errors.
func load(name, synopsis string, args []string, stderr io.Writer) (*config.Config, int, bool) {
	fs := flag.NewFlagSet("platform "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { config.Usage(stderr, fs, synopsis) }
	cfg, err := config.Load(fs, args, os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		return nil, 0, false
	}
	if err != nil {
		fmt.Fprintf(stderr, "platform %s: %v\n", name, err)
		return nil, 2, false
	}
	return cfg, 0, true
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	format := cfg.LogFormat
	if format == "auto" {
		format = "json"
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			format = "text"
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

func serve(args []string, stderr io.Writer) int {
	cfg, code, ok := load("serve", "platform serve: run a replica of the platform.", args, stderr)
	if !ok {
		return code
	}
	log := newLogger(cfg, stderr)
	memlimit.Tune(cfg.MemoryLimitBytes, log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := server.Run(ctx, cfg, log, version); err != nil {
		log.Error("platform stopped", "err", err)
		return 1
	}
	log.Info("stopped cleanly")
	return 0
}

// resealSecrets seals every stored webhook secret under the first of
// --secrets-keys, so that an old key can be dropped once it says none is
// left unreadable. Replicas do the same at every start; this is for after
// a key change, without a restart.
func resealSecrets(args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := load("reseal-secrets", "platform reseal-secrets: seal every stored webhook secret that is in plaintext or under a key other than the first of --secrets-keys, and report the ones no key opens (exit 1 if any).", args, stderr)
	if !ok {
		return code
	}
	keys, err := cfg.SecretKeys()
	if err == nil && keys == nil {
		err = errors.New("--secrets-keys (or PLATFORM_SECRETS_KEYS) is required")
	}
	var box *store.SecretBox
	if err == nil {
		box, err = store.NewSecretBox(keys...)
	}
	if err != nil {
		fmt.Fprintln(stderr, "platform reseal-secrets:", err)
		return 2
	}
	ctx := context.Background()
	st, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		fmt.Fprintln(stderr, "platform reseal-secrets:", err)
		return 1
	}
	defer st.Close()
	st.SealSecretsWith(box)
	r, err := st.Tenants().SealStoredSecrets(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "platform reseal-secrets:", err)
		return 1
	}
	fmt.Fprintf(stdout, "resealed %d webhook secret(s) under the first key\n", r.Resealed)
	if r.Unreadable > 0 {
		fmt.Fprintf(stderr, "platform reseal-secrets: %d sealed webhook secret(s) open under none of the given keys; their tenants fail closed: keep the key that sealed them\n", r.Unreadable)
		return 1
	}
	return 0
}

func migrate(args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := load("migrate", "platform migrate: apply pending database migrations and exit.", args, stderr)
	if !ok {
		return code
	}
	ctx := context.Background()
	st, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		fmt.Fprintln(stderr, "platform migrate:", err)
		return 1
	}
	defer st.Close()
	n, err := st.Migrate(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "platform migrate:", err)
		return 1
	}
	fmt.Fprintf(stdout, "applied %d migration(s) to the %s database\n", n, st.Dialect())
	return 0
}
