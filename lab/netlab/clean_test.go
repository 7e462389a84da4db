package netlab

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv, when set, makes this test binary a helper process that owns a trial
// (see TestHelperProcess).
const helperEnv = "SLOWSTART_NETLAB_TEST_HELPER"

// helperLinePrefix starts the line on which a helper prints its namespace names.
const helperLinePrefix = "netlab-helper namespaces: "

// TestHelperProcess is not a test: run with helperEnv set, it installs
// HandleSignals, creates a trial, prints its namespace names and waits for a
// signal. On the signal the handler removes the trial and the helper exits 0.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("runs only as a helper process of the Clean and signal tests")
	}
	ctx, stop := HandleSignals(t.Context())
	defer stop()
	trial, err := Create(ctx, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "create:", err)
		os.Exit(2)
	}
	fmt.Printf("%s%s %s\n", helperLinePrefix, trial.ClientNamespace, trial.ServerNamespace)
	<-ctx.Done()
	os.Exit(0)
}

// helperProcess is a running helper that owns one trial.
type helperProcess struct {
	cmd        *exec.Cmd
	namespaces []string
}

// startHelper starts a helper process and waits until it has made its trial.
// The helper is killed when the test ends.
func startHelper(t *testing.T) *helperProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	helper := &helperProcess{cmd: cmd}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		// Whatever the test did, leave nothing behind.
		for _, name := range helper.namespaces {
			removeNamedNamespace(name)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("helper process said nothing: %v", err)
	}
	go io.Copy(io.Discard, stdout)
	names, found := strings.CutPrefix(strings.TrimSpace(line), helperLinePrefix)
	if !found {
		t.Fatalf("helper process printed %q, want its namespace names", line)
	}
	helper.namespaces = strings.Fields(names)
	recordHelperNamespaces(helper.namespaces...)
	if len(helper.namespaces) != 2 {
		t.Fatalf("helper process printed %d namespace names, want 2: %q", len(helper.namespaces), line)
	}
	wantPrefix := fmt.Sprintf("%s%d-", NamespacePrefix, cmd.Process.Pid)
	for _, name := range helper.namespaces {
		if !strings.HasPrefix(name, wantPrefix) || !namespaceExists(t, name) {
			t.Fatalf("helper namespace %s: want an existing namespace named %s...", name, wantPrefix)
		}
	}
	return helper
}

// signalAndWait sends sig to the helper and waits for it to exit.
func (h *helperProcess) signalAndWait(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	if err := h.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(ioTimeout):
		t.Fatalf("helper did not exit within %v of %v", ioTimeout, sig)
		return nil
	}
}

// only returns a clean filter that accepts just these names, so the tests never
// touch the namespaces of other processes on the machine.
func only(names ...string) func(string) bool {
	return func(name string) bool { return slices.Contains(names, name) }
}

func TestSignalRemovesTrials(t *testing.T) {
	requireRoot(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			helper := startHelper(t)
			if err := helper.signalAndWait(t, sig); err != nil {
				t.Fatalf("helper exited with %v after %v, want status 0", err, sig)
			}
			for _, name := range helper.namespaces {
				if namespaceExists(t, name) {
					t.Errorf("namespace %s survives its owner's %v", name, sig)
				}
			}
		})
	}
}

