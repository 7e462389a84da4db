// Package testroot holds the one rule for tests that need root (network
// namespaces, TUN devices, live captures, nf_tables, routes): without root they
// are skipped, except under CI=true, where the suite runs as root and a test
// that cannot run is a failure.
package testroot

import (
	"os"
	"testing"
)

// Require skips t unless the process is root, or fails it under CI=true. needs
// says what the test needs root for, e.g. "network namespaces and routes".
func Require(t testing.TB, needs string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("needs root (%s); CI=true runs the suite as root", needs)
	}
	t.Skipf("needs root: %s", needs)
}
