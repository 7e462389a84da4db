//go:build linux

package childproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// onDiscardedThread runs fn on an OS thread that the runtime ends afterwards
// (locked, never unlocked), and returns once that thread is gone.
func onDiscardedThread(t *testing.T, fn func()) {
	t.Helper()
	tid := make(chan int, 1)
	var run func()
	run = func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// The main thread is never ended, only parked: hold it while
			// another thread, necessarily, takes the work.
			done := make(chan struct{})
			go func() { run(); close(done) }()
			<-done
			runtime.UnlockOSThread()
			return
		}
		fn()
		tid <- unix.Gettid()
	}
	go run()
	task := fmt.Sprintf("/proc/self/task/%d", <-tid)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(task); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the locked thread %s did not end within 10 s", task)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond) // polling for the thread's end, not standing in for it
	}
}

func sleeper() *exec.Cmd {
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// killedOrDying says whether the process is gone, a zombie, or has SIGKILL
// pending: what the parent-death signal leaves once it has been sent.
func killedOrDying(pid int) bool {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(status), "\n") {
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimSpace(value)
		switch name {
		case "State":
			if strings.HasPrefix(value, "Z") || strings.HasPrefix(value, "X") {
				return true
			}
		case "ShdPnd", "SigPnd":
			mask, err := strconv.ParseUint(value, 16, 64)
			if err == nil && mask&(1<<(uint(syscall.SIGKILL)-1)) != 0 {
				return true
			}
		}
	}
	return false
}

// The premise: a child forked by a thread that the runtime later ends is killed
// by its parent-death signal. Without it the next test would prove nothing.
func TestPlainStartDiesWithItsThread(t *testing.T) {
	cmd := sleeper()
	var startErr error
	onDiscardedThread(t, func() { startErr = cmd.Start() })
	if startErr != nil {
		t.Fatal(startErr)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the child ended with %v, want killed by SIGKILL", err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-waited
		t.Fatal("a child forked on a thread that ended was not killed: this kernel does not tie the parent-death signal to the thread, and TestStartOutlivesDiscardedThreads proves nothing")
	}
}

// A child started by Start, from a goroutine whose thread then ends (as the
// namespace code's threads do), lives on; and more such threads ending does
// not reach it either.
func TestStartOutlivesDiscardedThreads(t *testing.T) {
	var p *Process
	var err error
	onDiscardedThread(t, func() { p, err = Start(sleeper(), "") })
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p.Cmd.Process.Kill()
		p.Wait()
	}()
	for i := 0; i < 4*runtime.GOMAXPROCS(0); i++ {
		onDiscardedThread(t, func() {})
	}
	select {
	case <-p.Exited():
		t.Fatalf("the child exited: %v", p.Err())
	default:
	}
	if killedOrDying(p.Cmd.Process.Pid) {
		t.Fatalf("the child (pid %d) was sent its parent-death signal although slowstart runs on", p.Cmd.Process.Pid)
	}
	// It still dies with its parent's thread when that ends: Kill stands in for
	// slowstart's death here, and Wait reports it.
	p.Cmd.Process.Kill()
	var exit *exec.ExitError
	if err := p.Wait(); !errors.As(err, &exit) {
		t.Fatalf("Wait returned %v, want the kill", err)
	}
}

func TestStartReportsFailures(t *testing.T) {
	if _, err := Start(exec.Command("/nonexistent/slowstart-childproc-test"), ""); err == nil {
		t.Fatal("starting a missing binary succeeded")
	}
	if _, err := Start(sleeper(), "/nonexistent/netns"); err == nil || !strings.Contains(err.Error(), "/nonexistent/netns") {
		t.Fatalf("a missing namespace gave %v, want an error naming it", err)
	}
}
