package netlab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// NamespacePrefix begins the name of every namespace this package makes.
const NamespacePrefix = "slowstart-"

// namespacePattern matches exactly the names namespaceName gives, and captures
// the PID and start time of the process that made it (its owner.Tag). A
// mounted namespace is removed only when the marker on its lo names that same
// process; the name alone proves only an empty mount point with nothing
// mounted (a run killed between making it and mounting the namespace).
var namespacePattern = regexp.MustCompile(`^` + regexp.QuoteMeta(NamespacePrefix) + `([0-9]+)-([0-9]+)-[0-9]+-[cs]$`)

// oldNamespacePattern matches the names of earlier versions,
// slowstart-PID-N-c/-s, which carry no start time: such a namespace is removed
// only when mounted with a marker of that PID, never as an empty file.
var oldNamespacePattern = regexp.MustCompile(`^` + regexp.QuoteMeta(NamespacePrefix) + `([0-9]+)-[0-9]+-[cs]$`)

// allowedCongestionControlPath is the host-wide list of algorithms that network
// namespaces other than the host's may select.
const allowedCongestionControlPath = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"

// registry holds the live trials of this process, so that they can all be removed
// on a signal. Signals and PIDs belong to the process, so there is one registry per
// process (processTrials) and every Trial is registered in it.
type registry struct {
	pid   int
	owner Owner // this process, as its markers name it

	mu       sync.Mutex
	live     map[*Trial]struct{}
	sequence uint64 // trials made so far

	prepareOnce sync.Once
	prepareErr  error

	congestionMu sync.Mutex // serializes read-modify-write of the allowed list
}

var processTrials = newRegistry()

func newRegistry() *registry {
	return &registry{pid: thisProcess.PID, owner: thisProcess, live: map[*Trial]struct{}{}}
}

// nextSequence returns the number of the process's next trial.
func (r *registry) nextSequence() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sequence++
	return r.sequence
}

func (r *registry) add(t *Trial) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live[t] = struct{}{}
}

func (r *registry) remove(t *Trial) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.live, t)
}

// liveTrials returns the live trials, and the names of their namespaces.
func (r *registry) liveTrials() ([]*Trial, map[string]*Trial) {
	r.mu.Lock()
	defer r.mu.Unlock()
	trials := make([]*Trial, 0, len(r.live))
	byNamespace := make(map[string]*Trial, 2*len(r.live))
	for t := range r.live {
		trials = append(trials, t)
		byNamespace[t.ClientNamespace] = t
		byNamespace[t.ServerNamespace] = t
	}
	return trials, byNamespace
}

// prepare runs once per process before the first trial: it readies NetnsDir and
// removes what dead processes left there.
func (r *registry) prepare(ctx context.Context) error {
	r.prepareOnce.Do(func() {
		if r.prepareErr = prepareNetnsDir(); r.prepareErr != nil {
			return
		}
		removed, err := r.clean(ctx, false, nil)
		if len(removed) > 0 {
			slog.Info("removed network namespaces left by dead processes", "namespaces", removed)
		}
		if err != nil {
			// Leftovers do not stop new trials: their names cannot collide.
			slog.Warn("could not remove leftover network namespaces; try `slowstart lab clean`", "err", err)
		}
	})
	return r.prepareErr
}

// allowCongestionControl adds algorithm to the host's allowed list unless it is
// there. It writes the list only when the algorithm is missing, and never
// removes an algorithm from it.
func (r *registry) allowCongestionControl(algorithm string) error {
	r.congestionMu.Lock()
	defer r.congestionMu.Unlock()
	data, err := os.ReadFile(allowedCongestionControlPath)
	if err != nil {
		return fmt.Errorf("netlab: read %s: %w", allowedCongestionControlPath, err)
	}
	allowed := strings.Fields(string(data))
	if slices.Contains(allowed, algorithm) {
		return nil
	}
	value := strings.Join(append(allowed, algorithm), " ")
	if err := os.WriteFile(allowedCongestionControlPath, []byte(value), 0); err != nil {
		return fmt.Errorf("netlab: allow congestion control %q for namespaces (sysctl -w net.ipv4.tcp_allowed_congestion_control=%q; is it in net.ipv4.tcp_available_congestion_control or can module tcp_%s load?): %w",
			algorithm, value, algorithm, err)
	}
	slog.Info("allowed a congestion control algorithm in network namespaces",
		"algorithm", algorithm, "sysctl", "net.ipv4.tcp_allowed_congestion_control", "value", value)
	return nil
}

