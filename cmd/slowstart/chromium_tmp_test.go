package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slowstart/slowstart/browser"
	"github.com/slowstart/slowstart/internal/testroot"
)

// TestChromiumLeavesNothingInTmp: a page load (lab page, the code of probe
// --browser and of the demo's second half) leaves nothing in the temporary
// directory, Chromium's own files (org.chromium.Chromium.*) included: not when
// it ends, nor when it is killed and slowstart clean has run. The binary runs
// with a temporary directory of the test's own (TMPDIR), which Chromium would
// inherit were it not given one of slowstart's.
func TestChromiumLeavesNothingInTmp(t *testing.T) {
	testroot.Require(t, "network namespaces and Chromium as root")
	if _, err := os.Stat(browser.DefaultChromium); err != nil {
		t.Skipf("%s is missing (Debian package chromium)", browser.DefaultChromium)
	}
	// A short directory: Chromium's socket in it must fit a Unix socket's
	// path (t.TempDir's names are long).
	shortTemp := func(t *testing.T) string {
		t.Helper()
		dir, err := os.MkdirTemp("/tmp", "sst")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	left := func(t *testing.T, tmp string) {
		t.Helper()
		entries, err := os.ReadDir(tmp)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if len(names) > 0 {
			t.Errorf("left in the temporary directory: %v", names)
		}
	}

	t.Run("ended", func(t *testing.T) {
		tmp := shortTemp(t)
		cmd := exec.Command(builtBinary(t), "lab", "page", "--rtt", "20ms")
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("lab page: %v\n%s", err, out)
		}
		left(t, tmp)
	})

	t.Run("killed", func(t *testing.T) {
		tmp := shortTemp(t)
		env := []string{"TMPDIR=" + tmp}
		p := startBinary(t, env, "lab", "page", "--rtt", "20ms", "--page", "html=8KB,img=2MB", "--rate", "2mbit")
		// Chromium's own temporary files appear in slowstart's directory for
		// it: that is the moment to kill (polling the directory, not a wait
		// in its place).
		deadline := time.Now().Add(60 * time.Second)
		for {
			found, _ := filepath.Glob(filepath.Join(tmp, "slowstart-*-browser-*", "org.chromium.Chromium.*"))
			if len(found) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Chromium wrote nothing into slowstart's directory for it; stderr %q", p.out(true))
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.cmd.Wait()
		cmd := exec.Command(builtBinary(t), "clean")
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("clean: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "removed directory "+filepath.Join(tmp, "slowstart-")) {
			t.Errorf("clean did not say it removed the browser's directory:\n%s", out)
		}
		left(t, tmp)
		checkNoNamespacesOf(t, p.cmd.Process.Pid)
	})
}
