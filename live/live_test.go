package live

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/report"
)

// sliceSource replays packets as an analysis.PacketSource.
type sliceSource struct {
	packets []capture.Packet
	next    int
}

func (s *sliceSource) Next(p *capture.Packet) error {
	if s.next == len(s.packets) {
		return io.EOF
	}
	*p = s.packets[s.next]
	s.next++
	return nil
}

func readAll(t *testing.T, path string) []capture.Packet {
	t.Helper()
	r, err := capture.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var packets []capture.Packet
	for {
		var p capture.Packet
		err := r.Next(&p)
		if errors.Is(err, io.EOF) {
			return packets
		}
		if err != nil {
			t.Fatal(err)
		}
		p.Payload = append([]byte(nil), p.Payload...)
		packets = append(packets, p)
	}
}

func compare(t *testing.T, name string, got, want []report.Connection) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: Watch gave %d connections, analysis.File %d", name, len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("%s: connection %d differs:\n watch:    rounds %d IW %+v start %v packets %d\n analysis: rounds %d IW %+v start %v packets %d",
				name, i+1, len(got[i].Rounds), got[i].InitialWindow, got[i].StartMs, len(got[i].Packets),
				len(want[i].Rounds), want[i].InitialWindow, want[i].StartMs, len(want[i].Packets))
		}
	}
}

// TestWatchManyConnections: four connections overlapping in time, one of them a
// new connection on a four-tuple just used, fed as a live capture would hand
// them over, come out as analysis.Run reads the same packets, field for field.
func TestWatchManyConnections(t *testing.T) {
	names := []string{
		"rtt40-iw3-h1-100000.client", "rtt40-iw10-tls13h2-200000.client",
		"rtt150-iw3-tls12-100000.server", "rtt40-iw20-h1-6000.client",
	}
	var all []capture.Packet
	var start, firstEnd int64
	for i, name := range names {
		packets := readAll(t, filepath.Join("..", "testdata", "captures", name+".pcap"))
		if i == 0 {
			start = packets[0].TimestampNs
			firstEnd = packets[len(packets)-1].TimestampNs
		}
		shift := start + int64(i)*30e6 - packets[0].TimestampNs
		port := uint16(50000 + i)
		if i == 3 {
			// Reuse the first connection's four-tuple half a second after its
			// last packet: a new SYN starts a new connection.
			port = 50000
			shift = firstEnd + 500e6 - packets[0].TimestampNs
		}
		for _, p := range packets {
			p.TimestampNs += shift
			moveClient(&p, port)
			all = append(all, p)
		}
	}
	// Merge by time, stable (as a capture of all of them would see them).
	for i := 1; i < len(all); i++ {
		for j := i; j > 0 && all[j].TimestampNs < all[j-1].TimestampNs; j-- {
			all[j], all[j-1] = all[j-1], all[j]
		}
	}
	opts := analysis.Options{Packets: true}
	want, err := analysis.Run(context.Background(), &sliceSource{packets: all}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Connections) != len(names) {
		t.Fatalf("analysis.Run found %d connections in the merged capture, want %d", len(want.Connections), len(names))
	}
	var got []report.Connection
	if err := Watch(context.Background(), &sliceSource{packets: all}, WatchOptions{Analysis: opts}, func(c report.Connection) { got = append(got, c) }); err != nil {
		t.Fatal(err)
	}
	// Watch reports in the order connections finish; compare in Index order.
	for i := 1; i < len(got); i++ {
		for j := i; j > 0 && got[j].Index < got[j-1].Index; j-- {
			got[j], got[j-1] = got[j-1], got[j]
		}
	}
	compare(t, "merged", got, want.Connections)
}

// moveClient gives the connection's client (the side whose port is not a
// well-known one) the port port.
func moveClient(p *capture.Packet, port uint16) {
	if p.SrcPort > p.DstPort {
		p.SrcPort = port
	} else {
		p.DstPort = port
	}
}

// TestIgnore: packets to or from an ignored endpoint never reach the analysis.
func TestIgnore(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	other := netip.MustParseAddr("10.1.2.3")
	packets := []capture.Packet{
		{Src: lo, Dst: lo, SrcPort: 40000, DstPort: 8040, Flags: capture.FlagSYN, TimestampNs: 1e9},        // to the view: skipped
		{Src: lo, Dst: lo, SrcPort: 8040, DstPort: 40000, Flags: capture.FlagACK, TimestampNs: 1e9 + 1},    // from the view: skipped
		{Src: other, Dst: lo, SrcPort: 9000, DstPort: 40001, Flags: capture.FlagACK, TimestampNs: 1e9 + 2}, // any address, port 9000: skipped
		// A connection to another address on port 8040: kept.
		{Src: lo, Dst: other, SrcPort: 40002, DstPort: 8040, Flags: capture.FlagSYN, Seq: 100, TimestampNs: 1e9 + 3},
		{Src: other, Dst: lo, SrcPort: 8040, DstPort: 40002, Flags: capture.FlagSYN | capture.FlagACK, Seq: 500, Ack: 101, TimestampNs: 1e9 + 4},
		{Src: lo, Dst: other, SrcPort: 40002, DstPort: 8040, Flags: capture.FlagACK, Seq: 101, Ack: 501, TimestampNs: 1e9 + 5},
	}
	var got []report.Connection
	opts := WatchOptions{Ignore: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:8040"), netip.MustParseAddrPort("0.0.0.0:9000")}}
	if err := Watch(context.Background(), &sliceSource{packets: packets}, opts, func(c report.Connection) { got = append(got, c) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Client != "127.0.0.1:40002" {
		t.Fatalf("kept %d connections (%+v), want only the one not ignored", len(got), got)
	}
}
