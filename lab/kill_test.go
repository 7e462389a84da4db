package lab

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slowstart/slowstart/lab/netlab"
)

// killVariants are the runs the reliability test interrupts: each lasts about 1.5 s
// on two cores, so that a kill lands while namespaces are being made, during
// transfers and during teardown. They cover the built-in server and client, nginx
// and curl as child processes, captures, TLS, a rate limit with loss, and IPv6.
var killVariants = [][]string{
	{"--rtt", "20ms", "--size", "50KB", "--runs", "40", "--parallel", "4"},
	{"--rtt", "20ms", "--size", "50KB", "--runs", "24", "--parallel", "4", "--server-kind", "nginx", "--client-kind", "curl"},
	{"--rtt", "10ms", "--size", "20KB", "--runs", "40", "--parallel", "6", "--tls", "1.3", "--capture", "CAPTURE"},
	{"--rtt", "10ms", "--size", "30KB", "--runs", "30", "--parallel", "8", "--rate", "10mbit", "--loss", "1%", "--ipv6"},
}

// TestKilledRunLeavesNothingBehind kills `slowstart lab run` with SIGKILL at a
// random moment 20 times; after `slowstart lab clean` nothing of the run may remain:
// no namespace, no link in the host namespace, no child process, no temporary
// directory, and the host's routes and rules are byte-identical to before.
// SLOWSTART_KILL_SEED replays the kill moments of a logged seed.
func TestKilledRunLeavesNothingBehind(t *testing.T) {
	needRoot(t)
	binary := buildSlowstart(t)
	before := readHostState(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SLOWSTART_KILL_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("SLOWSTART_KILL_SEED=%q is not a number", s)
		}
	}
	t.Logf("kill moments from seed %d (SLOWSTART_KILL_SEED=%d replays them)", seed, seed)
	random := rand.New(rand.NewPCG(seed, 0))
	for i := range 20 {
		args := killVariants[i%len(killVariants)]
		killAfter := time.Duration(random.Int64N(int64(1500 * time.Millisecond)))
		run := startLabRun(t, binary, args)
		time.Sleep(killAfter) // the random moment of the kill, not a wait for anything
		if err := syscall.Kill(run.pid(), syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: %v", run.pid(), err)
		}
		_ = run.cmd.Wait()
		run.noteNamespaces()
		clean := exec.Command(binary, "lab", "clean")
		clean.Env = run.cmd.Env // the same TMPDIR, as a user's next command would have
		if out, err := clean.CombinedOutput(); err != nil {
			t.Fatalf("slowstart lab clean after kill %d: %v\n%s", i+1, err, out)
		}
		t.Logf("kill %d: %s killed after %v", i+1, strings.Join(args, " "), killAfter.Round(time.Millisecond))
		run.checkNothingLeft(t, before, fmt.Sprintf("kill %d (after %v, lab run %s)", i+1, killAfter.Round(time.Millisecond), strings.Join(args, " ")))
		if t.Failed() {
			return // one failure says it; the rest would repeat it
		}
	}
}

// TestInterruptedRunCleansUp sends SIGTERM and SIGINT (Ctrl-C) to a run in the
// middle of its trials: it must remove everything itself, without `lab clean`.
func TestInterruptedRunCleansUp(t *testing.T) {
	needRoot(t)
	binary := buildSlowstart(t)
	before := readHostState(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("signal moments from seed %d", seed)
	random := rand.New(rand.NewPCG(seed, 1))
	for _, signal := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		for _, args := range killVariants[:2] {
			name := fmt.Sprintf("%v/%s", signal, strings.Join(args, "_"))
			t.Run(name, func(t *testing.T) {
				run := startLabRun(t, binary, args)
				run.waitForTrials(t)
				// A random moment after the first trial began: during set-up, a transfer
				// or a teardown of one of the parallel trials.
				signalAfter := time.Duration(random.Int64N(int64(800 * time.Millisecond)))
				time.Sleep(signalAfter)
				t.Logf("%v after the first namespace and %v", signal, signalAfter.Round(time.Millisecond))
				if err := syscall.Kill(run.pid(), signal); err != nil {
					t.Fatalf("signal %d: %v", run.pid(), err)
				}
				exited := make(chan error, 1)
				go func() { exited <- run.cmd.Wait() }()
				select {
				case <-exited:
				case <-time.After(15 * time.Second):
					_ = syscall.Kill(run.pid(), syscall.SIGKILL)
					<-exited
					t.Fatalf("lab run did not exit within 15 s of %v", signal)
				}
				run.noteNamespaces()
				run.checkNothingLeft(t, before, fmt.Sprintf("%v during lab run %s", signal, strings.Join(args, " ")))
			})
		}
	}
}

