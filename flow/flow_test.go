package flow

import (
	"net/netip"
	"testing"
	"unsafe"

	"github.com/slowstart/slowstart/capture"
)

var (
	testClient = netip.MustParseAddrPort("192.0.2.2:40000")
	testServer = netip.MustParseAddrPort("192.0.2.1:80")
)

// pkt describes one packet of a test connection: who sent it, when (ms), its flags,
// sequence and acknowledgement numbers (absolute), payload length and IPv4 id.
type pkt struct {
	fromClient bool
	ms         float64
	flags      uint8
	seq, ack   uint32
	length     int
	ipID       uint16
	mss        uint16
}

const (
	syn    = capture.FlagSYN
	synack = capture.FlagSYN | capture.FlagACK
	ack    = capture.FlagACK
	psh    = capture.FlagACK | capture.FlagPSH
	fin    = capture.FlagFIN | capture.FlagACK
	rstAck = capture.FlagRST | capture.FlagACK
)

func (p pkt) packet() capture.Packet {
	src, dst := testServer, testClient
	if p.fromClient {
		src, dst = testClient, testServer
	}
	out := capture.Packet{
		TimestampNs: testEpochNs + int64(p.ms*1e6),
		Src:         src.Addr(), Dst: dst.Addr(), SrcPort: src.Port(), DstPort: dst.Port(),
		Seq: p.seq, Ack: p.ack, Flags: p.flags, Window: 65535,
		IPID:       p.ipID,
		HeaderLen:  20,
		PayloadLen: p.length,
	}
	out.Options.WindowScale = -1
	out.Options.MSS = p.mss
	return out
}

// recorder keeps what a tracker handed over.
type recorder struct {
	conns    []*Conn
	closed   []*Conn
	segments map[*Conn][]Segment
}

func (r *recorder) newHandler(c *Conn) Handler {
	r.conns = append(r.conns, c)
	return &recordingHandler{r: r}
}

type recordingHandler struct{ r *recorder }

func (h *recordingHandler) Segment(c *Conn, s *Segment) {
	if h.r.segments == nil {
		h.r.segments = map[*Conn][]Segment{}
	}
	h.r.segments[c] = append(h.r.segments[c], *s)
}
func (h *recordingHandler) Close(c *Conn) { h.r.closed = append(h.r.closed, c) }

func run(t *testing.T, pkts []pkt) (*recorder, *Tracker) {
	t.Helper()
	r := &recorder{}
	tr := NewTracker(r.newHandler, ServerHint{})
	for _, p := range pkts {
		pp := p.packet()
		tr.Add(&pp)
	}
	tr.Flush()
	return r, tr
}

const cISN, sISN = 1000, 5000

// testEpochNs puts the test packets at a real time (0 means "not seen" in Conn).
const testEpochNs = 1_700_000_000_000_000_000

// handshake is a plain three-way handshake at the client: SYN at 0, SYN/ACK after
// rttMs, ACK right after.
func handshake(rttMs float64) []pkt {
	return []pkt{
		{fromClient: true, ms: 0, flags: syn, seq: cISN, mss: 1460},
		{ms: rttMs, flags: synack, seq: sISN, ack: cISN + 1, mss: 1460},
		{fromClient: true, ms: rttMs + 0.1, flags: ack, seq: cISN + 1, ack: sISN + 1},
	}
}

