package main

import (
	"os"
	"testing"
)

// envRunPlatform makes the test binary behave as the platform binary, so
// tests run `platform …` as a child process (the same code, without a
// second build).
const envRunPlatform = "OPSMCP_TEST_RUN_PLATFORM"

func TestMain(m *testing.M) {
	if os.Getenv(envRunPlatform) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
