// Package stream is the engine under analysis.Stream: it shares the packets of an
// input among shards by four-tuple, runs each shard's connection tracking and
// analysis on a goroutine of its own, and merges what the shards finish into one
// sequence of reports, numbered and ordered by the input alone (the same at any
// number of shards or cores).
//
// It knows nothing of what a connection's analysis is: the caller gives it, per
// shard, what makes a connection's analyzer (a flow.Handler that also builds the
// connection's report), and, for UDP datagrams, what analyzes them. Package
// analysis wires the per-connection assembler (rounds, TLS, HTTP) into it; verbs
// use analysis.Stream, not this package.
//
// Its parts, each in a file of its own:
//
//   - stream.go: the reader's side. Add puts each packet into the batch of its
//     shard; every batchPackets packets of the whole input (a fixed count, so the
//     output does not depend on the number of shards) the batches go to the shards
//     and an item to the merger.
//   - shard.go: a shard tracks its connections (flow.Tracker), hands over those
//     that finished, with their analyzers, and at the end of the input the
//     connections still open, in chunks.
//   - merge.go: the merger numbers the connections begun in a batch by their first
//     packet, orders the finished ones by (batch, finish time, number), builds
//     their reports where the shards did not, and emits them.
package stream

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/report"
)

// batchPackets is how many packets of the whole input make a batch: the unit of
// work handed to the shards, and the points at which connections due are
// finished and reports are emitted. It is fixed, so that the output is the same
// whatever the number of shards.
const batchPackets = 4096

// Conn analyzes one connection: the tracker hands it the segments (flow.Handler),
// and it builds the connection's report, final or as it stands.
type Conn interface {
	flow.Handler
	Report(c *flow.Conn, final bool) report.Connection
}

// NewConnFunc makes the analyzer of a connection that begins; captureNs is the
// input's first packet time.
type NewConnFunc func(c *flow.Conn, captureNs int64) Conn

// FinishFunc takes a finished connection and its analyzer: a Conn calls it from
// its Close.
type FinishFunc func(c *flow.Conn, a Conn)

// Datagrams analyzes the input's UDP datagrams (QUIC) beside the TCP shards.
type Datagrams interface {
	// Add takes a datagram and returns the number (from 1) of the connection it
	// began, or 0.
	Add(p *capture.Packet) int
	// Finish reports every connection at the end of the input, in the order
	// of their numbers; firstNs is the input's first packet time.
	Finish(firstNs int64) []report.Connection
}

// Options tune a Stream.
type Options struct {
	// Shards is how many goroutines analyze connections; 0: DefaultShards.
	// The output does not depend on it.
	Shards int
	// IdleNs and AttemptIdleNs: a connection with no packet for this long in
	// capture time, or one that is only SYNs, is finished as it stands (0: never).
	IdleNs, AttemptIdleNs int64
	// Server, when set, limits the reports to connections with that server; it
	// also tells the server where a capture lacks the SYN.
	Server flow.ServerHint
	// Compact keeps SYN-only connections compact (flow.TrackerOptions).
	Compact bool
	// NewShard is called once per shard before any packet, with what the
	// shard's analyzers call when their connection is finished; it returns what
	// makes each connection's analyzer.
	NewShard func(finish FinishFunc) NewConnFunc
	// NewDatagrams makes the analyzer of UDP datagrams, at the first one
	// (nil: datagrams are counted, not analyzed).
	NewDatagrams func() Datagrams
	// Emit receives each connection's report once it is finished, from one
	// goroutine, in an order that depends only on the input: by the batch it
	// finished in, then the time it finished, then the order of its first
	// packet. Connections are numbered (Index) in the order of their first
	// packet. An error from Emit stops the stream (Close returns it).
	Emit func(*report.Connection) error
	// Emitted, when set, is told each connection's number and the ordinal of
	// its first packet (flow.Conn.FirstOrdinal) once Emit has taken its
	// report, from Emit's goroutine.
	Emitted func(index int, firstOrdinal int64)
}

