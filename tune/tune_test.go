package tune

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/internal/testroot"
)

// needRoot skips the test without root, except in CI, where it fails.
func needRoot(t *testing.T) { t.Helper(); testroot.Require(t, "network namespaces and routes") }

// newNamespace makes a network namespace holding a few kinds of routes,
// removed when the test ends.
func newNamespace(t *testing.T) string {
	t.Helper()
	needRoot(t)
	return testroot.Namespace(t, "sstune", `
		link set lo up
		link add veth0 type veth peer name veth1
		link add dummy0 type veth peer name dummy1
		# No link-local addresses: they would appear at a moment of the kernel's
		# choosing. The routes they bring are made by hand below instead.
		link set veth0 addrgenmode none
		link set veth1 addrgenmode none
		link set dummy0 addrgenmode none
		link set dummy1 addrgenmode none
		link set veth0 up
		link set veth1 up
		link set dummy1 up
		link set dummy0 up
		addr add 192.0.2.10/24 dev veth0
		-6 addr add 2001:db8::10/64 dev veth0 nodad
		addr add 198.51.100.1/24 dev dummy0
		route add default via 192.0.2.1 dev veth0 proto static metric 100
		route add 203.0.113.0/24 via 192.0.2.2 dev veth0 mtu lock 1400 rto_min 50ms advmss 1300
		route add 10.20.0.0/16 dev dummy0 table 100 initcwnd 4 quickack 1 congctl reno
		route add default via 198.51.100.254 dev dummy0 table 100 proto static
		-6 route add default via 2001:db8::1 dev veth0 metric 1024 pref high
		# Three routes of one destination and metric: only the first can be replaced.
		-6 route add fe80::/64 dev veth0
		-6 route append fe80::/64 dev veth1
		-6 route append fe80::/64 dev dummy0
		-6 route add 2001:db8:5::/48 via 2001:db8::2 dev veth0 mtu 1400 hoplimit 32 initrwnd 20
	`)
}

// routeSnapshot is `ip -d route show table all` for both families, by the real ip binary.
func routeSnapshot(t *testing.T, ns string) string {
	t.Helper()
	return testroot.IP(t, "-n", ns, "-4", "-d", "route", "show", "table", "all") + "----\n" +
		testroot.IP(t, "-n", ns, "-6", "-d", "route", "show", "table", "all")
}

// sysctlSnapshot is every sysctl Read lists, by the real sysctl binary
// inside the namespace.
func sysctlSnapshot(t *testing.T, ns string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns, "sysctl"}, Sysctls...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("sysctl in %s: %v\n%s", ns, err, out)
	}
	return string(out)
}

// flipped is the other value of a 0/1 sysctl.
func flipped(t *testing.T, ns, name string) string {
	t.Helper()
	state, err := Read(ns)
	if err != nil {
		t.Fatal(err)
	}
	if state.Sysctl(name) == "1" {
		return "0"
	}
	return "1"
}

func TestReadRoutesAndSysctls(t *testing.T) {
	ns := newNamespace(t)
	state, err := Read(ns)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"unicast default via 192.0.2.1 dev veth0 table main proto static scope global metric 100":                                                       false,
		"unicast 203.0.113.0/24 via 192.0.2.2 dev veth0 table main proto boot scope global mtu lock 1400 advmss 1300 rto_min lock 50ms":                 false,
		"unicast 10.20.0.0/16 dev dummy0 table 100 proto boot scope link initcwnd 4 quickack 1 congctl reno":                                            false,
		"unicast default via 2001:db8::1 dev veth0 table main proto boot scope global metric 1024 pref high":                                            false,
		"unicast 2001:db8:5::/48 via 2001:db8::2 dev veth0 table main proto boot scope global metric 1024 pref medium mtu 1400 hoplimit 32 initrwnd 20": false,
	}
	for _, r := range state.Routes {
		if _, ok := want[r.String()]; ok {
			want[r.String()] = true
		}
	}
	for line, seen := range want {
		if !seen {
			var all []string
			for _, r := range state.Routes {
				all = append(all, r.String())
			}
			t.Errorf("route %q not read; read:\n%s", line, strings.Join(all, "\n"))
		}
	}
	if got := state.Sysctl("net.ipv4.tcp_slow_start_after_idle"); got != "1" && got != "0" {
		t.Errorf("tcp_slow_start_after_idle = %q", got)
	}
	if got := state.Sysctl("net.ipv4.tcp_rmem"); len(strings.Fields(got)) != 3 {
		t.Errorf("tcp_rmem = %q, want three numbers", got)
	}
}