func TestCleanRemovesDeadOwnersOnly(t *testing.T) {
	requireRoot(t)
	t.Run("killed owner", func(t *testing.T) {
		helper := startHelper(t)
		err := helper.signalAndWait(t, syscall.SIGKILL)
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			t.Fatalf("helper exit after SIGKILL: %v, want a kill", err)
		}
		for _, name := range helper.namespaces {
			if !namespaceExists(t, name) {
				t.Fatalf("namespace %s vanished without Clean; the test cannot check Clean", name)
			}
		}
		removed, err := processTrials.clean(t.Context(), false, only(helper.namespaces...))
		if err != nil {
			t.Fatalf("Clean: %v", err)
		}
		checkRemoved(t, removed, helper.namespaces)
	})

	t.Run("live owner", func(t *testing.T) {
		helper := startHelper(t)
		removed, err := processTrials.clean(t.Context(), false, only(helper.namespaces...))
		if err != nil {
			t.Fatalf("Clean: %v", err)
		}
		if len(removed) != 0 {
			t.Fatalf("Clean removed %v of a live process", removed)
		}
		removed, err = processTrials.clean(t.Context(), true, only(helper.namespaces...))
		if err != nil {
			t.Fatalf("Clean with all: %v", err)
		}
		checkRemoved(t, removed, helper.namespaces)
	})

	t.Run("own live trial", func(t *testing.T) {
		trial := createTrial(t, Options{})
		names := []string{trial.ClientNamespace, trial.ServerNamespace}
		removed, err := processTrials.clean(t.Context(), false, only(names...))
		if err != nil {
			t.Fatalf("Clean: %v", err)
		}
		if len(removed) != 0 {
			t.Fatalf("Clean removed %v of this process's live trial", removed)
		}
		removed, err = processTrials.clean(t.Context(), true, only(names...))
		if err != nil {
			t.Fatalf("Clean with all: %v", err)
		}
		checkRemoved(t, removed, names)
		if err := trial.Do(Server, func() error { return nil }); err == nil {
			t.Errorf("trial still usable after Clean with all")
		}
	})

	t.Run("own PID, not a live trial", func(t *testing.T) {
		// Left by an earlier process that had this PID.
		earlier := Owner{PID: os.Getpid(), StartTime: thisProcess.StartTime - 1}
		name := namespaceName(earlier, 1<<40, Client)
		handle, err := inNewNamespace(name, func() error { return markNamespaceAs(earlier) }, nil)
		handle.Close()
		if err != nil {
			removeNamedNamespace(name)
			t.Fatal(err)
		}
		t.Cleanup(func() { removeNamedNamespace(name) })
		removed, err := processTrials.clean(t.Context(), false, only(name))
		if err != nil {
			t.Fatalf("Clean: %v", err)
		}
		checkRemoved(t, removed, []string{name})
	})
}

// checkRemoved checks that Clean reported exactly want and that they are gone.
func checkRemoved(t *testing.T, removed, want []string) {
	t.Helper()
	slices.Sort(removed)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(removed, want) {
		t.Errorf("Clean removed %v, want %v", removed, want)
	}
	for _, name := range want {
		if namespaceExists(t, name) {
			t.Errorf("namespace %s exists after Clean", name)
		}
	}
}

// TestCreateNeverRemovesAnotherOwnersName checks that a Create failing on a name
// already taken leaves the existing namespace alone.
func TestCreateNeverRemovesAnotherOwnersName(t *testing.T) {
	requireRoot(t)
	registry := newRegistry()
	registry.prepareOnce.Do(func() {})                // no leftover cleaning in this test
	taken := namespaceName(registry.owner, 1, Server) // the name its first trial will want
	handle, err := inNewNamespace(taken, nil, nil)
	handle.Close()
	t.Cleanup(func() { removeNamedNamespace(taken) })
	if err != nil {
		t.Fatal(err)
	}
	trial, err := registry.create(t.Context(), Options{})
	if err == nil {
		trial.Close()
		t.Fatalf("Create succeeded although namespace %s existed", taken)
	}
	if !namespaceExists(t, taken) {
		t.Errorf("failed Create removed the namespace %s it did not make", taken)
	}
	if client := namespaceName(registry.owner, 1, Client); namespaceExists(t, client) {
		t.Errorf("failed Create left its client namespace %s", client)
	}
	if trials, _ := registry.liveTrials(); len(trials) != 0 {
		t.Errorf("failed Create left %d trials registered", len(trials))
	}
}
