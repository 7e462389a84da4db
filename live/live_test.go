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

// feed reads a capture file packet by packet into a Tracker (as a live capture
// would hand them over) and returns the analyzed connections in ID order.
func feed(t *testing.T, packets []capture.Packet, opts analysis.Options) []report.Connection {
	t.Helper()
	var out []report.Connection
	var baseNs int64
	tr := NewTracker(Options{Server: opts.Server}, func(c *Conn) {
		if !c.Final {
			t.Errorf("connection %d handed over before it was final (%s) with no Expire call", c.ID, c.Reason)
		}
		rc, ok, err := Analyze(context.Background(), c, opts, baseNs)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			out = append(out, rc)
		}
	})
	for i := range packets {
		if baseNs == 0 {
			baseNs = packets[i].TimestampNs
		}
		p := packets[i] // the tracker must copy what it keeps: hand over a copy it can't alias
		p.Payload = append([]byte(nil), p.Payload...)
		tr.Add(&p)
		clear(p.Payload)
	}
	tr.Flush()
	if tr.Open() != 0 {
		t.Errorf("%d connections still tracked after Flush", tr.Open())
	}
	// Renumber as analysis does: in order of first packet, from 1.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Index < out[j-1].Index; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	for i := range out {
		out[i].Index = i + 1
	}
	return out
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
		t.Fatalf("%s: the tracker gave %d connections, analysis.File %d", name, len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("%s: connection %d differs:\n tracker:  rounds %d IW %+v start %v packets %d\n analysis: rounds %d IW %+v start %v packets %d",
				name, i+1, len(got[i].Rounds), got[i].InitialWindow, got[i].StartMs, len(got[i].Packets),
				len(want[i].Rounds), want[i].InitialWindow, want[i].StartMs, len(want[i].Packets))
		}
	}
}

// TestTrackerMatchesFile: every test capture fed packet by packet gives the
// connections analysis.File gives, field for field (rounds, IW verdict, packets).
func TestTrackerMatchesFile(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "testdata", "captures", "*.pcap"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no test captures: %v", err)
	}
	opts := analysis.Options{Packets: true, Tool: "slowstart test"}
	conns, rounds := 0, 0
	for _, path := range paths {
		want, err := analysis.File(context.Background(), path, opts)
		if err != nil {
			t.Fatal(err)
		}
		got := feed(t, readAll(t, path), opts)
		compare(t, filepath.Base(path), got, want.Connections)
		conns += len(got)
		for _, c := range got {
			rounds += len(c.Rounds)
		}
	}
	if conns < len(paths) || rounds == 0 {
		t.Fatalf("%d captures gave %d connections and %d rounds: the comparison checked too little", len(paths), conns, rounds)
	}
	t.Logf("%d captures, %d connections, %d rounds compared", len(paths), conns, rounds)
}

// TestTrackerManyConnections interleaves several captures (moved onto distinct
// client ports and shifted in time) into one stream, so that connections overlap,
// close while others are open, and one four-tuple is reused after a close.
func TestTrackerManyConnections(t *testing.T) {
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
			// last packet, before it is forgotten: a new SYN splits it.
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
		t.Fatalf("analysis.File found %d connections in the merged capture, want %d", len(want.Connections), len(names))
	}
	var reused int
	tr := NewTracker(Options{}, func(c *Conn) {
		if c.Reason == ReasonReused {
			reused++
		}
	})
	for i := range all {
		tr.Add(&all[i])
	}
	if reused != 1 {
		t.Errorf("%d connections ended by a reused four-tuple, want 1", reused)
	}
	compare(t, "merged", feed(t, all, opts), want.Connections)
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

