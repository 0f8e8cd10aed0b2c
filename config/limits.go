package config

import (
	"errors"
	"flag"
	"time"
)

// LimitsConfig bounds what one tenant or caller may hold.
type LimitsConfig struct {
	// StreamMaxLifetime ends a long-lived stream after this long (and
	// earlier when its caller's token expires).
	StreamMaxLifetime time.Duration
	// StreamsPerTenant and StreamsPerPrincipal bound the streams open on
	// one replica at once.
	StreamsPerTenant, StreamsPerPrincipal int
	// CatalogueItems bounds a tenant's tools, prompts, resources and
	// templates together.
	CatalogueItems int
}

func limitsFlags(fs *flag.FlagSet, c *LimitsConfig) {
	fs.DurationVar(&c.StreamMaxLifetime, "stream-max-lifetime", time.Hour, "longest a subscription stream stays open (it also ends when the caller's token expires, the tenant is disabled or deleted, or the caller's issuer is removed)")
	fs.IntVar(&c.StreamsPerTenant, "streams-per-tenant", 1000, "most subscription streams one tenant may hold open on a replica")
	fs.IntVar(&c.StreamsPerPrincipal, "streams-per-principal", 20, "most subscription streams one caller may hold open on a replica")
	fs.IntVar(&c.CatalogueItems, "max-catalogue-items", 1000, "most tools, prompts, resources and templates one tenant may register, together")
}

func (c *LimitsConfig) validate() []error {
	var errs []error
	if c.StreamMaxLifetime < time.Second {
		errs = append(errs, errors.New("stream-max-lifetime must be at least 1s"))
	}
	if c.StreamsPerTenant < 1 || c.StreamsPerPrincipal < 1 || c.StreamsPerPrincipal > c.StreamsPerTenant {
		errs = append(errs, errors.New("streams-per-tenant and streams-per-principal must be positive, the principal's no more than the tenant's"))
	}
	if c.CatalogueItems < 1 || c.CatalogueItems > 1_000_000 {
		errs = append(errs, errors.New("max-catalogue-items must be between 1 and 1000000"))
	}
	return errs
}
