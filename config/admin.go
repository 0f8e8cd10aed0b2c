package config

import "errors"

// errShortBootstrap and errBootstrapWithIssuer explain a refused
// bootstrap token at start.
var (
	errShortBootstrap      = errors.New("bootstrap-token must be at least 32 characters (generate one with: openssl rand -hex 32)")
	errBootstrapWithIssuer = errors.New("bootstrap-token is refused once admin-issuer is configured: admins sign in through the issuer and automation uses API tokens; unset PLATFORM_BOOTSTRAP_TOKEN, or set PLATFORM_KEEP_BOOTSTRAP_TOKEN=true to keep it deliberately")
)

// MinBootstrapTokenLen is the shortest bootstrap token accepted.
const MinBootstrapTokenLen = 32

// checkBootstrap applies the rules of the bootstrap token: long enough
// to be unguessable, and gone once admins sign in through an issuer,
// unless the operator keeps it on purpose.
func (c *Config) checkBootstrap() []error {
	if c.BootstrapToken == "" {
		return nil
	}
	var errs []error
	if len(c.BootstrapToken) < MinBootstrapTokenLen {
		errs = append(errs, errShortBootstrap)
	}
	if c.AdminIssuer != "" && !c.KeepBootstrapToken {
		errs = append(errs, errBootstrapWithIssuer)
	}
	return errs
}