func TestHandshakeRTT(t *testing.T) {
	cases := []struct {
		name    string
		pkts    []pkt
		wantMs  float64
		retried bool
		vantage string
	}{
		{"plain", handshake(20), 20.1, false, VantageClient},
		{
			// The first SYN was lost: the RTT runs from the one the SYN/ACK answered,
			// not from the first (which would add the 1 s timeout).
			"SYN sent again",
			[]pkt{
				{fromClient: true, ms: 0, flags: syn, seq: cISN, mss: 1460},
				{fromClient: true, ms: 1000, flags: syn, seq: cISN, mss: 1460},
				{ms: 1018, flags: synack, seq: sISN, ack: cISN + 1, mss: 1460},
				{fromClient: true, ms: 1018.2, flags: ack, seq: cISN + 1, ack: sISN + 1},
			},
			18.2, true, VantageClient,
		},
		{
			// Two SYN/ACKs with different ISNs (a middlebox): the client's ACK says which
			// one completed the handshake.
			"two SYN/ACKs",
			[]pkt{
				{fromClient: true, ms: 0, flags: syn, seq: cISN, mss: 1460},
				{ms: 30, flags: synack, seq: sISN, ack: cISN + 1, mss: 1460},
				{ms: 31, flags: synack, seq: sISN + 777, ack: cISN + 1, mss: 1460},
				{fromClient: true, ms: 39, flags: ack, seq: cISN + 1, ack: sISN + 1},
			},
			39, false, VantageClient,
		},
		{
			// The capture holds the client's packets only: the ACK shows a SYN/ACK came.
			"no SYN/ACK captured",
			[]pkt{
				{fromClient: true, ms: 0, flags: syn, seq: cISN, mss: 1460},
				{fromClient: true, ms: 55.5, flags: ack, seq: cISN + 1, ack: sISN + 1},
			},
			55.5, false, VantageUnknown,
		},
		{
			// A RST answered the first SYN; the SYN tried again half a second later
			// was answered.
			"RST then SYN again",
			[]pkt{
				{fromClient: true, ms: 0, flags: syn, seq: cISN, mss: 1460},
				{ms: 1, flags: rstAck, seq: 0, ack: cISN + 1},
				{fromClient: true, ms: 500, flags: syn, seq: cISN, mss: 1460},
				{ms: 501, flags: synack, seq: sISN, ack: cISN + 1, mss: 1460},
				{fromClient: true, ms: 501.3, flags: ack, seq: cISN + 1, ack: sISN + 1},
			},
			1.3, true, VantageClient,
		},
		{
			"refused",
			[]pkt{
				{fromClient: true, ms: 0, flags: syn, seq: cISN, mss: 1460},
				{ms: 12, flags: rstAck, seq: 0, ack: cISN + 1},
			},
			12, false, VantageUnknown,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := run(t, tc.pkts)
			if len(r.conns) != 1 {
				t.Fatalf("%d connections, want 1", len(r.conns))
			}
			c := r.conns[0]
			if got := float64(c.HandshakeRTTNs()) / 1e6; got < tc.wantMs-0.001 || got > tc.wantMs+0.001 {
				t.Errorf("handshake RTT %.3f ms, want %.3f", got, tc.wantMs)
			}
			if c.HandshakeRetried() != tc.retried {
				t.Errorf("retried = %v, want %v", c.HandshakeRetried(), tc.retried)
			}
			if v := c.Vantage(); v != tc.vantage {
				t.Errorf("vantage %s, want %s", v, tc.vantage)
			}
		})
	}
}

// TestSampledRTT: data and the acknowledgements of it time the round trip, but not
// from a retransmitted segment (Karn's rule).
func TestSampledRTT(t *testing.T) {
	pkts := append(handshake(20),
		pkt{fromClient: true, ms: 21, flags: psh, seq: cISN + 1, ack: sISN + 1, length: 100},
		pkt{ms: 41, flags: ack, seq: sISN + 1, ack: cISN + 101},
		pkt{ms: 45, flags: psh, seq: sISN + 1, ack: cISN + 101, length: 1000},
		pkt{fromClient: true, ms: 45.2, flags: ack, seq: cISN + 101, ack: sISN + 1001},
		// A segment sent twice: its acknowledgement must not be a sample.
		pkt{ms: 50, flags: psh, seq: sISN + 1001, ack: cISN + 101, length: 1000},
		pkt{ms: 250, flags: psh, seq: sISN + 1001, ack: cISN + 101, length: 1000},
		pkt{fromClient: true, ms: 250.01, flags: ack, seq: cISN + 101, ack: sISN + 2001},
	)
	r, _ := run(t, pkts)
	c := r.conns[0]
	if got := c.Dirs[ToServer].MinAckDelayNs; got != 20e6 {
		t.Errorf("request acknowledged after %d ns, want 20 ms", got)
	}
	if got := c.Dirs[ToClient].MinAckDelayNs; got != 0.2e6 {
		t.Errorf("response acknowledged after %d ns, want 0.2 ms (the retransmission times nothing)", got)
	}
	if got := c.SampledRTTNs(); got != 20.2e6 {
		t.Errorf("sampled RTT %d ns, want 20.2 ms", got)
	}
}

