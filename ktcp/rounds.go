package ktcp

// Rounds: a server socket's sending cut into round trips by the ACKs it
// received, as its events arrive. The lab's kernel tap (lab/labpath) cuts a
// whole record with it, and `slowstart field` cuts live connections with it,
// one event at a time, without keeping the events.

// Round is one of a server socket's sending rounds as its own ACK clock cuts
// them. The first round is the data the socket sent from the cutter's start
// until the first ACK of any of that data arrived; round k+1 is the data sent
// from that ACK (which opened it) until the first ACK of round k+1's own data
// arrived (which closed it). So a round is bounded by ACKs the socket received,
// and its bytes are what snd_nxt advanced by in between, however the
// application wrote.
//
// Sequence numbers are in whatever space the caller feeds the cutter
// (absolute, or relative to the ISN), compared modulo 2^32; times are on the
// caller's clock too (Event.MonoNs, or Unix nanoseconds).
type Round struct {
	// Start and End bound the round's data; Segments is its size in full
	// segments of the socket's MSS, rounded up.
	Start, End uint32
	Segments   int
	// OpenedNs is when the ACK that opened the round arrived (the cutter's
	// start time for the first round); ClosedNs when the ACK that closed it
	// arrived.
	OpenedNs, ClosedNs int64
	// CwndAtStart is the congestion window right after the ACK that opened the
	// round was processed (for the first round, the window the cutter started
	// with): the window in force when the round's first segment could leave. 0
	// when no event reported it.
	CwndAtStart uint32
	// Cwnd is the congestion window when the ACK that closed the round arrived,
	// before it was processed: the window the round's last segment left under.
	// When the socket was limited by its congestion window and every ACK of the
	// previous round came before the closing one (slow start on a clean path),
	// the round's segments are exactly Cwnd.
	Cwnd uint32
	// InFlight is what was unacknowledged when the closing ACK arrived (bytes):
	// the round's data, plus any of the previous round's still unacknowledged.
	InFlight uint32
	// QueuedBytes is what the application had written and the kernel not yet
	// sent when the round closed: more than 0 means a window cut the round, not
	// the application running out of data.
	QueuedBytes uint32
	// RwndBytes is the peer's receive window when the round closed.
	RwndBytes uint32
	// MSS is the socket's segment payload when the round closed (bytes).
	MSS uint32
	// Retransmitted says a retransmission left while the round was open, or the
	// congestion state was not Open when it closed: its size says little about
	// the window.
	Retransmitted bool
}

// Bytes is the round's size in bytes.
func (r Round) Bytes() uint32 { return r.End - r.Start }

// RoundACK is what the cutter needs of one segment the socket received (a
// KindProbe event): the socket before it processed the segment.
type RoundACK struct {
	Ns int64
	// Ack is the acknowledgment number the segment carried.
	Ack uint32
	// SndUna, SndNxt and WriteSeq are the socket's oldest unacknowledged byte,
	// next byte to send and the end of what its application wrote.
	SndUna, SndNxt, WriteSeq uint32
	// Cwnd is the congestion window (segments), MSS the segment payload
	// (bytes), RwndBytes the peer's receive window.
	Cwnd, MSS, RwndBytes uint32
	CAState              CAState
}

// RoundCutter cuts a server socket's sending into Rounds as the socket's
// events arrive, in the order the kernel reported them. It holds only the open
// round: a caller keeps what it needs of each round ACK returns. The zero
// RoundCutter is not ready: make one with NewRoundCutter.
type RoundCutter struct {
	start        uint32 // the open round's first byte
	openedNs     int64  // when the ACK that opened it arrived
	cwndAtStart  uint32
	awaitingCwnd bool // the open round's CwndAtStart is the next event's window
	retransmit   bool // a retransmission left while the open round was open
}

// NewRoundCutter starts cutting at sequence number start (the first byte of
// the first round: the server's ISN + 1 for a whole connection, or snd_nxt when
// a request arrived for one response) at time ns, with the congestion window
// cwnd in force then (the initial window at the start of a connection; 0 when
// unknown).
func NewRoundCutter(start uint32, ns int64, cwnd uint32) RoundCutter {
	return RoundCutter{start: start, openedNs: ns, cwndAtStart: cwnd}
}

// Start is the first byte of the round still open.
func (c *RoundCutter) Start() uint32 { return c.start }

// ACK takes one segment the socket received and returns the round it closed,
// if it closed one: the first ACK that acknowledges data of the open round
// closes it and opens the next, whose window at its start is what the next
// event reports (the next ACK's window before it is processed, or a state
// change's).
func (c *RoundCutter) ACK(a RoundACK) (Round, bool) {
	if c.awaitingCwnd {
		c.cwndAtStart, c.awaitingCwnd = a.Cwnd, false
	}
	if int32(a.Ack-c.start) <= 0 || int32(a.SndNxt-c.start) <= 0 {
		return Round{}, false
	}
	r := Round{
		Start:         c.start,
		End:           a.SndNxt,
		OpenedNs:      c.openedNs,
		ClosedNs:      a.Ns,
		CwndAtStart:   c.cwndAtStart,
		Cwnd:          a.Cwnd,
		InFlight:      a.SndNxt - a.SndUna,
		RwndBytes:     a.RwndBytes,
		MSS:           a.MSS,
		Retransmitted: c.retransmit || a.CAState != CAOpen,
	}
	if int32(a.WriteSeq-a.SndNxt) > 0 {
		r.QueuedBytes = a.WriteSeq - a.SndNxt
	}
	if a.MSS > 0 {
		r.Segments = int((r.End - r.Start + a.MSS - 1) / a.MSS)
	}
	c.start, c.openedNs = a.SndNxt, a.Ns
	c.cwndAtStart, c.awaitingCwnd, c.retransmit = 0, true, false
	return r, true
}

// Window takes the congestion window a state change of the socket reported:
// it is the open round's window at its start when no ACK came between the one
// that opened the round and this change.
func (c *RoundCutter) Window(cwnd uint32) {
	if c.awaitingCwnd {
		c.cwndAtStart, c.awaitingCwnd = cwnd, false
	}
}

// Retransmit notes a retransmission by the socket: the open round is marked
// Retransmitted.
func (c *RoundCutter) Retransmit() { c.retransmit = true }

// Event feeds one of the socket's events to the cutter (KindProbe as an ACK,
// KindState as a window, KindRetransmit as a retransmission; others are
// ignored), with times from Event.MonoNs, and returns the round it closed.
func (c *RoundCutter) Event(ev *Event) (Round, bool) {
	switch ev.Kind {
	case KindProbe:
		return c.ACK(ACKOf(ev))
	case KindState:
		c.Window(ev.Sock.SndCwnd)
	case KindRetransmit:
		c.Retransmit()
	}
	return Round{}, false
}

// ACKOf is a KindProbe event as the cutter takes it.
func ACKOf(ev *Event) RoundACK {
	return RoundACK{
		Ns:        ev.MonoNs,
		Ack:       ev.Segment.AckSeq,
		SndUna:    ev.Sock.SndUna,
		SndNxt:    ev.Sock.SndNxt,
		WriteSeq:  ev.Sock.WriteSeq,
		Cwnd:      ev.Sock.SndCwnd,
		MSS:       ev.Sock.MSS,
		RwndBytes: ev.Sock.SndWndBytes,
		CAState:   ev.Sock.CAState,
	}
}
