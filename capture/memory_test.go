package capture

import (
	"bytes"
	"errors"
	"io"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/pcapgo"
)

// tunCaptures are captures of link type RAW with whole packets, as a TUN device
// has them: a lab transfer at the client, the lab's QUIC capture (UDP), and a
// real-world mobile capture of several connections.
var tunCaptures = []string{
	"../testdata/captures/loaded-tlp-iw10.client.pcap",
	"../testdata/quic/h3-builtin-rtt40-chain6000-60000.client.pcap",
	"../testdata/realworld/nd__gaijin_mobile_mixed.pcap",
}

// TestMemoryReadsAsAFile: packets handed to a Memory come out as a Reader
// reads the capture file they came from (the records read by gopacket's pcapgo,
// not by this package): every Packet field, in order, and TCP only without
// WithUDP, for each of tunCaptures. The file's records are added
// again and again, past the size of a block, so that packets are read back
// from several blocks and across their ends.
func TestMemoryReadsAsAFile(t *testing.T) {
	for _, path := range tunCaptures {
		for _, udp := range []bool{false, true} {
			var opts []Option
			if udp {
				opts = append(opts, WithUDP())
			}
			want, _, err := readFiles(t, []string{path}, opts...)
			if !errors.Is(err, io.EOF) {
				t.Fatalf("%s: %v", path, err)
			}
			if len(want) == 0 && udp {
				t.Fatalf("%s: no packets read", path)
			}
			m := NewMemory(opts...)
			copies := 0
			for size := 0; size <= 2*memoryBlockBytes; copies++ {
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

// addRecords adds every record of a pcap file to m, as gopacket reads them (not
// this package), and returns their bytes.
func addRecords(t *testing.T, m *Memory, path string) (n int) {
	t.Helper()
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := pcapgo.NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	for pkt := range gopacket.NewPacketSource(pr, pr.LinkType()).Packets() {
		m.Add(pkt.Data(), pkt.Metadata().Timestamp.UnixNano())
		n += len(pkt.Data())
	}
	return n
}
