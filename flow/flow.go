// Package flow tracks TCP connections in a stream of decoded packets: which side is
// the client, the handshake and its options, sequence numbers turned into 64-bit
// stream offsets per direction, the advertised receive window, retransmissions,
// out-of-order segments and how the connection ended.
//
// It does not interpret payloads (see tlsrec, httpmsg) and does not decide rounds
// (see rounds): it hands every segment, annotated, to a per-connection Handler.
// Memory is per open connection, never per packet.
package flow

import (
	"net/netip"

	"github.com/slowstart/slowstart/capture"
)

// Dir is the direction of a segment.
type Dir uint8

// Directions.
const (
	ToServer Dir = 0 // sent by the client
	ToClient Dir = 1 // sent by the server
)

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
	// WindowBytes is the advertised receive window, scaled when scaling is in use.
	WindowBytes int
	HasTS       bool
	TSVal       uint32
	TSEcr       uint32
	// Payload is the captured part of the payload (may be shorter than Len). It
	// points into the reader's buffer: copy what you keep.
	Payload []byte
}

// DirState is what is known of one direction of a connection.
type DirState struct {
	SYN        capture.TCPOptions // options of this side's SYN (valid when SYNSeen)
	SYNSeen    bool
	base       uint32 // sequence number of stream offset 0
	baseSet    bool
	lastSeq    uint32 // last sequence number seen, for unwrapping
	lastOffset int64
	// HighestEnd is one past the highest stream offset sent.
	HighestEnd int64
	dataSeen   bool
	// highestTimeNs is when the segment ending at HighestEnd was seen.
	highestTimeNs int64
	FINSeen       bool
	RSTSeen       bool
	Packets       int64
	// Bytes counts stream bytes (new sequence space), not frames.
	Bytes           int64
	Retransmissions int
	OutOfOrder      int
	// WindowScale is the shift applied to this side's advertised window (0 when
	// scaling is not in use on the connection).
	WindowScale int
}

