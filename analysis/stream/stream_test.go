package stream

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"unsafe"

	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/report"
)

// countingConn is an analyzer that counts its connection's segments and payload
// bytes: enough to tell the engine's numbering, ordering and hand-over apart
// from any analysis.
type countingConn struct {
	finish   FinishFunc
	segments int
	bytes    int
}

func (a *countingConn) Segment(c *flow.Conn, s *flow.Segment) {
	a.segments++
	a.bytes += s.Len
}

func (a *countingConn) Close(c *flow.Conn) { a.finish(c, a) }

func (a *countingConn) Report(c *flow.Conn, final bool) report.Connection {
	rc := report.Connection{Client: c.Client.String(), Server: c.Server.String(), BytesToClient: int64(a.bytes)}
	if !final {
		rc.Notes = []string{"open"}
	}
	rc.MSS = a.segments // the segment count, where the test can read it
	return rc
}

// exchange makes the packets of one connection from client port port: a
// handshake, a request, a response of size bytes in segments of 1000, and a
// close; atNs is the first packet's time, each next 1 ms later.
func exchange(port uint16, size int, atNs int64, closeIt bool) []capture.Packet {
	client := netip.AddrFrom4([4]byte{10, 0, byte(port >> 8), byte(port)})
	server := netip.AddrFrom4([4]byte{192, 0, 2, 1})
	var out []capture.Packet
	at := atNs
	add := func(fromClient bool, seq, ack uint32, flags uint8, n int) {
		p := capture.Packet{TimestampNs: at, Src: client, Dst: server, SrcPort: port, DstPort: 80, Seq: seq, Ack: ack,
			Flags: flags, Window: 65535, HeaderLen: 20, PayloadLen: n, Options: capture.TCPOptions{WindowScale: -1}}
		if !fromClient {
			p.Src, p.Dst, p.SrcPort, p.DstPort = server, client, 80, port
		}
		out = append(out, p)
		at += 1e6
	}
	const ack = capture.FlagACK
	add(true, 100, 0, capture.FlagSYN, 0)
	add(false, 500, 101, capture.FlagSYN|ack, 0)
	add(true, 101, 501, ack, 0)
	add(true, 101, 501, ack|capture.FlagPSH, 100)
	sent := 0
	for sent < size {
		n := min(1000, size-sent)
		add(false, 501+uint32(sent), 201, ack, n)
		sent += n
	}
	if closeIt {
		add(true, 201, 501+uint32(size), ack|capture.FlagFIN, 0)
		add(false, 501+uint32(size), 202, ack|capture.FlagFIN, 0)
		add(true, 202, 502+uint32(size), ack, 0)
	}
	return out
}

// interleave merges the connections' packets in time order (ties by connection).
func interleave(conns ...[]capture.Packet) []capture.Packet {
	var out []capture.Packet
	next := make([]int, len(conns))
	for {
		best := -1
		for i, c := range conns {
			if next[i] < len(c) && (best < 0 || c[next[i]].TimestampNs < conns[best][next[best]].TimestampNs) {
				best = i
			}
		}
		if best < 0 {
			return out
		}
		out = append(out, conns[best][next[best]])
		next[best]++
	}
}

func testOptions(shards int, emitted *[]report.Connection) Options {
	return Options{
		Shards: shards,
		IdleNs: 3600e9,
		NewShard: func(finish FinishFunc) NewConnFunc {
			return func(c *flow.Conn, captureNs int64) Conn { return &countingConn{finish: finish} }
		},
		Emit: func(c *report.Connection) error {
			*emitted = append(*emitted, *c)
			return nil
		},
	}
}

