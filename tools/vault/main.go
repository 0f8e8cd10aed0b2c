// Command vault is an unmodified HashiCorp Vault server built from the
// published module, for the platform's tests only (a dev server on loopback).
// Never ship it: v1.21.1 is pinned because it is the last release that builds
// against the published sdk and api modules.
package main

import (
	"os"

	"github.com/hashicorp/vault/command"
)

func main() {
	os.Exit(command.Run(os.Args[1:]))
}
