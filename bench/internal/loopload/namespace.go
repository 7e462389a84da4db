// Package loopload is what the benchmarks of kernel TCP tracing (bench/ktcp,
// bench/field) share: running themselves again in a network namespace of their
// own, so that nothing outside it is traced and nothing is left behind; a server
// on its loopback that answers each connection's one-line request; clients that
// make short connections to it as fast as they can; reading a tracer's ring on
// one thread; and the CPU time and memory a phase used.
//
// It measures nothing of slowstart itself: each benchmark does, and prints its
// figures beside their peer.
package loopload

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/vishvananda/netlink"
)

// Isolate returns in the copy of the command that runs in a network namespace of
// its own. In the command as started it runs that copy (with the same arguments,
// insideEnv set in its environment) and exits with its exit code; the kernel
// removes the namespace when the copy exits. name prefixes its messages. It needs
// root.
func Isolate(name, insideEnv string) {
	if os.Getenv(insideEnv) != "" {
		return
	}
	if os.Geteuid() != 0 {
		fmt.Fprintf(os.Stderr, "%s: needs root (a network namespace and BPF programs)\n", name)
		os.Exit(1)
	}
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Env = append(os.Environ(), insideEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Loopback brings the namespace's loopback device up and returns it.
func Loopback() (netlink.Link, error) {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return nil, err
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return nil, fmt.Errorf("bring lo up: %w", err)
	}
	return lo, nil
}
