// Package flow tracks TCP connections in a stream of decoded packets: which side is
// the client, the handshake that completed and its options, sequence numbers turned
// into 64-bit stream offsets per direction, every sequence byte counted once (holes
// the capture missed and their later filling), the advertised receive window,
// retransmissions, out-of-order segments and how the connection ended.
//
// A connection begins with a SYN (or, where the capture missed it, with the first
// packet of a four-tuple); a new connection on a four-tuple that was in use needs a
// new SYN with a new initial sequence number. Packets that continue a finished
// connection's sequence space (retransmitted FINs, a last RST) are counted, not
// made into connections. Frames captured twice (the same segment seen on two
// interfaces, back to back) are counted once.
//
// It does not interpret payloads (see tlsrec, httpmsg) and does not decide rounds
// (see rounds): it hands every segment, annotated, to a per-connection Handler.
// Memory is per open connection (and a small record per recently finished one),
// never per packet.
package flow

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/slowstart/slowstart/capture"
)

// Dir is the direction of a segment.
type Dir uint8

// Directions.
const (
	ToServer Dir = 0 // sent by the client
	ToClient Dir = 1 // sent by the server
)

// Reverse is the other direction.
func (d Dir) Reverse() Dir { return 1 - d }

func (d Dir) String() string {
	if d == ToServer {
		return "to_server"
	}
	return "to_client"
}

// Segment is one TCP segment of a connection, with sequence numbers turned into
// stream offsets (bytes since the first data byte of the direction).
type Segment struct {
	Dir    Dir
	TimeNs int64
	Flags  uint8
	// Offset is the stream offset of the first payload byte; Len the true payload length.
	Offset int64
	Len    int
	// NewOffset and NewLen describe the part of the payload beyond everything this
	// direction sent before (NewLen is 0 for pure ACKs and pure retransmissions).
	NewOffset int64
	NewLen    int
	// FilledLen counts payload bytes below that point that the capture had not seen
	// before: they fill a hole (reordering, or a retransmission of bytes the capture
	// missed). NewLen + FilledLen is what the segment adds to the direction's bytes.
	FilledLen int
	// Retransmission: some payload bytes had been seen before (or, at the receiver,
	// filled a hole late). OutOfOrder: filled a hole shortly after the bytes above it
	// arrived, as reordering does.
	Retransmission bool
	OutOfOrder     bool
	// Hole: the segment starts beyond the highest byte seen before: the bytes in
	// between were lost before the capture point, or are late.
	Hole bool
	// AckOffset is the cumulative acknowledgement as an offset into the other
	// direction's stream (valid when HasAck).
	AckOffset int64
	HasAck    bool
	// AckBeyond counts bytes of the other direction that this segment acknowledged
	// first although the capture never saw them sent: the capture missed packets.
	AckBeyond int64
	// WindowBytes is the advertised receive window, scaled when scaling is in use.
	WindowBytes int
	// SACKHigh is one past the highest byte of the other direction this segment
	// selectively acknowledged (its SACK blocks), as a stream offset; 0 with none.
	SACKHigh int64
	// SACKBytes is how many bytes beyond the acknowledgement its SACK blocks
	// report received: what they take out of flight.
	SACKBytes int64
	// DupAck: a pure acknowledgement that repeats the last one (same ack, same
	// window) while the other side has bytes outstanding: the receiver got a
	// segment beyond a hole (RFC 5681's duplicate ACK). Like a SACK block, it
	// tells the sender a segment left the network, and Linux sends on it.
	DupAck bool
	HasTS  bool
	TSVal  uint32
	TSEcr  uint32
	// Payload is the captured part of the payload (may be shorter than Len). It
	// points into the reader's buffer: copy what you keep.
	Payload []byte
}

// SYNOptions are the options a SYN announced that the analysis uses.
type SYNOptions struct {
	MSS           uint16 // 0 when the option is absent
	WindowScale   int8   // -1 when the option is absent
	SACKPermitted bool
	HasTimestamps bool
	TSVal         uint32 // the SYN's timestamp value (valid with HasTimestamps)
}

func synOptions(o *capture.TCPOptions) SYNOptions {
	return SYNOptions{MSS: o.MSS, WindowScale: o.WindowScale, SACKPermitted: o.SACKPermitted, HasTimestamps: o.HasTimestamps, TSVal: o.TSVal}
}

// DirState is what is known of one direction of a connection.
//
// Its fields are in two parts: first those a packet of either direction reads
// or writes (a packet reads its own direction's and the other's), then those
// read only at a SYN, a retransmission, a hole or the report. A capture of
// many open connections reads a connection's state from memory for most of
// its packets: the fewer cache lines a packet touches, the fewer it waits for
// (TestDirStateHotFields).
type DirState struct {
	// lastSeq is the last sequence number seen, for unwrapping; lastOffset
	// its stream offset.
	lastSeq uint32
	baseSet bool
	ackSent bool // (see ackOffset)
	// dataSeen: data of this side was seen, or acknowledged by the other (see
	// HighestEnd).
	dataSeen bool
	SYNSeen  bool
	// WindowScale is the shift applied to this side's advertised window (0 when
	// scaling is not in use on the connection).
	WindowScale int8
	FINSeen     bool
	RSTSeen     bool
	// RTT sampling (Karn's rule): one new-data segment of this direction is timed
	// at a time, until the other side acknowledges it; a retransmission of its
	// bytes cancels the sample.
	timing bool
	// The floor's own timer (see AckDelayFloorNs): one segment at a time,
	// restarted when its bytes are sent again (from that latest sending).
	floorTiming bool
	lastRecent  int8 // (see recent)
	// SYNCount is how many SYNs (client) or SYN/ACKs (server) with the ISN were
	// captured (more than one: the first went unanswered or its answer was
	// lost; the round trip then is read with care, on every packet).
	SYNCount   int32
	lastOffset int64
	// The last acknowledgement this side sent (offset and window, when
	// ackSent), to tell a duplicate ACK.
	ackOffset int64
	ackWindow int
	// HighestEnd is one past the highest stream offset sent (or acknowledged by the
	// other side).
	HighestEnd int64
	// highestTimeNs is when the segment ending at HighestEnd was seen.
	highestTimeNs int64
	// HighestAckByPeer is the highest stream offset of this direction that the other
	// side acknowledged (-1 before any acknowledgement).
	HighestAckByPeer int64
	// finOffset is the stream offset of this side's FIN (-1 before one was seen).
	finOffset int64
	Packets   int64
	// Bytes counts distinct stream bytes the capture saw (new sequence space, each
	// byte once whenever it first appeared), not frames.
	Bytes             int64
	timedEnd, timedNs int64
	floorEnd, floorNs int64
	// MinAckDelayNs is the shortest time from a new-data segment of this direction
	// to the other side's acknowledgement of it (-1: no sample). Seen at one end of
	// the path, one direction's is the round trip and the other's about zero.
	MinAckDelayNs int64
	// recent frames of this direction, to tell frames captured twice
	recent [recentFrames]recentFrame

	// What a packet seldom reads.

	SYN SYNOptions // options of this side's SYN (valid when SYNSeen)
	// ISN is the initial sequence number of this side's SYN (see SYNCount).
	ISN  uint32
	base uint32 // sequence number of stream offset 0 (when baseSet)
	// seq tracks which bytes below HighestEnd the capture has not seen.
	seq seqSpace
	// preCaptureEnd: in a capture that began mid-stream, the first data seen began
	// here; bytes below it were sent before the capture (not missed by it).
	// lowestData is the lowest offset of data seen in such a capture.
	preCaptureEnd int64
	lowestData    int64
	// AckedUnseenBytes counts bytes the other side acknowledged that the capture
	// never saw: packets the capture dropped (or filtered away).
	AckedUnseenBytes int64
	// AckDelayFloorNs is the shortest time from the latest sending of a timed
	// segment's bytes to their acknowledgement, retransmitted ones too (-1: none):
	// never more than the true delay, so a floor that is still long shows that
	// the other side itself, not something near the capture, acknowledged the
	// data. (Karn's rule keeps retransmitted bytes out of MinAckDelayNs, which
	// estimates the round trip; a floor needs no such care.)
	AckDelayFloorNs int64
	Retransmissions int32
	OutOfOrder      int32
	// Duplicates counts frames captured twice: identical to the one before, back to
	// back, with nothing from the other side in between.
	Duplicates int32
}

