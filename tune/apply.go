package tune

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Bounds Apply keeps to unless forced. Linux's default initial window is 10
// segments (RFC 6928); CDNs run 10 to about 50; beyond 100 a new connection
// bursts more than 140 KB into a path it knows nothing about.
const (
	MinWindow       = 1
	MaxWindow       = 100
	MaxForcedWindow = 65535
)

// Route selectors of ApplyOptions.Route.
const (
	RouteDefault = "default"
	RouteAll     = "all"
)

// ApplyOptions say which routes get which initial windows.
type ApplyOptions struct {
	// Netns is the network namespace's name (or path); "" for the process's own.
	Netns string
	// InitCwnd is the initial congestion window to set, in segments; 0
	// leaves the routes' windows alone, which is allowed only when InitRwnd or
	// Sysctls give something else to set.
	InitCwnd int
	// InitRwnd is the initial receive window to set, in segments; 0 leaves
	// each route's initrwnd as it is.
	InitRwnd int
	// Route selects the routes: RouteDefault (the default routes, both
	// families, every table), RouteAll (every unicast route of every table
	// but local) or a prefix such as 192.0.2.0/24, 2001:db8::/32 or a single
	// address. "" means RouteDefault.
	Route string
	// Sysctls are sysctls to set, name to value: SysctlSlowStartAfterIdle
	// and SysctlNoMetricsSave, "0" or "1". Their prior values go into the
	// backup with the routes.
	Sysctls map[string]string
	// Force allows windows outside MinWindow..MaxWindow (up to MaxForcedWindow).
	Force bool
	// DryRun plans and prints without writing a backup or changing a route.
	DryRun bool
	// BackupPath is the backup file; "" names a new one in BackupDir.
	BackupPath string
	// BackupDir is where a named backup goes; "" means DefaultBackupDir.
	BackupDir string
	// Command is recorded in the backup.
	Command string
	// AfterBackup, when set, runs once the backup is durable and before any
	// route changes; an error stops Apply with nothing changed.
	AfterBackup func(path string) error
}

// UsageError says the options can't be used; nothing was changed.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// NoRouteError says no route matched the selector.
type NoRouteError struct {
	Route string
	Netns string
}

func (e *NoRouteError) Error() string {
	where := ""
	if e.Netns != "" {
		where = " in network namespace " + e.Netns
	}
	return fmt.Sprintf("no unicast route matches %q%s (see `slowstart tune show`)", e.Route, where)
}

// Change is what Apply or Revert does to one route.
type Change struct {
	Before Route `json:"before"`
	After  Route `json:"after"`
	// Command is the ip(8) command doing the same.
	Command string `json:"command"`
	// Unchanged: the route was already in the asked-for state.
	Unchanged bool `json:"unchanged"`
	// Missing: the route was not there (Revert adds it back).
	Missing bool `json:"missing,omitempty"`
	// Skipped says why the route was left alone although it matched.
	Skipped string `json:"skipped,omitempty"`
}

// skipShadowed is why a route that shares its table, destination, TOS and
// priority with an earlier one is left alone.
const skipShadowed = "shares its destination and metric with an earlier route in the same table: " +
	"the kernel can replace only the first of them (give each its own metric to tune it)"

// shadowed marks the routes that are not the first of their Key.
func shadowed(routes []Route) []bool {
	seen := map[string]bool{}
	out := make([]bool, len(routes))
	for i, r := range routes {
		out[i] = seen[r.Key()]
		seen[r.Key()] = true
	}
	return out
}

// SysctlChange is what Apply or Revert does to one sysctl.
type SysctlChange struct {
	Name   string `json:"name"`
	Before string `json:"before"`
	After  string `json:"after"`
	// Command is the sysctl(8) command doing the same.
	Command   string `json:"command"`
	Unchanged bool   `json:"unchanged"`
}

// ApplyResult is what Apply did, or would do under DryRun.
type ApplyResult struct {
	Schema  string   `json:"schema"`  // Schema
	Command string   `json:"command"` // "apply"
	Netns   string   `json:"netns,omitempty"`
	Changes []Change `json:"changes"`
	// Sysctls are the sysctl changes, in name order.
	Sysctls        []SysctlChange `json:"sysctls,omitempty"`
	SysctlsChanged int            `json:"sysctls_changed,omitempty"`
	BackupPath     string         `json:"backup,omitempty"` // "" when nothing was written
	Changed        int            `json:"changed"`          // routes replaced
	DryRun         bool           `json:"dry_run,omitempty"`
}

