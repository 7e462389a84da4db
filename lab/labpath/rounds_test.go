package labpath

import (
	"testing"

	"github.com/slowstart/slowstart/ktcp"
)

// TestKernelRounds cuts a record made by hand (IW 2, MSS 1000, a response of
// 6000 bytes written at once) into rounds. By hand: the request (ACK 0) closes
// nothing; the first ACK of data (1000) closes round 1 = [0, 2000), sent under
// the initial window 2 with 4000 bytes still queued; the window after it is 3
// (what the next event reports); the ACK of 2000 acknowledges only round 1's
// data; the ACK of 3000 is the first of round 2's data and closes round 2 =
// [2000, 6000), 4 segments under a window of 4, nothing queued, with a
// retransmission between its opening and closing ACKs; the ACK of 6000 finds
// nothing new sent, so no third round.
func TestKernelRounds(t *testing.T) {
	ack := func(ns int64, ack, una, nxt, write, cwnd uint32) KernelACK {
		return KernelACK{UnixNs: ns, Ack: ack, SndUna: una, SndNxt: nxt, WriteSeq: write, Cwnd: cwnd, MSS: 1000, RwndBytes: 65535}
	}
	conn := KernelConn{
		InitialWindow: 2,
		ACKs: []KernelACK{
			ack(10, 0, 0, 0, 0, 2),
			ack(20, 1000, 0, 2000, 6000, 2),
			ack(21, 2000, 1000, 4000, 6000, 3),
			ack(30, 3000, 2000, 6000, 6000, 4),
			ack(31, 6000, 3000, 6000, 6000, 5),
		},
		Retransmits: []KernelRetransmit{{UnixNs: 25, Start: 3000, End: 4000, CAState: ktcp.CAOpen}},
	}
	want := []KernelRound{
		{Start: 0, End: 2000, Segments: 2, OpenedUnixNs: 0, ClosedUnixNs: 20, CwndAtStart: 2, Cwnd: 2, InFlight: 2000, QueuedBytes: 4000, RwndBytes: 65535},
		{Start: 2000, End: 6000, Segments: 4, OpenedUnixNs: 20, ClosedUnixNs: 30, CwndAtStart: 3, Cwnd: 4, InFlight: 4000, QueuedBytes: 0, RwndBytes: 65535, Retransmitted: true},
	}
	got := conn.Rounds()
	if len(got) != len(want) {
		t.Fatalf("%d rounds %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("round %d:\n%+v\nwant\n%+v", i+1, got[i], want[i])
		}
	}
}
