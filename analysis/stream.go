package analysis

import (
	"context"
	"errors"
	"hash/maphash"
	"net/netip"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/quicanalysis"
	"github.com/slowstart/slowstart/report"
)

// Defaults of StreamOptions.
const (
	// DefaultIdleNs: a connection with no packet for an hour of capture time is
	// reported as it stands; its later packets are counted, not analyzed. Real
	// captures hold connections quiet for minutes (keep-alive) that then go on.
	DefaultIdleNs = 3600e9
	// DefaultAttemptIdleNs: a connection that is only SYNs is reported after 130 s
	// (Linux gives up retrying a SYN after about 127 s).
	DefaultAttemptIdleNs = 130e9
	// batchPackets is how many packets of the whole input make a batch: the
	// unit of work handed to the shards, and the points at which connections
	// due are finished and reports are emitted. It is fixed, so that the output
	// is the same whatever the number of shards.
	batchPackets = 4096
)

// StreamOptions tune a Stream.
type StreamOptions struct {
	Options
	// Shards is how many goroutines analyze connections (each a share of the
	// four-tuples); 0: GOMAXPROCS less one for the reader, at least one. The
	// output does not depend on it.
	Shards int
	// IdleNs and AttemptIdleNs: see DefaultIdleNs and DefaultAttemptIdleNs (0 takes
	// them; negative: never).
	IdleNs, AttemptIdleNs int64
	// CompactAttempts keeps a connection that is only SYNs so far in a few bytes
	// even with Packets (without Packets it always is), so that a SYN flood
	// takes the memory it takes without packet lists (a full connection is some
	// 5 KB, a compact one about 100 bytes). A SYN sent several times before its
	// answer is then in the packet list once, at its first sending; the
	// handshake's note still counts them. The page of a capture file sets it.
	CompactAttempts bool
	// Emit receives each connection's report once it is finished (both sides
	// closed and quiet, idle, or the input ended), from one goroutine, in an order
	// that depends only on the input: by the batch it finished in, then the time
	// it finished, then the order of its first packet. Connections are numbered
	// (Index) in the order of their first packet. An error from Emit stops the
	// stream (Close returns it).
	Emit func(*report.Connection) error
}

// StreamStats is what a Stream counted.
type StreamStats struct {
	Packets     int64 // handed to Add
	Connections int64 // reported (after the server filter)
	Open        int   // still open (for Snapshot)
	// IdleNs is the idle time after which the stream reported a connection
	// still open (its options' IdleNs as it applied them; 0: never).
	IdleNs int64
	flow.Stats
}

// Stream analyzes packets as they come and hands each connection's report over as
// soon as the connection is finished: memory holds open connections only. Packets
// are shared among shards by four-tuple, each shard tracking and analyzing its
// connections on a goroutine of its own; a merger numbers the connections and puts
// the reports in a deterministic order. Add, Advance, Snapshot and Close are called
// from one goroutine.
type Stream struct {
	opts    StreamOptions
	ctx     context.Context
	cancel  context.CancelFunc
	shards  []*shard
	seed    maphash.Seed
	pending []*shardBatch // the batch being filled, per shard
	// scratch is NextPacket's Packet when there are several shards (the
	// shard is known only once the packet is decoded).
	scratch  capture.Packet
	inBatch  int // packets in the current batch
	batchSeq int64
	ordinal  int64
	firstNs  int64
	maxNs    int64
	quic     *quicanalysis.Analyzer
	quicNew  []creation // QUIC connections begun in the current batch
	merged   chan mergeItem
	done     chan struct{}
	mergeErr error
	stats    StreamStats
	statsMu  sync.Mutex
	closed   bool
	// quicAtEnd are the QUIC connections finished at the end, for the merger's
	// chunk merge.
	quicAtEnd []finished
}

// creation is a connection's first packet: its number in its shard, the packet's
// ordinal in the input.
type creation struct {
	shard   int
	local   int
	ordinal int64
}

// finished is a connection's report from a shard, with what orders it: a
// finished TCP connection comes with its analyzer (c and ca), and the merger
// builds the report (report) when it emits it; a snapshot or a QUIC connection
// comes with its report in conn.
type finished struct {
	shard    int
	local    int
	finishNs int64
	ordinal  int64
	conn     report.Connection
	c        *flow.Conn
	ca       *connAnalyzer
}

