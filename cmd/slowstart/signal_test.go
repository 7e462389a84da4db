package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/slowstart/slowstart/internal/testroot"
)

// The built binary, shared by the tests that run it as a user would.
var (
	binaryOnce sync.Once
	binaryDir  string
	binaryPath string
	binaryErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binaryDir != "" {
		os.RemoveAll(binaryDir)
	}
	os.Exit(code)
}

// builtBinary builds the slowstart binary once for the test run.
func builtBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		binaryDir, binaryErr = os.MkdirTemp("", "slowstart-cmd-test-")
		if binaryErr != nil {
			return
		}
		binaryPath = filepath.Join(binaryDir, "slowstart")
		out, err := exec.Command("go", "build", "-o", binaryPath, ".").CombinedOutput()
		if err != nil {
			binaryErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binaryPath
}

// process is the built binary running, its output read line by line.
type process struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stdout []string
	stderr []string
	lines  chan streamLine
	done   chan struct{}
}

type streamLine struct {
	stderr bool
	text   string
}

// startBinary runs the binary with args (and env added to the environment);
// the process is killed when the test ends, if it has not exited.
func startBinary(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	return startBinaryStdin(t, nil, env, args...)
}

// startBinaryStdin is startBinary with standard input read from stdin.
func startBinaryStdin(t *testing.T, stdin io.Reader, env []string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(builtBinary(t), args...), lines: make(chan streamLine, 1024), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdin = stdin
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var readers sync.WaitGroup
	read := func(r io.Reader, isErr bool) {
		defer readers.Done()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			if isErr {
				p.stderr = append(p.stderr, sc.Text())
			} else {
				p.stdout = append(p.stdout, sc.Text())
			}
			p.mu.Unlock()
			select {
			case p.lines <- streamLine{isErr, sc.Text()}:
			default:
			}
		}
	}
	readers.Add(2)
	go read(stdout, false)
	go read(stderr, true)
	go func() {
		readers.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	return p
}

// waitLine waits until a line of the stream contains want: the moment the test
// synchronizes on.
func (p *process) waitLine(t *testing.T, stderr bool, want string, timeout time.Duration) {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case l := <-p.lines:
			if l.stderr == stderr && strings.Contains(l.text, want) {
				return
			}
		case <-p.done:
			t.Fatalf("the process ended before printing %q; stdout %q, stderr %q", want, p.out(false), p.out(true))
		case <-timer.C:
			t.Fatalf("no line %q within %v; stdout %q, stderr %q", want, timeout, p.out(false), p.out(true))
		}
	}
}

func (p *process) out(stderr bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if stderr {
		return append([]string(nil), p.stderr...)
	}
	return append([]string(nil), p.stdout...)
}

// signalAndWait sends sig and returns the exit code and the stderr lines printed
// after the signal was sent.
func (p *process) signalAndWait(t *testing.T, sig syscall.Signal, timeout time.Duration) (int, []string) {
	t.Helper()
	before := len(p.out(true))
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("still running %v after %v; stderr %q", sig, timeout, p.out(true))
	}
	err := p.cmd.Wait()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, p.out(true)[before:]
}

// checkInterrupted checks the contract of an interruption: exit 130 and one line,
// with no log lines nor Go errors.
func checkInterrupted(t *testing.T, code int, after []string, wantInLine string) {
	t.Helper()
	if code != exitInterrupted {
		t.Errorf("exit %d, want %d; stderr after the signal %q", code, exitInterrupted, after)
	}
	if len(after) != 1 || !strings.HasPrefix(after[0], "slowstart: interrupted") || !strings.Contains(after[0], wantInLine) {
		t.Errorf("stderr after the signal %q, want one line 'slowstart: interrupted…%s…'", after, wantInLine)
	}
	for _, l := range after {
		for _, bad := range []string{"level=", "context canceled", "use of closed", "panic", "goroutine "} {
			if strings.Contains(l, bad) {
				t.Errorf("stderr holds %q: %q", bad, l)
			}
		}
	}
}

// hangingServer answers /fast at once and holds /hang until the test ends; the
// returned channel receives a value when a /hang request has arrived.
func hangingServer(t *testing.T) (base string, arrived <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{}, 16)
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/fast", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, strings.Repeat("x", 4000)) })
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		got <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() {
		close(release)
		srv.Close()
	})
	return "http://" + ln.Addr().String(), got
}

func waitArrival(t *testing.T, arrived <-chan struct{}) {
	t.Helper()
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the request never reached the server")
	}
}

// TestInterruptProbe: Ctrl-C and SIGTERM while a probe waits for the server.
func TestInterruptProbe(t *testing.T) {
	testroot.Require(t, "a live capture on loopback")
	base, arrived := hangingServer(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			p := startBinary(t, nil, "probe", base+"/hang", "--timeout", "60s")
			waitArrival(t, arrived)
			code, after := p.signalAndWait(t, sig, 20*time.Second)
			checkInterrupted(t, code, after, "nothing left behind")
			if out := p.out(false); len(out) != 0 {
				t.Errorf("an interrupted probe printed a result: %q", out)
			}
		})
	}
}

// TestInterruptWatch: the watch stops with 130 and says how many probes it stored.
func TestInterruptWatch(t *testing.T) {
	testroot.Require(t, "a live capture on loopback")
	base, _ := hangingServer(t)
	store := filepath.Join(t.TempDir(), "w.db")
	p := startBinary(t, nil, "watch", base+"/fast", "--store", store, "--every", "1h")
	p.waitLine(t, false, "/fast", 30*time.Second) // the first probe's row
	code, after := p.signalAndWait(t, syscall.SIGINT, 20*time.Second)
	checkInterrupted(t, code, after, "1 probe stored in "+store)
}