type recentFrame struct {
	sig    frameSignature
	valid  bool // (next to sig's 28 bytes, not after timeNs: 8 bytes less)
	timeNs int64
}

// MissingBytes is the part of the direction's stream below its highest byte that
// the capture never saw (holes not filled by a later segment), including bytes the
// other side acknowledged.
func (d *DirState) MissingBytes() int64 {
	return d.seq.missing() - d.seq.missingBelow(d.preCaptureEnd)
}

// HolesOverflowed reports that more holes than the tracker follows appeared, so
// some bytes that filled old holes were counted as retransmitted instead.
func (d *DirState) HolesOverflowed() bool { return d.seq.overflowed }

// frameSignature identifies a frame closely enough to tell a capture duplicate.
type frameSignature struct {
	seq, ack     uint32
	tsVal, tsEcr uint32
	flags        uint8
	window       uint16
	ipID         uint16
	length       int32
}

// Conn is one TCP connection.
type Conn struct {
	// First what a packet reads or writes (see DirState).

	Client, Server netip.AddrPort
	// sameHash is the next open connection whose four-tuple hashes the same
	// (see connTable).
	sameHash *Conn
	handler  Handler
	LastNs   int64
	// The handshake that completed (0 when not seen): SYNNs is the client's SYN the
	// SYN/ACK answered (the latest one sent before it), SYNACKNs the SYN/ACK the
	// client acknowledged, HandshakeACKNs the client's first acknowledgement of it.
	// FirstSYNNs is the first SYN, earlier than SYNNs when the SYN was sent again.
	SYNNs, SYNACKNs, HandshakeACKNs int64
	// SYN/ACKs seen before the handshake completed, to pick the one acknowledged
	// (allocated at the first: most connections of a SYN flood never get one;
	// dropped when the handshake completes).
	synAcks *synAckSet
	heapPos int
	// closing: it ended and is due after the linger; done: finished. heapPos is
	// its deadline's place on the tracker's heap, plus one (0: none).
	closing, done bool
	// SYNACKInferred: the capture has no SYN/ACK; the client's acknowledgement of one
	// completed the handshake (SYNACKNs is 0).
	SYNACKInferred bool
	// rstBeforeHandshake: a RST answered a SYN; a retried SYN may still succeed.
	rstBeforeHandshake bool
	// sawOther[d]: a packet of the other direction arrived since d's last frame.
	sawOther [2]bool
	Dirs     [2]DirState

	// What a packet seldom reads.

	Index      int // 1-based, in order of first packet
	FirstNs    int64
	FirstSYNNs int64
	lastSYNNs  int64 // the latest client SYN so far
	// RefusedNs is when the server answered the SYN with a RST (0: it did not).
	RefusedNs    int64
	refusedSYNNs int64
	// Reordering window at the receiver: holes filled within this time of the data
	// above them count as out-of-order rather than retransmitted.
	reorderNs int64
	// FirstOrdinal is the number of the connection's first packet in the whole
	// input; FinishNs the capture time at which it was finished (handed over).
	FirstOrdinal int64
	FinishNs     int64
	// MidStream is true when the capture did not see the connection's SYN.
	MidStream bool
}

type synAck struct {
	isn        uint32
	timeNs     int64
	answeredNs int64 // the client SYN it answered (the latest before it)
	options    SYNOptions
}

// synAckSet keeps the first three SYN/ACKs and the latest.
type synAckSet struct {
	list [4]synAck
	n    int
}

// Handler receives the segments of one connection, in capture order.
type Handler interface {
	Segment(c *Conn, s *Segment)
	// Close is called once, when the connection is over or the input ended.
	Close(c *Conn)
}

// NewHandlerFunc makes the Handler of a new connection.
type NewHandlerFunc func(c *Conn) Handler

// ServerHint says which endpoint is the server when the capture holds no SYN.
type ServerHint struct {
	Addr netip.Addr // invalid: any address
	Port uint16     // 0: any port
}

// Matches reports whether ap is the hinted server.
func (h ServerHint) Matches(ap netip.AddrPort) bool {
	if h.Addr.IsValid() && h.Addr.Unmap() != ap.Addr().Unmap() {
		return false
	}
	return h.Port == 0 || h.Port == ap.Port()
}

// IsSet reports whether the hint says anything.
func (h ServerHint) IsSet() bool { return h.Addr.IsValid() || h.Port != 0 }

type connKey struct {
	a, b netip.AddrPort // a < b in a fixed order
}