// Stats is what a Stream counted.
type Stats struct {
	Packets     int64 // handed to Add
	Connections int64 // reported (after the server filter)
	Open        int   // still open (for Snapshot)
	// IdleNs is the idle time after which the stream reported a connection
	// still open (0: never).
	IdleNs int64
	// TimeOutliers counts packets whose timestamp stood more than a day away from
	// the packets around them (a record stamped 46 years late): each was read as
	// coming at the time of the packet before it. TimeOutlierNs is the farthest.
	TimeOutliers  int64
	TimeOutlierNs int64
	flow.Stats
}

// Stream analyzes packets as they come and hands each connection's report over
// as soon as the connection is finished: memory holds open connections only. Add,
// NextPacket, Advance, Snapshot and Close are called from one goroutine.
type Stream struct {
	opts   Options
	ctx    context.Context
	cancel context.CancelFunc
	shards []*shard
	reader reader
	merger *merger
	closed bool
	// arenaBytes is the capacity of the payload arenas of the batches in
	// existence (see arenaBudget): counted by the reader as it sends a batch,
	// uncounted by the shard that drops one.
	arenaBytes atomic.Int64
}

// reader is the reader's side of the stream: the batches being filled, and what
// it counts of the input.
type reader struct {
	seed    uint64   // of the shards' hash: random, so that no input can pick its shards
	pending []*batch // the batch being filled, per shard
	// lastSrc and lastDst are the endpoints of the last packet, lastShard
	// its connection's shard.
	lastSrc, lastDst netip.AddrPort
	lastShard        int
	inBatch          int // packets in the current batch
	batchSeq         int64
	ordinal          int64 // of the last packet added
	firstNs          int64
	maxNs            int64
	// lastNs is the last packet's time. A packet that jumps more than wildJumpNs
	// from it is held (a copy: held, heldPayload) until the next one shows
	// whether the capture's clock really moved (the next goes on near it) or the
	// one record was wrong (the next is back near lastNs: it is read at lastNs).
	lastNs                 int64
	held                   *capture.Packet
	heldPayload            []byte
	outliers, outlierMaxNs int64
	// datagrams analyzes UDP (made at the first datagram); datagramsNew are
	// its connections begun in the current batch.
	datagrams    Datagrams
	datagramsNew []creation
}

// wildJumpNs is how far a packet's timestamp may stand from the one before it
// before the next packet is asked whether the capture's clock moved or the record
// is wrong: one record with a wild timestamp (46 years late) would otherwise move
// the stream's clock by years, and every open connection would be reported idle,
// its later packets set aside.
const wildJumpNs = 24 * 3600 * 1_000_000_000

func absNs(ns int64) int64 {
	if ns < 0 {
		return -ns
	}
	return ns
}

// creation is a connection's first packet: its number in its shard (shard -1:
// the datagrams'), the packet's ordinal in the input.
type creation struct {
	shard   int
	local   int
	ordinal int64
}

// DefaultShards is how many shards a Stream runs on procs processors: one
// less than procs, for the reader, but two on two. The shards' work (flow,
// rounds, HTTP and TLS, a packet at a time) is most of an analysis of many
// open connections or of bulk transfers, the reader's and the merger's a
// larger part on short connections: on two cores, two shards took the edge
// shapes of bench/shapes.sh from 1.93 to 1.33 s (5,000 open connections) and
// 9.4 to 7.2 s (50,000), lossy bulk from 0.77 to 0.66 s, and left the short
// connections' shapes as they were (the reader decodes a packet into the
// slot of the shard the packet before went to, and hashes a four-tuple only
// when it changes: with a copy and a hash a packet, two shards cost bulk 17%).
func DefaultShards(procs int) int {
	return max(procs-1, min(procs, 2))
}

