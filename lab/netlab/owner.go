package netlab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/slowstart/slowstart/internal/owner"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Ownership: what the lab makes outside its own memory (named network
// namespaces, temporary directories) carries a marker naming the process that
// made it (package internal/owner). Clean removes only what carries a marker, and
// only when that process is gone.

// Owner identifies the process that made a namespace or directory.
type Owner = owner.Process

// markerKind names the lab in its markers: "slowstart-lab pid=N start=T".
const markerKind = "slowstart-lab"

// ParseOwner reads a lab marker.
func ParseOwner(marker string) (Owner, bool) { return owner.Parse(markerKind, marker) }

// ThisProcess is the Owner of the running process.
func ThisProcess() Owner { return thisProcess }

var thisProcess = owner.This()

func processStartTime(pid int) (uint64, error) { return owner.StartTime(pid) }

// markNamespace writes this process's marker into the calling thread's network
// namespace, as the alias of its loopback device: the marker lives and dies with
// the namespace, and no other program sets it.
func markNamespace() error { return markNamespaceAs(thisProcess) }

// markNamespaceAs writes owner's marker into the calling thread's namespace.
func markNamespaceAs(o Owner) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	if err := netlink.LinkSetAlias(lo, o.Marker(markerKind)); err != nil {
		return fmt.Errorf("mark the namespace as this process's (alias of lo): %w", err)
	}
	return nil
}

// namespaceOwner reads the marker of the network namespace mounted at
// mountPoint. It fails when the file is not a namespace or carries no marker.
func namespaceOwner(mountPoint string) (Owner, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(mountPoint, &fs); err != nil {
		return Owner{}, err
	}
	if fs.Type != unix.NSFS_MAGIC {
		return Owner{}, errors.New("not a mounted network namespace")
	}
	handle, err := netns.GetFromPath(mountPoint)
	if err != nil {
		return Owner{}, err
	}
	defer handle.Close()
	nl, err := netlink.NewHandleAt(handle)
	if err != nil {
		return Owner{}, err
	}
	defer nl.Close()
	lo, err := nl.LinkByName("lo")
	if err != nil {
		return Owner{}, err
	}
	o, ok := ParseOwner(lo.Attrs().Alias)
	if !ok {
		return Owner{}, errors.New("no slowstart marker on its lo")
	}
	return o, nil
}

// tempDirMarker is the file in each temporary directory of the lab that holds
// its owner's marker.
const tempDirMarker = ".slowstart-owner"

// tempDirPattern matches the names MakeTempDir gives:
// slowstart-PID-START-WHAT-DIGITS, the maker as owner.Tag writes it.
var tempDirPattern = regexp.MustCompile(`^` + regexp.QuoteMeta(NamespacePrefix) + `([0-9]+)-([0-9]+)-([a-z]+)-[0-9]+$`)

// oldTempDirPattern matches the names of earlier versions,
// slowstart-PID-WHAT-DIGITS, with no start time: such a directory is removed
// only with a whole marker of that PID inside.
var oldTempDirPattern = regexp.MustCompile(`^` + regexp.QuoteMeta(NamespacePrefix) + `([0-9]+)-([a-z]+)-[0-9]+$`)

// MakeTempDir makes a temporary directory for this process's lab (a server's
// configuration, a client's CA file), named slowstart-PID-START-WHAT-N in
// os.TempDir() (the process's PID and start time: owner.Tag) and marked as this
// process's inside, so that Clean can remove it when a killed process left it.
func MakeTempDir(what string) (string, error) {
	if what == "" || strings.Trim(what, "abcdefghijklmnopqrstuvwxyz") != "" {
		return "", fmt.Errorf("netlab: temporary directory kind %q: use lower-case letters", what)
	}
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%s-%s-", NamespacePrefix, thisProcess.Tag(), what))
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, tempDirMarker), []byte(thisProcess.Marker(markerKind)+"\n"), 0o600); err != nil {
		os.RemoveAll(dir) // nothing in it yet
		return "", fmt.Errorf("netlab: mark %s as this process's: %w", dir, err)
	}
	return dir, nil
}

// RemoveTempDir removes a directory MakeTempDir made, its marker last: a process
// killed while removing it leaves a directory that still carries its marker, or
// an empty one whose name carries the process's PID and start time, and Clean
// removes either (never an unmarked one with files in it, nor one whose name
// does not identify its maker).
func RemoveTempDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var errs []error
	for _, e := range entries {
		if e.Name() != tempDirMarker {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("netlab: remove %s: %w", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("netlab: remove %s: %w", dir, err)
	}
	return nil
}

// nameTag returns the process (PID and start time) a name made by this
// package carries in its first two submatches.
func nameTag(pattern *regexp.Regexp, name string) (Owner, bool) {
	match := pattern.FindStringSubmatch(name)
	if match == nil {
		return Owner{}, false
	}
	return owner.ParseTag(match[1], match[2])
}

// nameOwnerPID returns the PID a name of an earlier version carries.
func nameOwnerPID(pattern *regexp.Regexp, name string) (int, bool) {
	match := pattern.FindStringSubmatch(name)
	if match == nil {
		return 0, false
	}
	pid, err := strconv.Atoi(match[1])
	return pid, err == nil
}

// tempDirOwner reads the marker of a directory MakeTempDir made.
func tempDirOwner(dir string) (Owner, error) {
	data, err := os.ReadFile(filepath.Join(dir, tempDirMarker))
	if err != nil {
		return Owner{}, err
	}
	o, ok := ParseOwner(string(data))
	if !ok {
		return Owner{}, fmt.Errorf("%s: not a slowstart marker", tempDirMarker)
	}
	return o, nil
}