func makeKey(x, y netip.AddrPort) connKey {
	if x.Compare(y) < 0 {
		return connKey{x, y}
	}
	return connKey{y, x}
}

// Stats counts packets the tracker did not hand to a connection's handler.
type Stats struct {
	// Trailing packets continued a connection that had already finished (a
	// retransmitted FIN, a last RST, a late ACK): counted here, not made into a
	// new connection.
	Trailing int64
	// Duplicates are frames captured twice (counted in their connection as well).
	Duplicates int64
}

// Tracker demultiplexes packets into connections.
type Tracker struct {
	conns      connTable
	newHandler NewHandlerFunc
	hint       ServerHint
	next       int
	seg        Segment
	// lingerNs: a connection that ended (both FINs or a RST) is finished when no
	// packet of it was seen for this long. idleNs: an open connection is finished
	// when none was seen for this long (0: never), attemptIdleNs likewise for a
	// connection that is only SYNs; so memory stays bounded by open connections.
	lingerNs, idleNs, attemptIdleNs int64
	// deadlines orders open connections by when they may be finished.
	deadlines deadlineHeap
	// attempts holds connections that are only SYNs so far (a SYN flood, a scan,
	// an unreachable server) in a few bytes each; any other packet of the
	// four-tuple makes one a full connection.
	attempts         map[compactKey]*attempt
	attemptDeadlines attemptHeap
	compact          bool
	ending           bool  // FlushEach: the input is over
	last             *Conn // the connection of the previous packet
	// finished remembers recently finished connections' sequence spaces, so that
	// their late packets are not taken for new connections.
	finished  map[compactKey]tombstone
	tombQueue []tombRef
	tombHead  int
	// ordinal is the number of the packet being added, in the whole input.
	ordinal int64
	created func(index int, ordinal int64, client, server netip.AddrPort)
	nowNs   int64
	stats   Stats
}

// TrackerOptions tune a Tracker; the zero value keeps connections until they
// end.
type TrackerOptions struct {
	// Idle: a connection with no packet for this long (capture time) is finished
	// as it stands; 0 keeps it until the input ends. Its later packets are then
	// counted as trailing (Stats.Trailing).
	IdleNs int64
	// AttemptIdle: the same for a connection that is only SYNs so far (0: Idle).
	AttemptIdleNs int64
	// Compact keeps SYN-only connections as a few bytes each until a packet other
	// than a SYN comes; their handler is made then (or when they are finished),
	// and sees one of their SYNs.
	Compact bool
	// Created is told of every new connection when its first packet comes (its
	// number, that packet's ordinal, and who is the client and the server), before
	// its handler exists (with Compact, before a SYN-only one is a full one).
	Created func(index int, ordinal int64, client, server netip.AddrPort)
}

// NewTracker makes a Tracker that calls newHandler for each new connection.
func NewTracker(newHandler NewHandlerFunc, hint ServerHint) *Tracker {
	return NewTrackerWith(newHandler, hint, TrackerOptions{})
}

// NewTrackerWith is NewTracker with options.
func NewTrackerWith(newHandler NewHandlerFunc, hint ServerHint, opts TrackerOptions) *Tracker {
	t := &Tracker{
		conns:      newConnTable(),
		finished:   make(map[compactKey]tombstone),
		attempts:   make(map[compactKey]*attempt),
		newHandler: newHandler,
		hint:       hint,
		lingerNs:   2e9,
		idleNs:     opts.IdleNs,
		compact:    opts.Compact,
		created:    opts.Created,
	}
	t.attemptIdleNs = opts.AttemptIdleNs
	if t.attemptIdleNs <= 0 {
		t.attemptIdleNs = t.idleNs
	}
	return t
}

// Stats returns what the tracker counted so far.
func (t *Tracker) Stats() Stats { return t.stats }

// Add processes one packet, the next of the input.
func (t *Tracker) Add(p *capture.Packet) { t.AddNumbered(p, t.ordinal+1) }

// AddNumbered processes one packet that is the ordinal-th of the whole input (for
// trackers that see a share of the input's packets).
func (t *Tracker) AddNumbered(p *capture.Packet, ordinal int64) {
	t.ordinal = ordinal
	if p.TimestampNs > t.nowNs {
		t.nowNs = p.TimestampNs
	}
	src := netip.AddrPortFrom(p.Src, p.SrcPort)
	dst := netip.AddrPortFrom(p.Dst, p.DstPort)
	// Consecutive packets mostly belong to the same connection: try it before the table.
	c := t.last
	if c == nil || !c.between(src, dst) {
		c = t.conns.get(src, dst)
	}
	isSYN := p.Has(capture.FlagSYN) && !p.Has(capture.FlagACK)
	if c != nil {
		// A connection due to be finished (quiet for its linger, or idle) is
		// finished before this packet is matched, so that a late one is judged
		// against a finished connection. (Other connections are finished by
		// Advance: what happens to a connection depends only on its own packets and
		// the times Advance is called with.)
		if due := c.dueNs(t); due >= 0 && due < p.TimestampNs {
			t.finish(c, due)
			c = nil
		} else if isSYN && t.isNewConnection(c, src, p.Seq) {
			// A new connection on the same four-tuple (port reuse).
			t.finish(c, p.TimestampNs)
			c = nil
		}
	}
	if c == nil {
		key := makeKey(src, dst)
		var ckey compactKey
		if len(t.attempts) > 0 || len(t.finished) > 0 {
			ckey = compact(key)
		}
		if at := t.attempts[ckey]; at != nil && t.attemptIdleNs > 0 && at.lastNs+t.attemptIdleNs < p.TimestampNs {
			t.finish(t.promote(at), at.lastNs+t.attemptIdleNs)
		}
		if at := t.attempts[ckey]; at != nil {
			if client, _ := at.endpoints(); isSYN && src == client && t.addToAttempt(at, p) {
				return
			}
			c = t.promote(at)
		} else {
			if tomb, ok := t.finished[ckey]; ok {
				if tomb.continues(key, src, p) {
					t.stats.Trailing++
					// Keep it while it goes on (a peer that resets every minute):
					// its queue entry is moved on when it comes due (expireTombstones).
					tomb.lastNs = p.TimestampNs
					t.finished[ckey] = tomb
					return
				}
				delete(t.finished, ckey)
			}
			if t.compact && isSYN && !(t.hint.IsSet() && t.hint.Matches(src)) {
				t.newAttempt(key, src, dst, p)
				return
			}
			c = t.newConn(src, dst, p)
		}
	}
	if t.last != c {
		t.last = c // (written only when it changes: a pointer write costs a barrier while the collector runs)
	}
	c.LastNs = p.TimestampNs
	dir := ToServer
	if src == c.Server {
		dir = ToClient
	}
	if c.isDuplicate(dir, p) {
		t.stats.Duplicates++
		if dir == ToServer && p.Has(capture.FlagSYN) && !p.Has(capture.FlagACK) && c.HandshakeACKNs == 0 {
			// A copy of the SYN seen later (at another point of the path): the
			// handshake is timed from the latest copy, as Wireshark's initial RTT is.
			c.lastSYNNs = p.TimestampNs
		}
		return
	}
	t.segment(c, dir, p)
	if !c.closing && c.ended() {
		// Ended: due to be finished after the linger, earlier than when idle.
		c.closing = true
		t.schedule(c)
	}
}

