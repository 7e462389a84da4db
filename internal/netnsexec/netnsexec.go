//go:build linux

// Package netnsexec runs a function inside another network namespace, on an
// OS thread of its own: sockets the function makes (and netlink handles it
// opens) belong to that namespace for their whole life, and no other goroutine
// ever runs there. It is for code outside the lab (probes, captures, tuning)
// that must act from a namespace given by path; the lab's own trials use
// lab/netlab.
package netnsexec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netns"
)

// Enter moves the calling OS thread into the network namespace whose file is
// path. The caller has locked the goroutine to the thread and must never unlock
// it: the thread is then to end with its goroutine.
func Enter(path string) error {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("network namespace %s does not exist (see ip netns list): %w", path, err)
		}
		return fmt.Errorf("opening network namespace %s: %w", path, err)
	}
	defer ns.Close()
	if err := netns.Set(ns); err != nil {
		return fmt.Errorf("entering network namespace %s (needs CAP_SYS_ADMIN): %w", path, err)
	}
	return nil
}

// Run runs fn inside the network namespace whose file is path (as under
// /run/netns), or in the current one when path is empty. The thread fn ran on
// is never unlocked: it ends with its goroutine, so it cannot carry the
// namespace to other code. A panic in fn is returned as an error.
func Run(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := Enter(path); err != nil {
			done <- err
			return
		}
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("panic in network namespace %s: %v", path, p)
			}
		}()
		done <- fn()
	}()
	return <-done
}

// Named returns NAME for a named namespace's file, /run/netns/NAME (made by
// `ip netns add`), and false for another namespace file.
func Named(path string) (string, bool) {
	dir, name := filepath.Split(filepath.Clean(path))
	if filepath.Clean(dir) != "/run/netns" || name == "" {
		return "", false
	}
	return name, true
}