// namespaceName names the side's namespace of a process's trial:
// slowstart-PID-START-N-c (or -s), the process as owner.Tag writes it.
func namespaceName(o Owner, sequence uint64, side Side) string {
	return fmt.Sprintf("%s%s-%d-%s", NamespacePrefix, o.Tag(), sequence, side.suffix())
}

// Trial addresses: each trial takes a block of 4 IPv4 addresses from the
// benchmarking range 198.18.0.0/15 (RFC 2544), client .1 and server .2 of the
// block, and a /64 of the IPv6 benchmarking range 2001:2::/48 (RFC 5180), client
// ::1 and server ::2. The 32768 blocks are reused after as many trials; trials of
// different processes may share addresses, which never meet outside a trial's
// own namespaces.
const trialAddressBlocks = 1 << 15

var (
	benchmarkingIPv4 = netip.MustParseAddr("198.18.0.0").As4()
	benchmarkingIPv6 = netip.MustParseAddr("2001:2::").As16()
)

// trialAddresses returns the addresses of trial number sequence.
func trialAddresses(sequence uint64) (client, server, client6, server6 netip.Addr) {
	block := uint32(sequence % trialAddressBlocks)
	base := (uint32(benchmarkingIPv4[0])<<24 | uint32(benchmarkingIPv4[1])<<16) + block*4
	v4 := func(host uint32) netip.Addr {
		a := base + host
		return netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
	}
	v6 := func(host byte) netip.Addr {
		a := benchmarkingIPv6
		a[6], a[7] = byte(block>>8), byte(block) // the /64 within 2001:2::/48
		a[15] = host
		return netip.AddrFrom16(a)
	}
	return v4(1), v4(2), v6(1), v6(2)
}

// CloseAll closes every live trial of this process, as Trial.Close does, and
// returns their errors joined. Trials created while it runs may survive it.
func CloseAll() error { return processTrials.closeAll() }

func (r *registry) closeAll() error {
	trials, _ := r.liveTrials()
	var errs []error
	for _, t := range trials {
		errs = append(errs, t.Close())
	}
	return errors.Join(errs...)
}

// ExitInterrupted is the exit status of a process a second signal stopped: 130,
// as for Ctrl-C, whatever the signal.
const ExitInterrupted = 130

// HandleSignals removes every live trial when the process gets SIGINT, SIGTERM or
// SIGHUP, then cancels the returned context so the caller can wind down and exit
// as it chooses. A second signal removes the trials made since and exits at once
// with status ExitInterrupted. stop uninstalls the handler (and cancels the context);
// it does not close trials.
func HandleSignals(parent context.Context) (ctx context.Context, stop func()) {
	return processTrials.handleSignals(parent)
}

func (r *registry) handleSignals(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	stopped := make(chan struct{})
	go func() {
		received := 0
		for {
			select {
			case <-stopped:
				return
			case sig := <-signals:
				received++
				trials, _ := r.liveTrials()
				slog.Warn("removing lab trials on signal", "signal", sig.String(), "trials", len(trials))
				if err := r.closeAll(); err != nil {
					slog.Error("could not remove every lab trial; run `slowstart lab clean`", "err", err)
				}
				cancel()
				if received > 1 {
					os.Exit(ExitInterrupted)
				}
			}
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			signal.Stop(signals)
			close(stopped)
			cancel()
		})
	}
	return ctx, stop
}

// Clean removes what processes of this package made and left behind: the
// network namespaces under NetnsDir and the temporary directories (MakeTempDir)
// whose marker names a process that is gone, and those with this process's marker
// that are not its live trials. With all, it also removes those of processes still
// running, closing this process's own trials as Close does. It never touches what
// carries no marker, whatever its name. It returns what it removed (namespace
// names, directory paths).
func Clean(ctx context.Context, all bool) (removed []string, err error) {
	return processTrials.clean(ctx, all, nil)
}