// Advance finishes the connections due before capture time nowNs (ended and quiet
// for the linger, or idle) and forgets finished ones long quiet. Call it as the
// input's time passes: every few thousand packets with the latest time seen, and
// from a live source as time passes without packets.
func (t *Tracker) Advance(nowNs int64) {
	if nowNs > t.nowNs {
		t.nowNs = nowNs
	}
	for len(t.deadlines) > 0 && t.deadlines[0].atNs < nowNs {
		c := t.deadlines[0].conn
		due := c.dueNs(t)
		switch {
		case due < 0:
			t.deadlines.pop() // nothing will finish it but the end of the input
		case due < nowNs:
			t.finish(c, due) // takes it off the heap
		default:
			t.deadlines.set(c, due) // it had packets since: later
		}
	}
	for len(t.attemptDeadlines) > 0 && t.attemptDeadlines[0].atNs < nowNs {
		e := t.attemptDeadlines.pop()
		at := e.attempt
		if at.done {
			continue
		}
		due := at.lastNs + t.attemptIdleNs
		if due >= nowNs {
			t.attemptDeadlines.push(attemptDeadline{atNs: due, attempt: at})
			continue
		}
		t.finish(t.promote(at), due)
	}
	t.expireTombstones(nowNs)
}

// dueNs is when the connection may be finished: after the linger once it ended,
// after the idle time otherwise; -1 for never.
func (c *Conn) dueNs(t *Tracker) int64 {
	switch {
	case c.closing:
		return c.LastNs + t.lingerNs
	case t.idleNs > 0:
		return c.LastNs + t.idleNs
	}
	return -1
}

// schedule puts the connection's next deadline on the heap.
func (t *Tracker) schedule(c *Conn) {
	due := c.dueNs(t)
	if due < 0 {
		return
	}
	t.deadlines.set(c, due)
}

// isNewConnection reports whether a SYN from src with sequence number seq starts a
// new connection on c's four-tuple: a client SYN with another initial sequence
// number once the first connection got going, or any SYN from the old server.
func (t *Tracker) isNewConnection(c *Conn, src netip.AddrPort, seq uint32) bool {
	d := &c.Dirs[ToServer]
	if src != c.Client {
		// The roles swapped: the old server opens a connection to the old client.
		return c.Dirs[ToClient].dataSeen || c.ended()
	}
	if !d.SYNSeen {
		return d.dataSeen || c.ended()
	}
	return seq != d.ISN && (d.dataSeen || c.HandshakeACKNs != 0 || c.ended())
}

// ended reports whether the connection was closed: both FINs, or a RST once the
// handshake was over (a RST answering a SYN may be followed by a retried SYN).
func (c *Conn) ended() bool {
	rst := c.Dirs[0].RSTSeen || c.Dirs[1].RSTSeen
	return (rst && !c.rstBeforeHandshake) || (c.Dirs[0].finished() && c.Dirs[1].finished())
}

// finished reports whether the direction sent its FIN and everything before it:
// the other side acknowledged the FIN, or the capture saw every byte before it
// (with holes, retransmissions are still to come).
func (d *DirState) finished() bool {
	return d.FINSeen && (d.HighestAckByPeer > d.finOffset || d.seq.missing() == 0)
}

// finish hands the connection over as it stands, finished at capture time atNs.
func (t *Tracker) finish(c *Conn, atNs int64) {
	if c.done {
		return
	}
	c.done = true
	c.FinishNs = atNs
	t.deadlines.remove(c)
	t.conns.remove(c)
	if t.last == c {
		t.last = nil
	}
	if !t.ending {
		t.bury(makeKey(c.Client, c.Server), c) // at the end of the input no later packet can come
	}
	if c.handler != nil {
		c.handler.Close(c)
		c.handler = nil
	}
}

// Flush finishes every open connection (call at the end of the input), in the
// order the connections began, at the time of the last packet.
func (t *Tracker) Flush() { t.FlushEach(0, nil) }

// FlushEach is Flush calling after() once every `every` connections finished
// (every > 0), so that a caller can hand their reports over in pieces: the
// connections of a SYN flood (attempts kept compact) are made whole one at a
// time, as they are finished, never all at once.
func (t *Tracker) FlushEach(every int, after func()) {
	t.ending = true
	// Two lists of pointers, merged by number (the full connections and the
	// SYN-only attempts are numbered from one counter): a SYN flood's million
	// attempts cost 8 MB here, not 24 with a list of both kinds.
	conns := make([]*Conn, 0, t.conns.len())
	t.conns.each(func(c *Conn) { conns = append(conns, c) })
	slices.SortFunc(conns, func(a, b *Conn) int { return cmp.Compare(a.Index, b.Index) })
	attempts := make([]*attempt, 0, len(t.attempts))
	for _, at := range t.attempts {
		attempts = append(attempts, at)
	}
	slices.SortFunc(attempts, func(a, b *attempt) int { return cmp.Compare(a.index, b.index) })
	for n := 0; len(conns) > 0 || len(attempts) > 0; n++ {
		var c *Conn
		if len(attempts) == 0 || len(conns) > 0 && conns[0].Index < int(attempts[0].index) {
			c = conns[0]
			conns[0], conns = nil, conns[1:]
		} else {
			c = t.promote(attempts[0])
			attempts[0], attempts = nil, attempts[1:]
		}
		t.finish(c, t.nowNs)
		if every > 0 && (n+1)%every == 0 && after != nil {
			after()
		}
	}
	t.deadlines, t.attemptDeadlines = nil, nil
}

