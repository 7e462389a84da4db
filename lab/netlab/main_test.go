package netlab

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/slowstart/slowstart/internal/testroot"
)

// helperNamespaces records the namespaces made by helper processes, so that
// TestMain can check they are gone too.
var helperNamespaces struct {
	sync.Mutex
	names []string
}

func recordHelperNamespaces(names ...string) {
	helperNamespaces.Lock()
	defer helperNamespaces.Unlock()
	helperNamespaces.names = append(helperNamespaces.names, names...)
}

// TestMain runs the tests, then checks with `ip netns list` that none of the
// namespaces they made is left, removing any it finds.
func TestMain(m *testing.M) {
	code := m.Run()
	if os.Getenv(helperEnv) == "" && os.Geteuid() == 0 {
		if leftovers := leftoverTestNamespaces(); len(leftovers) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: tests left network namespaces behind: %v\n", leftovers)
			for _, name := range leftovers {
				removeNamedNamespace(name)
			}
			code = 1
		}
	}
	os.Exit(code)
}

// leftoverTestNamespaces lists the namespaces of this test process and of its
// helpers that `ip netns list` still shows.
func leftoverTestNamespaces() []string {
	output, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		return []string{fmt.Sprintf("(ip netns list failed: %v: %s)", err, output)}
	}
	ownPrefix := fmt.Sprintf("%s%d-", NamespacePrefix, os.Getpid())
	helperNamespaces.Lock()
	defer helperNamespaces.Unlock()
	var leftovers []string
	for _, line := range strings.Split(string(output), "\n") {
		fields := strings.Fields(line) // "NAME" or "NAME (id: N)"
		if len(fields) == 0 {
			continue
		}
		name := fields[0]
		for _, helperName := range helperNamespaces.names {
			if name == helperName {
				leftovers = append(leftovers, name)
			}
		}
		if strings.HasPrefix(name, ownPrefix) {
			leftovers = append(leftovers, name)
		}
	}
	return leftovers
}

// requireRoot skips tests that make namespaces and TUN devices when they cannot.
func requireRoot(t *testing.T) {
	t.Helper()
	testroot.Require(t, "makes network namespaces and TUN devices")
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("needs /dev/net/tun: %v", err)
	}
}

// createTrial makes a trial that is closed when the test ends, pass or fail.
func createTrial(t *testing.T, opts Options) *Trial {
	t.Helper()
	trial, err := Create(t.Context(), opts)
	if err != nil {
		t.Fatalf("Create(%+v): %v", opts, err)
	}
	t.Cleanup(func() {
		if err := trial.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return trial
}

// namespaceExists reports whether the named namespace is still mounted.
func namespaceExists(t *testing.T, name string) bool {
	t.Helper()
	_, err := os.Stat(NetnsDir + "/" + name)
	if err != nil && !os.IsNotExist(err) {
		t.Fatalf("stat namespace %s: %v", name, err)
	}
	return err == nil
}