// TestBytesEachOnce: every sequence byte counts once, whenever it first appears: in
// order, after reordering, in a retransmission that fills a hole, and bytes the
// other side acknowledged that the capture never saw are counted as missing.
func TestBytesEachOnce(t *testing.T) {
	data := func(ms float64, rel uint32, n int) pkt {
		return pkt{ms: ms, flags: ack, seq: sISN + 1 + rel, ack: cISN + 1, length: n}
	}
	pkts := append(handshake(20),
		data(40, 0, 1000),
		data(40.1, 2000, 1000), // a hole: 1000..2000
		data(40.2, 1000, 1000), // reordering fills it
		data(41, 4000, 1000),   // a hole: 3000..4000 ...
		data(300, 3000, 1000),  // ... filled late by a retransmission
		data(300.1, 3500, 1000),
		// The client acknowledges 7000: 5000..7000 was never captured.
		pkt{fromClient: true, ms: 301, flags: ack, seq: cISN + 1, ack: sISN + 1 + 7000},
		data(302, 7000, 500),
	)
	r, _ := run(t, pkts)
	c := r.conns[0]
	d := &c.Dirs[ToClient]
	if d.Bytes != 5500 {
		t.Errorf("bytes %d, want 5500 (0..5000 and 7000..7500 captured, each once)", d.Bytes)
	}
	if got := d.MissingBytes(); got != 2000 {
		t.Errorf("missing %d bytes, want 2000", got)
	}
	if d.AckedUnseenBytes != 2000 {
		t.Errorf("acknowledged but unseen %d, want 2000", d.AckedUnseenBytes)
	}
	segs := r.segments[c]
	var reordered, filledLate bool
	for _, s := range segs {
		if s.Offset == 1000 && s.FilledLen == 1000 && s.OutOfOrder {
			reordered = true
		}
		if s.Offset == 3000 && s.FilledLen == 1000 && s.Retransmission {
			filledLate = true
		}
		if s.Offset == 3500 && (s.FilledLen != 0 || !s.Retransmission) {
			t.Errorf("a segment of bytes seen before: filled %d, retransmission %v", s.FilledLen, s.Retransmission)
		}
	}
	if !reordered || !filledLate {
		t.Errorf("reordered fill seen: %v, late fill seen: %v", reordered, filledLate)
	}
}

// TestPreCaptureBytes: in a capture that began mid-stream, bytes below the first
// data seen were sent before the capture; filling them counts, and they are not
// capture loss.
func TestPreCaptureBytes(t *testing.T) {
	pkts := []pkt{
		{fromClient: true, ms: 0, flags: ack, seq: cISN + 1, ack: sISN + 1},
		{ms: 0.1, flags: ack, seq: sISN + 1 + 10944, ack: cISN + 1, length: 1368},
		{ms: 0.2, flags: ack, seq: sISN + 1, ack: cISN + 1, length: 1368},
	}
	r, _ := run(t, pkts)
	d := &r.conns[0].Dirs[ToClient]
	if d.Bytes != 2736 {
		t.Errorf("bytes %d, want 2736", d.Bytes)
	}
	if d.MissingBytes() != 0 {
		t.Errorf("missing %d, want 0 (sent before the capture began)", d.MissingBytes())
	}
}