// TestInterruptSurvey: the survey interrupted at its start.
func TestInterruptSurvey(t *testing.T) {
	testroot.Require(t, "live captures")
	base, arrived := hangingServer(t)
	list := writeSurveyList(t, "a "+base+"/hang", "b "+base+"/hang")
	p := startBinary(t, nil, "survey", "--no-exact", "--concurrency", "1", list)
	// Its progress line first (read before the signal, so that what follows the
	// signal is only what the signal made it say), then the request at the server.
	p.waitLine(t, true, "Surveying", 30*time.Second)
	waitArrival(t, arrived)
	code, after := p.signalAndWait(t, syscall.SIGTERM, 20*time.Second)
	checkInterrupted(t, code, after, "0 of 2 URLs measured")
}

// TestInterruptView: the page server stops with 130.
func TestInterruptView(t *testing.T) {
	p := startBinary(t, nil, "view", iw3Capture)
	p.waitLine(t, false, "is at http://", 30*time.Second)
	code, after := p.signalAndWait(t, syscall.SIGINT, 20*time.Second)
	checkInterrupted(t, code, after, "nothing left behind")
}

// TestInterruptAnalyze: analyze reading a capture that is still being written
// (a FIFO) stops at a signal, and reports what was written before it: the
// connection of the first half of a capture, as it stood.
func TestInterruptAnalyze(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "live.pcap")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(iw3Capture)
	if err != nil {
		t.Fatal(err)
	}
	// The file header and the first half of the records, whole (tcpdump
	// writes whole records): a pcap record is a 16-byte header, whose bytes
	// 8-11 are its captured length (little-endian here), and those bytes.
	end, records := 24, 0
	for end < len(whole)/2 {
		end += 16 + int(binary.LittleEndian.Uint32(whole[end+8:]))
		records++
	}
	p := startBinary(t, nil, "analyze", fifo, "--jsonl")
	// Opening a FIFO for writing returns once the reader has it open: analyze is
	// reading.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write(whole[:end]); err != nil {
		t.Fatal(err)
	}
	code, after := p.signalAndWait(t, syscall.SIGINT, 20*time.Second)
	checkInterrupted(t, code, after, "reported what was read until then (1 connection)")
	out := p.out(false)
	var c struct {
		Index int `json:"index"`
	}
	if len(out) != 1 || json.Unmarshal([]byte(out[0]), &c) != nil || c.Index != 1 {
		t.Fatalf("standard output %q, want the one connection as a JSON line; stderr %q", out, p.out(true))
	}
	t.Logf("%d records written before the signal", records)
}

// TestInterruptLabRun: lab run interrupted after its first trial prints that
// trial, exits 130 and leaves no namespace of its own.
func TestInterruptLabRun(t *testing.T) {
	testroot.Require(t, "network namespaces")
	// Each trial takes about 1.5 s (150 KB at 1 Mbit/s): the signal comes as the
	// second trial starts.
	p := startBinary(t, nil, "lab", "run", "--rtt", "10ms", "--rate", "1mbit", "--size", "150KB", "--runs", "3")
	p.waitLine(t, true, "1 of 3 trials done", 60*time.Second)
	code, after := p.signalAndWait(t, syscall.SIGINT, 30*time.Second)
	checkInterrupted(t, code, after, "1 of 3 trials finished")
	checkNoNamespacesOf(t, p.cmd.Process.Pid)
	// The finished trial's row: the point, then 1 trial.
	out := strings.Join(p.out(false), "\n")
	if !strings.Contains(out, "rtt10-rate1mbit-iw10-size150000") || !strings.Contains(out, "FCT paper") {
		t.Errorf("the finished trial is not printed:\n%s", out)
	}
}

// TestInterruptDemo: the demo interrupted while it emulates its servers.
func TestInterruptDemo(t *testing.T) {
	testroot.Require(t, "network namespaces")
	p := startBinary(t, nil, "probe")
	p.waitLine(t, true, "Emulating a far-away server", 30*time.Second)
	code, after := p.signalAndWait(t, syscall.SIGTERM, 30*time.Second)
	checkInterrupted(t, code, after, "nothing left behind")
	checkNoNamespacesOf(t, p.cmd.Process.Pid)
}

// TestInterruptTuneApply: tune apply interrupted after its backup, before any
// change, says nothing was changed.
func TestInterruptTuneApply(t *testing.T) {
	testroot.Require(t, "network namespaces")
	ns := tuneNamespace(t)
	dir := t.TempDir()
	p := startBinary(t, []string{tuneHoldEnv + "=1"}, "tune", "apply", "--netns", ns, "--initcwnd", "32", "--backup-dir", dir)
	p.waitLine(t, true, "backup written", 30*time.Second)
	code, after := p.signalAndWait(t, syscall.SIGINT, 20*time.Second)
	checkInterrupted(t, code, after, "nothing was changed")
}

// checkNoNamespacesOf fails when a network namespace of process pid is left.
func checkNoNamespacesOf(t *testing.T, pid int) {
	t.Helper()
	entries, err := os.ReadDir("/run/netns")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("slowstart-%d-", pid)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			t.Errorf("namespace %s left behind", e.Name())
		}
	}
}
