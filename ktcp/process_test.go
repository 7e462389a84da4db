//go:build linux

package ktcp_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/slowstart/slowstart/ktcp"
)

// childEnv makes the test binary act as a child process of these tests
// (TestMain) instead of running them: "hold" opens a tracer, prints the IDs of
// what it loaded and reads events until killed; "open" tries Open and prints
// the result.
const childEnv = "KTCP_TEST_CHILD"

// childResult is what an "open" child prints.
type childResult struct {
	Unavailable bool
	Error       string
}

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "hold":
		tracer, err := ktcp.Open(ktcp.Options{})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		objects, err := tracer.Objects()
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		json.NewEncoder(os.Stdout).Encode(objects)
		var ev ktcp.Event
		for tracer.Read(&ev) == nil {
		}
		os.Exit(1)
	case "open":
		tracer, err := ktcp.Open(ktcp.Options{})
		if err == nil {
			tracer.Close()
		}
		r := childResult{Unavailable: errors.Is(err, ktcp.ErrUnavailable)}
		if err != nil {
			r.Error = err.Error()
		}
		json.NewEncoder(os.Stdout).Encode(r)
		os.Exit(0)
	}
}

// TestKilledProcessLeavesNothing: a process that attached a tracer and is
// reading events is killed with SIGKILL, so no deferred call runs; its
// programs, links and maps are file descriptors of the process, and the kernel
// releases them all with it: none of their IDs remains. The kernel frees a
// program after an RCU grace period that follows the process's exit, and says
// nothing when it is done: the check polls for the IDs to go, up to 10 s.
func TestKilledProcessLeavesNothing(t *testing.T) {
	needRoot(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=hold")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child printed nothing: %v", err)
	}
	var objects ktcp.Objects
	if err := json.Unmarshal(line, &objects); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child said %q", line)
	}
	if len(objects.Programs) != len(ktcp.AllKinds)+1 || len(objects.Links) != len(ktcp.AllKinds) || len(objects.Maps) < 3 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child loaded %+v, want a program and a link per kind, the marker program and the maps", objects)
	}
	// Attached: each link exists and is the child's program's.
	for i, id := range objects.Links {
		lk, err := link.NewFromID(link.ID(id))
		if err != nil {
			t.Fatalf("link %d of the running child: %v", id, err)
		}
		info, err := lk.Info()
		lk.Close()
		if err != nil || uint32(info.Program) != objects.Programs[i] {
			t.Fatalf("link %d runs program %v (%v), want %d", id, info.Program, err, objects.Programs[i])
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, stdout)
	cmd.Wait()

	remaining := func() []string {
		var left []string
		for _, id := range objects.Programs {
			if p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id)); err == nil {
				p.Close()
				left = append(left, fmt.Sprintf("program %d", id))
			}
		}
		for _, id := range objects.Links {
			if l, err := link.NewFromID(link.ID(id)); err == nil {
				l.Close()
				left = append(left, fmt.Sprintf("link %d", id))
			}
		}
		for _, id := range objects.Maps {
			if m, err := ebpf.NewMapFromID(ebpf.MapID(id)); err == nil {
				m.Close()
				left = append(left, fmt.Sprintf("map %d", id))
			}
		}
		return left
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := remaining()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the child was killed, %v of it remain", left)
		}
		time.Sleep(10 * time.Millisecond) // polling the kernel's IDs, which no event announces
	}
}

// TestUnprivilegedIsUnavailable: a process without root or capabilities (the
// test binary run as nobody) gets an UnavailableError whose one line says what
// is missing.
func TestUnprivilegedIsUnavailable(t *testing.T) {
	needRoot(t) // to run a child as another user
	// A copy of the test binary that nobody can run.
	dir, err := os.MkdirTemp("", "ktcp-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	binary := filepath.Join(dir, "ktcp.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(binary, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "-test.run=^$")
	cmd.Dir = dir
	cmd.Env = []string{childEnv + "=open", "HOME=" + dir, "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the unprivileged child: %v (%s)", err, out)
	}
	var r childResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("the child said %q", out)
	}
	if !r.Unavailable {
		t.Fatalf("Open as nobody returned %q, want an UnavailableError", r.Error)
	}
	const want = "kernel TCP tracing is unavailable: load the programs: permission denied: run as root, or with the capabilities CAP_BPF and CAP_PERFMON"
	if r.Error != want {
		t.Errorf("Open as nobody said\n%q\nwant\n%q", r.Error, want)
	}
}