// New starts a Stream. Close it to end the input and wait for the reports.
func New(ctx context.Context, opts Options) *Stream {
	if opts.Shards <= 0 {
		opts.Shards = DefaultShards(runtime.GOMAXPROCS(0))
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Stream{opts: opts, ctx: ctx, cancel: cancel, reader: reader{seed: rand.Uint64()}}
	s.merger = newMerger(s)
	s.shards = make([]*shard, opts.Shards)
	s.reader.pending = make([]*batch, opts.Shards)
	for i := range s.shards {
		s.shards[i] = newShard(i, s)
		s.reader.pending[i] = s.shards[i].freeBatch()
		go s.shards[i].run()
	}
	go s.merger.run()
	return s
}

// shardOf picks the shard of a four-tuple, either direction.
func (s *Stream) shardOf(p *capture.Packet) int {
	if len(s.shards) == 1 {
		return 0
	}
	r := &s.reader
	src := netip.AddrPortFrom(p.Src, p.SrcPort)
	dst := netip.AddrPortFrom(p.Dst, p.DstPort)
	if (src == r.lastSrc && dst == r.lastDst) || (src == r.lastDst && dst == r.lastSrc) {
		// The connection of the packet before (a bulk transfer's next
		// segment, or its acknowledgement): no hash.
		return r.lastShard
	}
	r.lastSrc, r.lastDst = src, dst
	r.lastShard = s.hashShard(src, dst)
	return r.lastShard
}

// hashShard is the shard of the connection between a and b, the same both
// ways: the connection's hash, mixed.
func (s *Stream) hashShard(a, b netip.AddrPort) int {
	h := flow.EndpointsHash(a, b, s.reader.seed)
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 32
	return int(h % uint64(len(s.shards)))
}

// NextPacket returns a Packet to decode the next packet of the input into and
// pass to Add, which then need not copy it (with one shard it is the batch's
// next slot). It is valid until the next call of NextPacket or Add.
func (s *Stream) NextPacket() *capture.Packet {
	// The next slot of the shard the packet before went to: most packets
	// follow one of their own connection's, and Add copies those that do not.
	b := s.reader.pending[s.reader.lastShard]
	if len(b.packets) == cap(b.packets) {
		b.packets = slices.Grow(b.packets, batchPackets)
	}
	return &b.packets[:len(b.packets)+1][len(b.packets)]
}

// Add takes the next packet of the input (TCP, or a UDP datagram for QUIC). The
// packet and its payload may be reused after Add returns.
func (s *Stream) Add(p *capture.Packet) error {
	if s.closed {
		return errors.New("analysis: Add after Close")
	}
	r := &s.reader
	if r.held != nil {
		// p decides the packet held before it; p itself moves to a copy, since
		// adding the held one takes the batch's next slot, which may be p's.
		own := *p
		p = &own
		if err := s.addHeld(absNs(p.TimestampNs-r.held.TimestampNs) > wildJumpNs); err != nil {
			return err
		}
	}
	if r.ordinal > 0 && absNs(p.TimestampNs-r.lastNs) > wildJumpNs {
		r.heldPayload = append(r.heldPayload[:0], p.Payload...)
		held := *p
		held.Payload = r.heldPayload
		r.held = &held
		return nil
	}
	return s.add(p)
}

// addHeld adds the packet held for its wild timestamp: at the time of the packet
// before it when wrong, else as it came.
func (s *Stream) addHeld(wrong bool) error {
	r := &s.reader
	p := r.held
	r.held = nil
	if wrong {
		r.outliers++
		r.outlierMaxNs = max(r.outlierMaxNs, absNs(p.TimestampNs-r.lastNs))
		p.TimestampNs = r.lastNs
	}
	return s.add(p)
}

// add takes a packet in the input's order.
func (s *Stream) add(p *capture.Packet) error {
	r := &s.reader
	r.ordinal++
	r.lastNs = p.TimestampNs
	if r.firstNs == 0 {
		r.firstNs = p.TimestampNs
	}
	r.maxNs = max(r.maxNs, p.TimestampNs)
	if p.Protocol == capture.ProtocolUDP {
		s.addDatagram(p)
	} else {
		r.pending[s.shardOf(p)].add(p, r.ordinal)
	}
	r.inBatch++
	if r.inBatch == batchPackets {
		return s.sendBatch(false, nil, AllOpen)
	}
	return nil
}

func (s *Stream) addDatagram(p *capture.Packet) {
	r := &s.reader
	if r.datagrams == nil {
		if s.opts.NewDatagrams == nil {
			return
		}
		r.datagrams = s.opts.NewDatagrams()
	}
	if local := r.datagrams.Add(p); local > 0 {
		r.datagramsNew = append(r.datagramsNew, creation{shard: -1, local: local, ordinal: r.ordinal})
	}
}

// Advance tells the stream that capture time has reached nowNs without packets (a
// live source): connections due by then are finished in a batch sent at once.
func (s *Stream) Advance(nowNs int64) error {
	s.reader.maxNs = max(s.reader.maxNs, nowNs)
	return s.sendBatch(false, nil, AllOpen)
}

// Quiet says which open connections a snapshot reports: those whose last
// packet came at or after FromNs and before BeforeNs (capture times). A live
// view asks, at each snapshot, for those quiet since a while ago and not quiet
// yet at its previous snapshot: each connection once per pause, none still
// sending. A window that ends before it begins holds none.
type Quiet struct {
	FromNs, BeforeNs int64
}

// AllOpen is every open connection.
var AllOpen = Quiet{FromNs: math.MinInt64, BeforeNs: math.MaxInt64}

func (q Quiet) holds(lastNs int64) bool {
	return lastNs >= q.FromNs && lastNs < q.BeforeNs
}

// Snapshot returns the reports of the connections still open that quiet
// holds, as they stand, in the order of their first packet.
func (s *Stream) Snapshot(quiet Quiet) ([]report.Connection, error) {
	reply := make(chan []report.Connection, 1)
	if err := s.sendBatch(false, reply, quiet); err != nil {
		return nil, err
	}
	select {
	case conns := <-reply:
		return conns, nil
	case <-s.merger.done:
		if s.merger.err != nil {
			return nil, s.merger.err
		}
		return nil, errors.New("analysis: the stream ended")
	}
}

// sendBatch hands the current batch (possibly empty) to every shard, and tells
// the merger to collect their results.
func (s *Stream) sendBatch(flush bool, snapshot chan []report.Connection, quiet Quiet) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	r := &s.reader
	r.batchSeq++
	item := mergeItem{seq: r.batchSeq, datagramsNew: r.datagramsNew, snapshot: snapshot}
	r.datagramsNew = nil
	if flush && r.datagrams != nil {
		item.datagrams = r.datagrams.Finish(r.firstNs)
	}
	for i, sh := range s.shards {
		b := r.pending[i]
		b.seq, b.watermark, b.captureNs, b.flush, b.snapshot, b.quiet = r.batchSeq, r.maxNs, r.firstNs, flush, snapshot != nil, quiet
		n := b.bytes()
		s.arenaBytes.Add(int64(n - b.counted))
		b.counted = n
		select {
		case sh.in <- b:
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
		if !flush {
			if r.pending[i] = sh.freeBatch(); r.pending[i] == nil {
				return s.ctx.Err()
			}
		}
	}
	r.inBatch = 0
	select {
	case s.merger.items <- item:
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
	return nil
}

// Close ends the input: every open connection is finished and reported. It waits
// for the last report and returns the first error (from Emit or the context).
func (s *Stream) Close() (Stats, error) {
	if !s.closed && s.reader.held != nil {
		// The last packet jumped and nothing came after it to confirm the jump.
		if err := s.addHeld(true); err != nil {
			return s.Stats(), err
		}
	}
	if !s.closed {
		s.closed = true
		err := s.sendBatch(true, nil, AllOpen)
		close(s.merger.items)
		for _, sh := range s.shards {
			close(sh.in)
		}
		if err != nil {
			s.cancel()
		}
	}
	<-s.merger.done
	s.cancel()
	return s.Stats(), s.merger.err
}

// Stats returns what the stream counted so far.
func (s *Stream) Stats() Stats {
	st := s.merger.stats()
	st.Packets = s.reader.ordinal
	st.IdleNs = s.opts.IdleNs
	st.TimeOutliers, st.TimeOutlierNs = s.reader.outliers, s.reader.outlierMaxNs
	return st
}