// EachOpen calls f for every full connection open now (not the SYN-only ones
// kept compact), in no particular order.
func (t *Tracker) EachOpen(f func(*Conn)) { t.conns.each(f) }

// between reports whether c is the connection between x and y, either way.
func (c *Conn) between(x, y netip.AddrPort) bool {
	return (x == c.Client && y == c.Server) || (x == c.Server && y == c.Client)
}

// Handler returns the connection's handler (nil once it is finished).
func (c *Conn) Handler() Handler { return c.handler }

// Open returns the number of connections currently tracked.
func (t *Tracker) Open() int { return t.conns.len() + len(t.attempts) }

func (t *Tracker) newConn(src, dst netip.AddrPort, p *capture.Packet) *Conn {
	t.next++
	c := t.makeConn(src, dst, p, t.next, t.ordinal)
	if t.created != nil {
		t.created(c.Index, c.FirstOrdinal, c.Client, c.Server)
	}
	return c
}

// makeConn makes a connection numbered index whose first packet is p, the
// ordinal-th of the input.
func (t *Tracker) makeConn(src, dst netip.AddrPort, p *capture.Packet, index int, ordinal int64) *Conn {
	c := &Conn{Index: index, FirstOrdinal: ordinal, FirstNs: p.TimestampNs, LastNs: p.TimestampNs, reorderNs: 3e6}
	switch {
	case p.Has(capture.FlagSYN) && !p.Has(capture.FlagACK):
		c.Client, c.Server = src, dst
	case p.Has(capture.FlagSYN | capture.FlagACK):
		c.Client, c.Server = dst, src
		c.MidStream = true
	default:
		c.MidStream = true
		c.Client, c.Server = guessRoles(src, dst, t.hint)
	}
	if t.hint.IsSet() && t.hint.Matches(c.Client) && !t.hint.Matches(c.Server) {
		c.Client, c.Server = c.Server, c.Client
	}
	for i := range c.Dirs {
		c.Dirs[i].SYN.WindowScale = -1
		c.Dirs[i].finOffset = -1
		c.Dirs[i].HighestAckByPeer = -1
		c.Dirs[i].MinAckDelayNs = -1
		c.Dirs[i].AckDelayFloorNs = -1
	}
	t.conns.put(c)
	if t.newHandler != nil {
		c.handler = t.newHandler(c)
	}
	t.schedule(c)
	return c
}

// guessRoles picks the server of a connection whose SYN was not captured: the hinted
// endpoint, else the one on the lower (well-known) port.
func guessRoles(src, dst netip.AddrPort, hint ServerHint) (client, server netip.AddrPort) {
	if hint.IsSet() {
		if hint.Matches(src) {
			return dst, src
		}
		if hint.Matches(dst) {
			return src, dst
		}
	}
	if src.Port() < dst.Port() {
		return dst, src
	}
	return src, dst
}

// A frame identical to a recent one of its direction is the same frame captured
// twice (a capture on several interfaces, on a router's both sides, or a SPAN port
// that copies both ways). With an IPv4 identification the copies share it and a
// resent segment (on the stacks that number their packets) does not, so any copy
// within duplicateIPIDWindowNs counts. Without one, only a copy right after the
// first, with nothing from the other side in between and within
// duplicateWindowNs, counts: no stack resends that fast without a trigger from the
// other side (the shortest timers, tail loss probes, wait at least 10 ms).
// A SYN or SYN/ACK is sent again after a timeout of a second or more (RFC 6298;
// 200 ms at the very least on any stack), so an identical one within
// duplicateSYNWindowNs is a copy.
const (
	duplicateWindowNs     = 5_000_000
	duplicateSYNWindowNs  = 100_000_000
	duplicateIPIDWindowNs = 100_000_000
)

// recentFrames is how many recent frames per direction are compared for copies.
const recentFrames = 2

// isDuplicate reports whether p, going in direction dir, is a recent frame of that
// direction captured again. Pure ACKs without an IPv4 identification are never
// taken for duplicates (identical ones are sent on purpose).
func (c *Conn) isDuplicate(dir Dir, p *capture.Packet) bool {
	d := &c.Dirs[dir]
	withID := p.IPID != 0
	if withID || (p.PayloadLen > 0 || p.Flags&(capture.FlagSYN|capture.FlagFIN|capture.FlagRST) != 0) {
		for i := range d.recent {
			r := &d.recent[i]
			// Field by field, the likeliest to differ first: the struct
			// comparison is a call for every packet.
			if !r.valid || r.sig.seq != p.Seq || r.sig.ack != p.Ack || r.sig.tsVal != p.Options.TSVal ||
				r.sig.length != int32(p.PayloadLen) || r.sig.ipID != p.IPID || r.sig.tsEcr != p.Options.TSEcr ||
				r.sig.window != p.Window || r.sig.flags != p.Flags {
				continue
			}
			elapsedNs := p.TimestampNs - r.timeNs
			if elapsedNs < 0 {
				continue
			}
			window := int64(duplicateWindowNs)
			if p.Flags&capture.FlagSYN != 0 {
				window = duplicateSYNWindowNs
			}
			if (withID && elapsedNs <= duplicateIPIDWindowNs) ||
				(int8(i) == d.lastRecent && !c.sawOther[dir] && elapsedNs <= window) {
				d.Duplicates++
				return true
			}
		}
	}
	d.lastRecent = (d.lastRecent + 1) % recentFrames
	// Written field by field, not as a composite literal (see segment).
	r := &d.recent[d.lastRecent]
	r.sig.seq, r.sig.ack, r.sig.tsVal, r.sig.tsEcr = p.Seq, p.Ack, p.Options.TSVal, p.Options.TSEcr
	r.sig.flags, r.sig.window, r.sig.length, r.sig.ipID = p.Flags, p.Window, int32(p.PayloadLen), p.IPID
	r.timeNs, r.valid = p.TimestampNs, true
	c.sawOther[dir] = false
	c.sawOther[1-dir] = true
	return false
}

// unwrap turns a 32-bit sequence number into a 64-bit stream offset of the direction.
func (d *DirState) unwrap(seq uint32) int64 {
	if !d.baseSet {
		d.base, d.baseSet = seq, true
		d.lastSeq, d.lastOffset = seq, 0
	}
	off := d.lastOffset + int64(int32(seq-d.lastSeq))
	d.lastSeq, d.lastOffset = seq, off
	return off
}

