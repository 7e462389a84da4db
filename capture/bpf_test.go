package capture

import (
	"net/netip"
	"slices"
	"sort"
	"testing"

	"github.com/gopacket/gopacket/layers"
	"golang.org/x/net/bpf"
)

// runFilter runs a compiled filter in golang.org/x/net/bpf's VM and returns
// what it returns: 0 to drop the packet, else the number of bytes to keep
// (the kernel keeps at most the whole packet).
func runFilter(t *testing.T, program []bpf.RawInstruction, packet []byte) int {
	t.Helper()
	ops, ok := bpf.Disassemble(program)
	if !ok {
		t.Fatalf("the program has instructions the disassembler does not know:\n%v", program)
	}
	vm, err := bpf.NewVM(ops)
	if err != nil {
		t.Fatalf("the VM refuses the program: %v\n%v", err, ops)
	}
	kept, err := vm.Run(packet)
	if err != nil {
		t.Fatalf("running the program: %v", err)
	}
	return kept
}

// endpoint is an address and port for the filter table.
type endpoint struct {
	addr netip.Addr
	port uint16
}

func ep(addr string, port uint16) endpoint { return endpoint{netip.MustParseAddr(addr), port} }

func TestFilterProgram(t *testing.T) {
	var (
		client4 = ep("192.0.2.10", 40000)
		server4 = ep("198.51.100.20", 443)
		other4  = ep("198.51.100.21", 443)
		alt4    = ep("198.51.100.20", 8443)
		client6 = ep("2001:db8::10", 40000)
		server6 = ep("2001:db8:1::20", 443)
		other6  = ep("2001:db8:1::21", 443)
		local1  = ep("127.0.0.1", 50000)
		local2  = ep("127.0.0.1", 8080)
		local3  = ep("127.0.0.1", 9090)
	)
	tcp := func(src, dst endpoint, flags uint8) testSegment {
		s := dataSegment(src.addr, dst.addr, 100)
		s.srcPort, s.dstPort, s.flags = src.port, dst.port, flags
		return s
	}
	routerAlert := layers.IPv4Option{OptionType: 148, OptionLength: 4, OptionData: []byte{0, 0}}
	withIPv4Options := func(s testSegment) testSegment {
		s.ipv4Options = []layers.IPv4Option{routerAlert, routerAlert} // IHL 7
		return s
	}
	hopByHop := []byte{6 /* next: TCP */, 0, 1, 4, 0, 0, 0, 0}

	packets := map[string][]byte{
		"v4 syn":                   buildIP(t, tcp(client4, server4, FlagSYN)),
		"v4 data back":             buildIP(t, tcp(server4, client4, FlagACK|FlagPSH)),
		"v4 options syn":           buildIP(t, withIPv4Options(tcp(client4, server4, FlagSYN))),
		"v4 options data back":     buildIP(t, withIPv4Options(tcp(server4, client4, FlagACK))),
		"v4 other port":            buildIP(t, tcp(client4, alt4, FlagSYN)),
		"v4 other host":            buildIP(t, tcp(client4, other4, FlagSYN)),
		"v4 other local port":      buildIP(t, tcp(ep("192.0.2.10", 40001), server4, FlagSYN)),
		"v4 udp":                   buildUDP(t, client4.addr, server4.addr),
		"v4 later fragment":        fragment(buildIP(t, tcp(client4, server4, FlagACK))),
		"v6 syn":                   buildIP(t, tcp(client6, server6, FlagSYN)),
		"v6 data back":             buildIP(t, tcp(server6, client6, FlagACK)),
		"v6 other host":            buildIP(t, tcp(client6, other6, FlagSYN)),
		"v6 hop-by-hop":            buildIP(t, withIPv6Extensions(tcp(client6, server6, FlagSYN), hopByHop)),
		"v6 udp":                   buildUDP(t, client6.addr, server6.addr),
		"loopback to server":       buildIP(t, tcp(local1, local2, FlagSYN)),
		"loopback from server":     buildIP(t, tcp(local2, local1, FlagACK)),
		"loopback to other port":   buildIP(t, tcp(local1, local3, FlagSYN)),
		"cut inside the IP header": buildIP(t, tcp(client4, server4, FlagSYN))[:12],
		"empty":                    {},
		"not IP":                   {0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01}, // an ARP header
	}
	if ihl := packets["v4 options syn"][0] & 0x0f; ihl != 7 {
		t.Fatalf("the packet with IPv4 options has IHL %d, want 7", ihl)
	}
	allTCP := []string{"cut inside the IP header", "v4 syn", "v4 data back", "v4 options syn", "v4 options data back", "v4 other port",
		"v4 other host", "v4 other local port", "v6 syn", "v6 data back", "v6 other host",
		"loopback to server", "loopback from server", "loopback to other port"}

	tests := []struct {
		name   string
		filter Filter
		match  []string // the packets kept; all others are dropped
	}{
		{"zero filter: all TCP", Filter{}, allTCP},
		{"v4 host and port", Filter{Remote: server4.addr, Port: 443},
			[]string{"v4 syn", "v4 data back", "v4 options syn", "v4 options data back", "v4 other local port"}},
		{"v4 host, port and local port", Filter{Remote: server4.addr, Port: 443, LocalPort: 40000},
			[]string{"v4 syn", "v4 data back", "v4 options syn", "v4 options data back"}},
		{"v4 host only", Filter{Remote: server4.addr},
			[]string{"v4 syn", "v4 data back", "v4 options syn", "v4 options data back", "v4 other port", "v4 other local port"}},
		{"v4-mapped v6 address selects v4", Filter{Remote: netip.MustParseAddr("::ffff:198.51.100.20"), Port: 443},
			[]string{"v4 syn", "v4 data back", "v4 options syn", "v4 options data back", "v4 other local port"}},
		{"v4 host, wrong port", Filter{Remote: server4.addr, Port: 80}, nil},
		{"v6 host and port", Filter{Remote: server6.addr, Port: 443}, []string{"v6 syn", "v6 data back"}},
		{"v6 host, port and local port", Filter{Remote: server6.addr, Port: 443, LocalPort: 40000}, []string{"v6 syn", "v6 data back"}},
		{"v6 host, other local port", Filter{Remote: server6.addr, Port: 443, LocalPort: 1}, nil},
		{"port only, both families", Filter{Port: 443},
			[]string{"v4 syn", "v4 data back", "v4 options syn", "v4 options data back", "v4 other host",
				"v4 other local port", "v6 syn", "v6 data back", "v6 other host"}},
		{"local port only", Filter{LocalPort: 50000}, []string{"loopback to server", "loopback from server", "loopback to other port"}},
		{"loopback: both ends share the address", Filter{Remote: local2.addr, Port: 8080},
			[]string{"loopback to server", "loopback from server"}},
		{"loopback with local port", Filter{Remote: local2.addr, Port: 8080, LocalPort: 50000},
			[]string{"loopback to server", "loopback from server"}},
	}
	const snaplen = 96
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			program, err := filterProgram(tt.filter, snaplen)
			if err != nil {
				t.Fatal(err)
			}
			var kept []string
			for name, packet := range packets {
				n := runFilter(t, program, packet)
				if n == 0 {
					continue
				}
				kept = append(kept, name)
				if n != snaplen {
					t.Errorf("%s: the program returned %d, want the snap length %d", name, n, snaplen)
				}
			}
			sort.Strings(kept)
			want := slices.Clone(tt.match)
			sort.Strings(want)
			if !slices.Equal(kept, want) {
				t.Errorf("filter %s kept\n  %q\nwant\n  %q", tt.filter, kept, want)
			}
		})
	}
}

