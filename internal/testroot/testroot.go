// Package testroot holds the one rule for tests that need root (network
// namespaces, TUN devices, live captures, nf_tables, routes): without root they
// are skipped, except under CI=true, where the suite runs as root and a test
// that cannot run is a failure. It also makes the network namespace such a test
// sets up with ip(8) and removes when it ends (Namespace).
package testroot

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
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

var namespaceSeq atomic.Int64

// Namespace makes a network namespace for t, named prefix-PID-N, sets it up with
// setup, ip(8) commands one a line (`ip -n NAME` and the line's words: "link set
// lo up", "-6 route add default via 2001:db8::1 dev veth0"; blank lines and lines
// that start with # are skipped), and deletes it when t ends. It needs root
// (Require).
func Namespace(t testing.TB, prefix, setup string) string {
	t.Helper()
	Require(t, "network namespaces")
	name := fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), namespaceSeq.Add(1))
	IP(t, "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
			t.Errorf("deleting the namespace %s: %v\n%s", name, err, out)
		}
	})
	for _, line := range strings.Split(setup, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			IP(t, append([]string{"-n", name}, strings.Fields(line)...)...)
		}
	}
	return name
}

// IP runs ip(8) with args, fails t when it fails, and returns what it printed.
func IP(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