// report builds the report of a finished connection (once), and returns it.
func (f *finished) report() *report.Connection {
	if f.ca != nil {
		f.conn = f.ca.build(f.c, true)
		f.c, f.ca = nil, nil
	}
	return &f.conn
}

// shardBatch is a batch of one shard's packets, whose captured payloads are
// copied into one arena.
type shardBatch struct {
	seq       int64
	packets   []capture.Packet
	ordinals  []int64
	payload   []byte
	watermark int64 // the latest capture time of the whole input so far
	captureNs int64 // the input's first packet time
	flush     bool  // the input ended: finish every connection
	snapshot  bool  // report the open connections too, as they stand
}

// shardResult is what a shard made of one batch.
type shardResult struct {
	seq int64
	// flushChunks: the input ended, and the connections still open follow in
	// chunks (results of finished only, in order of first packet), the last one
	// marked lastChunk.
	flushChunks, lastChunk bool
	created                []creation
	finished               []finished
	snapshots              []finished
	stats                  flow.Stats
	open                   int
}

// mergeItem is one batch as the dispatcher sent it, for the merger.
type mergeItem struct {
	seq      int64
	quicNew  []creation
	quic     []report.Connection // at the end: the QUIC connections
	snapshot chan []report.Connection
}

// NewStream starts a Stream. Close it to end the input and wait for the reports.
func NewStream(ctx context.Context, opts StreamOptions) *Stream {
	if opts.Shards <= 0 {
		opts.Shards = max(runtime.GOMAXPROCS(0)-1, 1)
	}
	switch {
	case opts.IdleNs == 0:
		opts.IdleNs = DefaultIdleNs
	case opts.IdleNs < 0:
		opts.IdleNs = 0
	}
	switch {
	case opts.AttemptIdleNs == 0:
		opts.AttemptIdleNs = DefaultAttemptIdleNs
	case opts.AttemptIdleNs < 0:
		opts.AttemptIdleNs = 0
	}
	if opts.Tool == "" {
		opts.Tool = "slowstart"
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Stream{opts: opts, ctx: ctx, cancel: cancel, seed: maphash.MakeSeed(),
		merged: make(chan mergeItem, 4), done: make(chan struct{})}
	s.stats.IdleNs = opts.IdleNs
	s.shards = make([]*shard, opts.Shards)
	s.pending = make([]*shardBatch, opts.Shards)
	for i := range s.shards {
		s.shards[i] = newShard(i, s)
		s.pending[i] = s.shards[i].freeBatch()
		go s.shards[i].run()
	}
	go s.merge()
	return s
}

// shardOf picks the shard of a four-tuple, either direction.
func (s *Stream) shardOf(p *capture.Packet) int {
	if len(s.shards) == 1 {
		return 0
	}
	a := netip.AddrPortFrom(p.Src, p.SrcPort)
	b := netip.AddrPortFrom(p.Dst, p.DstPort)
	if a.Compare(b) > 0 {
		a, b = b, a
	}
	var h maphash.Hash
	h.SetSeed(s.seed)
	a16, b16 := a.Addr().As16(), b.Addr().As16()
	h.Write(a16[:])
	h.Write(b16[:])
	h.WriteByte(byte(a.Port()))
	h.WriteByte(byte(a.Port() >> 8))
	h.WriteByte(byte(b.Port()))
	h.WriteByte(byte(b.Port() >> 8))
	return int(h.Sum64() % uint64(len(s.shards)))
}

// NextPacket returns a Packet to decode the next packet of the input into and
// pass to Add, which then need not copy it (with one shard it is the batch's
// next slot). It is valid until the next call of NextPacket or Add.
func (s *Stream) NextPacket() *capture.Packet {
	if len(s.shards) != 1 {
		return &s.scratch
	}
	b := s.pending[0]
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
	s.ordinal++
	s.stats.Packets++
	if s.firstNs == 0 {
		s.firstNs = p.TimestampNs
	}
	s.maxNs = max(s.maxNs, p.TimestampNs)
	if p.Protocol == capture.ProtocolUDP {
		s.addDatagram(p)
	} else {
		b := s.pending[s.shardOf(p)]
		if n := len(b.packets); n < cap(b.packets) && p == &b.packets[:n+1][n] {
			b.packets = b.packets[:n+1] // decoded in place (NextPacket)
		} else {
			b.packets = append(b.packets, *p)
		}
		b.ordinals = append(b.ordinals, s.ordinal)
		b.payload = append(b.payload, p.Payload...)
	}
	s.inBatch++
	if s.inBatch == batchPackets {
		return s.sendBatch(false, nil)
	}
	return nil
}

func (s *Stream) addDatagram(p *capture.Packet) {
	if s.quic == nil {
		s.quic = quicanalysis.New(quicanalysis.Options{Keys: s.opts.KeyLog, PacketLog: s.opts.Packets})
	}
	before := s.quic.Count()
	s.quic.Add(quicanalysis.Datagram{TimeNs: p.TimestampNs,
		Src: netip.AddrPortFrom(p.Src, p.SrcPort), Dst: netip.AddrPortFrom(p.Dst, p.DstPort), Payload: p.Payload})
	if s.quic.Count() > before {
		s.quicNew = append(s.quicNew, creation{shard: -1, local: before + 1, ordinal: s.ordinal})
	}
}

// Advance tells the stream that capture time has reached nowNs without packets (a
// live source): connections due by then are finished in a batch sent at once.
func (s *Stream) Advance(nowNs int64) error {
	s.maxNs = max(s.maxNs, nowNs)
	return s.sendBatch(false, nil)
}

// Snapshot returns the reports of the connections still open, as they stand, in
// the order of their first packet.
func (s *Stream) Snapshot() ([]report.Connection, error) {
	reply := make(chan []report.Connection, 1)
	if err := s.sendBatch(false, reply); err != nil {
		return nil, err
	}
	select {
	case conns := <-reply:
		return conns, nil
	case <-s.done:
		if s.mergeErr != nil {
			return nil, s.mergeErr
		}
		return nil, errors.New("analysis: the stream ended")
	}
}

// sendBatch hands the current batch (possibly empty) to every shard, and tells
// the merger to collect their results.
func (s *Stream) sendBatch(flush bool, snapshot chan []report.Connection) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	s.batchSeq++
	item := mergeItem{seq: s.batchSeq, quicNew: s.quicNew, snapshot: snapshot}
	s.quicNew = nil
	if flush && s.quic != nil {
		item.quic = s.quic.ConnectionsFrom(s.firstNs)
	}
	for i, sh := range s.shards {
		b := s.pending[i]
		b.seq, b.watermark, b.captureNs, b.flush, b.snapshot = s.batchSeq, s.maxNs, s.firstNs, flush, snapshot != nil
		select {
		case sh.in <- b:
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
		if !flush {
			s.pending[i] = sh.freeBatch()
		}
	}
	s.inBatch = 0
	select {
	case s.merged <- item:
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
	return nil
}

// Close ends the input: every open connection is finished and reported. It waits
// for the last report and returns the first error (from Emit or the context).
func (s *Stream) Close() (StreamStats, error) {
	if !s.closed {
		s.closed = true
		err := s.sendBatch(true, nil)
		close(s.merged)
		for _, sh := range s.shards {
			close(sh.in)
		}
		if err != nil {
			s.cancel()
		}
	}
	<-s.done
	s.cancel()
	return s.Stats(), s.mergeErr
}

// Stats returns what the stream counted so far.
func (s *Stream) Stats() StreamStats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	return s.stats
}

// merge numbers connections and emits their reports, batch by batch, in an order
// that depends only on the input.
func (s *Stream) merge() {
	defer close(s.done)
	global := map[uint64]int{} // openKey(shard, local number) → index, while open
	next := 0
	var emitErr error
	results := make([]shardResult, len(s.shards))
	for item := range s.merged {
		for i, sh := range s.shards {
			select {
			case results[i] = <-sh.out:
			case <-s.ctx.Done():
				if s.mergeErr == nil {
					s.mergeErr = s.ctx.Err()
				}
				return
			}
		}
		// Number the connections begun in this batch, in order of first packet.
		var created []creation
		for _, r := range results {
			created = append(created, r.created...)
		}
		created = append(created, item.quicNew...)
		sort.Slice(created, func(i, j int) bool { return created[i].ordinal < created[j].ordinal })
		for _, c := range created {
			next++
			global[openKey(c.shard, c.local)] = next
		}
		var out []*finished
		var snaps []finished
		var stats flow.Stats
		open := 0
		for i := range results {
			r := &results[i]
			for k := range r.finished {
				out = append(out, &r.finished[k])
			}
			snaps = append(snaps, r.snapshots...)
			stats.Trailing += r.stats.Trailing
			stats.Duplicates += r.stats.Duplicates
			open += r.open
		}
		var quicDone []finished
		for i, c := range item.quic {
			quicDone = append(quicDone, finished{shard: -1, local: i + 1, finishNs: s.maxNs, conn: c})
		}
		if !results[0].flushChunks {
			for k := range quicDone {
				out = append(out, &quicDone[k])
			}
			quicDone = nil
		}
		s.quicAtEnd = quicDone
		indexOf := func(f *finished) int { return global[openKey(f.shard, f.local)] }
		sort.Slice(out, func(i, j int) bool {
			if out[i].finishNs != out[j].finishNs {
				return out[i].finishNs < out[j].finishNs
			}
			return indexOf(out[i]) < indexOf(out[j])
		})
		if item.snapshot != nil {
			var conns []report.Connection
			for k := range snaps {
				if index, ok := global[openKey(snaps[k].shard, snaps[k].local)]; ok {
					snaps[k].conn.Index = index
					conns = append(conns, snaps[k].conn)
				}
			}
			sort.Slice(conns, func(i, j int) bool { return conns[i].Index < conns[j].Index })
			item.snapshot <- conns
		}
		emitted := 0
		emit := func(f *finished) {
			key := openKey(f.shard, f.local)
			index, ok := global[key]
			delete(global, key)
			if !ok {
				return // filtered out (another server than the one asked for)
			}
			if emitErr == nil && s.opts.Emit != nil {
				rc := f.report()
				rc.Index = index
				emitErr = s.opts.Emit(rc)
			}
			emitted++
		}
		for _, f := range out {
			emit(f)
		}
		// The shards' slices go back to them for their next batches.
		for i := range results {
			if f := results[i].finished; cap(f) > 0 {
				clear(f)
				select {
				case s.shards[i].spare <- f[:0]:
				default:
				}
			}
		}
		if results[0].flushChunks {
			if !s.mergeFlushChunks(global, emit) {
				return
			}
		}
		s.statsMu.Lock()
		s.stats.Stats.Trailing += stats.Trailing
		s.stats.Stats.Duplicates += stats.Duplicates
		s.stats.Open = open
		s.stats.Connections += int64(emitted)
		s.statsMu.Unlock()
		if emitErr != nil && s.mergeErr == nil {
			s.mergeErr = emitErr
			s.cancel()
		}
	}
}

// mergeFlushChunks hands over, at the end of the input, the connections still
// open: each shard's chunks come in order of first packet (and the QUIC
// connections in theirs); all finished at the same time, they are emitted by
// number, merging the shards' streams, a chunk at a time. False when cancelled.
func (s *Stream) mergeFlushChunks(global map[uint64]int, emit func(*finished)) bool {
	type head struct {
		items []finished
		done  bool
	}
	heads := make([]head, len(s.shards)+1)
	heads[len(s.shards)] = head{items: s.quicAtEnd, done: true}
	s.quicAtEnd = nil
	next := func(i int) bool {
		for len(heads[i].items) == 0 && !heads[i].done {
			select {
			case r, ok := <-s.shards[i].out:
				if !ok {
					heads[i].done = true
					return true
				}
				heads[i].items, heads[i].done = r.finished, r.lastChunk
			case <-s.ctx.Done():
				if s.mergeErr == nil {
					s.mergeErr = s.ctx.Err()
				}
				return false
			}
		}
		return true
	}
	indexOf := func(f *finished) int {
		if index, ok := global[openKey(f.shard, f.local)]; ok {
			return index
		}
		return 0 // filtered out: goes first, emit drops it
	}
	for {
		best := -1
		for i := range heads {
			if i < len(s.shards) && !next(i) {
				return false
			}
			if len(heads[i].items) == 0 {
				continue
			}
			if best < 0 || indexOf(&heads[i].items[0]) < indexOf(&heads[best].items[0]) {
				best = i
			}
		}
		if best < 0 {
			return true
		}
		emit(&heads[best].items[0])
		heads[best].items = heads[best].items[1:]
	}
}

// openKey packs a connection's shard (-1 for QUIC) and number in its shard into
// one map key: the merger holds one per open connection, a SYN flood's million
// among them.
func openKey(shard, local int) uint64 { return uint64(shard+1)<<40 | uint64(local) }