// TestConnectionBoundaries: a connection begins with a SYN; late packets of a
// finished one are not new connections; a SYN with a new ISN on the same
// four-tuple is.
func TestConnectionBoundaries(t *testing.T) {
	closeBoth := []pkt{
		{ms: 30, flags: psh, seq: sISN + 1, ack: cISN + 1, length: 100},
		{ms: 31, flags: fin, seq: sISN + 101, ack: cISN + 1},
		{fromClient: true, ms: 32, flags: fin, seq: cISN + 1, ack: sISN + 102},
		{ms: 33, flags: ack, seq: sISN + 102, ack: cISN + 2},
	}
	base := append(handshake(20), closeBoth...)
	cases := []struct {
		name     string
		after    []pkt
		conns    int
		trailing int64
	}{
		{"nothing after", nil, 1, 0},
		{
			"FIN retransmitted after the close",
			[]pkt{
				{fromClient: true, ms: 5000, flags: fin, seq: cISN + 1, ack: sISN + 102},
				{fromClient: true, ms: 10000, flags: fin, seq: cISN + 1, ack: sISN + 102},
				{ms: 10001, flags: capture.FlagRST, seq: sISN + 102},
			},
			1, 3,
		},
		{
			"the old SYN once more",
			[]pkt{{fromClient: true, ms: 5000, flags: syn, seq: cISN, mss: 1460}},
			1, 1,
		},
		{
			"port reused with a new ISN",
			[]pkt{
				{fromClient: true, ms: 5000, flags: syn, seq: 90000, mss: 1460},
				{ms: 5020, flags: synack, seq: 70000, ack: 90001, mss: 1460},
				{fromClient: true, ms: 5020.1, flags: ack, seq: 90001, ack: 70001},
			},
			2, 0,
		},
		{
			"port reused right away, still lingering",
			[]pkt{
				{fromClient: true, ms: 40, flags: syn, seq: 90000, mss: 1460},
				{ms: 60, flags: synack, seq: 70000, ack: 90001, mss: 1460},
			},
			2, 0,
		},
		{
			"unrelated packets much later",
			[]pkt{{fromClient: true, ms: 9000, flags: psh, seq: 3_000_000_000, ack: 4_000_000_000, length: 10}},
			2, 0,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, tr := run(t, append(append([]pkt{}, base...), tc.after...))
			if len(r.conns) != tc.conns {
				t.Errorf("%d connections, want %d", len(r.conns), tc.conns)
			}
			if got := tr.Stats().Trailing; got != tc.trailing {
				t.Errorf("%d trailing packets, want %d", got, tc.trailing)
			}
			if len(r.closed) != len(r.conns) {
				t.Errorf("%d closed of %d", len(r.closed), len(r.conns))
			}
		})
	}
}

// TestFINWithHoles: a connection whose FINs came with bytes still missing is not
// over: the retransmissions that fill them belong to it.
func TestFINWithHoles(t *testing.T) {
	pkts := append(handshake(20),
		pkt{fromClient: true, ms: 30, flags: psh, seq: cISN + 1, ack: sISN + 1, length: 100},
		pkt{fromClient: true, ms: 31, flags: fin | capture.FlagPSH, seq: cISN + 201, ack: sISN + 1, length: 100},
		pkt{ms: 32, flags: fin, seq: sISN + 1, ack: cISN + 101},
		pkt{fromClient: true, ms: 3500, flags: psh, seq: cISN + 101, ack: sISN + 2, length: 100},
	)
	r, tr := run(t, pkts)
	if len(r.conns) != 1 || tr.Stats().Trailing != 0 {
		t.Fatalf("%d connections, %d trailing; want 1 and 0", len(r.conns), tr.Stats().Trailing)
	}
	if got := r.conns[0].Dirs[ToServer].Bytes; got != 300 {
		t.Errorf("client bytes %d, want 300", got)
	}
}

func TestDuplicateFrames(t *testing.T) {
	cases := []struct {
		name string
		pkts []pkt
		dups int
	}{
		{
			// The same frame seen on two interfaces, a few ms apart, with the same
			// IPv4 id, even with the other side's packet in between.
			"same IP id",
			[]pkt{
				{ms: 40, flags: psh, seq: sISN + 1, ack: cISN + 1, length: 500, ipID: 7},
				{fromClient: true, ms: 41, flags: ack, seq: cISN + 1, ack: sISN + 501, ipID: 9},
				{ms: 47, flags: psh, seq: sISN + 1, ack: cISN + 1, length: 500, ipID: 7},
			},
			1,
		},
		{
			// A resent segment carries a new IPv4 id: not a duplicate.
			"new IP id",
			[]pkt{
				{ms: 40, flags: psh, seq: sISN + 1, ack: cISN + 1, length: 500, ipID: 7},
				{ms: 41, flags: psh, seq: sISN + 1, ack: cISN + 1, length: 500, ipID: 8},
			},
			0,
		},
		{
			// Without ids: back to back, nothing between, within 5 ms.
			"no id, back to back",
			[]pkt{
				{ms: 40, flags: psh, seq: sISN + 1, ack: cISN + 1, length: 500},
				{ms: 40.01, flags: psh, seq: sISN + 1, ack: cISN + 1, length: 500},
			},
			1,
		},
		{
			"no id, 200 ms later (a timeout's retransmission)",
			[]pkt{
				{ms: 40, flags: psh, seq: sISN + 1, ack: cISN + 1, length: 500},
				{ms: 240, flags: psh, seq: sISN + 1, ack: cISN + 1, length: 500},
			},
			0,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, tr := run(t, append(handshake(20), tc.pkts...))
			c := r.conns[0]
			if got := int(c.Dirs[ToClient].Duplicates + c.Dirs[ToServer].Duplicates); got != tc.dups {
				t.Errorf("%d duplicates, want %d", got, tc.dups)
			}
			if tr.Stats().Duplicates != int64(tc.dups) {
				t.Errorf("tracker counted %d", tr.Stats().Duplicates)
			}
			if got := c.Dirs[ToClient].Bytes; got != 500 {
				t.Errorf("server bytes %d, want 500", got)
			}
		})
	}
}