// TestApplyRevertExact applies and reverts 100 times: every time the routes
// must carry the new windows after apply, and the routes and sysctls read
// back byte for byte as before after revert.
func TestApplyRevertExact(t *testing.T) {
	ns := newNamespace(t)
	dir := t.TempDir()
	before := routeSnapshot(t, ns)
	sysctlsBefore := sysctlSnapshot(t, ns)
	idle, metrics := flipped(t, ns, SysctlSlowStartAfterIdle), flipped(t, ns, SysctlNoMetricsSave)
	for i := 0; i < 100; i++ {
		initcwnd := 20 + i%7
		res, err := Apply(ApplyOptions{Netns: ns, InitCwnd: initcwnd, InitRwnd: 30, Route: RouteAll,
			Sysctls:    map[string]string{SysctlSlowStartAfterIdle: idle, SysctlNoMetricsSave: metrics},
			BackupPath: filepath.Join(dir, fmt.Sprintf("b%d.json", i))})
		if err != nil {
			t.Fatalf("iteration %d: apply: %v", i, err)
		}
		if res.SysctlsChanged != 2 {
			t.Fatalf("iteration %d: changed %d sysctls, want 2", i, res.SysctlsChanged)
		}
		if now := sysctlSnapshot(t, ns); !strings.Contains(now, SysctlSlowStartAfterIdle+" = "+idle+"\n") ||
			!strings.Contains(now, SysctlNoMetricsSave+" = "+metrics+"\n") {
			t.Fatalf("iteration %d: sysctls after apply:\n%s", i, now)
		}
		if res.Changed < 7 {
			t.Fatalf("iteration %d: changed %d routes, want every unicast route outside local (at least 7)", i, res.Changed)
		}
		skipped := 0
		for _, c := range res.Changes {
			if c.Skipped != "" {
				skipped++
			}
		}
		if skipped != 2 {
			t.Fatalf("iteration %d: %d routes skipped, want the 2 fe80::/64 routes behind the first", i, skipped)
		}
		applied := routeSnapshot(t, ns)
		if n := strings.Count(applied, fmt.Sprintf("initcwnd %d ", initcwnd)); n != res.Changed {
			t.Fatalf("iteration %d: %d routes show initcwnd %d, want %d:\n%s", i, n, initcwnd, res.Changed, applied)
		}
		if !strings.Contains(applied, "mtu lock 1400") || !strings.Contains(applied, "congctl reno") || !strings.Contains(applied, "pref high") {
			t.Fatalf("iteration %d: apply lost an attribute:\n%s", i, applied)
		}
		rev, err := Revert(RevertOptions{BackupPath: res.BackupPath, Netns: ns})
		if err != nil {
			t.Fatalf("iteration %d: revert: %v", i, err)
		}
		if rev.Changed != res.Changed || rev.SysctlsChanged != 2 {
			t.Fatalf("iteration %d: revert changed %d routes and %d sysctls, apply %d and 2", i, rev.Changed, rev.SysctlsChanged, res.Changed)
		}
		if after := routeSnapshot(t, ns); after != before {
			t.Fatalf("iteration %d: routes differ after revert\nbefore:\n%s\nafter:\n%s", i, before, after)
		}
		if after := sysctlSnapshot(t, ns); after != sysctlsBefore {
			t.Fatalf("iteration %d: sysctls differ after revert\nbefore:\n%s\nafter:\n%s", i, sysctlsBefore, after)
		}
	}
}

