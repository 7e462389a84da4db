package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/testroot"
	"github.com/slowstart/slowstart/lab/labserver"
)

// tuneNamespace makes a network namespace with a default route, a /24 with
// metrics, a route in another table and IPv6 routes; removed at the end. The
// many kinds of routes are package tune's tests; these are what the command's
// outputs show.
func tuneNamespace(t *testing.T) string {
	t.Helper()
	return testroot.Namespace(t, "sstunecli", `
		link set lo up
		link add veth0 type veth peer name veth1
		# No link-local addresses: they would appear at a moment of the kernel's choosing.
		link set veth0 addrgenmode none
		link set veth1 addrgenmode none
		link set veth0 up
		link set veth1 up
		addr add 192.0.2.10/24 dev veth0
		-6 addr add 2001:db8::10/64 dev veth0 nodad
		route add default via 192.0.2.1 dev veth0 proto static metric 100
		route add 203.0.113.0/24 via 192.0.2.2 dev veth0 mtu lock 1400 rto_min 50ms
		route add 10.20.0.0/16 via 192.0.2.3 dev veth0 table 100 initcwnd 4
		-6 route add default via 2001:db8::1 dev veth0 metric 1024
	`)
}

// tuneSnapshot is the routes of both families and the TCP sysctls of the
// namespace, by the real ip and sysctl binaries.
func tuneSnapshot(t *testing.T, ns string) string {
	t.Helper()
	return testroot.IP(t, "-n", ns, "-4", "-d", "route", "show", "table", "all") + "----\n" +
		testroot.IP(t, "-n", ns, "-6", "-d", "route", "show", "table", "all") + "----\n" +
		testroot.IP(t, "netns", "exec", ns, "sysctl", "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_no_metrics_save",
			"net.ipv4.tcp_congestion_control", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")
}

// tuneSysctl reads one sysctl inside the namespace with the sysctl binary.
func tuneSysctl(t *testing.T, ns, name string) string {
	t.Helper()
	return strings.TrimSpace(testroot.IP(t, "netns", "exec", ns, "sysctl", "-n", name))
}

// tuneOther is the other value of a 0/1 sysctl.
func tuneOther(value string) string {
	if value == "1" {
		return "0"
	}
	return "1"
}

func TestTuneCLIApplyRevert(t *testing.T) {
	ns := tuneNamespace(t)
	dir := t.TempDir()
	before := tuneSnapshot(t, ns)

	code, out, errOut := runCLI(t, "tune", "show", "--netns", ns, "--json")
	if code != exitOK {
		t.Fatalf("show: exit %d: %s", code, errOut)
	}
	var shown struct {
		Routes []struct {
			Destination string `json:"destination"`
			Table       uint32 `json:"table"`
			Metrics     []struct {
				Name  string `json:"name"`
				Value uint32 `json:"value"`
			} `json:"metrics"`
		} `json:"routes"`
		Sysctls         []struct{ Name, Value string } `json:"sysctls"`
		Recommendations []struct {
			Reason   string  `json:"reason"`
			SavingMs float64 `json:"saving_ms"`
		} `json:"recommendations"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatalf("show --json: %v\n%s", err, out)
	}
	foundTable100 := false
	for _, r := range shown.Routes {
		if r.Destination == "10.20.0.0/16" && r.Table == 100 && len(r.Metrics) == 1 && r.Metrics[0].Name == "initcwnd" && r.Metrics[0].Value == 4 {
			foundTable100 = true
		}
	}
	if !foundTable100 {
		t.Errorf("show lacks 10.20.0.0/16 in table 100 with initcwnd 4:\n%s", out)
	}
	priced := false
	for _, r := range shown.Recommendations {
		if strings.Contains(r.Reason, "no initcwnd") && r.SavingMs > 0 {
			priced = true
		}
	}
	if !priced {
		t.Errorf("no priced initcwnd recommendation for 160 KB at 130 ms: %+v", shown.Recommendations)
	}

	// A dry run prints the ip commands and changes nothing.
	code, out, errOut = runCLI(t, "tune", "apply", "--netns", ns, "--initcwnd", "32", "--dry-run", "--backup-dir", dir)
	if code != exitOK || !strings.Contains(out, "ip route change default via 192.0.2.1 dev veth0 table main proto static scope global metric 100 initcwnd 32") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	if now := tuneSnapshot(t, ns); now != before {
		t.Fatalf("dry run changed the routes:\n%s", now)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("dry run wrote a backup")
	}

	idle := tuneOther(tuneSysctl(t, ns, "net.ipv4.tcp_slow_start_after_idle"))
	for i := 0; i < 3; i++ {
		code, out, errOut = runCLI(t, "tune", "apply", "--netns", ns, "--initcwnd", "32", "--initrwnd", "40", "--route", "all",
			"--slow-start-after-idle", idle, "--backup-dir", dir, "--persist")
		if code != exitOK {
			t.Fatalf("apply %d: exit %d\n%s%s", i, code, out, errOut)
		}
		if got := tuneSysctl(t, ns, "net.ipv4.tcp_slow_start_after_idle"); got != idle {
			t.Errorf("apply %d: tcp_slow_start_after_idle = %s, want %s", i, got, idle)
		}
		for _, want := range []string{"Backup of the prior state: " + dir, "InitialCongestionWindow=32", "congestion-window: 32", "post-up ip route change",
			"sysctl -w net.ipv4.tcp_slow_start_after_idle=" + idle, "net.ipv4.tcp_slow_start_after_idle = " + idle} {
			if !strings.Contains(out, want) {
				t.Errorf("apply %d: output lacks %q:\n%s", i, want, out)
			}
		}
		applied := tuneSnapshot(t, ns)
		if strings.Count(applied, "initcwnd 32 initrwnd 40") < 5 {
			t.Errorf("apply %d: routes:\n%s", i, applied)
		}
		code, out, errOut = runCLI(t, "tune", "apply", "--netns", ns, "--initcwnd", "32", "--initrwnd", "40", "--route", "all",
			"--slow-start-after-idle", idle, "--backup-dir", dir)
		if code != exitOK || !strings.Contains(out, "Nothing to change") {
			t.Errorf("apply %d again: exit %d, want nothing to change:\n%s%s", i, code, out, errOut)
		}
		code, out, errOut = runCLI(t, "tune", "revert", "--netns", ns, "--backup-dir", dir)
		if code != exitOK || !strings.Contains(out, "Restored") {
			t.Fatalf("revert %d: exit %d\n%s%s", i, code, out, errOut)
		}
		if now := tuneSnapshot(t, ns); now != before {
			t.Fatalf("revert %d: routes differ\nbefore:\n%s\nafter:\n%s", i, before, now)
		}
		code, out, _ = runCLI(t, "tune", "revert", "--netns", ns, "--backup-dir", dir)
		if code != exitOK || !strings.Contains(out, "Nothing to change") {
			t.Errorf("revert %d again: exit %d:\n%s", i, code, out)
		}
	}
}

func TestTuneCLIErrors(t *testing.T) {
	ns := tuneNamespace(t)
	dir := t.TempDir()
	before := tuneSnapshot(t, ns)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"tune", "apply", "--netns", ns}, exitUsage, "--initcwnd N is required"},
		{[]string{"tune", "apply", "--netns", ns, "--initcwnd", "0"}, exitUsage, "at least 1"},
		{[]string{"tune", "apply", "--netns", ns, "--initcwnd", "101"}, exitUsage, "--force"},
		{[]string{"tune", "apply", "--netns", ns, "--initcwnd", "abc"}, exitUsage, "invalid argument"},
		{[]string{"tune", "apply", "--netns", ns, "--initcwnd", "20", "--initrwnd", "1000"}, exitUsage, "initrwnd 1000"},
		{[]string{"tune", "apply", "--netns", ns, "--initcwnd", "20", "--route", "nonsense"}, exitUsage, "--route"},
		{[]string{"tune", "apply", "--netns", ns, "--slow-start-after-idle", "2"}, exitUsage, "one of 0, 1"},
		{[]string{"tune", "apply", "--netns", ns, "--initcwnd", "0", "--no-metrics-save", "1"}, exitUsage, "at least 1"},
		{[]string{"tune", "apply", "--netns", ns, "--initcwnd", "20", "--route", "198.18.0.0/15"}, exitUsage, "no unicast route matches"},
		{[]string{"tune", "apply", "--netns", "no-such-namespace-x", "--initcwnd", "20"}, exitUsage, "does not exist"},
		{[]string{"tune", "show", "--netns", "no-such-namespace-x"}, exitUsage, "no such network namespace"},
		{[]string{"probe", "--netns", "no-such-namespace-x", "http://192.0.2.1/"}, exitUsage, "no such network namespace"},
		{[]string{"survey", "--netns", "/run/netns/no-such-namespace-x", "-"}, exitUsage, "no such network namespace"},
		{[]string{"tune", "revert", "--netns", ns, "--backup-dir", dir}, exitFile, "no backup"},
		{[]string{"tune", "revert", "--backup", filepath.Join(dir, "missing.json")}, exitFile, "missing.json"},
		{[]string{"tune", "show", "--size", "big"}, exitUsage, "--size"},
		{[]string{"tune", "show", "extra"}, exitUsage, "unknown command"},
	} {
		code, out, errOut := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d (want %d), stderr %q (want %q), stdout %q", tc.args[1:], code, tc.code, errOut, tc.want, out)
		}
	}
	if now := tuneSnapshot(t, ns); now != before {
		t.Errorf("failed commands changed the routes:\n%s", now)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed commands wrote %d files", len(entries))
	}
}

// TestTuneKilledAfterBackup kills the binary between writing its backup and
// changing any route; the backup must then restore the routes exactly, even
// after they were changed by hand.
func TestTuneKilledAfterBackup(t *testing.T) {
	ns := tuneNamespace(t)
	before := tuneSnapshot(t, ns)
	bin := filepath.Join(t.TempDir(), "slowstart")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	backup := filepath.Join(t.TempDir(), "backup.json")
	idle := tuneOther(tuneSysctl(t, ns, "net.ipv4.tcp_slow_start_after_idle"))
	cmd := exec.Command(bin, "tune", "apply", "--netns", ns, "--initcwnd", "24", "--route", "all", "--slow-start-after-idle", idle, "--backup", backup)
	cmd.Env = append(os.Environ(), tuneHoldEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(stderr)
	held := false
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "backup written: "+backup) {
			held = true
			break
		}
	}
	if !held {
		t.Fatalf("the process did not report its backup: %v", lines.Err())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("process ended with %v, not killed", err)
	}
	if now := tuneSnapshot(t, ns); now != before {
		t.Fatalf("routes changed before the backup hold:\n%s", now)
	}
	// Change the routes as a half-finished apply (or an operator) would.
	testroot.IP(t, "-n", ns, "route", "change", "default", "via", "192.0.2.1", "dev", "veth0", "proto", "static", "metric", "100", "initcwnd", "50")
	testroot.IP(t, "-n", ns, "route", "del", "10.20.0.0/16", "table", "100")
	testroot.IP(t, "netns", "exec", ns, "sysctl", "-w", "net.ipv4.tcp_slow_start_after_idle="+idle)
	start := time.Now()
	revert := exec.Command(bin, "tune", "revert", "--backup", backup)
	if out, err := revert.CombinedOutput(); err != nil {
		t.Fatalf("revert: %v\n%s", err, out)
	}
	if now := tuneSnapshot(t, ns); now != before {
		t.Fatalf("routes differ after revert from the killed run's backup\nbefore:\n%s\nafter:\n%s", before, now)
	}
	t.Logf("revert took %v", time.Since(start))
}

// TestTuneCLILabIW: the commands together on a lab server whose route carries
// initcwnd 10: `tune apply --initcwnd 20` in its namespace makes `probe --exact`
// from the client's count 20 segments, and `tune revert` 10 again. (Package
// tune's own lab test applies through its API and measures with probe/exact's.)
func TestTuneCLILabIW(t *testing.T) {
	testroot.Require(t, "network namespaces, routes and nftables")
	s := startSurveyLab(t, labserver.Config{RTT: 20 * time.Millisecond, IW: 10})
	exactIW := func(when string) int {
		t.Helper()
		code, out, errOut := runCLI(t, "probe", "--exact", "--exact-runs", "1", "--json", "--netns", s.Netns, s.URL("/bytes/100000"))
		var res struct {
			Verdict    string `json:"verdict"`
			Reason     string `json:"reason"`
			IWSegments int    `json:"iw_segments"`
		}
		if err := json.Unmarshal([]byte(out), &res); code != exitOK || err != nil {
			t.Fatalf("%s: probe --exact: exit %d (%v): %s%s", when, code, err, out, errOut)
		}
		if res.Verdict != "exact" {
			t.Fatalf("%s: probe --exact: verdict %s: %s", when, res.Verdict, res.Reason)
		}
		return res.IWSegments
	}

	if iw := exactIW("before apply"); iw != 10 {
		t.Fatalf("before apply: measured IW %d, want 10", iw)
	}
	dir := t.TempDir()
	code, out, errOut := runCLI(t, "tune", "apply", "--netns", s.ServerNamespace, "--initcwnd", "20", "--route", "all", "--backup-dir", dir)
	if code != exitOK || !strings.Contains(out, "initcwnd 20") {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	if iw := exactIW("after apply"); iw != 20 {
		t.Errorf("after apply: measured IW %d, want 20", iw)
	}
	code, out, errOut = runCLI(t, "tune", "revert", "--netns", s.ServerNamespace, "--backup-dir", dir)
	if code != exitOK || !strings.Contains(out, "Restored") {
		t.Fatalf("revert: exit %d\n%s%s", code, out, errOut)
	}
	if iw := exactIW("after revert"); iw != 10 {
		t.Errorf("after revert: measured IW %d, want 10", iw)
	}
}
