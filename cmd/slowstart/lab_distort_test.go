package main

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/testroot"
	"github.com/slowstart/slowstart/lab"
)

// TestLabMarksADistortedTrial: lab run whose process is stalled on purpose
// (SIGSTOP for 150 ms every 300 ms, as a host that deschedules the emulator,
// the server and the client would) marks its trial distorted, runs it again
// twice, says so in the JSON (path_check, reruns, the summary's counts and a
// warning) and in the text.
func TestLabMarksADistortedTrial(t *testing.T) {
	testroot.Require(t, "network namespaces")
	bin := builtBinary(t)
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			args := []string{"lab", "run", "--rtt", "200ms", "--rate", "2mbit", "--size", "60KB", "--runs", "1"}
			if format == "json" {
				args = append(args, "--json")
			}
			cmd := exec.Command(bin, args...)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// The injected stall, until the run ends.
			stalls := 0
		stall:
			for {
				select {
				case err := <-done:
					var exit *exec.ExitError
					if err != nil && !errors.As(err, &exit) {
						t.Fatal(err)
					}
					break stall
				case <-time.After(300 * time.Millisecond):
				}
				if cmd.Process.Signal(syscall.SIGSTOP) != nil {
					continue
				}
				stalls++
				time.Sleep(150 * time.Millisecond) // the stall itself, not a wait for anything
				cmd.Process.Signal(syscall.SIGCONT)
			}
			if cmd.ProcessState.ExitCode() != exitOK {
				t.Fatalf("lab run: exit %d: %s", cmd.ProcessState.ExitCode(), stderr.String())
			}
			checkNoNamespacesOf(t, cmd.Process.Pid)
			t.Logf("%d stalls injected", stalls)
			if format == "text" {
				out := stdout.String()
				if !strings.Contains(out, "  distorted\n") || !strings.Contains(out, "warning: rtt200-rate2mbit-iw10-size60000: the host, not the path, set the times of 1 of 1 trials") {
					t.Errorf("the text does not mark the trial:\n%s", out)
				}
				return
			}
			var run lab.RunOutput
			if err := json.Unmarshal([]byte(stdout.String()), &run); err != nil {
				t.Fatalf("%v: %s", err, stdout.String())
			}
			checkSchema(t, "lab", "lab run --json", stdout.String())
			if len(run.Trials) != 1 {
				t.Fatalf("%d trials", len(run.Trials))
			}
			tr := run.Trials[0]
			if tr.PathCheck == nil || !tr.PathCheck.Distorted || tr.PathCheck.Reason == "" || tr.Reruns != lab.DefaultDistortedReruns || !tr.Excluded || tr.DistortedBy == "" {
				t.Errorf("trial: path check %+v, reruns %d, excluded %v, distorted by %q; want distorted, run again %d times, excluded",
					tr.PathCheck, tr.Reruns, tr.Excluded, tr.DistortedBy, lab.DefaultDistortedReruns)
			}
			s := run.Summary
			if s.Rerun != 1 || s.Distorted != 1 || s.Excluded != 0 || s.FCTUserMs.N != 1 {
				t.Errorf("summary: rerun %d, distorted %d, excluded %d, %d FCTs; want 1, 1, 0 (every trial was: kept) and 1", s.Rerun, s.Distorted, s.Excluded, s.FCTUserMs.N)
			}
			warned := false
			for _, w := range run.Warnings {
				warned = warned || strings.Contains(w, "every trial stayed distorted")
			}
			if !warned {
				t.Errorf("no warning says every trial stayed distorted: %q", run.Warnings)
			}
		})
	}
}