// CheckWindow checks a window in segments against the bounds Apply keeps.
func CheckWindow(name string, segments int, force bool) error {
	switch {
	case segments < MinWindow:
		return fmt.Errorf("%s %d: a window is at least %d segment (to go back to the kernel default, use revert)", name, segments, MinWindow)
	case segments > MaxForcedWindow:
		return fmt.Errorf("%s %d: more than %d segments is not a window the kernel can use", name, segments, MaxForcedWindow)
	case segments > MaxWindow && !force:
		return fmt.Errorf("%s %d is above %d segments (%d KB sent blind into an unknown path on every new connection); use --force if you mean it",
			name, segments, MaxWindow, segments*1448/1000)
	}
	return nil
}

// selector matches routes.
type selector func(Route) bool

func parseSelector(s string) (selector, error) {
	switch strings.ToLower(s) {
	case "", RouteDefault:
		return func(r Route) bool { return r.IsDefault() }, nil
	case RouteAll:
		return func(Route) bool { return true }, nil
	}
	prefix, err := netip.ParsePrefix(s)
	if err != nil {
		addr, addrErr := netip.ParseAddr(s)
		if addrErr != nil {
			return nil, fmt.Errorf("--route %q: use default, all, a prefix (192.0.2.0/24) or an address", s)
		}
		prefix = netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen())
	}
	prefix = netip.PrefixFrom(prefix.Addr().Unmap(), prefix.Bits()).Masked()
	return func(r Route) bool { return r.dst == prefix }, nil
}

// configurable reports whether Apply may touch the route: a unicast route
// outside the local table.
func configurable(r Route) bool {
	return r.Type == "unicast" && r.Table != TableLocal
}

// Apply sets the initial windows on the selected routes of opts.Netns. It
// writes the backup of every route it will change before changing any, and
// changes nothing if the backup can't be written. Routes already carrying the
// values are left alone; with none to change, no backup is written.
func Apply(opts ApplyOptions) (*ApplyResult, error) {
	if opts.DryRun {
		return apply(opts)
	}
	// First without changing anything or taking the lock: an apply that has
	// nothing to change (or can't) leaves no trace, not even a lock file.
	dry := opts
	dry.DryRun, dry.AfterBackup = true, nil
	res, err := apply(dry)
	if err != nil || !res.wouldChange() {
		if res != nil {
			res.DryRun = false
		}
		return res, err
	}
	// One apply or revert per network namespace at a time, from reading the
	// routes to checking them.
	unlock, err := lockNetns(opts.Netns)
	if err != nil {
		return nil, err
	}
	defer unlock()
	removeOrphanTemporaries(backupDirOf(opts.BackupDir, opts.BackupPath))
	return apply(opts)
}

// wouldChange says whether a dry run found a route or a sysctl to change.
func (r *ApplyResult) wouldChange() bool {
	for _, c := range r.Changes {
		if !c.Unchanged {
			return true
		}
	}
	for _, s := range r.Sysctls {
		if !s.Unchanged {
			return true
		}
	}
	return false
}