// buildSlowstart builds the slowstart binary of this tree once per test.
func buildSlowstart(t *testing.T) string {
	t.Helper()
	binary := filepath.Join(t.TempDir(), "slowstart")
	out, err := exec.Command("go", "build", "-o", binary, "../cmd/slowstart").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ../cmd/slowstart: %v\n%s", err, out)
	}
	return binary
}

// hostState is what a lab run must not change in the host's network namespace.
type hostState struct {
	routesAndRules string   // ip route/rule, IPv4 and IPv6, every table
	links          []string // link names
}

func readHostState(t *testing.T) hostState {
	t.Helper()
	var all bytes.Buffer
	for _, args := range [][]string{
		{"route", "show", "table", "all"},
		{"-6", "route", "show", "table", "all"},
		{"rule", "show"},
		{"-6", "rule", "show"},
	} {
		out, err := exec.Command("ip", args...).Output()
		if err != nil {
			t.Fatalf("ip %s: %v", strings.Join(args, " "), err)
		}
		fmt.Fprintf(&all, "# ip %s\n%s", strings.Join(args, " "), out)
	}
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatalf("ip -o link show: %v", err)
	}
	var links []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// "7: tun0: <...> ..." or "8: veth0@if2: <...>"
		if fields := strings.SplitN(line, ": ", 3); len(fields) == 3 {
			links = append(links, fields[1])
		}
	}
	slices.Sort(links)
	return hostState{routesAndRules: all.String(), links: links}
}

// labRun is one `slowstart lab run` started by a test, in its own process group and
// with its own temporary directory.
type labRun struct {
	cmd        *exec.Cmd
	output     bytes.Buffer
	tempDir    string
	namespaces map[string]string // name → "net:[inode]", noted after the run ended
}

func startLabRun(t *testing.T, binary string, args []string) *labRun {
	t.Helper()
	dir := t.TempDir()
	run := &labRun{tempDir: filepath.Join(dir, "tmp")}
	if err := os.Mkdir(run.tempDir, 0o755); err != nil {
		t.Fatal(err)
	}
	args = slices.Clone(args)
	for i, a := range args {
		if a == "CAPTURE" {
			args[i] = filepath.Join(dir, "captures")
		}
	}
	run.cmd = exec.Command(binary, append([]string{"lab", "run"}, args...)...)
	run.cmd.Env = append(os.Environ(), "TMPDIR="+run.tempDir)
	run.cmd.Stdout, run.cmd.Stderr = &run.output, &run.output
	// Its own process group: children that keep it (nsenter, curl) can be found
	// after it dies.
	run.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := run.cmd.Start(); err != nil {
		t.Fatalf("start slowstart lab run: %v", err)
	}
	t.Cleanup(func() { run.killLeftovers(t) })
	return run
}

func (r *labRun) pid() int { return r.cmd.Process.Pid }

// namespacePrefix begins the names of the run's namespaces.
func (r *labRun) namespacePrefix() string {
	return fmt.Sprintf("%s%d-", netlab.NamespacePrefix, r.pid())
}

// mountedNamespaces lists the run's namespaces still mounted under /run/netns.
func (r *labRun) mountedNamespaces() []string {
	entries, _ := os.ReadDir(netlab.NetnsDir)
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), r.namespacePrefix()) {
			names = append(names, e.Name())
		}
	}
	return names
}

// noteNamespaces records the identity of the run's namespaces still mounted once it
// has exited, so that processes left inside them can be found after they are unmounted.
func (r *labRun) noteNamespaces() {
	r.namespaces = map[string]string{}
	for _, name := range r.mountedNamespaces() {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(netlab.NetnsDir, name), &st); err == nil {
			r.namespaces[name] = fmt.Sprintf("net:[%d]", st.Ino)
		}
	}
}

