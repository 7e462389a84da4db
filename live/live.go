// Package live tracks TCP connections in a live capture and hands each one over,
// with its packets, when it completes: both FINs or a RST followed by a quiet
// spell (as package flow decides it), or no packet for a while. Each connection
// is then analyzed alone by the same pipeline as a capture file (Analyze), so that
// its rounds and initial-window verdict are those that `slowstart analyze` reports
// for the same packets.
//
// Memory is bounded: packets are kept only while their connection is open, a
// connection stops keeping payload bytes past Options.MaxConnBytes (the analysis
// then treats the rest as cut by the snaplen), a connection that reaches
// Options.MaxConnPackets is handed over at once, and at most Options.MaxOpen
// connections are tracked (the least recently active one is handed over first).
package live

import (
	"net/netip"
	"sort"
	"time"

	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/flow"
)

// Defaults of Options.
const (
	DefaultLinger         = 2 * time.Second // as flow.Tracker: a closed connection's quiet spell
	DefaultIdle           = 3 * time.Second
	DefaultEvict          = 5 * time.Minute
	DefaultMaxOpen        = 4096
	DefaultMaxConnPackets = 200_000
	DefaultMaxConnBytes   = 64 << 20
)

// Options tune a Tracker. Zero values take the defaults above.
type Options struct {
	// Server says which endpoint is the server when a connection's SYN was not
	// seen (as analysis.Options.Server).
	Server flow.ServerHint
	// Linger: a connection that ended (both FINs or a RST) is complete when none
	// of its packets was seen for this long. Must equal flow.Tracker's (2 s) for
	// the connections to split as the analysis of a file splits them.
	Linger time.Duration
	// Idle: an open connection with no packet for this long is handed over
	// (Conn.Final false) and kept; if it carries more packets later it is handed
	// over again, whole, under the same ID.
	Idle time.Duration
	// Evict: an open connection idle this long is handed over one last time
	// (Final) and forgotten.
	Evict time.Duration
	// MaxOpen bounds the connections tracked at once.
	MaxOpen int
	// MaxConnPackets: a connection with this many packets is handed over (Final)
	// and forgotten; its later packets start a new connection seen mid-stream.
	MaxConnPackets int
	// MaxConnBytes bounds the payload bytes kept per connection; later packets keep
	// their headers and lengths only.
	MaxConnBytes int
	// Ignore lists endpoints whose packets are skipped (e.g. the server that shows
	// the live view, when it listens on the captured interface: its own traffic
	// would feed itself). An unspecified address (0.0.0.0, ::) matches any
	// address on that port.
	Ignore []netip.AddrPort
}

func (o *Options) defaults() {
	if o.Linger <= 0 {
		o.Linger = DefaultLinger
	}
	if o.Idle <= 0 {
		o.Idle = DefaultIdle
	}
	if o.Evict <= 0 {
		o.Evict = DefaultEvict
	}
	if o.MaxOpen <= 0 {
		o.MaxOpen = DefaultMaxOpen
	}
	if o.MaxConnPackets <= 0 {
		o.MaxConnPackets = DefaultMaxConnPackets
	}
	if o.MaxConnBytes <= 0 {
		o.MaxConnBytes = DefaultMaxConnBytes
	}
}

// Why a connection was handed over.
const (
	ReasonClosed  = "closed"  // both FINs or a RST, then quiet
	ReasonIdle    = "idle"    // no packet for Options.Idle (still open)
	ReasonEvicted = "evicted" // idle for Options.Evict, or pushed out by MaxOpen
	ReasonReused  = "reused"  // a new SYN on the same four-tuple
	ReasonFull    = "full"    // reached Options.MaxConnPackets
	ReasonFlushed = "flushed" // the capture ended
)

// Conn is one connection as handed over: its packets in capture order. The
// Tracker does not touch Packets after handing a Final connection over; a
// connection handed over before it is Final is handed over again, and its
// Packets must then be treated as read-only until then.
type Conn struct {
	// ID numbers connections from 1 in the order of their first packet, as
	// flow.Conn.Index does.
	ID      int
	FirstNs int64
	LastNs  int64
	Packets []capture.Packet
	// Final is false for a connection handed over because it was idle and that
	// is still tracked: it may be handed over again with more packets.
	Final  bool
	Reason string
	// PayloadCut counts the packets whose payload bytes were not kept
	// (Options.MaxConnBytes).
	PayloadCut int
}

type key struct{ a, b netip.AddrPort }

func makeKey(x, y netip.AddrPort) key {
	if x.Compare(y) < 0 {
		return key{x, y}
	}
	return key{y, x}
}

// conn is a tracked connection.
type conn struct {
	Conn
	key    key
	client netip.AddrPort // the side that sent the SYN (when seen)
	// As flow.Tracker decides port reuse: the client's SYN was seen, its stream
	// base (ISN+1), and whether the client sent data.
	clientSYN     bool
	clientBase    uint32
	clientData    bool
	fin           [2]bool // FIN seen from the key's a, b side
	rst           bool
	closedAt      int64
	payloadBytes  int
	emittedAt     int // len(Packets) when last handed over (0: never)
	lastActiveSeq uint64
}

// Tracker splits packets into connections. It is not safe for concurrent use.
type Tracker struct {
	opts      Options
	emit      func(*Conn)
	conns     map[key]*conn
	closing   []*conn // connections that ended, waiting for their quiet spell
	next      int
	lastSweep int64
	activity  uint64
}

// NewTracker makes a Tracker that calls emit for each connection handed over.
func NewTracker(opts Options, emit func(*Conn)) *Tracker {
	opts.defaults()
	return &Tracker{opts: opts, emit: emit, conns: make(map[key]*conn)}
}