func TestExpireIdleAndClosed(t *testing.T) {
	var got []Conn
	tr := NewTracker(Options{}, func(c *Conn) { got = append(got, *c) })
	a := netip.MustParseAddr("10.0.0.1")
	b := netip.MustParseAddr("10.0.0.2")
	pkt := func(ts int64, sport, dport uint16, flags uint8, n int) *capture.Packet {
		return &capture.Packet{TimestampNs: ts, Src: a, Dst: b, SrcPort: sport, DstPort: dport, Flags: flags, PayloadLen: n, Payload: make([]byte, n)}
	}
	const s = int64(1e9)
	tr.Add(pkt(1*s, 40000, 80, capture.FlagSYN, 0))
	tr.Add(pkt(1*s+1, 40000, 80, capture.FlagACK, 10))
	tr.Add(pkt(1*s, 40001, 80, capture.FlagSYN, 0))
	tr.Add(pkt(1*s+2, 40001, 80, capture.FlagRST, 0))
	tr.Expire(2 * s) // nothing is due yet
	if len(got) != 0 {
		t.Fatalf("handed over %d connections before they were due", len(got))
	}
	tr.Expire(1*s + int64(DefaultLinger) + 10) // the reset one is complete
	if len(got) != 1 || got[0].ID != 2 || !got[0].Final || got[0].Reason != ReasonClosed {
		t.Fatalf("after the linger: %+v", got)
	}
	tr.Expire(1*s + int64(DefaultIdle) + 10) // the open one is idle: handed over, kept
	if len(got) != 2 || got[1].ID != 1 || got[1].Final || len(got[1].Packets) != 2 || tr.Open() != 1 {
		t.Fatalf("after idle: %d handed over, open %d", len(got), tr.Open())
	}
	tr.Expire(1*s + int64(DefaultIdle) + 20) // not again without new packets
	if len(got) != 2 {
		t.Fatalf("an idle connection was handed over twice without new packets")
	}
	reply := pkt(10*s, 80, 40000, capture.FlagACK, 100)
	reply.Src, reply.Dst = b, a
	tr.Add(reply)
	tr.Expire(10*s + int64(DefaultEvict) + 1)
	if len(got) != 3 || got[2].ID != 1 || !got[2].Final || len(got[2].Packets) != 3 || tr.Open() != 0 {
		t.Fatalf("after evict: %d handed over, open %d: %+v", len(got), tr.Open(), got[2:])
	}
}

func TestMemoryBounds(t *testing.T) {
	var got []Conn
	tr := NewTracker(Options{MaxOpen: 2, MaxConnPackets: 5, MaxConnBytes: 25}, func(c *Conn) { got = append(got, *c) })
	a := netip.MustParseAddr("10.0.0.1")
	b := netip.MustParseAddr("10.0.0.2")
	for i := range 3 {
		tr.Add(&capture.Packet{TimestampNs: int64(i + 1), Src: a, Dst: b, SrcPort: uint16(40000 + i), DstPort: 80, Flags: capture.FlagSYN})
	}
	if tr.Open() != 2 || len(got) != 1 || got[0].ID != 1 || got[0].Reason != ReasonEvicted {
		t.Fatalf("MaxOpen 2: open %d, handed over %+v", tr.Open(), got)
	}
	for i := range 4 {
		tr.Add(&capture.Packet{TimestampNs: int64(10 + i), Src: a, Dst: b, SrcPort: 40002, DstPort: 80, Flags: capture.FlagACK, PayloadLen: 10, Payload: make([]byte, 10)})
	}
	if len(got) != 2 || got[1].ID != 3 || got[1].Reason != ReasonFull || len(got[1].Packets) != 5 || got[1].PayloadCut != 2 {
		t.Fatalf("MaxConnPackets 5, MaxConnBytes 25: %+v", got[1:])
	}
	if got[1].Packets[2].Payload == nil || got[1].Packets[3].Payload != nil || got[1].Packets[3].PayloadLen != 10 {
		t.Fatalf("payloads past MaxConnBytes: want the length kept and the bytes dropped")
	}
}

func TestIgnore(t *testing.T) {
	var got []Conn
	tr := NewTracker(Options{Ignore: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:8040"), netip.MustParseAddrPort("0.0.0.0:9000")}},
		func(c *Conn) { got = append(got, *c) })
	lo := netip.MustParseAddr("127.0.0.1")
	other := netip.MustParseAddr("10.1.2.3")
	for _, p := range []capture.Packet{
		{Src: lo, Dst: lo, SrcPort: 40000, DstPort: 8040, Flags: capture.FlagSYN},    // to the view: skipped
		{Src: lo, Dst: lo, SrcPort: 8040, DstPort: 40000, Flags: capture.FlagACK},    // from the view: skipped
		{Src: other, Dst: lo, SrcPort: 9000, DstPort: 40001, Flags: capture.FlagACK}, // any address, port 9000: skipped
		{Src: other, Dst: lo, SrcPort: 8040, DstPort: 40002, Flags: capture.FlagSYN}, // another address on 8040: kept
	} {
		tr.Add(&p)
	}
	tr.Flush()
	if len(got) != 1 || got[0].Packets[0].DstPort != 40002 {
		t.Fatalf("kept %d connections, want only the one not ignored", len(got))
	}
}
