package tune

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/testroot"
)

// TestApplyHoldsTheLock: an apply while another holds the network namespace's
// lock changes nothing and names the holder.
func TestApplyHoldsTheLock(t *testing.T) {
	ns := newNamespace(t)
	dir := t.TempDir()
	before := routeSnapshot(t, ns)
	unlock, err := lockNetns(ns)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Apply(ApplyOptions{Netns: ns, InitCwnd: 20, Route: RouteAll, BackupDir: dir})
	var lockErr *LockError
	if !errors.As(err, &lockErr) || lockErr.Holder != strconv.Itoa(os.Getpid()) {
		t.Fatalf("apply under another's lock: %v, want a LockError naming PID %d", err, os.Getpid())
	}
	if now := routeSnapshot(t, ns); now != before {
		t.Fatalf("routes changed under another's lock:\n%s", now)
	}
	unlock()
	res, err := Apply(ApplyOptions{Netns: ns, InitCwnd: 20, Route: RouteAll, BackupDir: dir})
	if err != nil || res.Changed == 0 {
		t.Fatalf("apply after the lock was released: %v", err)
	}
	applied := routeSnapshot(t, ns)
	if unlock, err = lockNetns(ns); err != nil {
		t.Fatal(err)
	}
	if _, err := Revert(RevertOptions{Netns: ns, BackupDir: dir}); !errors.As(err, &lockErr) {
		t.Errorf("revert under another's lock: %v, want a LockError", err)
	}
	if now := routeSnapshot(t, ns); now != applied {
		t.Fatalf("routes changed by a revert under another's lock:\n%s", now)
	}
	unlock()
	if _, err := Revert(RevertOptions{Netns: ns, BackupDir: dir}); err != nil {
		t.Fatal(err)
	}
	if now := routeSnapshot(t, ns); now != before {
		t.Errorf("routes after the revert:\n%s", now)
	}
}

// TestOneLockPerNamespace: the lock belongs to the network namespace, not to
// a backup directory: an apply with another --backup-dir, or naming the
// namespace by another path, waits for it (two applies with different
// backup directories interleaved on thousands of routes, and both failed).
func TestOneLockPerNamespace(t *testing.T) {
	ns := newNamespace(t)
	before := routeSnapshot(t, ns)
	unlock, err := lockNetns(ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ns, filepath.Join(NetnsDir, ns)} {
		_, err := Apply(ApplyOptions{Netns: name, InitCwnd: 20, Route: RouteAll, BackupDir: t.TempDir()})
		var lockErr *LockError
		if !errors.As(err, &lockErr) || lockErr.Holder != strconv.Itoa(os.Getpid()) {
			t.Errorf("apply of %s with a backup directory of its own under the namespace's lock: %v, want a LockError naming PID %d", name, err, os.Getpid())
		}
	}
	if now := routeSnapshot(t, ns); now != before {
		t.Fatalf("routes changed under the namespace's lock:\n%s", now)
	}
	unlock()

	// Two at once, each with its own backup directory, over 2,000 routes (a
	// window wide enough for two unlocked applies to interleave), several
	// times: never half one value and half the other.
	var batch strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&batch, "route add 10.%d.%d.0/24 via 192.0.2.2 dev veth0\n", 100+i/250, i%250)
	}
	add := exec.Command("ip", "-n", ns, "-batch", "-")
	add.Stdin = strings.NewReader(batch.String())
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ip -batch: %v\n%s", err, out)
	}
	initcwnd := regexp.MustCompile(`initcwnd (\d+) `)
	dirs := []string{t.TempDir(), t.TempDir()}
	for i := range 6 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, value := range []int{20 + i%2, 30} {
			wg.Go(func() {
				_, errs[j] = Apply(ApplyOptions{Netns: ns, InitCwnd: value, Route: RouteAll, BackupDir: dirs[j]})
			})
		}
		wg.Wait()
		for j, err := range errs {
			var lockErr *LockError
			if err != nil && !errors.As(err, &lockErr) {
				t.Fatalf("round %d: apply %d: %v", i, j, err)
			}
		}
		values := map[string]bool{}
		for _, m := range initcwnd.FindAllStringSubmatch(routeSnapshot(t, ns), -1) {
			values[m[1]] = true
		}
		if len(values) != 1 {
			t.Fatalf("round %d: the routes carry initcwnd %v: half one apply, half the other", i, values)
		}
	}
}

// TestNothingToApplyLeavesNoTrace: an apply that changes nothing (no route
// matches, or every one has the values already) takes no lock and writes nothing.
func TestNothingToApplyLeavesNoTrace(t *testing.T) {
	ns := newNamespace(t)
	dir := filepath.Join(t.TempDir(), "backups")
	if _, err := Apply(ApplyOptions{Netns: ns, InitCwnd: 20, Route: "198.18.0.0/15", BackupDir: dir}); err == nil {
		t.Fatal("an apply matching no route succeeded")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an apply matching no route made %s (%v)", dir, err)
	}
}

