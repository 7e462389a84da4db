package analysis

import (
	"math"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/report"
)

// TestListedPacketKeepsEveryField: a packet kept for the list comes back as
// the report.Packet its segment makes, at the widest values each field takes
// (the largest scaled window, a merged segment of 256 KB, an offset past 4 GB,
// both flags), in 40 bytes.
func TestListedPacketKeepsEveryField(t *testing.T) {
	if n := unsafe.Sizeof(listedPacket{}); n != 40 {
		t.Errorf("a listed packet takes %d bytes, want 40", n)
	}
	from := new(atomic.Int64)
	from.Store(math.MaxInt64)
	ca := &connAnalyzer{env: &connEnv{opts: Options{Packets: true}, packetsFrom: from}}
	c := &flow.Conn{FirstNs: 1_700_000_000_123_456_789}
	segs := []flow.Segment{
		{Dir: flow.ToServer, TimeNs: c.FirstNs, Offset: 0, Len: 0, Flags: 0x02, WindowBytes: 64240},
		{Dir: flow.ToClient, TimeNs: c.FirstNs + 25_000_123, Offset: 5 << 30, Len: 256 << 10, HasAck: true, AckOffset: 1<<40 + 7,
			Flags: 0x18, WindowBytes: 65535 << 14, Retransmission: true, OutOfOrder: true},
	}
	for i := range segs {
		ca.recordPacket(c, &segs[i])
	}
	ms := func(ns int64) float64 { return float64(ns-c.FirstNs) / 1e6 }
	got := appendListed(nil, ca.packets, c.FirstNs, ms)
	want := []report.Packet{
		{TimeMs: 0, Dir: "c2s", Seq: 0, Len: 0, Ack: -1, Win: 64240, Flags: "S"},
		{TimeMs: 25.000123, Dir: "s2c", Seq: 5 << 30, Len: 256 << 10, Ack: 1<<40 + 7, Win: 65535 << 14, Flags: "PA", Retx: true, OOO: true},
	}
	if len(got) != len(want) {
		t.Fatalf("%d packets listed, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("packet %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