// fragment marks an IPv4 packet as a fragment at offset 1480 bytes (its
// checksum is not fixed: the filter does not look at it).
func fragment(ip []byte) []byte {
	ip[6], ip[7] = 0, 185 // fragment offset in 8-byte units
	return ip
}

func TestDropAllProgram(t *testing.T) {
	program := dropAllProgram()
	for _, packet := range [][]byte{buildIP(t, synSegment(client4, server4)), buildIP(t, synSegment(client6, server6)), {}} {
		if n := runFilter(t, program, packet); n != 0 {
			t.Errorf("the drop-all program kept %d bytes of a %d-byte packet", n, len(packet))
		}
	}
}

func TestFilterProgramSnaplen(t *testing.T) {
	for _, snaplen := range []int64{0, -1, 1 << 31} {
		if int64(int(snaplen)) != snaplen {
			continue // not an int on this platform
		}
		if _, err := filterProgram(Filter{}, int(snaplen)); err == nil {
			t.Errorf("snap length %d: no error", snaplen)
		}
	}
	program, err := filterProgram(Filter{}, 1<<31-1)
	if err != nil {
		t.Fatal(err)
	}
	packet := buildIP(t, dataSegment(client4, server4, 1000))
	if n := runFilter(t, program, packet); n != 1<<31-1 {
		t.Errorf("with the largest snap length the program returned %d", n)
	}
}

func TestFilterString(t *testing.T) {
	tests := []struct {
		filter Filter
		want   string
	}{
		{Filter{}, "tcp"},
		{Filter{Remote: netip.MustParseAddr("::ffff:192.0.2.1"), Port: 443}, "tcp and host 192.0.2.1 and port 443"},
		{Filter{Remote: netip.MustParseAddr("2001:db8::1"), Port: 80, LocalPort: 5000}, "tcp and host 2001:db8::1 and port 80 and port 5000"},
	}
	for _, tt := range tests {
		if got := tt.filter.String(); got != tt.want {
			t.Errorf("%#v: got %q, want %q", tt.filter, got, tt.want)
		}
	}
}
