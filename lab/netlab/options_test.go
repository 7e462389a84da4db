package netlab

import (
	"net/netip"
	"strings"
	"testing"
)

func TestOptionsResolved(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		want    Options
		wantErr string
	}{
		{name: "zero is the lab default", opts: Options{}, want: Options{CongestionControl: "cubic", MTU: 1500}},
		{name: "kept as given", opts: Options{InitCwnd: 4, InitRwnd: 20, CongestionControl: "bbr", MTU: 9000},
			want: Options{InitCwnd: 4, InitRwnd: 20, CongestionControl: "bbr", MTU: 9000}},
		{name: "negative initcwnd", opts: Options{InitCwnd: -1}, wantErr: "InitCwnd"},
		{name: "negative initrwnd", opts: Options{InitRwnd: -3}, wantErr: "InitRwnd"},
		{name: "MTU too small for IPv6", opts: Options{MTU: 1279}, wantErr: "MTU"},
		{name: "MTU too large", opts: Options{MTU: 65536}, wantErr: "MTU"},
		{name: "congestion control with a space", opts: Options{CongestionControl: "cubic reno"}, wantErr: "congestion control"},
		{name: "sysctl escaping /proc/sys/net", opts: Options{Sysctls: map[string]string{"../kernel/panic": "1"}}, wantErr: "sysctl"},
		{name: "absolute sysctl", opts: Options{Sysctls: map[string]string{"/proc/sys/net/ipv4/tcp_ecn": "1"}}, wantErr: "sysctl"},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			got, err := test.opts.resolved()
			if test.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), test.wantErr) {
					t.Fatalf("resolved() error = %v, want one mentioning %q", err, test.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("resolved(): %v", err)
			}
			if got.InitCwnd != test.want.InitCwnd || got.InitRwnd != test.want.InitRwnd ||
				got.CongestionControl != test.want.CongestionControl || got.MTU != test.want.MTU {
				t.Errorf("resolved() = %+v, want %+v", got, test.want)
			}
		})
	}
}

func TestSysctlWrites(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want map[string]string
	}{
		{name: "defaults", opts: Options{CongestionControl: "cubic"}, want: map[string]string{
			"ipv4/tcp_no_metrics_save": "1", "ipv4/tcp_congestion_control": "cubic", "ipv4/tcp_slow_start_after_idle": "1"}},
		{name: "tuned", opts: Options{CongestionControl: "bbr", SaveMetrics: true, NoSlowStartAfterIdle: true,
			Sysctls: map[string]string{"ipv4/tcp_ecn": "1"}}, want: map[string]string{
			"ipv4/tcp_no_metrics_save": "0", "ipv4/tcp_congestion_control": "bbr", "ipv4/tcp_slow_start_after_idle": "0",
			"ipv4/tcp_ecn": "1"}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			got := map[string]string{}
			for _, write := range test.opts.sysctlWrites() {
				got[write.key] = write.value
			}
			for key, value := range test.want {
				if got[key] != value {
					t.Errorf("sysctl %s = %q, want %q", key, got[key], value)
				}
			}
		})
	}
}

func TestTrialAddresses(t *testing.T) {
	ipv4Range := netip.MustParsePrefix("198.18.0.0/15")
	ipv6Range := netip.MustParsePrefix("2001:2::/48")
	seen := map[netip.Addr]uint64{}
	for sequence := uint64(0); sequence < trialAddressBlocks; sequence++ {
		client, server, client6, server6 := trialAddresses(sequence)
		for _, addr := range []netip.Addr{client, server, client6, server6} {
			inRange := ipv4Range.Contains(addr) || ipv6Range.Contains(addr)
			if !inRange {
				t.Fatalf("trial %d: address %s outside the benchmarking ranges", sequence, addr)
			}
			if earlier, dup := seen[addr]; dup {
				t.Fatalf("trial %d: address %s already given to trial %d", sequence, addr, earlier)
			}
			seen[addr] = sequence
		}
		if client.Next() != server || client6.Next() != server6 {
			t.Fatalf("trial %d: addresses %s %s %s %s are not consecutive pairs", sequence, client, server, client6, server6)
		}
	}
	if first, _, _, _ := trialAddresses(0); first != netip.MustParseAddr("198.18.0.1") {
		t.Errorf("first client address = %s, want 198.18.0.1", first)
	}
	if last, _, _, _ := trialAddresses(trialAddressBlocks - 1); last != netip.MustParseAddr("198.19.255.253") {
		t.Errorf("last client address = %s, want 198.19.255.253", last)
	}
}

func TestNamespaceNamePattern(t *testing.T) {
	tests := []struct {
		name string
		want Owner // zero when the name is not one this version makes
		old  bool  // a name of an earlier version (no start time)
	}{
		{name: namespaceName(Owner{PID: 12345, StartTime: 987654}, 7, Client), want: Owner{PID: 12345, StartTime: 987654}},
		{name: namespaceName(Owner{PID: 1, StartTime: 0}, 1, Server), want: Owner{PID: 1, StartTime: 0}},
		{name: "slowstart-12345-7-c", old: true},
		{name: "slowstart-99995-1-c", old: true},
		{name: "slowstart-abc-1-c"},
		{name: "slowstart-012-3-4-c"}, // not as Tag writes a PID
		{name: "other-12345-7-c"},
		{name: "slowstart-12345"},
	}
	for _, test := range tests {
		got, ok := nameTag(namespacePattern, test.name)
		if got != test.want || ok != (test.want != Owner{}) {
			t.Errorf("owner of %q = %+v (%v), want %+v", test.name, got, ok, test.want)
		}
		if _, old := nameOwnerPID(oldNamespacePattern, test.name); old != test.old {
			t.Errorf("%q: an earlier version's name: %v, want %v", test.name, old, test.old)
		}
	}
}