// apply is Apply without the lock.
func apply(opts ApplyOptions) (*ApplyResult, error) {
	if opts.InitCwnd != 0 || (opts.InitRwnd == 0 && len(opts.Sysctls) == 0) {
		if err := CheckWindow("initcwnd", opts.InitCwnd, opts.Force); err != nil {
			return nil, &UsageError{err}
		}
	}
	if opts.InitRwnd != 0 {
		if err := CheckWindow("initrwnd", opts.InitRwnd, opts.Force); err != nil {
			return nil, &UsageError{err}
		}
	}
	match, err := parseSelector(opts.Route)
	if err != nil {
		return nil, &UsageError{err}
	}
	sysctlNames, err := checkSysctls(opts.Sysctls)
	if err != nil {
		return nil, &UsageError{err}
	}
	set := map[uint16]uint32{}
	if opts.InitCwnd != 0 {
		set[unix.RTAX_INITCWND] = uint32(opts.InitCwnd)
	}
	if opts.InitRwnd != 0 {
		set[unix.RTAX_INITRWND] = uint32(opts.InitRwnd)
	}
	result := &ApplyResult{Schema: Schema, Command: "apply", Netns: opts.Netns, DryRun: opts.DryRun}
	err = inNetns(opts.Netns, func() error {
		routes, names, err := dumpRoutes()
		if err != nil {
			return err
		}
		var touched []Route
		var requests [][]byte
		isShadowed := shadowed(routes)
		for i, r := range routes {
			if len(set) == 0 || !configurable(r) || !match(r) {
				continue
			}
			if isShadowed[i] {
				result.Changes = append(result.Changes, Change{Before: r, After: r, Unchanged: true, Skipped: skipShadowed})
				continue
			}
			msg, err := replaceMessage(r.Message, set)
			if err != nil {
				return fmt.Errorf("route %s: %w", r, err)
			}
			after, err := parseRoute(msg, names)
			if err != nil {
				return err
			}
			same, err := sameState(r.Message, msg)
			if err != nil {
				return err
			}
			result.Changes = append(result.Changes, Change{Before: r, After: after, Command: after.IPCommand("change"), Unchanged: same})
			if !same {
				touched = append(touched, r)
				requests = append(requests, msg)
			}
		}
		if len(set) != 0 && len(result.Changes) == 0 {
			return &NoRouteError{Route: opts.Route, Netns: opts.Netns}
		}
		var priorSysctls []BackupSysctl
		for _, name := range sysctlNames {
			value, err := readSysctl(name)
			if err != nil {
				return fmt.Errorf("read %s: %w", name, err)
			}
			want := opts.Sysctls[name]
			change := SysctlChange{Name: name, Before: value, After: want, Command: "sysctl -w " + name + "=" + want, Unchanged: value == want}
			result.Sysctls = append(result.Sysctls, change)
			if !change.Unchanged {
				priorSysctls = append(priorSysctls, BackupSysctl{Name: name, Value: value})
			}
		}
		if opts.DryRun || (len(touched) == 0 && len(priorSysctls) == 0) {
			return nil
		}
		path := opts.BackupPath
		backup := newBackup(opts.Netns, opts.Command, opts.InitCwnd, opts.InitRwnd, touched, priorSysctls)
		if path == "" {
			dir := opts.BackupDir
			if dir == "" {
				dir = DefaultBackupDir
			}
			path = defaultBackupPath(dir, backup.Created)
		}
		if err := writeBackup(path, backup); err != nil {
			return fmt.Errorf("nothing changed: %w", err)
		}
		result.BackupPath = path
		if opts.AfterBackup != nil {
			if err := opts.AfterBackup(path); err != nil {
				return fmt.Errorf("nothing changed: %w", err)
			}
		}
		for i, msg := range requests {
			if err := routeReplace(msg); err != nil {
				err = fmt.Errorf("replace route %s: %w", touched[i], err)
				// Put back the ones already changed; the backup has them all.
				for j := i - 1; j >= 0; j-- {
					if undoErr := routeReplace(mustReplaceMessage(touched[j].Message)); undoErr != nil {
						err = errors.Join(err, fmt.Errorf("undo route %s: %w (restore with `slowstart tune revert --backup %s`)", touched[j], undoErr, path))
					}
				}
				return err
			}
			result.Changed++
		}
		for _, prior := range priorSysctls {
			if err := writeSysctl(prior.Name, opts.Sysctls[prior.Name]); err != nil {
				return fmt.Errorf("%w (the routes are changed; restore all with `slowstart tune revert --backup %s`)", err, path)
			}
			result.SysctlsChanged++
		}
		if len(touched) == 0 {
			return nil
		}
		return verify(touched, requests)
	})
	if err != nil {
		return result, err
	}
	return result, nil
}

// mustReplaceMessage is replaceMessage of a message that has been through it
// already (and so parses).
func mustReplaceMessage(msg []byte) []byte {
	b, err := replaceMessage(msg, nil)
	if err != nil {
		return msg
	}
	return b
}

// verify re-reads the routes and checks that each is in the state requested.
func verify(before []Route, requests [][]byte) error {
	routes, _, err := dumpRoutes()
	if err != nil {
		return fmt.Errorf("re-read routes to check them: %w", err)
	}
	byKey := map[string]Route{}
	for _, r := range routes {
		if _, ok := byKey[r.Key()]; !ok {
			byKey[r.Key()] = r
		}
	}
	for i, r := range before {
		now, ok := byKey[r.Key()]
		if !ok {
			return fmt.Errorf("route %s is gone after the change", r)
		}
		same, err := sameState(now.Message, requests[i])
		if err != nil {
			return err
		}
		if !same {
			return fmt.Errorf("route %s reads back as %s, not as requested", r, now)
		}
	}
	return nil
}

// checkSysctls checks the sysctls Apply is asked to set and returns their
// names in order.
func checkSysctls(set map[string]string) ([]string, error) {
	var names []string
	for name, value := range set {
		allowed, ok := settableSysctls[name]
		if !ok {
			return nil, fmt.Errorf("sysctl %s: apply sets only %s and %s", name, SysctlSlowStartAfterIdle, SysctlNoMetricsSave)
		}
		if !slices.Contains(allowed, value) {
			return nil, fmt.Errorf("sysctl %s=%q: the value is one of %s", name, value, strings.Join(allowed, ", "))
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}