// Conn is one TCP connection.
type Conn struct {
	Index          int // 1-based, in order of first packet
	Client, Server netip.AddrPort
	FirstNs        int64
	LastNs         int64
	// Handshake times (0 when not seen): the client's SYN, the server's SYN/ACK and
	// the client's first packet after the SYN/ACK.
	SYNNs, SYNACKNs, HandshakeACKNs int64
	// MidStream is true when the capture did not see the connection's SYN.
	MidStream bool
	Dirs      [2]DirState
	// Reordering window at the receiver: holes filled within this time of the data
	// above them count as out-of-order rather than retransmitted.
	reorderNs int64
	handler   Handler
	closedAt  int64
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

// Tracker demultiplexes packets into connections.
type Tracker struct {
	conns      map[connKey]*Conn
	newHandler NewHandlerFunc
	hint       ServerHint
	next       int
	seg        Segment
	// lingerNs: a connection that ended (both FINs or a RST) is closed when no packet
	// of it was seen for this long, so memory stays bounded by open connections.
	lingerNs  int64
	lastSweep int64
	closing   []*Conn
	last      *Conn // the connection of the previous packet
}

// NewTracker makes a Tracker that calls newHandler for each new connection.
func NewTracker(newHandler NewHandlerFunc, hint ServerHint) *Tracker {
	return &Tracker{
		conns:      make(map[connKey]*Conn),
		newHandler: newHandler,
		hint:       hint,
		lingerNs:   2e9,
	}
}

// Add processes one packet.
func (t *Tracker) Add(p *capture.Packet) {
	src := netip.AddrPortFrom(p.Src, p.SrcPort)
	dst := netip.AddrPortFrom(p.Dst, p.DstPort)
	// Consecutive packets mostly belong to the same connection: try it before the map.
	c := t.last
	if c == nil || !((src == c.Client && dst == c.Server) || (src == c.Server && dst == c.Client)) {
		c = t.conns[makeKey(src, dst)]
	}
	isSYN := p.Has(capture.FlagSYN) && !p.Has(capture.FlagACK)
	if c != nil && isSYN && c.Dirs[ToServer].SYNSeen && src == c.Client && p.Seq+1 != c.Dirs[ToServer].base && c.Dirs[ToServer].dataSeen {
		// A new connection on the same four-tuple (port reuse).
		t.finish(makeKey(src, dst), c)
		c = nil
	}
	if c == nil {
		c = t.newConn(makeKey(src, dst), src, dst, p)
	}
	t.last = c
	c.LastNs = p.TimestampNs
	dir := ToServer
	if src == c.Server {
		dir = ToClient
	}
	t.segment(c, dir, p)
	if c.closedAt == 0 && (c.Dirs[0].RSTSeen || c.Dirs[1].RSTSeen || (c.Dirs[0].FINSeen && c.Dirs[1].FINSeen)) {
		c.closedAt = p.TimestampNs
		t.closing = append(t.closing, c)
	}
	if len(t.closing) > 0 && p.TimestampNs-t.lastSweep > t.lingerNs/4 {
		t.sweep(p.TimestampNs)
	}
}

func (t *Tracker) sweep(nowNs int64) {
	t.lastSweep = nowNs
	kept := t.closing[:0]
	for _, c := range t.closing {
		if nowNs-c.LastNs > t.lingerNs {
			key := makeKey(c.Client, c.Server)
			if t.conns[key] == c {
				t.finish(key, c)
			}
			continue
		}
		kept = append(kept, c)
	}
	t.closing = kept
}

func (t *Tracker) finish(key connKey, c *Conn) {
	delete(t.conns, key)
	if t.last == c {
		t.last = nil
	}
	if c.handler != nil {
		c.handler.Close(c)
		c.handler = nil
	}
}

// Flush closes every open connection (call at the end of the input), in the order
// the connections began.
func (t *Tracker) Flush() {
	open := make([]*Conn, 0, len(t.conns))
	for _, c := range t.conns {
		open = append(open, c)
	}
	// Order by index so that handlers see connections in a stable order.
	for i := 1; i < len(open); i++ {
		for j := i; j > 0 && open[j].Index < open[j-1].Index; j-- {
			open[j], open[j-1] = open[j-1], open[j]
		}
	}
	for _, c := range open {
		t.finish(makeKey(c.Client, c.Server), c)
	}
	t.closing = t.closing[:0]
}

// Open returns the number of connections currently tracked.
func (t *Tracker) Open() int { return len(t.conns) }

func (t *Tracker) newConn(key connKey, src, dst netip.AddrPort, p *capture.Packet) *Conn {
	t.next++
	c := &Conn{Index: t.next, FirstNs: p.TimestampNs, reorderNs: 3e6}
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
	}
	t.conns[key] = c
	if t.newHandler != nil {
		c.handler = t.newHandler(c)
	}
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

func (t *Tracker) segment(c *Conn, dir Dir, p *capture.Packet) {
	d := &c.Dirs[dir]
	other := &c.Dirs[1-dir]
	d.Packets++
	s := &t.seg
	*s = Segment{Dir: dir, TimeNs: p.TimestampNs, Flags: p.Flags, Len: p.PayloadLen, Payload: p.Payload}
	if p.Options.HasTimestamps {
		s.HasTS, s.TSVal, s.TSEcr = true, p.Options.TSVal, p.Options.TSEcr
	}

	if p.Has(capture.FlagSYN) {
		d.SYN, d.SYNSeen = p.Options, true
		// The stream starts after the SYN.
		d.base, d.baseSet = p.Seq+1, true
		d.lastSeq, d.lastOffset = p.Seq+1, 0
		if dir == ToServer && !p.Has(capture.FlagACK) {
			if c.SYNNs == 0 {
				c.SYNNs = p.TimestampNs
			}
		} else if dir == ToClient && c.SYNACKNs == 0 {
			c.SYNACKNs = p.TimestampNs
			c.setWindowScales()
		}
	} else if dir == ToServer && c.SYNACKNs != 0 && c.HandshakeACKNs == 0 {
		c.HandshakeACKNs = p.TimestampNs
	}

	if p.Has(capture.FlagACK) {
		if !other.baseSet {
			// Mid-stream: the first acknowledgement fixes the other side's offset 0.
			other.base, other.baseSet = p.Ack, true
			other.lastSeq, other.lastOffset = p.Ack, 0
		}
		s.HasAck = true
		s.AckOffset = other.lastOffset + int64(int32(p.Ack-other.lastSeq))
	}
	win := int(p.Window)
	if !p.Has(capture.FlagSYN) {
		win <<= uint(d.WindowScale)
	}
	s.WindowBytes = win

	if p.Has(capture.FlagSYN) {
		s.Offset = 0
	} else {
		s.Offset = d.unwrap(p.Seq)
	}
	if p.PayloadLen > 0 {
		t.classify(c, d, s)
	}
	if p.Has(capture.FlagFIN) {
		d.FINSeen = true
	}
	if p.Has(capture.FlagRST) {
		d.RSTSeen = true
	}
	if c.handler != nil {
		c.handler.Segment(c, s)
	}
}

// classify sets the new part of a data segment, and whether it is a
// retransmission or out of order.
func (t *Tracker) classify(c *Conn, d *DirState, s *Segment) {
	end := s.Offset + int64(s.Len)
	if !d.dataSeen {
		d.dataSeen = true
		if s.Offset < 0 {
			// Mid-stream capture whose first ACK pointed past this segment.
			s.Offset = 0
		}
		d.HighestEnd = s.Offset
	}
	if end > d.HighestEnd {
		start := s.Offset
		if start < d.HighestEnd {
			start = d.HighestEnd
			s.Retransmission = true
		}
		s.Hole = start > d.HighestEnd
		s.NewOffset = start
		s.NewLen = int(end - start)
		d.Bytes += int64(s.NewLen)
		d.HighestEnd = end
		d.highestTimeNs = s.TimeNs
	} else {
		// Entirely below the highest byte: a retransmission, or reordering when it
		// arrives shortly after the bytes above it (receiver side only; a sender
		// never reorders its own segments).
		if s.TimeNs-d.highestTimeNs < c.reorderNs && c.isReceiverSide(s.Dir) {
			s.OutOfOrder = true
		} else {
			s.Retransmission = true
		}
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
		c.Dirs[ToServer].WindowScale = int(min(cs, 14))
		c.Dirs[ToClient].WindowScale = int(min(ss, 14))
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

// HandshakeRTTNs is the round trip seen in the handshake (SYN to the client's first
// packet after the SYN/ACK), or 0 when the handshake was not seen whole.
func (c *Conn) HandshakeRTTNs() int64 {
	if c.SYNNs == 0 || c.SYNACKNs == 0 || c.HandshakeACKNs == 0 {
		return 0
	}
	return c.HandshakeACKNs - c.SYNNs
}

// MSS is the payload size of a full segment from the server: the smaller of the two
// SYNs' MSS options, less 12 bytes when timestamps are in use. 0 when unknown.
func (c *Conn) MSS() int {
	cm, sm := int(c.Dirs[ToServer].SYN.MSS), int(c.Dirs[ToClient].SYN.MSS)
	if !c.Dirs[ToServer].SYNSeen || !c.Dirs[ToClient].SYNSeen {
		return 0
	}
	if cm == 0 {
		cm = 536
	}
	if sm == 0 {
		sm = 536
	}
	m := min(cm, sm)
	if c.Dirs[ToServer].SYN.HasTimestamps && c.Dirs[ToClient].SYN.HasTimestamps {
		m -= 12
	}
	return m
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