// setBase makes seq stream offset 0 of the direction.
func (d *DirState) setBase(seq uint32) {
	d.base, d.baseSet = seq, true
	d.lastSeq, d.lastOffset = seq, 0
}

func (t *Tracker) segment(c *Conn, dir Dir, p *capture.Packet) {
	d := &c.Dirs[dir]
	other := &c.Dirs[1-dir]
	d.Packets++
	s := &t.seg
	// Cleared, then set field by field: a composite literal is built on the
	// stack and copied, and that copy reads back the stack's narrow stores as
	// wide loads the processor cannot forward (on bulk, the copy's first store
	// held 39% of this function's samples; perf).
	*s = Segment{}
	s.Dir, s.TimeNs, s.Flags, s.Len, s.Payload = dir, p.TimestampNs, p.Flags, p.PayloadLen, p.Payload
	if p.Options.HasTimestamps {
		s.HasTS, s.TSVal, s.TSEcr = true, p.Options.TSVal, p.Options.TSEcr
	}

	if p.Has(capture.FlagSYN) {
		c.handshakeSYN(dir, p)
	} else if dir == ToServer && c.HandshakeACKNs == 0 && p.Has(capture.FlagACK) && !p.Has(capture.FlagRST) {
		switch {
		case c.synAcks != nil:
			c.handshakeACK(p)
		case c.Dirs[ToServer].SYNSeen && !other.dataSeen:
			// The client acknowledged a SYN/ACK the capture did not see (a capture of
			// one direction, or a dropped packet): time the handshake from its SYN.
			c.SYNACKInferred = true
			c.SYNNs, c.HandshakeACKNs = c.lastSYNNs, p.TimestampNs
			other.ISN = p.Ack - 1
			other.setBase(p.Ack)
		}
	}
	if p.Has(capture.FlagRST) && c.HandshakeACKNs == 0 && !d.dataSeen && !other.dataSeen && c.lastSYNNs != 0 {
		c.rstBeforeHandshake = true
		if dir == ToClient && p.Has(capture.FlagACK) && p.Ack == c.Dirs[ToServer].ISN+1 && c.synAcks == nil {
			// The server refused the connection: the RST answered the latest SYN.
			if c.RefusedNs == 0 {
				c.RefusedNs, c.refusedSYNNs = p.TimestampNs, c.lastSYNNs
			}
		}
	}

	if p.Has(capture.FlagACK) {
		if !other.baseSet {
			// Mid-stream: the first acknowledgement fixes the other side's offset 0.
			other.setBase(p.Ack)
		}
		s.HasAck = true
		s.AckOffset = other.lastOffset + int64(int32(p.Ack-other.lastSeq))
		s.AckBeyond = other.acknowledged(s.AckOffset)
		if other.timing && s.AckOffset >= other.timedEnd {
			other.timing = false
			if delay := p.TimestampNs - other.timedNs; delay >= 0 && (other.MinAckDelayNs < 0 || delay < other.MinAckDelayNs) {
				other.MinAckDelayNs = delay
			}
		}
		if other.floorTiming && s.AckOffset >= other.floorEnd {
			other.floorTiming = false
			if delay := p.TimestampNs - other.floorNs; delay >= 0 && (other.AckDelayFloorNs < 0 || delay < other.AckDelayFloorNs) {
				other.AckDelayFloorNs = delay
			}
		}
	}
	win := int(p.Window)
	if !p.Has(capture.FlagSYN) {
		win <<= uint(d.WindowScale)
	}
	s.WindowBytes = win
	if s.HasAck && !p.Has(capture.FlagSYN) {
		for i := range p.Options.NumSACK {
			right := other.lastOffset + int64(int32(p.Options.SACK[i].Right-other.lastSeq))
			if right <= s.AckOffset {
				continue // a D-SACK, or a block the acknowledgement covers
			}
			if right > s.SACKHigh {
				s.SACKHigh = right
			}
			if left := max(other.lastOffset+int64(int32(p.Options.SACK[i].Left-other.lastSeq)), s.AckOffset); left < right {
				s.SACKBytes += right - left
			}
		}
		s.DupAck = p.PayloadLen == 0 && p.Flags&(capture.FlagFIN|capture.FlagRST) == 0 && d.ackSent &&
			s.AckOffset == d.ackOffset && win == d.ackWindow && other.HighestEnd > s.AckOffset
		d.ackOffset, d.ackWindow, d.ackSent = s.AckOffset, win, true
	}

	if p.Has(capture.FlagSYN) {
		s.Offset = 0
	} else {
		s.Offset = d.unwrap(p.Seq)
	}
	if p.PayloadLen > 0 {
		t.classify(c, d, s)
	}
	if p.Has(capture.FlagFIN) {
		if !d.FINSeen {
			d.finOffset = s.Offset + int64(s.Len)
		}
		d.FINSeen = true
	}
	if p.Has(capture.FlagRST) {
		d.RSTSeen = true
	}
	if c.handler != nil {
		c.handler.Segment(c, s)
	}
}

// handshakeSYN records a SYN or SYN/ACK.
func (c *Conn) handshakeSYN(dir Dir, p *capture.Packet) {
	d := &c.Dirs[dir]
	if dir == ToServer && !p.Has(capture.FlagACK) {
		if !d.SYNSeen || p.Seq != d.ISN {
			d.SYN, d.SYNSeen, d.ISN, d.SYNCount = synOptions(&p.Options), true, p.Seq, 0
			d.setBase(p.Seq + 1)
			if c.FirstSYNNs == 0 {
				c.FirstSYNNs = p.TimestampNs
			}
		}
		d.SYNCount++
		c.lastSYNNs = p.TimestampNs
		if c.rstBeforeHandshake {
			// The SYN is tried again after a RST: the attempt goes on.
			c.rstBeforeHandshake = false
			c.Dirs[0].RSTSeen, c.Dirs[1].RSTSeen = false, false
		}
		return
	}
	if dir != ToClient || c.HandshakeACKNs != 0 {
		return // a SYN/ACK after the handshake, or one from the client side
	}
	client := &c.Dirs[ToServer]
	if client.SYNSeen && p.Ack != client.ISN+1 {
		return // it answers another SYN than the client's
	}
	if c.synAcks == nil {
		c.synAcks = &synAckSet{}
	}
	set := c.synAcks
	for i := 0; i < set.n; i++ {
		if set.list[i].isn == p.Seq {
			// The SYN/ACK sent again: Karn's rule, time the latest.
			set.list[i].timeNs, set.list[i].answeredNs = p.TimestampNs, c.lastSYNNs
			d.SYNCount++
			c.useSynAck(i)
			return
		}
	}
	sa := synAck{isn: p.Seq, timeNs: p.TimestampNs, answeredNs: c.lastSYNNs, options: synOptions(&p.Options)}
	i := set.n
	if i == len(set.list) {
		i = len(set.list) - 1 // keep the first three and the latest
	} else {
		set.n++
	}
	set.list[i] = sa
	d.SYNCount = 1
	c.useSynAck(i)
}

