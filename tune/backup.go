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
	lockName  = ".lock"
)

// LockError says another tune process holds the backup directory's lock.
type LockError struct {
	Dir    string
	Holder string // the holder's PID as it wrote it, "" when unknown
}

func (e *LockError) Error() string {
	who := "another slowstart tune"
	if e.Holder != "" {
		who += " (PID " + e.Holder + ")"
	}
	return fmt.Sprintf("%s is changing routes with the backups in %s: wait for it to end, then run this again", who, e.Dir)
}

// lockDir is the directory whose lock an apply or revert takes: the backup
// directory given, else the directory of the backup file given, else
// DefaultBackupDir.
func lockDir(backupDir, backupPath string) string {
	switch {
	case backupDir != "":
		return backupDir
	case backupPath != "":
		return filepath.Dir(backupPath)
	}
	return DefaultBackupDir
}

// lockBackupDir takes the lock of the backup directory (made when missing) for
// the whole read-modify-write of an apply or a revert, so that two of them never
// interleave their changes, and removes the temporary files of writers that died.
// unlock releases it; the kernel releases it too when the process dies.
func lockBackupDir(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create backup directory: %w", err)
	}
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &LockError{Dir: dir, Holder: strings.TrimSpace(string(holder))}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	removeOrphanTemporaries(dir)
	return func() {
		_ = f.Truncate(0)
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// removeOrphanTemporaries removes the temporary backups in dir whose writer is
// gone (it held the lock, so none is writing now but this process). A temporary
// file without a PID in its name (an older slowstart's) is removed when it is
// more than an hour old.
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
