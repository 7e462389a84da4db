package ktcp

import "testing"

// TestRoundCutter feeds the cutter a server socket's events as the kernel
// reported them for nginx answering curl with 30,249 bytes (headers and a
// 30,000-byte body) under initcwnd 4 over 50 ms, MSS 1448 (copied from a
// trace of the lab; times in ms, sequence numbers relative to the ISN + 1, the
// absolute ones placed near 2^32 so that they wrap inside the response).
//
// By hand: the request (ACK 0) closes nothing. The first ACK of data (1448)
// closes round 1 = [0, 5792): 4 segments sent under the initial window 4, with
// 24,457 bytes written and not yet sent. The next event shows the window 5:
// round 2's window at its start. The ACKs of 2896..5792 acknowledge round 1's
// data only; the ACK of 7240 (at 104.594) is the first of round 2's data and
// closes round 2 = [5792, 17376), 8 segments under a window of 8, still 12,869
// bytes queued; the next event shows 9. The ACK of 18824 (at 155.017) closes
// round 3 = [17376, 30249): 12,873 bytes, 9 segments, nothing queued (the
// application had written all of it), under a window of 16. A retransmission
// between 104.594 and 155.017 marks round 3. The client's FIN (a state change
// after the last ACK) opens nothing: no round is left to close.
func TestRoundCutter(t *testing.T) {
	var base = uint32(0xffff_f000) // sequence numbers wrap at 4096
	ms := func(v float64) int64 { return int64(v * 1e6) }
	probe := func(at float64, ack, una, nxt, write, cwnd uint32) Event {
		return Event{Kind: KindProbe, MonoNs: ms(at),
			Sock:    Sock{SndCwnd: cwnd, SndUna: base + una, SndNxt: base + nxt, WriteSeq: base + write, MSS: 1448, SndWndBytes: 64512},
			Segment: Segment{AckSeq: base + ack, Flags: FlagACK}}
	}
	events := []Event{
		probe(0.058, 0, 0, 0, 0, 4),
		probe(54.231, 1448, 0, 5792, 30249, 4),
		probe(54.270, 2896, 1448, 8688, 30249, 5),
		probe(54.280, 4344, 2896, 11584, 30249, 6),
		probe(54.293, 5792, 4344, 14480, 30249, 7),
		probe(104.594, 7240, 5792, 17376, 30249, 8),
		probe(104.631, 8688, 7240, 20272, 30249, 9),
		{Kind: KindRetransmit, MonoNs: ms(120)},
		probe(155.017, 18824, 17376, 30249, 30249, 16),
		probe(155.060, 30249, 28801, 30249, 30249, 24),
		{Kind: KindState, MonoNs: ms(157.061), OldState: StateEstablished, NewState: StateCloseWait, Sock: Sock{SndCwnd: 25}},
	}
	want := []Round{
		{Start: base, End: base + 5792, Segments: 4, OpenedNs: ms(0.058), ClosedNs: ms(54.231), CwndAtStart: 4, Cwnd: 4, InFlight: 5792, QueuedBytes: 24457, RwndBytes: 64512, MSS: 1448},
		{Start: base + 5792, End: base + 17376, Segments: 8, OpenedNs: ms(54.231), ClosedNs: ms(104.594), CwndAtStart: 5, Cwnd: 8, InFlight: 11584, QueuedBytes: 12873, RwndBytes: 64512, MSS: 1448},
		{Start: base + 17376, End: base + 30249, Segments: 9, OpenedNs: ms(104.594), ClosedNs: ms(155.017), CwndAtStart: 9, Cwnd: 16, InFlight: 12873, RwndBytes: 64512, MSS: 1448, Retransmitted: true},
	}
	c := NewRoundCutter(base, ms(0.058), 4)
	var got []Round
	for i := range events {
		if r, ok := c.Event(&events[i]); ok {
			got = append(got, r)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d rounds %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("round %d:\n%+v\nwant\n%+v", i+1, got[i], want[i])
		}
	}
	if got[2].Bytes() != 12873 {
		t.Errorf("round 3 holds %d bytes across the wrap, want 12873", got[2].Bytes())
	}
	if c.Start() != base+30249 {
		t.Errorf("the open round starts at %d, want %d", c.Start()-base, 30249)
	}
}

// TestRoundCutterWindowFromState: when a state change comes between the ACK
// that closed a round and the next ACK, the next round's window at its start
// is the state change's (the window after the closing ACK was processed).
func TestRoundCutterWindowFromState(t *testing.T) {
	c := NewRoundCutter(0, 0, 2)
	if _, ok := c.ACK(RoundACK{Ns: 1, Ack: 1000, SndUna: 0, SndNxt: 2000, WriteSeq: 5000, Cwnd: 2, MSS: 1000}); !ok {
		t.Fatal("the first ACK of data closed no round")
	}
	c.Window(3)
	c.Window(7) // only the first report after the closing ACK counts
	r, ok := c.ACK(RoundACK{Ns: 2, Ack: 3000, SndUna: 1000, SndNxt: 5000, WriteSeq: 5000, Cwnd: 4, MSS: 1000})
	if !ok || r.CwndAtStart != 3 || r.Segments != 3 || r.Start != 2000 || r.End != 5000 {
		t.Errorf("round 2 %+v (closed %v), want [2000, 5000), 3 segments, window 3 at its start", r, ok)
	}
}
