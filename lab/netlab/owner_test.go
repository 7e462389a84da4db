package netlab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestOwnerMarker(t *testing.T) {
	o := Owner{PID: 4242, StartTime: 987654}
	back, ok := ParseOwner(o.Marker(markerKind))
	if !ok || back != o {
		t.Fatalf("ParseOwner(%q) = %+v, %v", o.Marker(markerKind), back, ok)
	}
	for _, bad := range []string{"", "slowstart-lab", "slowstart-lab pid=0 start=1", "slowstart-lab pid=12 start=1 extra",
		"slowstart-lab pid=x start=1", "other pid=12 start=1", "slowstart-lab pid=-3 start=1"} {
		if _, ok := ParseOwner(bad); ok {
			t.Errorf("ParseOwner(%q) accepted", bad)
		}
	}
	if !ThisProcess().Alive() {
		t.Errorf("this process %+v is not alive", ThisProcess())
	}
	if (Owner{PID: os.Getpid(), StartTime: ThisProcess().StartTime + 1}).Alive() {
		t.Errorf("an owner with this PID and another start time (a reused PID) is alive")
	}
	if (Owner{PID: deadPID(t), StartTime: 1}).Alive() {
		t.Errorf("a dead process is alive")
	}
}

// deadPID returns the PID of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// running reports whether the process runs (exists and is not a zombie).
func running(t *testing.T, pid int) bool {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// sleeper starts a process that lives until the test ends, in the namespace
// mounted at mountPoint when it is not empty.
func sleeper(t *testing.T, name string) *exec.Cmd {
	t.Helper()
	var cmd *exec.Cmd
	if name == "" {
		cmd = exec.Command("sleep", "300")
	} else {
		cmd = exec.Command("ip", "netns", "exec", name, "sleep", "300")
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	if name != "" {
		// ip netns exec enters the namespace, then runs sleep: wait until the
		// process is inside, or a Clean right after may not find it there.
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(NetnsDir, name), &st); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("net:[%d]", st.Ino)
		deadline := time.Now().Add(ioTimeout)
		for {
			link, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid))
			if link == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the process never entered namespace %s (%s, want %s)", name, link, want)
			}
			time.Sleep(time.Millisecond) // polling the condition above, not waiting in its place
		}
	}
	return cmd
}

// TestCleanNeedsProof: Clean removes a namespace, and kills what runs in it, only
// when it carries the marker of its owner, named in its name, and that owner is
// gone. A namespace with the lab's name pattern and no marker is left alone, even
// with all.
func TestCleanNeedsProof(t *testing.T) {
	requireRoot(t)
	dead := deadPID(t)
	other := deadPID(t)
	makeNamespace := func(name string, marker *Owner) {
		t.Helper()
		handle, err := inNewNamespace(name, func() error {
			if marker == nil {
				return nil
			}
			return markNamespaceAs(*marker)
		}, nil)
		handle.Close()
		t.Cleanup(func() { removeNamedNamespace(name) })
		if err != nil {
			t.Fatal(err)
		}
	}
	deadOwner := Owner{PID: dead, StartTime: 1}
	unmarked := namespaceName(deadOwner, 1, Client)
	makeNamespace(unmarked, nil)
	mismatched := namespaceName(Owner{PID: other, StartTime: 1}, 1, Server) // a dead owner's marker, another process in the name
	makeNamespace(mismatched, &deadOwner)
	otherStart := namespaceName(Owner{PID: dead, StartTime: 2}, 3, Server) // the same PID, another start time
	makeNamespace(otherStart, &deadOwner)
	proven := namespaceName(deadOwner, 2, Server)
	makeNamespace(proven, &deadOwner)
	// An earlier version's name (no start time): its marker is the proof.
	oldUnmarked := fmt.Sprintf("slowstart-%d-5-c", dead)
	makeNamespace(oldUnmarked, nil)
	oldProven := fmt.Sprintf("slowstart-%d-6-s", dead)
	makeNamespace(oldProven, &deadOwner)

	insideUnmarked := sleeper(t, unmarked)
	insideProven := sleeper(t, proven)
	provenExited := make(chan error, 1)
	go func() { provenExited <- insideProven.Wait() }()

	names := []string{unmarked, mismatched, otherStart, proven, oldUnmarked, oldProven}
	removed, err := processTrials.clean(t.Context(), true, only(names...))
	if err != nil {
		t.Fatalf("Clean: %v", err)
	}
	slices.Sort(removed)
	if want := slices.Sorted(slices.Values([]string{proven, oldProven})); !slices.Equal(removed, want) {
		t.Errorf("Clean removed %v, want only %v", removed, want)
	}
	for _, name := range []string{unmarked, mismatched, otherStart, oldUnmarked} {
		if !namespaceExists(t, name) {
			t.Errorf("namespace %s without proof was removed", name)
		}
	}
	if !running(t, insideUnmarked.Process.Pid) {
		t.Errorf("the process in the unproven namespace %s was killed", unmarked)
	}
	select {
	case <-provenExited:
	case <-time.After(ioTimeout):
		t.Errorf("the process in the removed namespace %s still runs", proven)
	}
}