// clean is Clean limited, when only is not nil, to the names only accepts.
func (r *registry) clean(ctx context.Context, all bool, only func(name string) bool) ([]string, error) {
	entries, err := os.ReadDir(NetnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("netlab: list network namespaces in %s: %w", NetnsDir, err)
	}
	_, ownTrials := r.liveTrials()
	var removed []string
	var errs []error
	for _, entry := range entries {
		name := entry.Name()
		tag, tagged := nameTag(namespacePattern, name)
		oldPID, old := nameOwnerPID(oldNamespacePattern, name)
		if (!tagged && !old) || (only != nil && !only(name)) {
			continue
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("netlab: clean network namespaces: %w", err))
			break
		}
		trial, isOwnTrial := ownTrials[name]
		switch {
		case isOwnTrial && all:
			if err := trial.Close(); err != nil {
				errs = append(errs, err)
				continue
			}
		case isOwnTrial:
			continue
		default:
			mountPoint := filepath.Join(NetnsDir, name)
			marker, err := namespaceOwner(mountPoint)
			if err != nil {
				// Not a marked namespace. An empty file with nothing mounted,
				// under a name that carries the PID and start time of a
				// process that is gone: a run killed between making the mount
				// point and mounting the namespace on it, or between
				// unmounting and removing it. Nothing else is ours to judge.
				if tagged && tag != r.owner && !tag.Alive() && emptyMountPoint(mountPoint) && os.Remove(mountPoint) == nil {
					removed = append(removed, name)
				}
				continue
			}
			if (tagged && marker != tag) || (old && marker.PID != oldPID) {
				continue // the marker names another process than the name: no proof
			}
			if !all && marker != r.owner && marker.Alive() {
				continue
			}
			// A dead run's servers and clients may still live inside: they
			// would keep the namespace and its sockets after the unmount.
			killNamespaceProcesses(mountPoint)
			if err := removeNamedNamespace(name); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		removed = append(removed, name)
	}
	if only == nil {
		dirs, err := r.cleanTempDirs(all, os.TempDir())
		removed = append(removed, dirs...)
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// NamespacesOf returns the names of the network namespaces under NetnsDir that the
// lab of process pid made and that are still there: for checks that a run left
// none behind.
func NamespacesOf(pid int) ([]string, error) {
	entries, err := os.ReadDir(NetnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("netlab: list network namespaces in %s: %w", NetnsDir, err)
	}
	prefix := NamespacePrefix + strconv.Itoa(pid) + "-"
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// cleanTempDirs removes the directories in dir that MakeTempDir made (its name
// and its marker, both naming the same process) for an owner that is gone
// (with all, any owner's but this process's). Without a whole marker, a
// directory whose name carries the PID and start time of a process that is
// gone, and that holds nothing or only a marker file cut short, is removed
// too: a run killed between making it and marking it (or emptying and
// removing it). Anything else is left alone, whatever its name.
func (r *registry) cleanTempDirs(all bool, dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil
	}
	var removed []string
	var errs []error
	for _, entry := range entries {
		name := entry.Name()
		tag, tagged := nameTag(tempDirPattern, name)
		oldPID, old := nameOwnerPID(oldTempDirPattern, name)
		if (!tagged && !old) || !entry.IsDir() {
			continue
		}
		path := filepath.Join(dir, name)
		marker, err := tempDirOwner(path)
		if err != nil {
			if !tagged || tag == r.owner || tag.Alive() {
				continue
			}
			if emptyDir(path) && os.Remove(path) == nil {
				removed = append(removed, path)
			} else if onlyPartialMarker(path) && os.Remove(filepath.Join(path, tempDirMarker)) == nil && os.Remove(path) == nil {
				removed = append(removed, path)
			}
			continue
		}
		if (tagged && marker != tag) || (old && marker.PID != oldPID) || marker == r.owner || (!all && marker.Alive()) {
			continue
		}
		if err := RemoveTempDir(path); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, path)
	}
	return removed, errors.Join(errs...)
}

// emptyDir reports whether the directory at path holds nothing.
func emptyDir(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return err != nil && len(names) == 0
}

// onlyPartialMarker reports whether the directory at path holds a marker file
// and nothing else, and the marker is shorter than a whole one: what MakeTempDir
// leaves when it is killed between creating the marker file and writing it.
func onlyPartialMarker(path string) bool {
	entries, err := os.ReadDir(path)
	if err != nil || len(entries) != 1 || entries[0].Name() != tempDirMarker || !entries[0].Type().IsRegular() {
		return false
	}
	info, err := entries[0].Info()
	return err == nil && info.Size() <= int64(len(thisProcess.Marker(markerKind))+1)
}

// emptyMountPoint reports whether path is an empty regular file with nothing
// mounted on it (a mounted namespace reads as a file of the nsfs file system).
func emptyMountPoint(path string) bool {
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil || fs.Type == unix.NSFS_MAGIC {
		return false
	}
	info, err := os.Lstat(path)
	return err == nil && info.Mode().IsRegular() && info.Size() == 0
}
