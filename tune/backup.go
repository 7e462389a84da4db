package tune

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// BackupSchema names the backup file format.
const BackupSchema = "slowstart.tune-backup/v1"

// DefaultBackupDir is where Apply writes backups unless told otherwise.
const DefaultBackupDir = "/var/lib/slowstart/tune"

// backupPrefix starts the name of every backup file Apply names itself.
const backupPrefix = "tune-backup-"

// Backup is the state of the routes Apply touched, as they were before it did.
type Backup struct {
	Schema   string    `json:"schema"`
	Created  time.Time `json:"created"`
	Hostname string    `json:"hostname,omitempty"`
	// Netns is the network namespace's name, "" for the host's.
	Netns string `json:"netns"`
	// Command is the command line that made the backup.
	Command string `json:"command,omitempty"`
	// InitCwnd and InitRwnd are the values Apply set (0: not set).
	InitCwnd int           `json:"applied_initcwnd"`
	InitRwnd int           `json:"applied_initrwnd,omitempty"`
	Routes   []BackupRoute `json:"routes"`
	// Sysctls are the prior values of the sysctls Apply changed.
	Sysctls []BackupSysctl `json:"sysctls,omitempty"`
}

// BackupSysctl is one sysctl's prior value.
type BackupSysctl struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// BackupRoute is one route's prior state.
type BackupRoute struct {
	// Route is the route for people to read.
	Route Route `json:"route"`
	// Restore is the ip(8) command that restores it by hand.
	Restore string `json:"restore"`
	// Netlink is the route's netlink message as the kernel dumped it (struct
	// rtmsg and its attributes, host byte order), in base64: what Revert
	// writes back.
	Netlink string `json:"netlink"`
}

// BackupError says a backup file can't be found, read or used.
type BackupError struct {
	Path string
	Err  error
}

func (e *BackupError) Error() string {
	if e.Path == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("backup %s: %v", e.Path, e.Err)
}
func (e *BackupError) Unwrap() error { return e.Err }

// newBackup records routes and sysctls.
func newBackup(netnsName, command string, initCwnd, initRwnd int, routes []Route, sysctls []BackupSysctl) *Backup {
	host, _ := os.Hostname()
	b := &Backup{Schema: BackupSchema, Created: time.Now().UTC(), Hostname: host, Netns: netnsName,
		Command: command, InitCwnd: initCwnd, InitRwnd: initRwnd, Routes: []BackupRoute{}, Sysctls: sysctls}
	for _, r := range routes {
		b.Routes = append(b.Routes, BackupRoute{Route: r, Restore: r.IPCommand("replace"),
			Netlink: base64.StdEncoding.EncodeToString(r.Message)})
	}
	return b
}

// defaultBackupPath names a new backup in dir.
func defaultBackupPath(dir string, created time.Time) string {
	return filepath.Join(dir, fmt.Sprintf("%s%s-%d.json", backupPrefix, created.Format("20060102T150405.000000000Z"), os.Getpid()))
}

// writeBackup writes b to path durably and atomically: to a temporary file in
// the same directory, fsync'd, then linked into place (never over an existing
// file) and the directory fsync'd. A crash leaves either no file at path or the
// whole backup.
func writeBackup(path string, b *Backup) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create backup directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, fmt.Sprintf("%s%d-*%s", tmpPrefix, os.Getpid(), tmpSuffix))
	if err != nil {
		return fmt.Errorf("create backup: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write backup: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync backup: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close backup: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("backup %s exists already: give another file", path)
		}
		return fmt.Errorf("put backup in place: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open backup directory to sync it: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync backup directory: %w", err)
	}
	return nil
}

// A backup being written is a temporary file named after its writer's PID until
// it is complete: .tune-backup-PID-N.tmp.
const (
	tmpPrefix = ".tune-backup-"
	tmpSuffix = ".tmp"
)

// LockError says another tune process holds the network namespace's lock.
type LockError struct {
	Netns  string // the namespace's name or path, "" for this process's
	Holder string // the holder's PID, "" when unknown
}

func (e *LockError) Error() string {
	who := "another slowstart tune"
	if e.Holder != "" {
		who += " (PID " + e.Holder + ")"
	}
	where := "this network namespace"
	if e.Netns != "" {
		where = "network namespace " + e.Netns
	}
	return fmt.Sprintf("%s is changing the routes of %s: wait for it to end, then run this again", who, where)
}

// netnsFile is the file of a network namespace: the named one's under
// NetnsDir (or the path given), or this process's own.
func netnsFile(name string) string {
	if name == "" {
		return "/proc/self/ns/net"
	}
	return NetnsPath(name)
}

