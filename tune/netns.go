package tune

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netns"
)

// NetnsDir is where named network namespaces live (`ip netns add NAME`).
const NetnsDir = "/run/netns"

// NetnsPath is the file of the named network namespace: NAME under NetnsDir, or
// name itself when it is a path.
func NetnsPath(name string) string {
	if strings.Contains(name, "/") {
		return name
	}
	return filepath.Join(NetnsDir, name)
}

// inNetns runs fn on an OS thread inside the named network namespace ("" is
// the calling process's). The caller's thread never changes namespace; the
// thread fn ran on is moved back, or discarded if that fails.
func inNetns(name string, fn func() error) error {
	if name == "" {
		return fn()
	}
	path := NetnsPath(name)
	target, err := netns.GetFromPath(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("network namespace %s: %s does not exist (see `ip netns list`)", name, path)
		}
		return fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer target.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		original, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("read this thread's network namespace: %w", err)
			return
		}
		defer original.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("enter network namespace %s (needs root): %w", path, err)
			return
		}
		var fnErr error
		func() {
			defer func() {
				if p := recover(); p != nil {
					fnErr = fmt.Errorf("panic in network namespace %s: %v", path, p)
				}
			}()
			fnErr = fn()
		}()
		if err := netns.Set(original); err != nil {
			// The thread stays locked: the runtime ends it with this goroutine.
			done <- errors.Join(fnErr, fmt.Errorf("move thread back from %s: %w", path, err))
			return
		}
		runtime.UnlockOSThread()
		done <- fnErr
	}()
	return <-done
}
