package netlab

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Congestion control algorithms a trial may select. Any algorithm the kernel
// offers (net.ipv4.tcp_available_congestion_control) is accepted.
const (
	CongestionCubic = "cubic"
	CongestionBBR   = "bbr"
	CongestionReno  = "reno"
)

// Limits on Options.MTU: IPv6 needs at least 1280 bytes on a link.
const (
	MinMTU     = 1280
	MaxMTU     = 65535
	DefaultMTU = 1500
)

// Options says how one trial's namespaces are set up. The zero value is the lab's
// default: kernel initcwnd and initrwnd, cubic, slow start after idle on (the
// kernel's default), route metrics never cached, MTU 1500.
type Options struct {
	// InitCwnd is the initial congestion window in segments on the server's route
	// to the client (ip route ... initcwnd). 0 keeps the kernel default (10).
	InitCwnd int
	// InitRwnd is the initial receive window in segments on the client's route to
	// the server (ip route ... initrwnd). 0 keeps the kernel default.
	InitRwnd int
	// ServerAdvMSS and ClientAdvMSS are the MSS each side announces in its SYN, set
	// on its route (ip route ... advmss): a server announcing less than the client
	// (as some CDNs do) still sends segments as large as the client's MSS allows.
	// 0 keeps the kernel's choice (the MTU less the headers).
	ServerAdvMSS, ClientAdvMSS int
	// ClientQuickAck sets quickack on the client's route (ip route ... quickack 1):
	// the client acknowledges every segment at once instead of delaying its ACKs.
	ClientQuickAck bool
	// CongestionControl is written to net.ipv4.tcp_congestion_control in both
	// namespaces. Empty means "cubic". The algorithm is added to the host's
	// net.ipv4.tcp_allowed_congestion_control when missing, since a namespace
	// other than the host's can only select an allowed one.
	CongestionControl string
	// NoSlowStartAfterIdle writes net.ipv4.tcp_slow_start_after_idle=0 in both
	// namespaces, as a tuned server would. false keeps the kernel default 1.
	NoSlowStartAfterIdle bool
	// SaveMetrics writes net.ipv4.tcp_no_metrics_save=0, so connections inherit
	// the route metrics (cwnd, ssthresh, RTT) cached by earlier connections.
	// false, the lab's default, writes 1: every connection is a first visit.
	SaveMetrics bool
	// MTU of both TUN devices in bytes, from MinMTU to MaxMTU. 0 means DefaultMTU.
	MTU int
	// Sysctls are written in both namespaces after the ones above: keys are paths
	// under /proc/sys/net such as "ipv4/tcp_early_retrans" or "ipv4/tcp_ecn".
	Sysctls map[string]string
}

// resolved returns the options with defaults filled in, or an error naming the
// first field that cannot be used.
func (o Options) resolved() (Options, error) {
	if o.InitCwnd < 0 {
		return o, fmt.Errorf("netlab: InitCwnd %d segments is negative: use 0 for the kernel default", o.InitCwnd)
	}
	if o.InitRwnd < 0 {
		return o, fmt.Errorf("netlab: InitRwnd %d segments is negative: use 0 for the kernel default", o.InitRwnd)
	}
	if o.ServerAdvMSS < 0 || o.ClientAdvMSS < 0 || o.ServerAdvMSS > MaxMTU || o.ClientAdvMSS > MaxMTU {
		return o, fmt.Errorf("netlab: advmss %d/%d bytes: use 1 to %d, or 0 for the kernel's choice", o.ServerAdvMSS, o.ClientAdvMSS, MaxMTU)
	}
	if o.CongestionControl == "" {
		o.CongestionControl = CongestionCubic
	}
	if strings.ContainsAny(o.CongestionControl, " \t\n/") {
		return o, fmt.Errorf("netlab: congestion control %q is not an algorithm name such as cubic, bbr or reno", o.CongestionControl)
	}
	if o.MTU == 0 {
		o.MTU = DefaultMTU
	}
	if o.MTU < MinMTU || o.MTU > MaxMTU {
		return o, fmt.Errorf("netlab: MTU %d bytes is outside %d..%d (IPv6 needs at least %d)", o.MTU, MinMTU, MaxMTU, MinMTU)
	}
	for key := range o.Sysctls {
		if err := checkSysctlKey(key); err != nil {
			return o, err
		}
	}
	return o, nil
}

// availableCongestionControlPath lists the algorithms this kernel has loaded.
const availableCongestionControlPath = "/proc/sys/net/ipv4/tcp_available_congestion_control"

// CheckCongestionControl says whether a trial can use the algorithm: the kernel
// has it loaded, or a module for it (tcp_NAME) is there to load. It reads the
// host's lists; it changes nothing.
func CheckCongestionControl(algorithm string) error {
	data, err := os.ReadFile(availableCongestionControlPath)
	if err != nil {
		return fmt.Errorf("read %s: %w", availableCongestionControlPath, err)
	}
	available := strings.Fields(string(data))
	if slices.Contains(available, algorithm) {
		return nil
	}
	if release, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		modules, _ := filepath.Glob(filepath.Join("/lib/modules", strings.TrimSpace(string(release)), "kernel/net/ipv4", "tcp_"+algorithm+".ko*"))
		if len(modules) > 0 {
			return nil
		}
	}
	return fmt.Errorf("congestion control %q: this kernel offers %s (and has no module tcp_%s to load)", algorithm, strings.Join(available, ", "), algorithm)
}

// checkSysctlKey accepts a relative path under /proc/sys/net that stays there.
func checkSysctlKey(key string) error {
	if key == "" || path.IsAbs(key) || path.Clean(key) != key || strings.HasPrefix(key, "..") {
		return fmt.Errorf("netlab: sysctl %q must be a plain path under /proc/sys/net, such as ipv4/tcp_ecn", key)
	}
	return nil
}

// sysctlWrites lists the per-namespace sysctls the options ask for, in the order
// they are written, as paths under /proc/sys/net.
func (o Options) sysctlWrites() []sysctlWrite {
	noMetricsSave := "1"
	if o.SaveMetrics {
		noMetricsSave = "0"
	}
	slowStartAfterIdle := "1"
	if o.NoSlowStartAfterIdle {
		slowStartAfterIdle = "0"
	}
	writes := []sysctlWrite{
		{"ipv4/tcp_no_metrics_save", noMetricsSave},
		{"ipv4/tcp_congestion_control", o.CongestionControl},
		{"ipv4/tcp_slow_start_after_idle", slowStartAfterIdle},
		// No router solicitations or other autoconfiguration on the point-to-point link.
		{"ipv6/conf/" + TUNName + "/accept_ra", "0"},
		{"ipv6/conf/" + TUNName + "/autoconf", "0"},
	}
	keys := make([]string, 0, len(o.Sysctls))
	for key := range o.Sysctls {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for _, key := range keys {
		writes = append(writes, sysctlWrite{key, o.Sysctls[key]})
	}
	return writes
}

type sysctlWrite struct {
	key   string // path under /proc/sys/net
	value string
}