// TestSameAtAnyShardCount: the engine numbers connections by their first packet
// and emits them in an order of the input alone, whatever the number of shards,
// and hands every finished connection's analyzer over exactly once.
func TestSameAtAnyShardCount(t *testing.T) {
	var conns [][]capture.Packet
	for i := range 1200 {
		// Staggered starts (20 ms apart: 24 s in all, so that closed ones
		// outlast their 2 s linger within the input), sizes and ends; one in
		// three left open at the end. About 14,000 packets: several batches.
		conns = append(conns, exchange(uint16(2000+i), 500+(i%17)*900, int64(i)*2e7, i%3 != 0))
	}
	packets := interleave(conns...)
	run := func(shards int) ([]report.Connection, Stats) {
		var emitted []report.Connection
		s := New(context.Background(), testOptions(shards, &emitted))
		for i := range packets {
			if err := s.Add(&packets[i]); err != nil {
				t.Fatal(err)
			}
		}
		st, err := s.Close()
		if err != nil {
			t.Fatal(err)
		}
		return emitted, st
	}
	one, st := run(1)
	if len(one) != len(conns) || st.Connections != int64(len(conns)) || st.Packets != int64(len(packets)) {
		t.Fatalf("one shard: %d reports, stats %+v; want %d connections of %d packets", len(one), st, len(conns), len(packets))
	}
	seen := map[int]bool{}
	for _, c := range one {
		// Connection i (from 1) began with client port 2000+i-1: numbered by
		// first packet.
		if want := fmt.Sprintf("10.0.%d.%d:%d", (2000+c.Index-1)>>8&0xff, (2000+c.Index-1)&0xff, 2000+c.Index-1); c.Client != want {
			t.Fatalf("connection %d is %s, want %s", c.Index, c.Client, want)
		}
		if seen[c.Index] {
			t.Fatalf("connection %d emitted twice", c.Index)
		}
		seen[c.Index] = true
	}
	// Connection 2 closed early and is emitted once its linger passed;
	// connection 1, left open, only at the end of the input.
	if one[0].Index != 2 {
		t.Errorf("the first report is of connection %d, want 2 (the first to close)", one[0].Index)
	}
	for _, shards := range []int{2, 3, 7} {
		got, _ := run(shards)
		if !reflect.DeepEqual(got, one) {
			t.Errorf("%d shards emit other reports or another order than one shard", shards)
		}
	}
}