func TestApplyIdempotent(t *testing.T) {
	ns := newNamespace(t)
	dir := t.TempDir()
	first, err := Apply(ApplyOptions{Netns: ns, InitCwnd: 32, BackupDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if first.Changed != 3 || first.BackupPath == "" {
		t.Fatalf("first apply changed %d routes (want the 3 default routes), backup %q", first.Changed, first.BackupPath)
	}
	snapshot := routeSnapshot(t, ns)
	second, err := Apply(ApplyOptions{Netns: ns, InitCwnd: 32, BackupDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if second.Changed != 0 || second.BackupPath != "" {
		t.Errorf("second apply changed %d routes, wrote backup %q; want nothing", second.Changed, second.BackupPath)
	}
	for _, c := range second.Changes {
		if !c.Unchanged {
			t.Errorf("route %s not reported unchanged", c.Before)
		}
	}
	if now := routeSnapshot(t, ns); now != snapshot {
		t.Errorf("second apply changed the routes:\n%s\n%s", snapshot, now)
	}
	// Revert from the newest backup, twice: the second does nothing.
	for i, wantChanged := range []int{3, 0} {
		rev, err := Revert(RevertOptions{BackupDir: dir, Netns: ns})
		if err != nil {
			t.Fatal(err)
		}
		if rev.BackupPath != first.BackupPath || rev.Changed != wantChanged {
			t.Errorf("revert %d: backup %s changed %d; want %s and %d", i+1, rev.BackupPath, rev.Changed, first.BackupPath, wantChanged)
		}
	}
}

func TestApplyDryRunAndBounds(t *testing.T) {
	ns := newNamespace(t)
	dir := t.TempDir()
	before := routeSnapshot(t, ns)
	res, err := Apply(ApplyOptions{Netns: ns, InitCwnd: 40, Route: "203.0.113.0/24", DryRun: true, BackupDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 1 || res.Changed != 0 || res.BackupPath != "" {
		t.Fatalf("dry run: %d changes, %d changed, backup %q", len(res.Changes), res.Changed, res.BackupPath)
	}
	wantCmd := "ip route change 203.0.113.0/24 via 192.0.2.2 dev veth0 table main proto boot scope global mtu lock 1400 advmss 1300 initcwnd 40 rto_min lock 50ms"
	if got := res.Changes[0].Command; got != wantCmd {
		t.Errorf("command\n got %s\nwant %s", got, wantCmd)
	}
	if now := routeSnapshot(t, ns); now != before {
		t.Errorf("dry run changed the routes")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("dry run wrote %d files", len(entries))
	}
	for _, opts := range []ApplyOptions{
		{InitCwnd: 0}, {InitCwnd: 101}, {InitCwnd: -3}, {InitCwnd: 10, InitRwnd: 500},
		{InitCwnd: 10, Route: "not-a-prefix"}, {InitCwnd: 70000, Force: true},
		{Sysctls: map[string]string{SysctlSlowStartAfterIdle: "2"}},
		{Sysctls: map[string]string{"net.ipv4.ip_forward": "1"}},
	} {
		opts.Netns, opts.BackupDir = ns, dir
		if _, err := Apply(opts); err == nil {
			t.Errorf("%+v accepted", opts)
		} else if _, ok := err.(*UsageError); !ok {
			t.Errorf("%+v: %v is not a UsageError", opts, err)
		}
	}
	if _, err := Apply(ApplyOptions{Netns: ns, InitCwnd: 101, Force: true, Route: "2001:db8:5::/48", BackupDir: dir}); err != nil {
		t.Errorf("forced 101: %v", err)
	}
	if _, err := Apply(ApplyOptions{Netns: ns, InitCwnd: 20, Route: "192.0.2.99/32", BackupDir: dir}); err == nil {
		t.Error("a prefix with no route was accepted")
	} else if _, ok := err.(*NoRouteError); !ok {
		t.Errorf("no route: %v is not a NoRouteError", err)
	}
}

// TestRevertRecreatesDeletedRoute: a route deleted after apply comes back.
func TestRevertRecreatesDeletedRoute(t *testing.T) {
	ns := newNamespace(t)
	before := routeSnapshot(t, ns)
	res, err := Apply(ApplyOptions{Netns: ns, InitCwnd: 16, Route: "10.20.0.0/16", BackupDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	testroot.IP(t, "-n", ns, "route", "del", "10.20.0.0/16", "table", "100")
	rev, err := Revert(RevertOptions{BackupPath: res.BackupPath})
	if err != nil {
		t.Fatal(err)
	}
	if len(rev.Changes) != 1 || !rev.Changes[0].Missing {
		t.Errorf("changes %+v, want one missing route", rev.Changes)
	}
	if now := routeSnapshot(t, ns); now != before {
		t.Errorf("routes differ:\n%s\n%s", before, now)
	}
}

func TestBackupErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := NewestBackup(filepath.Join(dir, "none"), ""); err == nil {
		t.Error("a missing directory gave a backup")
	}
	if _, err := NewestBackup(dir, ""); err == nil {
		t.Error("an empty directory gave a backup")
	}
	bad := filepath.Join(dir, "tune-backup-bad.json")
	if err := os.WriteFile(bad, []byte(`{"schema":"other"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadBackup(bad); err == nil {
		t.Error("a file of another schema loaded")
	}
	b := newBackup("x", "test", 10, 0, nil, nil)
	path := filepath.Join(dir, "b.json")
	if err := writeBackup(path, b); err != nil {
		t.Fatal(err)
	}
	if err := writeBackup(path, b); err == nil {
		t.Error("a backup overwrote another")
	}
	data, _ := os.ReadFile(path)
	if !bytes.Contains(data, []byte(BackupSchema)) {
		t.Errorf("backup lacks its schema: %s", data)
	}
	got, err := LoadBackup(path)
	if err != nil || got.Netns != "x" {
		t.Errorf("load: %+v, %v", got, err)
	}
}

// TestSysctlOnlyApplyIdempotent: a sysctl alone is applied, backed up,
// applied again without effect, and reverted twice, the second time without
// effect; the host's value is never touched.
func TestSysctlOnlyApplyIdempotent(t *testing.T) {
	ns := newNamespace(t)
	dir := t.TempDir()
	hostBefore, err := os.ReadFile("/proc/sys/net/ipv4/tcp_slow_start_after_idle")
	if err != nil {
		t.Fatal(err)
	}
	routesBefore, sysctlsBefore := routeSnapshot(t, ns), sysctlSnapshot(t, ns)
	want := flipped(t, ns, SysctlSlowStartAfterIdle)
	set := map[string]string{SysctlSlowStartAfterIdle: want}
	dry, err := Apply(ApplyOptions{Netns: ns, Sysctls: set, BackupDir: dir, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Sysctls) != 1 || dry.Sysctls[0].Unchanged || dry.SysctlsChanged != 0 || sysctlSnapshot(t, ns) != sysctlsBefore {
		t.Fatalf("dry run: %+v", dry)
	}
	first, err := Apply(ApplyOptions{Netns: ns, Sysctls: set, BackupDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if first.SysctlsChanged != 1 || first.Changed != 0 || first.BackupPath == "" {
		t.Fatalf("first apply: %+v", first)
	}
	second, err := Apply(ApplyOptions{Netns: ns, Sysctls: set, BackupDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if second.SysctlsChanged != 0 || second.BackupPath != "" || !second.Sysctls[0].Unchanged {
		t.Errorf("second apply: %+v", second)
	}
	if hostNow, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_slow_start_after_idle"); !bytes.Equal(hostNow, hostBefore) {
		t.Errorf("the host's sysctl changed: %q, was %q", hostNow, hostBefore)
	}
	for i, wantChanged := range []int{1, 0} {
		rev, err := Revert(RevertOptions{Netns: ns, BackupDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if rev.SysctlsChanged != wantChanged {
			t.Errorf("revert %d changed %d sysctls, want %d", i+1, rev.SysctlsChanged, wantChanged)
		}
	}
	if now := sysctlSnapshot(t, ns); now != sysctlsBefore {
		t.Errorf("sysctls differ:\n%s\n%s", sysctlsBefore, now)
	}
	if now := routeSnapshot(t, ns); now != routesBefore {
		t.Errorf("routes differ:\n%s\n%s", routesBefore, now)
	}
}

// TestBackupRefusesOtherSysctls: a backup naming a sysctl Apply does not set
// is refused, so a backup file can't be used to write arbitrary sysctls.
func TestBackupRefusesOtherSysctls(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.json")
	b := newBackup("", "test", 0, 0, nil, []BackupSysctl{{Name: "net.ipv4.ip_forward", Value: "1"}})
	if err := writeBackup(path, b); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadBackup(path); err == nil {
		t.Error("a backup with net.ipv4.ip_forward loaded")
	}
}