// Open returns the number of connections tracked.
func (t *Tracker) Open() int { return len(t.conns) }

// Add takes one packet; it copies what it keeps (p.Payload may be reused).
func (t *Tracker) Add(p *capture.Packet) {
	src := netip.AddrPortFrom(p.Src, p.SrcPort)
	dst := netip.AddrPortFrom(p.Dst, p.DstPort)
	if len(t.opts.Ignore) > 0 && (t.ignored(src) || t.ignored(dst)) {
		return
	}
	k := makeKey(src, dst)
	c := t.conns[k]
	isSYN := p.Has(capture.FlagSYN) && !p.Has(capture.FlagACK)
	if c != nil && isSYN && c.clientSYN && src == c.client && p.Seq+1 != c.clientBase && c.clientData {
		t.finish(c, ReasonReused)
		c = nil
	}
	if c == nil {
		if len(t.conns) >= t.opts.MaxOpen {
			t.evictLeastActive()
		}
		t.next++
		c = &conn{Conn: Conn{ID: t.next, FirstNs: p.TimestampNs}, key: k}
		t.conns[k] = c
	}
	t.activity++
	c.lastActiveSeq = t.activity
	c.LastNs = p.TimestampNs

	if p.Has(capture.FlagSYN) && !p.Has(capture.FlagACK) {
		c.client, c.clientSYN, c.clientBase = src, true, p.Seq+1
	} else if c.clientSYN && src == c.client && p.PayloadLen > 0 {
		c.clientData = true
	}
	side := 0
	if src != k.a {
		side = 1
	}
	if p.Has(capture.FlagFIN) {
		c.fin[side] = true
	}
	if p.Has(capture.FlagRST) {
		c.rst = true
	}

	q := *p
	if n := len(p.Payload); n > 0 {
		if c.payloadBytes+n <= t.opts.MaxConnBytes {
			q.Payload = append([]byte(nil), p.Payload...)
			c.payloadBytes += n
		} else {
			q.Payload = nil
			c.PayloadCut++
		}
	} else {
		q.Payload = nil
	}
	c.Packets = append(c.Packets, q)

	if c.closedAt == 0 && (c.rst || (c.fin[0] && c.fin[1])) {
		c.closedAt = p.TimestampNs
		t.closing = append(t.closing, c)
	}
	if len(c.Packets) >= t.opts.MaxConnPackets {
		t.finish(c, ReasonFull)
	}
	// Sweep closed connections on packet time exactly as flow.Tracker does, so
	// that a late packet joins the connection it would join there.
	if len(t.closing) > 0 && p.TimestampNs-t.lastSweep > int64(t.opts.Linger)/4 {
		t.sweepClosed(p.TimestampNs)
	}
}

func (t *Tracker) ignored(ap netip.AddrPort) bool {
	for _, ig := range t.opts.Ignore {
		if ig.Port() == ap.Port() && (ig.Addr().IsUnspecified() || ig.Addr().Unmap() == ap.Addr().Unmap()) {
			return true
		}
	}
	return false
}

func (t *Tracker) sweepClosed(nowNs int64) {
	t.lastSweep = nowNs
	kept := t.closing[:0]
	for _, c := range t.closing {
		if t.conns[c.key] != c {
			continue // handed over already
		}
		if nowNs-c.LastNs > int64(t.opts.Linger) {
			t.finish(c, ReasonClosed)
			continue
		}
		kept = append(kept, c)
	}
	t.closing = kept
}

// Expire hands over what is complete at wall-clock time nowNs (Unix ns, the
// clock of live capture timestamps): closed connections quiet for Linger, open
// ones idle for Idle (kept, not Final) and for Evict (Final). Call it
// periodically while packets may not be arriving.
func (t *Tracker) Expire(nowNs int64) {
	defer t.dropHandedOver()
	for _, c := range t.sorted() {
		quiet := nowNs - c.LastNs
		switch {
		case c.closedAt != 0 && quiet > int64(t.opts.Linger):
			t.finish(c, ReasonClosed)
		case c.closedAt == 0 && quiet > int64(t.opts.Evict):
			t.finish(c, ReasonEvicted)
		case c.closedAt == 0 && quiet > int64(t.opts.Idle) && c.emittedAt != len(c.Packets):
			c.emittedAt = len(c.Packets)
			out := c.Conn
			out.Packets = c.Packets[:len(c.Packets):len(c.Packets)]
			out.Final, out.Reason = false, ReasonIdle
			t.emit(&out)
		}
	}
}

// Flush hands over every tracked connection, in the order they began.
func (t *Tracker) Flush() {
	for _, c := range t.sorted() {
		t.finish(c, ReasonFlushed)
	}
	t.closing = t.closing[:0]
}

func (t *Tracker) evictLeastActive() {
	var victim *conn
	for _, c := range t.conns {
		if victim == nil || c.lastActiveSeq < victim.lastActiveSeq {
			victim = c
		}
	}
	if victim != nil {
		t.finish(victim, ReasonEvicted)
	}
}

// sorted returns the tracked connections by ID.
func (t *Tracker) sorted() []*conn {
	out := make([]*conn, 0, len(t.conns))
	for _, c := range t.conns {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (t *Tracker) finish(c *conn, reason string) {
	delete(t.conns, c.key)
	out := c.Conn
	out.Final, out.Reason = true, reason
	t.emit(&out)
}

// dropHandedOver forgets closing entries whose connection was handed over.
func (t *Tracker) dropHandedOver() {
	kept := t.closing[:0]
	for _, c := range t.closing {
		if t.conns[c.key] == c {
			kept = append(kept, c)
		}
	}
	t.closing = kept
}
