package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"

	"github.com/vishvananda/netns"
)

// inNamespace runs fn on an OS thread inside the network namespace at path (a file
// such as /run/netns/NAME); with an empty path it just runs fn. Sockets fn makes
// belong to that namespace for their whole life. The caller's thread never changes
// namespace; the thread fn ran on is moved back, or discarded if that fails.
func inNamespace(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	target, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", path, err)
	}
	defer target.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		original, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("reading this thread's network namespace: %w", err)
			return
		}
		defer original.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("entering network namespace %s (needs CAP_SYS_ADMIN): %w", path, err)
			return
		}
		fnErr := fn()
		if err := netns.Set(original); err != nil {
			// Leave the thread locked: the runtime ends it with this goroutine.
			done <- errors.Join(fnErr, fmt.Errorf("moving a thread back from %s: %w", path, err))
			return
		}
		runtime.UnlockOSThread()
		done <- fnErr
	}()
	return <-done
}

// dialIn dials address with dialer from inside the namespace at path.
func dialIn(ctx context.Context, path string, dialer *net.Dialer, network, address string) (net.Conn, error) {
	var conn net.Conn
	err := inNamespace(path, func() error {
		var err error
		conn, err = dialer.DialContext(ctx, network, address)
		return err
	})
	return conn, err
}