// TestSegmentCap: each direction's segments are bounded by the other side's MSS
// option, never by the sender's own: a server that announces less than the client
// (as some CDNs do) still sends segments as large as the client's option allows.
func TestSegmentCap(t *testing.T) {
	pkts := handshake(20)
	pkts[1].mss = 1400 // the SYN/ACK announces less than the client's 1460
	r, _ := run(t, pkts)
	c := r.conns[0]
	if got := c.SegmentCap(ToClient); got != 1460 {
		t.Errorf("server's segments capped at %d, want the client's 1460", got)
	}
	if got := c.SegmentCap(ToServer); got != 1400 {
		t.Errorf("client's segments capped at %d, want the server's 1400", got)
	}
	pkts[1].mss = 0 // a SYN/ACK without the option
	r, _ = run(t, pkts)
	c = r.conns[0]
	if c.SegmentCap(ToClient) != 1460 || c.SegmentCap(ToServer) != 0 {
		t.Errorf("caps %d (server) and %d (client), want 1460 and unknown (0)", c.SegmentCap(ToClient), c.SegmentCap(ToServer))
	}
}

func TestSeqSpace(t *testing.T) {
	var q seqSpace
	q.addHole(10, 20)
	q.addHole(30, 40)
	if got := q.fill(12, 15); got != 3 {
		t.Fatalf("filled %d, want 3", got)
	}
	// Holes are now 10..12, 15..20, 30..40.
	if got := q.fill(0, 100); got != 2+5+10 {
		t.Errorf("filled %d, want 17", got)
	}
	if q.missing() != 0 {
		t.Errorf("missing %d after filling all", q.missing())
	}
	for i := range maxHoles + 10 {
		q.addHole(int64(1000+10*i), int64(1005+10*i))
	}
	if len(q.holes) != maxHoles || !q.overflowed {
		t.Errorf("%d holes (overflowed %v), want at most %d", len(q.holes), q.overflowed, maxHoles)
	}
	if q.missingBelow(1020) != 0 {
		t.Errorf("the oldest holes were not the ones forgotten")
	}
}

// TestTrailingPacketsKeepOneTombstoneEntry: a finished connection whose peer goes
// on sending (a FIN retransmitted for minutes, or the same traffic replayed) keeps
// its tombstone alive with one queue entry, not one per packet.
func TestTrailingPacketsKeepOneTombstoneEntry(t *testing.T) {
	closeBoth := []pkt{
		{ms: 30, flags: psh, seq: sISN + 1, ack: cISN + 1, length: 100},
		{ms: 31, flags: fin, seq: sISN + 101, ack: cISN + 1},
		{fromClient: true, ms: 32, flags: fin, seq: cISN + 1, ack: sISN + 102},
		{ms: 33, flags: ack, seq: sISN + 102, ack: cISN + 2},
	}
	pkts := append(handshake(20), closeBoth...)
	const trailing = 20000
	for i := 0; i < trailing; i++ {
		// A FIN retransmitted every 100 ms for over half an hour.
		pkts = append(pkts, pkt{fromClient: true, ms: 5000 + float64(i)*100, flags: fin, seq: cISN + 1, ack: sISN + 102})
	}
	r, tr := run(t, pkts)
	if len(r.conns) != 1 {
		t.Fatalf("%d connections, want 1", len(r.conns))
	}
	if got := tr.Stats().Trailing; got != trailing {
		t.Errorf("%d trailing packets, want %d", got, trailing)
	}
	if queued := len(tr.tombQueue) - tr.tombHead; queued > 2 {
		t.Errorf("%d tombstone queue entries for one finished connection", queued)
	}
}

