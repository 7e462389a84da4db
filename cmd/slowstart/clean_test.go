package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/testroot"
	"github.com/slowstart/slowstart/lab/labserver"
	"github.com/slowstart/slowstart/probe/exact"
)

// killedExactProbe runs `probe --exact` from the lab server's client namespace,
// kills it (SIGKILL) while it holds back a connection's ACKs, and returns its PID.
func killedExactProbe(t *testing.T, s *labserver.Server) int {
	t.Helper()
	p := startBinary(t, nil, "probe", "--exact", "--exact-runs", "50", "--netns", s.Netns, s.URL("/bytes/1000000"))
	waitHeld(t, s.Netns)
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	return p.cmd.Process.Pid
}

// waitHeld waits until an exact measurement holds back a connection's ACKs in
// the namespace: the middle of a measurement.
func waitHeld(t *testing.T, netnsPath string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if ports, err := exactHeldPorts(netnsPath); err == nil && len(ports) > 0 {
			return
		}
		time.Sleep(2 * time.Millisecond) // polling the kernel's state, not a synchronization
	}
	t.Fatal("no exact measurement held back its ACKs")
}

// TestCleanCommand reproduces the user's view of leftovers: a killed exact probe
// leaves its table, which `slowstart clean` removes and names, while a directory
// and a namespace of the user's with the lab's names are left alone by `lab
// clean` and `clean` alike.
func TestCleanCommand(t *testing.T) {
	testroot.Require(t, "network namespaces and nftables")
	userDir := filepath.Join(os.TempDir(), "slowstart-424242-x")
	if err := os.Mkdir(userDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(userDir) })
	if err := os.WriteFile(filepath.Join(userDir, "notes.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	userNamespace := "slowstart-424242-1-c"
	if out, err := exec.Command("ip", "netns", "add", userNamespace).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "delete", userNamespace).Run() })
	inside := exec.Command("ip", "netns", "exec", userNamespace, "sleep", "300")
	if err := inside.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inside.Process.Kill(); inside.Wait() })

	s := startSurveyLab(t, labserver.Config{RTT: 40 * time.Millisecond, IW: 10, Keys: surveyKeys})
	pid := killedExactProbe(t, s)
	left, err := exact.Tables(s.Netns)
	if err != nil || len(left) != 1 || left[0] != fmt.Sprintf("slowstart_exact_%d", pid) {
		t.Fatalf("after the kill: tables %v (%v), want the killed probe's", left, err)
	}

	for _, args := range [][]string{{"lab", "clean"}, {"clean"}} {
		out, err := exec.Command(builtBinary(t), args...).CombinedOutput()
		if err != nil {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
		t.Logf("%v:\n%s", args, out)
		if args[0] == "lab" {
			want := fmt.Sprintf("removed nftables table inet slowstart_exact_%d in network namespace %s", pid, filepath.Base(s.Netns))
			if !strings.Contains(string(out), want) {
				t.Errorf("%v does not say %q", args, want)
			}
		}
		if _, err := os.Stat(filepath.Join(userDir, "notes.txt")); err != nil {
			t.Fatalf("%v removed the user's %s: %v", args, userDir, err)
		}
		if _, err := os.Stat(filepath.Join("/run/netns", userNamespace)); err != nil {
			t.Fatalf("%v removed the user's namespace %s: %v", args, userNamespace, err)
		}
		if state, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", inside.Process.Pid)); err != nil || strings.Contains(string(state), ") Z ") {
			t.Fatalf("%v killed the process in the user's namespace", args)
		}
		if strings.Contains(string(out), "424242") {
			t.Errorf("%v names the user's things: %s", args, out)
		}
	}
	if left, err := exact.Tables(s.Netns); err != nil || len(left) != 0 {
		t.Errorf("after clean: tables %v (%v)", left, err)
	}
}

// TestInterruptExact: probe --exact interrupted mid-measurement removes its rules
// and exits 130 with one line.
func TestInterruptExact(t *testing.T) {
	testroot.Require(t, "network namespaces and nftables")
	s := startSurveyLab(t, labserver.Config{RTT: 40 * time.Millisecond, IW: 10, Keys: surveyKeys})
	p := startBinary(t, nil, "probe", "--exact", "--exact-runs", "50", "--netns", s.Netns, s.URL("/bytes/1000000"))
	waitHeld(t, s.Netns)
	code, after := p.signalAndWait(t, syscall.SIGINT, 20*time.Second)
	checkInterrupted(t, code, after, "the firewall rules were removed")
	if left, err := exact.Tables(s.Netns); err != nil || len(left) != 0 {
		t.Errorf("after the interruption: tables %v (%v)", left, err)
	}
}