// TestCleanTempDirsNeedProof reproduces `mkdir /tmp/slowstart-424242-x; slowstart
// lab clean`: the user's directory stays, as does one with the lab's name pattern
// but no marker; only a marked directory of a dead owner goes (and of a live one
// with all). Without a marker, only a directory whose name carries the PID and
// start time of a process that is gone, and that holds nothing (or a marker cut
// short), goes: an empty look-alike whose name carries a PID alone, or a
// marker's first word alone, stays.
func TestCleanTempDirsNeedProof(t *testing.T) {
	dir := t.TempDir()
	dead := deadPID(t)
	live := sleeper(t, "")
	liveStart, err := processStartTime(live.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	deadOwner := Owner{PID: dead, StartTime: 1}
	liveOwner := Owner{PID: live.Process.Pid, StartTime: liveStart}
	reusedOwner := Owner{PID: live.Process.Pid, StartTime: liveStart - 1} // its PID now another process's
	name := func(o Owner, what string, n int) string {
		return fmt.Sprintf("slowstart-%s-%s-%d", o.Tag(), what, n)
	}
	mk := func(name string, marker *Owner, content ...string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, c := range content {
			if err := os.WriteFile(filepath.Join(path, "user-data"), []byte(c), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if marker != nil {
			if err := os.WriteFile(filepath.Join(path, tempDirMarker), []byte(marker.Marker(markerKind)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return path
	}
	keep := "keep me\n"
	user := mk("slowstart-424242-x", nil, keep)
	userLike := mk(fmt.Sprintf("slowstart-%d-nginx-123", dead), nil, keep)
	forged := mk(name(Owner{PID: 424242, StartTime: 1}, "nginx", 7), &deadOwner, keep) // marker and name disagree
	deadOnes := mk(name(deadOwner, "curl", 99), &deadOwner, keep)
	oldDeadOnes := mk(fmt.Sprintf("slowstart-%d-curl-98", dead), &deadOwner, keep) // an earlier version's name, marked
	liveOnes := mk(name(liveOwner, "nginx", 5), &liveOwner, keep)
	reused := mk(name(reusedOwner, "nginx", 6), &reusedOwner, keep)

	// Empty, without a marker: a dead run's (killed between making it and
	// marking it) goes; a live process's stays; so does a look-alike whose
	// name carries a PID and no start time.
	emptyDead := mk(name(deadOwner, "nginx", 8), nil)
	emptyLive := mk(name(liveOwner, "nginx", 9), nil)
	emptyLookAlike := mk("slowstart-99999-nginx-124", nil)

	// Only a marker file cut short (killed between creating the file and
	// writing its line): a dead run's goes; with anything else inside, or a
	// live process's, or under a name without a start time, it stays.
	partial := func(name string, extra bool) string {
		t.Helper()
		path := mk(name, nil)
		if err := os.WriteFile(filepath.Join(path, tempDirMarker), []byte("slowstart-lab"), 0o600); err != nil {
			t.Fatal(err)
		}
		if extra {
			if err := os.WriteFile(filepath.Join(path, "user-data"), []byte(keep), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return path
	}
	emptyMarkerDead := partial(name(deadOwner, "nginx", 10), false)
	partialWithData := partial(name(deadOwner, "nginx", 11), true)
	partialLive := partial(name(liveOwner, "nginx", 12), false)
	partialLookAlike := partial(fmt.Sprintf("slowstart-%d-nginx-13", dead), false)

	removed, err := processTrials.cleanTempDirs(false, dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if want := slices.Sorted(slices.Values([]string{deadOnes, oldDeadOnes, reused, emptyDead, emptyMarkerDead})); !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	for _, kept := range []string{user, userLike, forged, liveOnes, partialWithData} {
		if _, err := os.Stat(filepath.Join(kept, "user-data")); err != nil {
			t.Errorf("%s was touched: %v", kept, err)
		}
	}
	for _, kept := range []string{emptyLive, emptyLookAlike} {
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("the empty directory %s was removed: %v", kept, err)
		}
	}
	for _, kept := range []string{partialLive, partialLookAlike} {
		if _, err := os.Stat(filepath.Join(kept, tempDirMarker)); err != nil {
			t.Errorf("%s was touched: %v", kept, err)
		}
	}
	removed, err = processTrials.cleanTempDirs(true, dir)
	if err != nil || !slices.Equal(removed, []string{liveOnes}) {
		t.Errorf("with all: removed %v (%v), want only %s", removed, err, liveOnes)
	}
	for _, kept := range []string{user, userLike, forged} {
		if _, err := os.Stat(filepath.Join(kept, "user-data")); err != nil {
			t.Errorf("with all, %s was touched: %v", kept, err)
		}
	}
}

// TestMakeTempDirIsCleanable: a directory MakeTempDir made carries the proof Clean
// needs, and this process's own is never removed.
func TestMakeTempDirIsCleanable(t *testing.T) {
	path, err := MakeTempDir("test")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(path)
	if !tempDirPattern.MatchString(filepath.Base(path)) {
		t.Errorf("%s does not match the pattern Clean looks for", path)
	}
	owner, err := tempDirOwner(path)
	if err != nil || owner != ThisProcess() {
		t.Errorf("marker %+v (%v), want %+v", owner, err, ThisProcess())
	}
	removed, err := processTrials.cleanTempDirs(true, filepath.Dir(path))
	if err != nil || slices.Contains(removed, path) {
		t.Errorf("Clean removed this process's own directory: %v %v", removed, err)
	}
}

// TestCleanEmptyMountPoints: a run killed between making a namespace's mount
// point and mounting it (or between unmounting and removing it) leaves an empty
// file under NetnsDir with nothing mounted: Clean removes it when the process
// its name carries (PID and start time) is gone, and leaves a live process's,
// any file with content, and an empty look-alike whose name has no start time
// alone.
func TestCleanEmptyMountPoints(t *testing.T) {
	requireRoot(t)
	dead := deadPID(t)
	live := sleeper(t, "")
	mk := func(name, content string) string {
		t.Helper()
		path := filepath.Join(NetnsDir, name)
		if err := os.WriteFile(path, []byte(content), 0o444); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(path) })
		return path
	}
	liveStart, err := processStartTime(live.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	deadOwner := Owner{PID: dead, StartTime: 1}
	emptyDead := namespaceName(deadOwner, 3, Client)
	emptyLive := namespaceName(Owner{PID: live.Process.Pid, StartTime: liveStart}, 3, Client)
	withContent := namespaceName(deadOwner, 4, Server)
	lookAlike := fmt.Sprintf("slowstart-%d-1-c", dead)
	mk(emptyDead, "")
	mk(emptyLive, "")
	mk(withContent, "not a mount point\n")
	mk(lookAlike, "")
	removed, err := processTrials.clean(t.Context(), false, only(emptyDead, emptyLive, withContent, lookAlike))
	if err != nil {
		t.Fatalf("Clean: %v", err)
	}
	if !slices.Equal(removed, []string{emptyDead}) {
		t.Errorf("Clean removed %v, want only %s", removed, emptyDead)
	}
	for _, kept := range []string{emptyLive, withContent, lookAlike} {
		if _, err := os.Stat(filepath.Join(NetnsDir, kept)); err != nil {
			t.Errorf("%s was removed: %v", kept, err)
		}
	}
}

// TestRemoveTempDir: a directory MakeTempDir made goes whole, with what was put
// in it; one already gone is no error.
func TestRemoveTempDir(t *testing.T) {
	dir, err := MakeTempDir("test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.MkdirAll(filepath.Join(dir, "docroot", "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "docroot", "sub", "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RemoveTempDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there: %v", dir, err)
	}
	if err := RemoveTempDir(dir); err != nil {
		t.Errorf("removing it again: %v", err)
	}
}