// TestConcurrentApplies: two applies at once never leave the routes half one
// value and half the other, and reverting their backups, newest first, gives the
// routes back as they were.
func TestConcurrentApplies(t *testing.T) {
	ns := newNamespace(t)
	dir := t.TempDir()
	before := routeSnapshot(t, ns)
	initcwnd := regexp.MustCompile(`initcwnd (\d+) `)
	for i := range 20 {
		var wg sync.WaitGroup
		results := make([]*ApplyResult, 2)
		errs := make([]error, 2)
		for j, value := range []int{20, 30} {
			wg.Go(func() {
				results[j], errs[j] = Apply(ApplyOptions{Netns: ns, InitCwnd: value, Route: RouteAll, BackupDir: dir})
			})
		}
		wg.Wait()
		for j, err := range errs {
			var lockErr *LockError
			if err != nil && !errors.As(err, &lockErr) {
				t.Fatalf("round %d: apply %d: %v", i, j, err)
			}
		}
		values := map[string]bool{}
		for _, m := range initcwnd.FindAllStringSubmatch(routeSnapshot(t, ns), -1) {
			values[m[1]] = true
		}
		if len(values) != 1 {
			t.Fatalf("round %d: the routes carry initcwnd %v: half one apply, half the other", i, values)
		}
		// Revert what was applied, newest backup first.
		var backups []string
		for j := range results {
			if errs[j] == nil && results[j].BackupPath != "" {
				backups = append(backups, results[j].BackupPath)
			}
		}
		for k := len(backups) - 1; k >= 0; k-- {
			newest, err := NewestBackup(dir, ns)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Revert(RevertOptions{BackupPath: newest, Netns: ns, BackupDir: dir}); err != nil {
				t.Fatalf("round %d: revert: %v", i, err)
			}
			if err := os.Remove(newest); err != nil {
				t.Fatal(err)
			}
		}
		if now := routeSnapshot(t, ns); now != before {
			t.Fatalf("round %d: routes differ after the reverts\nbefore:\n%s\nafter:\n%s", i, before, now)
		}
	}
}

// TestOrphanTemporariesRemoved: the temporary backups of writers that died are
// removed (as an apply or a revert does under its lock), a live writer's stay.
func TestOrphanTemporariesRemoved(t *testing.T) {
	dir := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	live := exec.Command("sleep", "300")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	files := map[string]bool{ // name: removed
		fmt.Sprintf(".tune-backup-%d-123.tmp", dead.Process.Pid): true,
		fmt.Sprintf(".tune-backup-%d-456.tmp", live.Process.Pid): false,
		".tune-backup-123456.tmp":                                true,  // an older writer's, two hours old
		".tune-backup-654321.tmp":                                false, // an older writer's, just written
		"tune-backup-20260101T000000.000000000Z-1.json":          false,
		"notes.tmp": false,
	}
	for name := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(filepath.Join(dir, ".tune-backup-123456.tmp"), old, old); err != nil {
		t.Fatal(err)
	}
	removeOrphanTemporaries(dir)
	for name, removed := range files {
		_, err := os.Stat(filepath.Join(dir, name))
		if gone := errors.Is(err, os.ErrNotExist); gone != removed {
			t.Errorf("%s: removed %v, want %v", name, gone, removed)
		}
	}
}

// TestRevertKeepsRemainingLifetime: an IPv6 route that expires keeps, through
// apply and revert, the lifetime it has left, not the one the backup recorded.
func TestRevertKeepsRemainingLifetime(t *testing.T) {
	ns := newNamespace(t)
	dir := t.TempDir()
	const prefix = "2001:db8:7::/64"
	testroot.IP(t, "-n", ns, "-6", "route", "add", prefix, "via", "2001:db8::2", "dev", "veth0", "expires", "3000")
	expires := func() int {
		t.Helper()
		out := testroot.IP(t, "-n", ns, "-6", "route", "show", prefix)
		m := regexp.MustCompile(`expires (\d+)sec`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("route %s does not expire: %q", prefix, out)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	res, err := Apply(ApplyOptions{Netns: ns, InitCwnd: 20, Route: prefix, BackupDir: dir})
	if err != nil || res.Changed != 1 {
		t.Fatalf("apply: %+v, %v", res, err)
	}
	if left := expires(); left > 3000 || left < 2900 {
		t.Fatalf("after apply: expires in %d s, want about 3000", left)
	}
	// Time passes: the route has 100 s left when it is reverted.
	testroot.IP(t, "-n", ns, "-6", "route", "change", prefix, "via", "2001:db8::2", "dev", "veth0", "expires", "100", "initcwnd", "20")
	if _, err := Revert(RevertOptions{BackupPath: res.BackupPath, Netns: ns}); err != nil {
		t.Fatal(err)
	}
	if left := expires(); left > 100 || left < 90 {
		t.Errorf("after revert: expires in %d s, want the 100 s it had left, not the 3000 recorded", left)
	}
	if out := testroot.IP(t, "-n", ns, "-6", "route", "show", prefix); strings.Contains(out, "initcwnd") {
		t.Errorf("revert kept the initcwnd: %q", out)
	}
	// Deleted since the backup: it comes back with the recorded lifetime less
	// the time since the backup.
	res, err = Apply(ApplyOptions{Netns: ns, InitCwnd: 20, Route: prefix, BackupDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	testroot.IP(t, "-n", ns, "-6", "route", "del", prefix)
	if _, err := Revert(RevertOptions{BackupPath: res.BackupPath, Netns: ns}); err != nil {
		t.Fatal(err)
	}
	if left := expires(); left > 100 || left < 80 {
		t.Errorf("re-added: expires in %d s, want about the 100 s recorded", left)
	}
}