// TestSnapshotQuiet: a snapshot asked for the connections quiet in a window
// builds those whose last packet came in it, and no other.
func TestSnapshotQuiet(t *testing.T) {
	b := exchange(3001, 2000, 3e9, false)
	c := exchange(3002, 3000, 4e9, false)
	lastB, lastC := b[len(b)-1].TimestampNs, c[len(c)-1].TimestampNs
	if lastB >= c[0].TimestampNs {
		t.Fatalf("b's last packet at %d ns, c's first at %d: the windows below need b quiet before c begins", lastB, c[0].TimestampNs)
	}
	packets := interleave(b, c)
	var emitted []report.Connection
	s := New(context.Background(), testOptions(2, &emitted))
	defer s.Close()
	for i := range packets {
		if err := s.Add(&packets[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		quiet Quiet
		want  []int
	}{
		{"every open one", AllOpen, []int{1, 2}},
		{"quiet since b's last packet", Quiet{FromNs: 0, BeforeNs: lastB + 1}, []int{1}},
		{"quiet since c's, b already shown", Quiet{FromNs: lastB + 1, BeforeNs: lastC + 1}, []int{2}},
		{"none quiet yet", Quiet{FromNs: 0, BeforeNs: lastB}, nil},
	} {
		open, err := s.Snapshot(tc.quiet)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, o := range open {
			got = append(got, o.Index)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: snapshot of connections %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSnapshotNumbersOpenConnections: a snapshot reports the open connections as
// they stand, numbered as they will be when finished, in order of number.
func TestSnapshotNumbersOpenConnections(t *testing.T) {
	// a closes at once; b and c begin after its 2 s linger, and stay open.
	a := exchange(3000, 5000, 0, true)
	b := exchange(3001, 2000, 3e9, false)
	c := exchange(3002, 3000, 3e9+5e5, false)
	packets := interleave(a, b, c)
	var emitted []report.Connection
	s := New(context.Background(), testOptions(2, &emitted))
	for i := range packets {
		if err := s.Add(&packets[i]); err != nil {
			t.Fatal(err)
		}
	}
	open, err := s.Snapshot(AllOpen)
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 2 || open[0].Index != 2 || open[1].Index != 3 || len(open[0].Notes) != 1 {
		t.Errorf("snapshot: %+v; want connections 2 and 3, as they stand", open)
	}
	if _, err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(emitted) != 3 || emitted[0].Index != 1 || emitted[1].Index != 2 || emitted[2].Index != 3 || len(emitted[2].Notes) != 0 {
		t.Errorf("emitted %+v; want 1 (closed), then 2 and 3 at the end, final", emitted)
	}
}

// TestDefaultShards: a shard a processor but the reader's, and two on two.
func TestDefaultShards(t *testing.T) {
	for procs, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 8: 7} {
		if got := DefaultShards(procs); got != want {
			t.Errorf("DefaultShards(%d) = %d, want %d", procs, got, want)
		}
	}
}

// TestArenaBudget: once the batches in existence hold more than arenaBudget of
// payload arenas, the reader makes no new batch but waits for one to come back
// (here the stream is cancelled, so it gets none); under it, it makes one. A
// shard that drops a batch it cannot give back uncounts its arena.
func TestArenaBudget(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var emitted []report.Connection
	s := New(ctx, testOptions(1, &emitted))
	sh := s.shards[0]
	if b := sh.freeBatch(); b == nil {
		t.Fatal("under the budget: no batch")
	}
	s.arenaBytes.Store(arenaBudget + 1)
	cancel()
	if b := sh.freeBatch(); b != nil {
		t.Fatal("over the budget: a new batch made instead of waiting for one to come back")
	}
	for range cap(sh.free) {
		sh.free <- &batch{}
	}
	sh.recycle(&batch{payload: make([]byte, 0, 1000), counted: 1000})
	if got := s.arenaBytes.Load(); got != arenaBudget+1-1000 {
		t.Errorf("after a batch was dropped the arenas count %d bytes, want %d", got, arenaBudget+1-1000)
	}
	_, _ = s.Close() // its goroutines end
}

// TestArenaBudgetCountsSlots: a batch's packets' slots count toward the
// budget with its arena: a capture of short snaps (an arena of a few hundred
// kilobytes) held a dozen batches of 4096 slots, 192 bytes each, that no
// budget bounded.
func TestArenaBudgetCountsSlots(t *testing.T) {
	var emitted []report.Connection
	s := New(context.Background(), testOptions(1, &emitted))
	for i := range batchPackets {
		// Packets without payload: an empty arena.
		p := exchange(uint16(1000+i%100), 0, int64(i)*1000, false)[0]
		if err := s.Add(&p); err != nil {
			t.Fatal(err)
		}
	}
	slots := int64(batchPackets) * int64(unsafe.Sizeof(capture.Packet{}))
	if got := s.arenaBytes.Load(); got < slots {
		t.Errorf("after a batch of %d packets the batches count %d bytes, want at least their slots' %d", batchPackets, got, slots)
	}
	if _, err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestShardsShareConnections: the shards' hash spreads connections evenly
// (a client's consecutive ports, or clients in one network, to one server) and
// gives a packet and its answer one shard.
func TestShardsShareConnections(t *testing.T) {
	server := netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), 443)
	for _, shards := range []int{2, 3, 4} {
		for seed := range uint64(3) {
			s := &Stream{shards: make([]*shard, shards), reader: reader{seed: seed * 0x1234567}}
			count := make([]int, shards)
			const n = 12000
			for i := range n {
				client := netip.AddrPortFrom(netip.MustParseAddr("10.0.0.7"), uint16(10000+i))
				if i%2 == 1 {
					client = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 50000)
				}
				k := s.hashShard(client, server)
				if back := s.hashShard(server, client); back != k {
					t.Fatalf("%s to %s: shard %d, its answer %d", client, server, k, back)
				}
				count[k]++
			}
			for k, c := range count {
				if want := n / shards; c < want*9/10 || c > want*11/10 {
					t.Errorf("%d shards, seed %d: shard %d has %d of %d connections, want about %d", shards, seed, k, c, n, want)
				}
			}
		}
	}
}