// useSynAck makes SYN/ACK i the connection's, until the client's acknowledgement
// says which one it answered.
func (c *Conn) useSynAck(i int) {
	sa := &c.synAcks.list[i]
	d := &c.Dirs[ToClient]
	d.SYN, d.SYNSeen, d.ISN = sa.options, true, sa.isn
	if !d.dataSeen {
		d.setBase(sa.isn + 1)
	}
	c.SYNACKNs = sa.timeNs
	c.SYNNs = sa.answeredNs
	if c.SYNNs == 0 && c.Dirs[ToServer].SYNSeen {
		c.SYNNs = c.lastSYNNs
	}
	c.setWindowScales()
}

// handshakeACK completes the handshake with the client's first acknowledgement of
// a SYN/ACK it received.
func (c *Conn) handshakeACK(p *capture.Packet) {
	for i := 0; i < c.synAcks.n; i++ {
		// The client's first acknowledgement may also cover data the server sent
		// right after its SYN/ACK (a banner, or data the client waited for before
		// acknowledging): it still completes the handshake it answers.
		early := int64(p.Ack - (c.synAcks.list[i].isn + 1))
		if p.Ack == c.synAcks.list[i].isn+1 || early > 0 && early <= c.Dirs[ToClient].HighestEnd {
			c.useSynAck(i)
			c.HandshakeACKNs = p.TimestampNs
			// The handshake is done: no SYN/ACK is looked at again (176 bytes a
			// connection, 50,000 of them open at once on an edge).
			c.synAcks = nil
			if c.rstBeforeHandshake {
				c.rstBeforeHandshake = false
				c.Dirs[0].RSTSeen, c.Dirs[1].RSTSeen = false, false
			}
			return
		}
	}
}

// acknowledged records that the other side acknowledged this direction's stream up
// to offset ack, and returns how many bytes that acknowledgement newly covered
// beyond what the capture saw sent (a FIN counts one sequence number, not a byte).
func (d *DirState) acknowledged(ack int64) int64 {
	if ack <= d.HighestAckByPeer {
		return 0
	}
	d.HighestAckByPeer = ack
	limit := d.HighestEnd
	if d.FINSeen && d.finOffset == d.HighestEnd {
		limit++ // the FIN's sequence number
	}
	beyond := ack - limit
	// Only an acknowledgement a sane distance ahead is believed: a middlebox that
	// rewrote sequence numbers, or a stray ACK, must not invent gigabytes.
	const maxBelievableBytes = 64 << 20
	if beyond <= 0 || beyond > maxBelievableBytes {
		return 0
	}
	if beyond == 1 && !d.FINSeen {
		return 0 // most likely the FIN, not captured
	}
	if !d.dataSeen {
		d.dataSeen = true
		d.HighestEnd = 0
		beyond = ack
	}
	d.seq.addHole(d.HighestEnd, ack)
	d.HighestEnd = ack
	d.AckedUnseenBytes += beyond
	return beyond
}

// classify sets the new part of a data segment, and whether it is a
// retransmission or out of order.
func (t *Tracker) classify(c *Conn, d *DirState, s *Segment) {
	end := s.Offset + int64(s.Len)
	if !d.dataSeen {
		d.dataSeen = true
		// Bytes between the stream's start (the SYN, or where the other side's first
		// acknowledgement pointed) and this segment were not seen: reordered, lost,
		// or sent before a mid-stream capture began.
		d.HighestEnd = 0
		if !d.SYNSeen {
			// Mid-stream, offset 0 is only where the first acknowledgement pointed:
			// data may lie below it too.
			d.HighestEnd = min(0, s.Offset)
			d.lowestData = d.HighestEnd
			d.preCaptureEnd = max(s.Offset, 0)
		}
	} else if !d.SYNSeen && s.Offset < d.lowestData {
		// Mid-stream, bytes below any seen so far: sent before the first ones the
		// capture holds (a file of captures in another order, a late retransmission).
		d.seq.addHoleBelow(s.Offset, d.lowestData)
		d.lowestData = s.Offset
	}
	below := s.Offset < d.HighestEnd
	if end > d.HighestEnd {
		start := max(s.Offset, d.HighestEnd)
		if start > d.HighestEnd {
			s.Hole = true
			d.seq.addHole(d.HighestEnd, start)
		}
		s.NewOffset = start
		s.NewLen = int(end - start)
		d.HighestEnd = end
		d.highestTimeNs = s.TimeNs
	}
	if below {
		belowEnd := min(end, d.HighestEnd-int64(s.NewLen))
		s.FilledLen = int(d.seq.fill(s.Offset, belowEnd))
		seenBefore := belowEnd-s.Offset > int64(s.FilledLen)
		switch {
		case seenBefore:
			s.Retransmission = true
		case s.NewLen == 0 && s.TimeNs-d.highestTimeNs < c.reorderNs && c.isReceiverSide(s.Dir):
			// It filled a hole shortly after the bytes above it arrived: reordering
			// (receiver side only; a sender never reorders its own segments).
			s.OutOfOrder = true
		default:
			// It filled a hole late: the bytes were sent again.
			s.Retransmission = true
		}
	}
	d.Bytes += int64(s.NewLen + s.FilledLen)
	switch {
	case s.Retransmission || s.OutOfOrder || s.Hole:
		d.timing = false // Karn: a resent byte's acknowledgement times nothing
	case !d.timing && s.NewLen > 0:
		d.timing, d.timedEnd, d.timedNs = true, s.NewOffset+int64(s.NewLen), s.TimeNs
	}
	switch {
	case d.floorTiming && s.Len > 0 && s.Offset < d.floorEnd && (s.NewLen == 0 || s.NewOffset > s.Offset):
		// Its bytes sent again: the floor counts from the latest sending.
		d.floorNs = s.TimeNs
	case !d.floorTiming && s.NewLen > 0:
		d.floorTiming, d.floorEnd, d.floorNs = true, s.NewOffset+int64(s.NewLen), s.TimeNs
	}
	if s.Retransmission {
		d.Retransmissions++
	}
	if s.OutOfOrder {
		d.OutOfOrder++
	}
}

