package tune

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The marks journal: every apply and revert that changed a route or a sysctl
// appends one line to a file beside the backups (MarksFile), so that whatever
// measures the server's connections in another process (`slowstart field`)
// can show the change on its timeline, even if it was not running when the
// change was made: it reads the journal when it starts and every interval.
// Lines are only ever appended, each with one write(2) to a file opened with
// O_APPEND, and fsync'd.

// MarkSchema names a line of the marks journal.
const MarkSchema = "slowstart.tune-mark/v1"

// MarksFileName is the journal's name in the backup directory.
const MarksFileName = "marks.jsonl"

// DefaultMarksFile is the journal of the default backup directory.
var DefaultMarksFile = filepath.Join(DefaultBackupDir, MarksFileName)

// MarksFile is the journal of a backup directory ("" for DefaultBackupDir).
func MarksFile(backupDir string) string {
	if backupDir == "" {
		backupDir = DefaultBackupDir
	}
	return filepath.Join(backupDir, MarksFileName)
}

// Mark is one change of the server's initial windows or sysctls, as the
// journal records it.
type Mark struct {
	Schema string    `json:"schema"` // MarkSchema
	Time   time.Time `json:"time"`   // when the change was made (UTC)
	// Action is "apply" or "revert".
	Action   string `json:"action"`
	Hostname string `json:"hostname,omitempty"`
	// Netns is the network namespace changed, "" for the host's.
	Netns string `json:"netns"`
	// Routes are the routes changed, each with its initcwnd and initrwnd before
	// and after (0: not set, the kernel's default).
	Routes []MarkRoute `json:"routes"`
	// Sysctls are the sysctls changed.
	Sysctls []SysctlChange `json:"sysctls,omitempty"`
	// Backup is the backup file the apply wrote, or the revert restored.
	Backup string `json:"backup,omitempty"`
}

// MarkRoute is one route a change touched.
type MarkRoute struct {
	Route          string `json:"route"`
	InitCwndBefore int    `json:"initcwnd_before"`
	InitCwndAfter  int    `json:"initcwnd_after"`
	InitRwndBefore int    `json:"initrwnd_before"`
	InitRwndAfter  int    `json:"initrwnd_after"`
}

// Key identifies a mark in a journal (its time and action), for readers that
// import marks more than once.
func (m Mark) Key() string {
	return m.Time.UTC().Format(time.RFC3339Nano) + " " + m.Action + " " + m.Netns
}

// markOf records what changes did, or nil when they changed nothing.
func markOf(action, netnsName, backup string, changes []Change, sysctls []SysctlChange) *Mark {
	host, _ := os.Hostname()
	m := &Mark{Schema: MarkSchema, Time: time.Now().UTC(), Action: action, Hostname: host, Netns: netnsName,
		Routes: []MarkRoute{}, Backup: backup}
	metric := func(r Route, name string) int {
		v, _ := r.Metric(name)
		return int(v)
	}
	for _, c := range changes {
		if c.Unchanged || c.Skipped != "" {
			continue
		}
		m.Routes = append(m.Routes, MarkRoute{Route: c.After.String(),
			InitCwndBefore: metric(c.Before, "initcwnd"), InitCwndAfter: metric(c.After, "initcwnd"),
			InitRwndBefore: metric(c.Before, "initrwnd"), InitRwndAfter: metric(c.After, "initrwnd")})
	}
	for _, s := range sysctls {
		if !s.Unchanged {
			m.Sysctls = append(m.Sysctls, s)
		}
	}
	if len(m.Routes) == 0 && len(m.Sysctls) == 0 {
		return nil
	}
	return m
}

// AppendMark appends m to the journal at path (made, readable by its owner
// only, when missing).
func AppendMark(path string, m Mark) error {
	line, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("the marks journal %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("the marks journal %s: %w", path, err)
	}
	line = append(line, '\n')
	// A line cut by a crash is ended first, so that it does not swallow this one.
	if st, statErr := f.Stat(); statErr == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if r, openErr := os.Open(path); openErr == nil {
			if _, readErr := r.ReadAt(last, st.Size()-1); readErr == nil && last[0] != '\n' {
				line = append([]byte{'\n'}, line...)
			}
			r.Close()
		}
	}
	_, err = f.Write(line)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("the marks journal %s: %w", path, err)
	}
	return nil
}

// ReadMarks reads the journal at path, oldest first. A missing journal holds
// no marks; a line that is not a mark (a write cut by a crash) is skipped.
func ReadMarks(path string) ([]Mark, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the marks journal %s: %w", path, err)
	}
	defer f.Close()
	var marks []Mark
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var m Mark
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.Schema != MarkSchema {
			continue
		}
		marks = append(marks, m)
	}
	if err := sc.Err(); err != nil {
		return marks, fmt.Errorf("the marks journal %s: %w", path, err)
	}
	return marks, nil
}