// TestHandshakeACKCoversEarlyData: a server that speaks first (a banner) sends data
// right after its SYN/ACK, and the client's first acknowledgement covers both: it
// still completes the handshake, which keeps its round trip (it had none).
func TestHandshakeACKCoversEarlyData(t *testing.T) {
	pkts := []pkt{
		{fromClient: true, ms: 0, flags: syn, seq: cISN, mss: 1460},
		{ms: 20, flags: synack, seq: sISN, ack: cISN + 1, mss: 1460},
		{ms: 20.05, flags: psh, seq: sISN + 1, ack: cISN + 1, length: 100},
		{fromClient: true, ms: 20.2, flags: ack, seq: cISN + 1, ack: sISN + 101},
		{fromClient: true, ms: 25, flags: psh, seq: cISN + 1, ack: sISN + 101, length: 50},
	}
	r, _ := run(t, pkts)
	if len(r.conns) != 1 {
		t.Fatalf("%d connections, want 1", len(r.conns))
	}
	c := r.conns[0]
	if got := c.HandshakeRTTNs(); got < 20e6 || got > 20.3e6 {
		t.Errorf("handshake RTT %d ns, want about 20.2 ms", got)
	}
	if c.Dirs[ToClient].Bytes != 100 {
		t.Errorf("server bytes %d, want 100", c.Dirs[ToClient].Bytes)
	}
}

// TestFlushInOrderOfFirstPacket: at the end of the input, the full connections and
// the SYN-only attempts kept compact are finished together in the order their
// first packets came, whichever kind each is.
func TestFlushInOrderOfFirstPacket(t *testing.T) {
	r := &recorder{}
	tr := NewTrackerWith(r.newHandler, ServerHint{}, TrackerOptions{Compact: true})
	server := netip.MustParseAddrPort("192.0.2.1:80")
	for i := range 12 {
		client := netip.AddrPortFrom(netip.MustParseAddr("198.51.100.7"), uint16(20000+i))
		ms := int64(i)
		p := capture.Packet{TimestampNs: testEpochNs + ms*1e6, Src: client.Addr(), Dst: server.Addr(),
			SrcPort: client.Port(), DstPort: server.Port(), Seq: uint32(1000 * i), Flags: syn, Window: 65535, HeaderLen: 20}
		p.Options.WindowScale = -1
		tr.Add(&p)
		if i%3 != 0 {
			continue // left a SYN-only attempt
		}
		// Answered: a full connection.
		a := capture.Packet{TimestampNs: p.TimestampNs + 1e5, Src: server.Addr(), Dst: client.Addr(),
			SrcPort: server.Port(), DstPort: client.Port(), Seq: 7, Ack: p.Seq + 1, Flags: synack, Window: 65535, HeaderLen: 20}
		a.Options.WindowScale = -1
		tr.Add(&a)
	}
	if len(r.closed) != 0 {
		t.Fatalf("%d connections finished before the end", len(r.closed))
	}
	tr.Flush()
	if len(r.closed) != 12 {
		t.Fatalf("%d connections finished at the end, want 12", len(r.closed))
	}
	for i, c := range r.closed {
		if c.Index != i+1 {
			t.Fatalf("finished in the order %v, want 1 to 12", indexes(r.closed))
		}
	}
}

func indexes(conns []*Conn) []int {
	var out []int
	for _, c := range conns {
		out = append(out, c.Index)
	}
	return out
}