// lockNetns takes the lock of a network namespace ("" this process's) for the
// whole read-modify-write of an apply or a revert, so that two of them never
// interleave their changes of its routes, whatever backup directories they
// use: an exclusive flock on the namespace's own file, which every path to
// the namespace opens (its name under /run/netns, /proc/PID/ns/net), so there
// is one lock per namespace and no lock file to leave behind. unlock releases
// it; the kernel releases it too when the process dies.
func lockNetns(name string) (unlock func(), err error) {
	path := netnsFile(name)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && name != "" {
		return nil, fmt.Errorf("network namespace %s: %s does not exist (see `ip netns list`)", name, path)
	}
	if err != nil {
		return nil, fmt.Errorf("open the network namespace %s to lock it: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := flockHolder(f)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &LockError{Netns: name, Holder: holder}
		}
		return nil, fmt.Errorf("lock the network namespace %s: %w", path, err)
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// flockHolder finds, in /proc/locks, the PID of a process that holds a flock
// on f's file ("" when none is found).
func flockHolder(f *os.File) string {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return ""
	}
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	data, err := os.ReadFile("/proc/locks")
	if err != nil {
		return ""
	}
	// "1: FLOCK  ADVISORY  WRITE 1234 00:04:4026531840 0 EOF"
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 6 && fields[1] == "FLOCK" && fields[5] == want && fields[0] != "->" {
			return fields[4]
		}
	}
	return ""
}

// backupDirOf is the directory backups go to: the backup directory given,
// else the directory of the backup file given, else DefaultBackupDir.
func backupDirOf(backupDir, backupPath string) string {
	switch {
	case backupDir != "":
		return backupDir
	case backupPath != "":
		return filepath.Dir(backupPath)
	}
	return DefaultBackupDir
}

// removeOrphanTemporaries removes the temporary backups in dir whose writer is
// gone (a writer of another namespace may be writing its own meanwhile: its
// PID runs). A temporary file without a PID in its name (an older slowstart's)
// is removed when it is more than an hour old.
func removeOrphanTemporaries(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, tmpPrefix)
		if !ok || !strings.HasSuffix(name, tmpSuffix) || e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		orphan := false
		if pid, err := strconv.Atoi(pidText); err == nil && pid > 0 {
			orphan = pid != os.Getpid() && !processRunning(pid)
		} else if info, err := e.Info(); err == nil {
			orphan = time.Since(info.ModTime()) > time.Hour
		}
		if orphan && os.Remove(filepath.Join(dir, name)) == nil {
			removed = append(removed, name)
		}
	}
	return removed
}

// processRunning reports whether a process with this PID exists.
func processRunning(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// LoadBackup reads and checks a backup file.
func LoadBackup(path string) (*Backup, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &BackupError{path, err}
	}
	var b Backup
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, &BackupError{path, fmt.Errorf("not a slowstart tune backup: %w", err)}
	}
	if b.Schema != BackupSchema {
		return nil, &BackupError{path, fmt.Errorf("schema %q, want %q", b.Schema, BackupSchema)}
	}
	for i := range b.Routes {
		msg, err := base64.StdEncoding.DecodeString(b.Routes[i].Netlink)
		if err != nil {
			return nil, &BackupError{path, fmt.Errorf("route %d: netlink message: %w", i+1, err)}
		}
		r, err := parseRoute(msg, nil)
		if err != nil {
			return nil, &BackupError{path, fmt.Errorf("route %d: %w", i+1, err)}
		}
		// The message is the truth; the interface names are those recorded
		// (the message holds only their indexes).
		recorded := b.Routes[i].Route
		r.Device = recorded.Device
		for j := range r.Multipath {
			if j < len(recorded.Multipath) {
				r.Multipath[j].Device = recorded.Multipath[j].Device
			}
		}
		b.Routes[i].Route = r
	}
	for _, s := range b.Sysctls {
		// Only the sysctls Apply sets, with their values: a backup never
		// writes anything else.
		if allowed, ok := settableSysctls[s.Name]; !ok || !slices.Contains(allowed, s.Value) {
			return nil, &BackupError{path, fmt.Errorf("sysctl %s=%q is not one a backup restores", s.Name, s.Value)}
		}
	}
	return &b, nil
}

// NewestBackup returns the path of the newest backup in dir made for the
// named network namespace ("" for the host's).
func NewestBackup(dir, netnsName string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", &BackupError{Err: fmt.Errorf("no backups: %s does not exist (nothing was applied, or give --backup FILE)", dir)}
		}
		return "", &BackupError{Path: dir, Err: err}
	}
	type found struct {
		path    string
		created time.Time
	}
	var backups []found
	for _, e := range entries {
		if e.IsDir() || !strings.HasPrefix(e.Name(), backupPrefix) || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := LoadBackup(path)
		if err != nil || b.Netns != netnsName {
			continue
		}
		backups = append(backups, found{path, b.Created})
	}
	if len(backups) == 0 {
		where := "the host's network namespace"
		if netnsName != "" {
			where = "network namespace " + netnsName
		}
		return "", &BackupError{Err: fmt.Errorf("no backup for %s in %s (give --backup FILE)", where, dir)}
	}
	slices.SortFunc(backups, func(a, b found) int {
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return strings.Compare(a.path, b.path)
	})
	return backups[len(backups)-1].path, nil
}
