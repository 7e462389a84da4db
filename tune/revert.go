package tune

import (
	"fmt"
	"time"
)

// RevertOptions say which backup to restore.
type RevertOptions struct {
	// BackupPath is the backup file; "" takes the newest in BackupDir made for
	// Netns.
	BackupPath string
	// BackupDir is where to look for the newest backup; "" means DefaultBackupDir.
	BackupDir string
	// Netns is the network namespace; "" means the one the backup names when
	// BackupPath is given, the host's otherwise. A backup made for another
	// namespace is refused.
	Netns string
}

// RevertResult is what Revert did.
type RevertResult struct {
	Schema     string   `json:"schema"`  // Schema
	Command    string   `json:"command"` // "revert"
	BackupPath string   `json:"backup"`
	Netns      string   `json:"netns,omitempty"`
	Changes    []Change `json:"changes"`
	Changed    int      `json:"changed"`
	// Sysctls are the recorded sysctls, with what Revert did to each.
	Sysctls        []SysctlChange `json:"sysctls,omitempty"`
	SysctlsChanged int            `json:"sysctls_changed,omitempty"`
}

// Revert puts every route the backup recorded back in its recorded state:
// each route's recorded netlink message is sent back as a replacement, which
// also adds a route that has been deleted since. The recorded sysctls get
// their recorded values. Routes and sysctls already in the recorded state are
// left alone, so Revert is idempotent.
func Revert(opts RevertOptions) (*RevertResult, error) {
	path := opts.BackupPath
	dir := opts.BackupDir
	if dir == "" {
		dir = DefaultBackupDir
	}
	// Find the backup before the lock, so that a revert with none to use leaves
	// no trace; then again under it, where no apply writes a newer one meanwhile.
	find := func() (string, error) {
		if path != "" {
			return path, nil
		}
		return NewestBackup(dir, opts.Netns)
	}
	chosen, err := find()
	if err != nil {
		return nil, err
	}
	// The namespace to lock: the one asked for, else the one the backup names.
	target := opts.Netns
	if target == "" {
		b, err := LoadBackup(chosen)
		if err != nil {
			return nil, err
		}
		target = b.Netns
	}
	unlock, err := lockNetns(target)
	if err != nil {
		return nil, err
	}
	defer unlock()
	removeOrphanTemporaries(backupDirOf(opts.BackupDir, chosen))
	if path, err = find(); err != nil {
		return nil, err
	}
	backup, err := LoadBackup(path)
	if err != nil {
		return nil, err
	}
	netnsName := backup.Netns
	if opts.Netns == "" && netnsName != target {
		return nil, &BackupError{path, fmt.Errorf("made for network namespace %q, which changed while waiting for %q's lock: run this again", netnsName, target)}
	}
	if opts.Netns != "" && opts.Netns != backup.Netns {
		where := "the host's network namespace"
		if backup.Netns != "" {
			where = "network namespace " + backup.Netns
		}
		return nil, &BackupError{path, fmt.Errorf("made for %s, not for %s", where, opts.Netns)}
	}
	result := &RevertResult{Schema: Schema, Command: "revert", BackupPath: path, Netns: netnsName}
	err = inNetns(netnsName, func() error {
		routes, _, err := dumpRoutes()
		if err != nil {
			return err
		}
		current := map[string]Route{}
		for _, r := range routes {
			if _, ok := current[r.Key()]; !ok && configurable(r) {
				current[r.Key()] = r
			}
		}
		var requests [][]byte
		var recorded []Route
		elapsed := time.Since(backup.Created)
		for _, br := range backup.Routes {
			want := br.Route
			msg, err := replaceMessage(want.Message, nil)
			if err != nil {
				return fmt.Errorf("route %s: %w", want, err)
			}
			change := Change{After: want, Command: want.IPCommand("replace")}
			now, ok := current[want.Key()]
			// An IPv6 route that expires keeps the lifetime it has left: the
			// current route's, or for one deleted since, the recorded one less
			// the time since the backup.
			if ok {
				msg = withLifetimeOf(msg, now.Message, 0)
			} else {
				msg = withLifetimeOf(msg, want.Message, elapsed)
			}
			if ok {
				change.Before = now
				if change.Unchanged, err = sameState(now.Message, want.Message); err != nil {
					return err
				}
			} else {
				change.Missing = true
			}
			result.Changes = append(result.Changes, change)
			if !change.Unchanged {
				requests = append(requests, msg)
				recorded = append(recorded, want)
			}
		}
		for i, msg := range requests {
			if err := routeReplace(msg); err != nil {
				return fmt.Errorf("restore route %s: %w (the backup is unchanged; restore by hand with: %s)",
					recorded[i], err, recorded[i].IPCommand("replace"))
			}
			result.Changed++
		}
		for _, s := range backup.Sysctls {
			now, err := readSysctl(s.Name)
			if err != nil {
				return fmt.Errorf("read %s: %w", s.Name, err)
			}
			change := SysctlChange{Name: s.Name, Before: now, After: s.Value, Command: "sysctl -w " + s.Name + "=" + s.Value, Unchanged: now == s.Value}
			result.Sysctls = append(result.Sysctls, change)
			if change.Unchanged {
				continue
			}
			if err := writeSysctl(s.Name, s.Value); err != nil {
				return err
			}
			result.SysctlsChanged++
		}
		if len(requests) == 0 {
			return nil
		}
		return verify(recorded, requests)
	})
	return result, err
}
