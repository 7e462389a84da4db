// Package owner names the process that made something outside its own memory (a
// network namespace, a temporary directory, an nftables table), so that a later
// run can prove what it may remove: a marker holds the maker's PID and the time
// that process started, which together never repeat while the machine runs. A
// name proves nothing by itself (a user may pick it) and a PID neither (PIDs are
// reused); the start time tells a reused PID from the owner.
//
// It only writes and reads markers and tells whether their process still runs; it
// removes nothing.
package owner

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Process identifies a running (or once running) process.
type Process struct {
	PID       int
	StartTime uint64 // clock ticks since boot: field 22 of /proc/PID/stat
}

// Marker is the text a maker of kind (e.g. "slowstart-lab") writes:
// "KIND pid=N start=T".
func (p Process) Marker(kind string) string {
	return fmt.Sprintf("%s pid=%d start=%d", kind, p.PID, p.StartTime)
}

// Tag is the process in a form that fits in a name: "PID-STARTTIME". A name
// that carries it identifies its maker from the first system call that made
// it (a mkdir, a mount point's creation), before any marker could be written
// inside: so something killed between making a thing and marking it can be
// told from a look-alike whose name carries only a PID.
func (p Process) Tag() string {
	return fmt.Sprintf("%d-%d", p.PID, p.StartTime)
}

// ParseTag reads the PID and start time of a Tag, from the two decimal
// numbers given as strings (the submatches of a name's pattern).
func ParseTag(pid, startTime string) (Process, bool) {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 || strconv.Itoa(n) != pid {
		return Process{}, false
	}
	st, err := strconv.ParseUint(startTime, 10, 64)
	if err != nil || strconv.FormatUint(st, 10) != startTime {
		return Process{}, false
	}
	return Process{PID: n, StartTime: st}, true
}

// Parse reads a marker that Marker wrote for kind; anything else is refused.
func Parse(kind, marker string) (Process, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(marker), kind+" ")
	if !ok {
		return Process{}, false
	}
	var p Process
	if n, err := fmt.Sscanf(rest, "pid=%d start=%d", &p.PID, &p.StartTime); err != nil || n != 2 || p.PID <= 0 {
		return Process{}, false
	}
	if rest != fmt.Sprintf("pid=%d start=%d", p.PID, p.StartTime) {
		return Process{}, false // trailing or odd text: not what Marker writes
	}
	return p, true
}

// This is the running process.
func This() Process { return this }

var this = func() Process {
	pid := os.Getpid()
	start, _ := StartTime(pid)
	return Process{PID: pid, StartTime: start}
}()

// Alive reports whether the process still runs: one with its PID exists and
// started at its start time.
func (p Process) Alive() bool {
	start, err := StartTime(p.PID)
	return err == nil && start == p.StartTime
}

// StartTime reads field 22 (starttime) of /proc/PID/stat.
func StartTime(pid int) (uint64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("no process %d", pid)
	}
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: the
	// fields after the last ')' start with field 3.
	end := strings.LastIndexByte(string(data), ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	fields := strings.Fields(string(data[end+1:]))
	const startTimeField = 22 - 3
	if len(fields) <= startTimeField {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields)+2)
	}
	return strconv.ParseUint(fields[startTimeField], 10, 64)
}
