package capture

import (
	"errors"
	"io"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/gopacket/gopacket/pcapgo"
)

// TestMemoryReadsAsAFile: packets handed to a Memory come out as a Reader
// reads the capture file they came from (the records read by gopacket's pcapgo,
// not by this package): every Packet field, in order, and TCP only without
// WithUDP. The captures are link type RAW with whole packets, as a TUN device
// has them: a lab transfer at the client, the lab's QUIC capture (UDP), and a
// real-world mobile capture of several connections. The file's records are added
// again and again, past the size of a block, so that packets are read back
// from several blocks and across their ends.
func TestMemoryReadsAsAFile(t *testing.T) {
	for _, path := range []string{
		"../testdata/captures/loaded-tlp-iw10.client.pcap",
		"../testdata/quic/h3-builtin-rtt40-chain6000-60000.client.pcap",
		"../testdata/realworld/nd__gaijin_mobile_mixed.pcap",
	} {
		for _, udp := range []bool{false, true} {
			var opts []Option
			if udp {
				opts = append(opts, WithUDP())
			}
			want := readFile(t, path, opts)
			if len(want) == 0 && udp {
				t.Fatalf("%s: no packets read", path)
			}
			m := NewMemory(opts...)
			copies := 0
			for size := int64(0); size <= 2*memoryBlockBytes; copies++ {
				size += addRecords(t, m, path)
			}
			for c := 0; c < copies; c++ {
				for i, w := range want {
					var got Packet
					if err := m.Next(&got); err != nil {
						t.Fatalf("%s (udp %v) copy %d, packet %d: %v", path, udp, c, i, err)
					}
					got.Payload, w.Payload = slices.Clone(got.Payload), slices.Clone(w.Payload)
					if !reflect.DeepEqual(got, w) {
						t.Fatalf("%s (udp %v) copy %d, packet %d:\n got %+v\nwant %+v", path, udp, c, i, got, w)
					}
				}
			}
			var p Packet
			if err := m.Next(&p); err != io.EOF {
				t.Errorf("%s: after the last packet: %v, want io.EOF", path, err)
			}
		}
	}
}

// readFile reads a capture file's packets with a Reader.
func readFile(t *testing.T, path string, opts []Option) []Packet {
	t.Helper()
	r, err := Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []Packet
	for {
		var p Packet
		err := r.Next(&p)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		p.Payload = slices.Clone(p.Payload)
		out = append(out, p)
	}
}

// addRecords adds every record of a pcap file to m, as pcapgo reads them, and
// returns their bytes.
func addRecords(t *testing.T, m *Memory, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pr, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for {
		data, ci, err := pr.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		m.Add(data, ci.Timestamp.UnixNano())
		n += int64(len(data))
	}
}