// waitForTrials polls until the run has made its first namespace.
func (r *labRun) waitForTrials(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(r.mountedNamespaces()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("lab run made no namespace within 10 s:\n%s", r.output.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// leftoverProcess is a process of a finished run still alive.
type leftoverProcess struct {
	pid     int
	command string
	why     string
}

// leftoverProcesses finds processes still in the run's process group or in one of
// its namespaces (nginx runs in a process group of its own).
func (r *labRun) leftoverProcesses() []leftoverProcess {
	inNamespace := map[string]bool{}
	for _, id := range r.namespaces {
		inNamespace[id] = true
	}
	entries, _ := os.ReadDir("/proc")
	var found []leftoverProcess
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
		end := bytes.LastIndexByte(stat, ')')
		start := bytes.IndexByte(stat, '(')
		if end < 0 || start < 0 {
			continue
		}
		command := string(stat[start+1 : end])
		fields := strings.Fields(string(stat[end+1:]))
		if len(fields) < 3 || fields[0] == "Z" {
			continue
		}
		if group, _ := strconv.Atoi(fields[2]); group == r.pid() {
			found = append(found, leftoverProcess{pid, command, "in the run's process group"})
			continue
		}
		if netNamespace, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "net")); err == nil && inNamespace[netNamespace] {
			found = append(found, leftoverProcess{pid, command, "in the run's network namespace " + netNamespace})
		}
	}
	return found
}

// checkNothingLeft fails the test for anything of the run still there.
func (r *labRun) checkNothingLeft(t *testing.T, before hostState, what string) {
	t.Helper()
	if names := r.mountedNamespaces(); len(names) > 0 {
		t.Errorf("%s: namespaces left under %s: %v", what, netlab.NetnsDir, names)
	}
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Errorf("ip netns list: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, r.namespacePrefix()) {
			t.Errorf("%s: ip netns list shows %s", what, line)
		}
	}
	// Processes die a moment after the namespaces go: give them until a deadline.
	var processes []leftoverProcess
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if processes = r.leftoverProcesses(); len(processes) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, p := range processes {
		t.Errorf("%s: process %d (%s) is still alive, %s", what, p.pid, p.command, p.why)
	}
	if left, _ := os.ReadDir(r.tempDir); len(left) > 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
			// What is inside, for finding how it was left: names and sizes,
			// and the marker's text.
			_ = filepath.WalkDir(filepath.Join(r.tempDir, e.Name()), func(path string, d os.DirEntry, err error) error {
				if err != nil {
					t.Logf("  %s: %v", path, err)
					return nil
				}
				info, _ := d.Info()
				if d.Name() == ".slowstart-owner" {
					marker, _ := os.ReadFile(path)
					t.Logf("  %s (%q)", path, marker)
				} else if info != nil {
					t.Logf("  %s %v %d bytes, modified %s", path, info.Mode(), info.Size(), info.ModTime().Format("15:04:05.000000"))
				}
				return nil
			})
		}
		t.Errorf("%s: temporary files left in TMPDIR: %v (checked at %s)", what, names, time.Now().Format("15:04:05.000000"))
	}
	after := readHostState(t)
	if after.routesAndRules != before.routesAndRules {
		t.Errorf("%s: the host's routes or rules changed:\nbefore:\n%s\nafter:\n%s", what, before.routesAndRules, after.routesAndRules)
	}
	if !slices.Equal(after.links, before.links) {
		t.Errorf("%s: the host's links changed: before %v, after %v", what, before.links, after.links)
	}
	if t.Failed() {
		t.Logf("output of the run:\n%s", r.output.String())
	}
}

// killLeftovers removes what a failed check found, so one failure does not leak
// processes and namespaces into later tests: processes the run left (they are
// this test's grandchildren), then the run's namespaces.
func (r *labRun) killLeftovers(t *testing.T) {
	if r.cmd.ProcessState == nil {
		_ = syscall.Kill(r.pid(), syscall.SIGKILL)
		_ = r.cmd.Wait()
	}
	for _, p := range r.leftoverProcesses() {
		if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Logf("killing leftover process %d (%s): %v", p.pid, p.command, err)
		}
	}
	for _, name := range r.mountedNamespaces() {
		if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
			t.Logf("removing leftover namespace %s: %v: %s", name, err, out)
		}
	}
}
