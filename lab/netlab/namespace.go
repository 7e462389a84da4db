package netlab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetnsDir is where named network namespaces are bind-mounted, as by `ip netns add`.
const NetnsDir = "/run/netns"

// TUNName is the name of the TUN device in each of a trial's namespaces.
const TUNName = "tun0"

// onNamespaceThread runs fn on a new OS thread that enter has moved into another
// network namespace, then moves that thread back to the namespace it started in.
// The caller's thread never changes namespace. If enter fails, fn does not run.
// If the thread cannot be moved back, it stays locked, so the Go runtime ends it
// with its goroutine instead of reusing it. A panic in fn is re-raised in the caller.
func onNamespaceThread(enter func() error, fn func() error) error {
	type result struct {
		err        error
		panicked   bool
		panicValue any
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		original, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("netlab: read this thread's network namespace: %w", err)}
			return
		}
		var res result
		defer func() {
			if p := recover(); p != nil {
				res.panicked, res.panicValue = true, p
			}
			if err := netns.Set(original); err != nil {
				res.err = errors.Join(res.err, fmt.Errorf("netlab: move thread back to its network namespace (thread discarded): %w", err))
			} else {
				runtime.UnlockOSThread()
			}
			original.Close()
			done <- res
		}()
		if err := enter(); err != nil {
			res.err = err
			return
		}
		res.err = fn()
	}()
	res := <-done
	if res.panicked {
		panic(res.panicValue)
	}
	return res.err
}

// inNamespace runs fn on a thread inside the namespace ns.
func inNamespace(ns netns.NsHandle, fn func() error) error {
	return onNamespaceThread(func() error {
		if err := netns.Set(ns); err != nil {
			return fmt.Errorf("netlab: enter network namespace: %w", err)
		}
		return nil
	}, fn)
}

// inNewNamespace creates a network namespace, runs mark inside it (nil: nothing),
// bind-mounts it at NetnsDir/name and runs setup (nil: nothing) on a thread
// inside it. It returns a handle to the namespace whenever
// the mount was made, even when setup failed: the namespace then exists and must
// be removed. Without a handle, nothing was mounted.
func inNewNamespace(name string, mark, setup func() error) (netns.NsHandle, error) {
	handle := netns.None()
	err := onNamespaceThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("netlab: create network namespace %s (needs root): %w", name, err)
		}
		return nil
	}, func() error {
		opened, err := netns.Get()
		if err != nil {
			return fmt.Errorf("netlab: open network namespace %s: %w", name, err)
		}
		// The marker goes in before the namespace has a name: a process killed
		// at any moment leaves either no namespace or one Clean can prove it
		// made, never a named one without its marker.
		if mark != nil {
			if err := mark(); err != nil {
				opened.Close()
				return err
			}
		}
		if err := bindThreadNamespace(name); err != nil {
			opened.Close()
			return err
		}
		handle = opened
		if setup == nil {
			return nil
		}
		return setup()
	})
	return handle, err
}

// bindThreadNamespace bind-mounts the calling thread's network namespace at
// NetnsDir/name, failing if that name exists.
func bindThreadNamespace(name string) error {
	mountPoint := filepath.Join(NetnsDir, name)
	file, err := os.OpenFile(mountPoint, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("netlab: create mount point for network namespace %s: %w", name, err)
	}
	file.Close()
	if err := unix.Mount("/proc/thread-self/ns/net", mountPoint, "none", unix.MS_BIND, ""); err != nil {
		os.Remove(mountPoint)
		return fmt.Errorf("netlab: bind-mount network namespace at %s: %w", mountPoint, err)
	}
	return nil
}

// removeNamedNamespace unmounts NetnsDir/name and removes the mount point, as
// `ip netns delete` does. The namespace itself goes when nothing else holds it
// (open files, sockets or processes inside it). A name already gone is no error.
func removeNamedNamespace(name string) error {
	mountPoint := filepath.Join(NetnsDir, name)
	err := unix.Unmount(mountPoint, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("netlab: unmount network namespace %s: %w (try `ip netns delete %s`)", mountPoint, err, name)
	}
	if err := os.Remove(mountPoint); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("netlab: remove network namespace mount point %s: %w", mountPoint, err)
	}
	return nil
}

// prepareNetnsDir makes NetnsDir and, as iproute2 does, makes it a shared mount
// so that namespaces mounted or unmounted under it are seen the same way in other
// mount namespaces (those `ip netns exec` makes, for instance).
func prepareNetnsDir() error {
	if err := os.MkdirAll(NetnsDir, 0o755); err != nil {
		return fmt.Errorf("netlab: create %s: %w", NetnsDir, err)
	}
	err := unix.Mount("", NetnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if errors.Is(err, unix.EINVAL) {
		// Not a mount point yet: mount it on itself first.
		if err := unix.Mount(NetnsDir, NetnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("netlab: bind-mount %s on itself: %w", NetnsDir, err)
		}
		err = unix.Mount("", NetnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	}
	if err != nil {
		return fmt.Errorf("netlab: make %s a shared mount: %w", NetnsDir, err)
	}
	return nil
}

// openTUN creates the TUN device name in the calling thread's network namespace:
// layer 3 (IFF_TUN), no packet information header (IFF_NO_PI), no virtio-net
// header and no offloads, so every read is one IP packet of at most MTU bytes. The
// file is non-blocking and registered with the Go runtime's poller, so deadlines
// work and Close interrupts a blocked Read. The device disappears with the file.
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("netlab: open /dev/net/tun (is the tun module loaded?): %w", err)
	}
	request, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlab: TUN device name %q: %w", name, err)
	}
	request.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, request); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlab: create TUN device %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
}

// writeSysctl writes value to /proc/sys/net/key for the calling thread's network
// namespace (sysctls under /proc/sys/net follow the thread, not the process).
func writeSysctl(key, value string) error {
	file := filepath.Join("/proc/sys/net", key)
	if err := os.WriteFile(file, []byte(value), 0); err != nil {
		return fmt.Errorf("netlab: write %q to %s: %w", value, file, err)
	}
	return nil
}

// killNamespaceProcesses sends SIGKILL to every process (other than this one)
// whose network namespace is the one mounted at mountPoint: servers and clients
// a killed run left inside, which would keep the namespace and its sockets alive
// after it is unmounted. It returns how many it signalled.
func killNamespaceProcesses(mountPoint string) int {
	var ns unix.Stat_t
	if err := unix.Stat(mountPoint, &ns); err != nil {
		return 0
	}
	var hostNS unix.Stat_t
	if err := unix.Stat("/proc/1/ns/net", &hostNS); err == nil && hostNS.Ino == ns.Ino && hostNS.Dev == ns.Dev {
		return 0 // not a namespace of its own (a mount point that was never bound)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	killed := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &st) != nil || st.Ino != ns.Ino || st.Dev != ns.Dev {
			continue
		}
		if unix.Kill(pid, unix.SIGKILL) == nil {
			killed++
		}
	}
	return killed
}
