package config

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"
)

// FlowsConfig is the flow record and the admin UI's view of it.
type FlowsConfig struct {
	// Record turns the flow record on (the default); off, the platform
	// serves as before but keeps no record, so the admin UI's flow pages
	// stay empty and flows cannot be cancelled by id.
	Record bool
	// Retention is how long a flow that no longer changes is kept.
	Retention time.Duration
	// Replica names this replica in the record (default: the host name).
	Replica string
	// TraceURL links a trace id to a tracing backend: a URL with
	// {traceId} (and optionally {spanId}) in it.
	TraceURL string
	// CallSample is the share of successful one-round calls recorded, for
	// tenants that set none of their own.
	CallSample float64
	// RefusalsPerMinute bounds the refused requests recorded per tenant
	// a minute.
	RefusalsPerMinute int
}

func flowsFlags(fs *flag.FlagSet, c *FlowsConfig) {
	host, _ := os.Hostname()
	fs.BoolVar(&c.Record, "flow-record", true, "record every call and every round of every flow (the admin UI's flow pages, cancellation)")
	fs.DurationVar(&c.Retention, "flow-retention", 7*24*time.Hour, "how long the flow record keeps a call that no longer changes (a tenant may set its own)")
	fs.Float64Var(&c.CallSample, "flow-record-sample", 1, "the share of successful one-round calls recorded, 0 to 1 (a tenant may set its own; failures are always recorded)")
	fs.IntVar(&c.RefusalsPerMinute, "flow-record-refusals", 120, "refused requests recorded per tenant per minute on each replica, bad tokens and bad states each; the rest are counted")
	fs.StringVar(&c.Replica, "replica-name", host, "this replica's name in the flow record (default: the host name)")
	fs.StringVar(&c.TraceURL, "trace-url", "", "trace link template for the admin UI, e.g. https://tempo.example/trace/{traceId} (empty: no links)")
}

func (c *FlowsConfig) validate() []error {
	var errs []error
	if c.Retention < time.Minute {
		errs = append(errs, errors.New("flow-retention must be at least 1m"))
	}
	if !(c.CallSample >= 0 && c.CallSample <= 1) {
		errs = append(errs, fmt.Errorf("flow-record-sample must be between 0 and 1, not %v", c.CallSample))
	}
	if c.RefusalsPerMinute < 0 || c.RefusalsPerMinute > 100_000 {
		errs = append(errs, fmt.Errorf("flow-record-refusals must be between 0 and 100000, not %d", c.RefusalsPerMinute))
	}
	if len(c.Replica) > 200 {
		errs = append(errs, errors.New("replica-name must be at most 200 characters"))
	}
	if c.TraceURL != "" {
		u, err := url.Parse(strings.NewReplacer("{traceId}", "x", "{spanId}", "y").Replace(c.TraceURL))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !strings.Contains(c.TraceURL, "{traceId}") {
			errs = append(errs, fmt.Errorf("trace-url must be an http(s) URL containing {traceId}, not %q", c.TraceURL))
		}
	}
	return errs
}
