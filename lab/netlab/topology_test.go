package netlab

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func TestCreateSetsRoutesAndSysctls(t *testing.T) {
	requireRoot(t)
	tests := []struct {
		name string
		opts Options
		// sysctls expected in both namespaces, under /proc/sys/net
		wantSysctls map[string]string
		wantMTU     int
	}{
		{
			name: "initcwnd 4 initrwnd 20, defaults",
			opts: Options{InitCwnd: 4, InitRwnd: 20},
			wantSysctls: map[string]string{"ipv4/tcp_congestion_control": "cubic",
				"ipv4/tcp_no_metrics_save": "1", "ipv4/tcp_slow_start_after_idle": "1"},
			wantMTU: 1500,
		},
		{
			name: "bbr, tuned, jumbo",
			opts: Options{InitCwnd: 32, CongestionControl: "bbr", NoSlowStartAfterIdle: true, SaveMetrics: true, MTU: 9000},
			wantSysctls: map[string]string{"ipv4/tcp_congestion_control": "bbr",
				"ipv4/tcp_no_metrics_save": "0", "ipv4/tcp_slow_start_after_idle": "0"},
			wantMTU: 9000,
		},
		{
			name: "reno with extra sysctl, kernel windows",
			opts: Options{CongestionControl: "reno", Sysctls: map[string]string{"ipv4/tcp_ecn": "1"}},
			wantSysctls: map[string]string{"ipv4/tcp_congestion_control": "reno",
				"ipv4/tcp_no_metrics_save": "1", "ipv4/tcp_ecn": "1"},
			wantMTU: 1500,
		},
	}
	hostCongestionControl := readHostFile(t, "/proc/sys/net/ipv4/tcp_congestion_control")
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			trial, err := Create(t.Context(), test.opts)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			closed := false
			t.Cleanup(func() {
				if !closed {
					trial.Close()
				}
			})

			for _, side := range []Side{Client, Server} {
				peer := Server
				if side == Server {
					peer = Client
				}
				wantInitCwnd, wantInitRwnd := 0, test.opts.InitRwnd
				if side == Server {
					wantInitCwnd, wantInitRwnd = test.opts.InitCwnd, 0
				}
				for _, ipv6 := range []bool{false, true} {
					route := findRoute(t, trial, side, ipv6, trial.Addr(peer, ipv6).String())
					if route.InitCwnd != wantInitCwnd || route.InitRwnd != wantInitRwnd {
						t.Errorf("%s route to %s: initcwnd %d initrwnd %d, want %d and %d",
							side, trial.Addr(peer, ipv6), route.InitCwnd, route.InitRwnd, wantInitCwnd, wantInitRwnd)
					}
				}
				checkTUNLink(t, trial, side, test.wantMTU)
				// Read the sysctls from a separate process inside the namespace.
				for key, want := range test.wantSysctls {
					output, err := trial.Command(side, "cat", "/proc/sys/net/"+key).Output()
					if err != nil {
						t.Fatalf("read %s in %s namespace: %v", key, side, err)
					}
					if got := strings.TrimSpace(string(output)); got != want {
						t.Errorf("%s namespace: %s = %q, want %q", side, key, got, want)
					}
				}
			}
			if got := readHostFile(t, "/proc/sys/net/ipv4/tcp_congestion_control"); got != hostCongestionControl {
				t.Errorf("host tcp_congestion_control changed from %q to %q", hostCongestionControl, got)
			}
			allowed := strings.Fields(readHostFile(t, allowedCongestionControlPath))
			if !slices.Contains(allowed, trial.Options.CongestionControl) {
				t.Errorf("host allowed congestion control %v lacks %s", allowed, trial.Options.CongestionControl)
			}

			if err := trial.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			closed = true
			if err := trial.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			for _, name := range []string{trial.ClientNamespace, trial.ServerNamespace} {
				if namespaceExists(t, name) {
					t.Errorf("namespace %s still exists after Close", name)
				}
			}
			if slices.Contains(leftoverTestNamespaces(), trial.ClientNamespace) {
				t.Errorf("ip netns list still shows %s", trial.ClientNamespace)
			}
			if err := trial.Do(Client, func() error { return nil }); err == nil {
				t.Errorf("Do after Close succeeded, want an error")
			}
		})
	}
}