// TestAnsweredAttemptsLeaveTheDeadlineHeap: a SYN-only attempt that is answered
// becomes a full connection and leaves the attempts' deadline heap then, not
// when its deadline (the idle time, an hour by default) comes: the heap holds
// the unanswered attempts only, each where its heapPos says, and they still
// finish when idle, with the rest.
func TestAnsweredAttemptsLeaveTheDeadlineHeap(t *testing.T) {
	r := &recorder{}
	const idleNs = 60e9
	tr := NewTrackerWith(r.newHandler, ServerHint{}, TrackerOptions{Compact: true, IdleNs: idleNs})
	server := netip.MustParseAddrPort("192.0.2.1:80")
	unanswered := 0
	// SYNs of eight clients at a time, then the SYN/ACKs in the reverse order:
	// attempts leave the heap from its middle.
	for g := 0; g < 1000; g += 8 {
		var syns [8]capture.Packet
		for k := range syns {
			i := g + k
			client := netip.AddrPortFrom(netip.MustParseAddr("198.51.100.7"), uint16(20000+i))
			p := capture.Packet{TimestampNs: testEpochNs + int64(i)*1e6, Src: client.Addr(), Dst: server.Addr(),
				SrcPort: client.Port(), DstPort: server.Port(), Seq: uint32(1000 * i), Flags: syn, Window: 65535, HeaderLen: 20}
			p.Options.WindowScale = -1
			tr.Add(&p)
			syns[k] = p
		}
		for k := len(syns) - 1; k >= 0; k-- {
			p := &syns[k]
			if (g+k)%4 == 0 {
				unanswered++
				continue
			}
			a := capture.Packet{TimestampNs: testEpochNs + int64(g+8)*1e6 + int64(8-k)*1e4, Src: p.Dst, Dst: p.Src,
				SrcPort: p.DstPort, DstPort: p.SrcPort, Seq: 7, Ack: p.Seq + 1, Flags: synack, Window: 65535, HeaderLen: 20}
			a.Options.WindowScale = -1
			tr.Add(&a)
		}
	}
	if got := len(tr.attemptDeadlines); got != unanswered {
		t.Fatalf("%d entries on the attempts' deadline heap, want the %d unanswered attempts", got, unanswered)
	}
	for i, e := range tr.attemptDeadlines {
		if e.attempt.done || int(e.attempt.heapPos) != i+1 {
			t.Fatalf("entry %d: done %v, heapPos %d", i, e.attempt.done, e.attempt.heapPos)
		}
	}
	tr.Advance(testEpochNs + 2000*1e6 + idleNs)
	if len(r.closed) != 1000 || len(tr.attemptDeadlines) != 0 {
		t.Fatalf("idle: %d connections finished and %d deadlines left, want all 1000 and none", len(r.closed), len(tr.attemptDeadlines))
	}
	synOnly := 0
	for _, c := range r.closed {
		if c.SYNACKNs == 0 {
			synOnly++
		}
	}
	if synOnly != unanswered {
		t.Errorf("%d connections finished with no SYN/ACK, want %d", synOnly, unanswered)
	}
}

// TestConnSize holds a Conn to the 896-byte size class of Go's allocator: a
// capture holds one for each connection open at once (50,000 in bench/shapes.sh
// edge50k), and a field added among the small ones' padding, or a bool put
// back after the field it goes with, would make it 1,024.
func TestConnSize(t *testing.T) {
	if n := unsafe.Sizeof(Conn{}); n > 896 {
		t.Errorf("a Conn takes %d bytes, want at most 896", n)
	}
}

// TestSYNACKsDroppedAtHandshake: the SYN/ACKs kept to pick the one the client
// acknowledged go once the handshake completes, and one sent again after it
// changes nothing.
func TestSYNACKsDroppedAtHandshake(t *testing.T) {
	r, _ := run(t, []pkt{
		{fromClient: true, ms: 0, flags: syn, seq: cISN, mss: 1460},
		{ms: 30, flags: synack, seq: sISN, ack: cISN + 1, mss: 1460},
		{ms: 31, flags: synack, seq: sISN + 777, ack: cISN + 1, mss: 1460},
		{fromClient: true, ms: 39, flags: ack, seq: cISN + 1, ack: sISN + 1},
		{ms: 60, flags: synack, seq: sISN + 777, ack: cISN + 1, mss: 1460},
	})
	if len(r.conns) != 1 {
		t.Fatalf("%d connections, want 1", len(r.conns))
	}
	c := r.conns[0]
	if c.synAcks != nil {
		t.Errorf("the SYN/ACKs are still kept after the handshake: %+v", *c.synAcks)
	}
	if c.Dirs[ToClient].ISN != sISN || c.SYNACKNs != testEpochNs+30_000_000 || c.HandshakeACKNs != testEpochNs+39_000_000 {
		t.Errorf("server ISN %d, SYN/ACK at %d, handshake ACK at %d; want %d, %d, %d",
			c.Dirs[ToClient].ISN, c.SYNACKNs, c.HandshakeACKNs, sISN, testEpochNs+30_000_000, testEpochNs+39_000_000)
	}
}
