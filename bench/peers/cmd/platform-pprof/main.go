// Command platform-pprof is the platform's serve command with
// net/http/pprof on a second loopback listener, for the peer benchmark's
// -cpuprofile option only: the platform binary serves no pprof. It runs
// the same server package as cmd/platform serve, configured the same way
// (flags, PLATFORM_* variables), and takes the pprof address from
// PEERS_PPROF_LISTEN (a loopback address; the name is the harness's
// pprofEnv).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/internal/memlimit"
	"github.com/opsmcp/platform/server"
)

func main() { os.Exit(run()) }

func run() int {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "serve" {
		args = args[1:]
	}
	fs := flag.NewFlagSet("platform-pprof", flag.ContinueOnError)
	cfg, err := config.Load(fs, args, os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "platform-pprof:", err)
		return 2
	}
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel))
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))

	pprofAddr := os.Getenv("PEERS_PPROF_LISTEN")
	host, _, err := net.SplitHostPort(pprofAddr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		fmt.Fprintln(os.Stderr, "platform-pprof: PEERS_PPROF_LISTEN must be a loopback host:port")
		return 2
	}
	memlimit.Tune(cfg.MemoryLimitBytes, log) // as cmd/platform serve does
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	pln, err := net.Listen("tcp", pprofAddr)
	if err != nil {
		log.Error("pprof listen failed", "err", err)
		return 1
	}
	psrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = psrv.Serve(pln) }()
	defer psrv.Close()

	if err := server.Run(ctx, cfg, log, "pprof-variant"); err != nil {
		log.Error("platform stopped", "err", err)
		return 1
	}
	return 0
}