// isReceiverSide reports whether the capture point looks like the receiving end of
// direction dir: judged from the handshake (the client's capture sees SYN→SYN/ACK
// take a round trip).
func (c *Conn) isReceiverSide(dir Dir) bool {
	v := c.Vantage()
	return (dir == ToClient && v == VantageClient) || (dir == ToServer && v == VantageServer)
}

func (c *Conn) setWindowScales() {
	cs, ss := c.Dirs[ToServer].SYN.WindowScale, c.Dirs[ToClient].SYN.WindowScale
	if cs >= 0 && ss >= 0 {
		c.Dirs[ToServer].WindowScale = min(cs, 14)
		c.Dirs[ToClient].WindowScale = min(ss, 14)
	} else {
		c.Dirs[ToServer].WindowScale, c.Dirs[ToClient].WindowScale = 0, 0
	}
}

// Vantage points.
const (
	VantageClient  = "client"
	VantageServer  = "server"
	VantageUnknown = "unknown"
)

// Vantage tells where the capture was taken, from the handshake: at the client the
// SYN→SYN/ACK gap is a round trip and SYN/ACK→ACK is short; at the server the reverse.
func (c *Conn) Vantage() string {
	if c.SYNNs == 0 || c.SYNACKNs == 0 || c.HandshakeACKNs == 0 {
		return VantageUnknown
	}
	first := c.SYNACKNs - c.SYNNs
	second := c.HandshakeACKNs - c.SYNACKNs
	switch {
	case first > 3*second && first > 200_000:
		return VantageClient
	case second > 3*first && second > 200_000:
		return VantageServer
	}
	return VantageUnknown
}

// HandshakeRTTNs is the round trip of the handshake that completed (the SYN the
// SYN/ACK answered to the client's acknowledgement of it), or 0 when the handshake
// was not seen whole.
func (c *Conn) HandshakeRTTNs() int64 {
	if c.HandshakeACKNs == 0 && c.RefusedNs != 0 {
		// A refused connection: the SYN to the RST that answered it.
		return max(c.RefusedNs-c.refusedSYNNs, 1)
	}
	if c.SYNNs == 0 || c.HandshakeACKNs == 0 || (c.SYNACKNs == 0 && !c.SYNACKInferred) {
		return 0
	}
	// A handshake quicker than the capture's clock resolves reads as 1 ns, not as
	// "unknown".
	return max(c.HandshakeACKNs-c.SYNNs, 1)
}

// SampledRTTNs is the round trip from data and its acknowledgements (Karn's rule):
// the shortest acknowledgement delay of each direction added up (at one end of the
// path one is the round trip and the other about zero; in the middle each is a
// part). 0 when a direction has no sample.
func (c *Conn) SampledRTTNs() int64 {
	a, b := c.Dirs[ToServer].MinAckDelayNs, c.Dirs[ToClient].MinAckDelayNs
	if a < 0 || b < 0 {
		return 0
	}
	return a + b
}

// DataRTTFloorNs is a floor of the round trip data took from the capture point to
// the peer that acknowledged it and back, by vantage: at the client, the client's
// data acknowledged (the server's side of the path); at the server, the server's;
// elsewhere both added up. 0 when the data gave no sample. A floor far below the
// handshake's round trip shows something near the capture acknowledging for the
// peer (a split-TCP middlebox, a proxy).
func (c *Conn) DataRTTFloorNs() int64 {
	a, b := c.Dirs[ToServer].AckDelayFloorNs, c.Dirs[ToClient].AckDelayFloorNs
	switch c.Vantage() {
	case VantageClient:
		return max(a, 0)
	case VantageServer:
		return max(b, 0)
	}
	if a < 0 || b < 0 {
		return 0
	}
	return a + b
}

// RTTNs is the connection's best round-trip estimate: the handshake's, unless the
// handshake was retried (Karn's rule: its sample may belong to an earlier SYN) and
// data samples show a shorter one; the data samples when no handshake was seen.
func (c *Conn) RTTNs() int64 {
	hs, sampled := c.HandshakeRTTNs(), c.SampledRTTNs()
	switch {
	case hs == 0:
		return sampled
	case sampled > 0 && c.HandshakeRetried() && sampled < hs:
		return sampled
	}
	return hs
}

// HandshakeRetried reports whether the client sent its SYN more than once, or the
// server its SYN/ACK: the handshake RTT is timed from the latest of each (Karn's
// rule), which the answer may not have been.
func (c *Conn) HandshakeRetried() bool {
	return c.Dirs[ToServer].SYNCount > 1 || c.Dirs[ToClient].SYNCount > 1
}

// SegmentCap is the largest payload a segment sent in direction d may carry as the
// SYNs say: the MSS option of the *other* side, which bounds what this side may
// send (RFC 9293 3.7.1), less 12 bytes when both sides use timestamps. A side's own
// MSS option bounds only what it receives: a server announcing 1400 bytes to a
// client that announced 1460 sends 1448-byte segments. 0 when the peer's SYN was not
// captured or carried no MSS option; the path (a tunnel, a smaller MTU) may make the
// segments smaller still.
func (c *Conn) SegmentCap(d Dir) int {
	peer := &c.Dirs[d.Reverse()]
	if !peer.SYNSeen || peer.SYN.MSS == 0 {
		return 0
	}
	return int(peer.SYN.MSS) - c.optionBytes()
}

// optionBytes is the TCP option space every data segment carries: 12 bytes of
// timestamps when both SYNs asked for them.
func (c *Conn) optionBytes() int {
	if c.Dirs[ToServer].SYN.HasTimestamps && c.Dirs[ToClient].SYN.HasTimestamps {
		return 12
	}
	return 0
}

// Closed says how the connection ended: "rst", "fin" (both sides) or "open".
func (c *Conn) Closed() string {
	switch {
	case c.Dirs[0].RSTSeen || c.Dirs[1].RSTSeen:
		return "rst"
	case c.Dirs[0].FINSeen && c.Dirs[1].FINSeen:
		return "fin"
	}
	return "open"
}