// findRoute returns the side's route to the single address dst, failing the test
// if there is not exactly one.
func findRoute(t *testing.T, trial *Trial, side Side, ipv6 bool, dst string) netlink.Route {
	t.Helper()
	family := netlink.FAMILY_V4
	if ipv6 {
		family = netlink.FAMILY_V6
	}
	var found []netlink.Route
	err := trial.Do(side, func() error {
		handle, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		defer handle.Close()
		routes, err := handle.RouteList(nil, family)
		if err != nil {
			return err
		}
		for _, route := range routes {
			if route.Dst != nil && route.Dst.IP.String() == dst {
				ones, bits := route.Dst.Mask.Size()
				if ones == bits {
					found = append(found, route)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("list %s routes: %v", side, err)
	}
	if len(found) != 1 {
		t.Fatalf("%s namespace has %d routes to %s, want 1: %v", side, len(found), dst, found)
	}
	return found[0]
}

// checkTUNLink checks the side's TUN device: up, MTU, and its two addresses.
func checkTUNLink(t *testing.T, trial *Trial, side Side, wantMTU int) {
	t.Helper()
	err := trial.Do(side, func() error {
		handle, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		defer handle.Close()
		link, err := handle.LinkByName(TUNName)
		if err != nil {
			return err
		}
		if link.Type() != "tuntap" || link.Attrs().MTU != wantMTU || link.Attrs().Flags&net.FlagUp == 0 {
			return fmt.Errorf("%s: type %s, MTU %d, flags %v; want tuntap, MTU %d, up",
				TUNName, link.Type(), link.Attrs().MTU, link.Attrs().Flags, wantMTU)
		}
		addrs, err := handle.AddrList(link, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		var got []string
		for _, addr := range addrs {
			got = append(got, addr.IPNet.String())
		}
		slices.Sort(got)
		want := []string{trial.Addr(side, false).String() + "/32", trial.Addr(side, true).String() + "/128"}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			return fmt.Errorf("%s addresses %v, want %v", TUNName, got, want)
		}
		return nil
	})
	if err != nil {
		t.Errorf("%s namespace: %v", side, err)
	}
}

func readHostFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// TestCreateLeavesHostUntouched checks that a live trial adds no link, address,
// route or rule to the host's namespace.
func TestCreateLeavesHostUntouched(t *testing.T) {
	requireRoot(t)
	before := hostNetworkState(t)
	trial := createTrial(t, Options{InitCwnd: 4})
	after := hostNetworkState(t)
	for _, line := range after {
		if !slices.Contains(before, line) {
			t.Errorf("trial %s added to the host namespace: %s", trial.ClientNamespace, line)
		}
	}
}

// hostNetworkState lists the host namespace's links, addresses, routes and rules.
func hostNetworkState(t *testing.T) []string {
	t.Helper()
	var state []string
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, link := range links {
		state = append(state, fmt.Sprintf("link %d %s", link.Attrs().Index, link.Attrs().Name))
		addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
		if err != nil {
			t.Fatal(err)
		}
		for _, addr := range addrs {
			state = append(state, fmt.Sprintf("address %s on %s", addr.IPNet, link.Attrs().Name))
		}
	}
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	for _, route := range routes {
		state = append(state, "route "+route.String())
	}
	rules, err := netlink.RuleList(netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	for _, rule := range rules {
		state = append(state, "rule "+rule.String())
	}
	return state
}

func TestCreateInParallel(t *testing.T) {
	requireRoot(t)
	const trialCount = 8
	trials := make([]*Trial, trialCount)
	errs := make([]error, trialCount)
	var wg sync.WaitGroup
	for i := range trialCount {
		wg.Go(func() { trials[i], errs[i] = Create(t.Context(), Options{InitCwnd: i + 1}) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, trial := range trials {
			if trial != nil {
				trial.Close()
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Create: %v", err)
	}

	seen := map[string]int{}
	for i, trial := range trials {
		for _, key := range []string{trial.ClientNamespace, trial.ServerNamespace,
			trial.ClientAddr.String(), trial.ServerAddr.String(), trial.ClientAddr6.String(), trial.ServerAddr6.String()} {
			if earlier, dup := seen[key]; dup {
				t.Errorf("trials %d and %d share %s", earlier, i, key)
			}
			seen[key] = i
		}
		route := findRoute(t, trial, Server, false, trial.ClientAddr.String())
		if route.InitCwnd != i+1 {
			t.Errorf("trial %d: server route initcwnd %d, want %d", i, route.InitCwnd, i+1)
		}
	}

	for i, trial := range trials {
		wg.Go(func() { errs[i] = trial.Close() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, trial := range trials {
		for _, name := range []string{trial.ClientNamespace, trial.ServerNamespace} {
			if namespaceExists(t, name) {
				t.Errorf("namespace %s still exists after Close", name)
			}
		}
	}
}

// TestRunsInNamespace checks that Do, Command and Start all run inside the side's
// namespace, by comparing the namespace inode they see with the mounted one.
func TestRunsInNamespace(t *testing.T) {
	requireRoot(t)
	trial := createTrial(t, Options{})
	hostNamespace := namespaceLink(t, "/proc/self/ns/net")
	for _, side := range []Side{Client, Server} {
		var stat syscall.Stat_t
		if err := syscall.Stat(trial.NamespacePath(side), &stat); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("net:[%d]", stat.Ino)
		if want == hostNamespace {
			t.Fatalf("%s namespace is the host's (%s)", side, want)
		}
		tests := []struct {
			name string
			run  func() (string, error)
		}{
			{"Do", func() (string, error) {
				var got string
				err := trial.Do(side, func() error {
					var err error
					got, err = os.Readlink("/proc/thread-self/ns/net")
					return err
				})
				return got, err
			}},
			{"Command", func() (string, error) {
				output, err := trial.Command(side, "readlink", "/proc/self/ns/net").Output()
				return strings.TrimSpace(string(output)), err
			}},
			{"Start", func() (string, error) {
				cmd := exec.Command("readlink", "/proc/self/ns/net")
				var output strings.Builder
				cmd.Stdout = &output
				if err := trial.Start(side, cmd); err != nil {
					return "", err
				}
				err := cmd.Wait()
				return strings.TrimSpace(output.String()), err
			}},
		}
		for _, test := range tests {
			got, err := test.run()
			if err != nil {
				t.Fatalf("%s %s: %v", test.name, side, err)
			}
			if got != want {
				t.Errorf("%s %s ran in %s, want %s", test.name, side, got, want)
			}
		}
	}
	if got := namespaceLink(t, "/proc/thread-self/ns/net"); got != hostNamespace {
		t.Errorf("test goroutine's thread is in %s after Do, want the host's %s", got, hostNamespace)
	}
	wantErr := errors.New("from fn")
	if err := trial.Do(Server, func() error { return wantErr }); !errors.Is(err, wantErr) {
		t.Errorf("Do returned %v, want fn's error", err)
	}
}

func namespaceLink(t *testing.T, path string) string {
	t.Helper()
	link, err := os.Readlink(path)
	if err != nil {
		t.Fatal(err)
	}
	return link
}

// TestCloseAllWhileCreating closes every trial while others are being made, as a
// signal may, and checks that no namespace survives either.
func TestCloseAllWhileCreating(t *testing.T) {
	requireRoot(t)
	const creators = 4
	var wg sync.WaitGroup
	for range creators {
		wg.Go(func() {
			for range 3 {
				// Errors are expected here: CloseAll may close a trial being made.
				Create(t.Context(), Options{})
			}
		})
	}
	closeErrs := make(chan error, 1)
	wg.Go(func() {
		var errs []error
		for range 20 {
			errs = append(errs, CloseAll())
		}
		closeErrs <- errors.Join(errs...)
	})
	wg.Wait()
	if err := <-closeErrs; err != nil {
		t.Errorf("CloseAll during Create: %v", err)
	}
	if err := CloseAll(); err != nil {
		t.Fatalf("final CloseAll: %v", err)
	}
	if trials, _ := processTrials.liveTrials(); len(trials) != 0 {
		t.Errorf("%d trials still registered after CloseAll", len(trials))
	}
	if leftovers := leftoverTestNamespaces(); len(leftovers) != 0 {
		t.Errorf("namespaces left after CloseAll: %v", leftovers)
	}
}
