package stream

import (
	"net/netip"
	"unsafe"

	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/report"
)

// batchesInFlight is how many batches a shard may have queued: enough to keep it
// busy while the reader fills the next, few enough to bound memory.
const batchesInFlight = 4

// flushChunkConns is how many connections' reports a shard hands over at once
// at the end of the input.
const flushChunkConns = 64

// prebuiltConns bounds the reports a shard builds ahead of the merger in one
// result: the merger builds the others as it emits them. A report is many
// times the size of the analyzer it is built from (a keep-alive connection's
// sixty rounds and exchanges: some 25 KB against 2 KB), and when thousands of
// such connections end in one batch, reports built all at once for results
// queued to the merger were most of the memory the stream held.
const prebuiltConns = 64

// arenaBudget bounds the memory the batches in existence may hold (their
// payload arenas, their packets' slots and ordinals: batch.bytes) before the
// reader waits for a batch to come back rather than make one more. A capture
// of whole packets fills an arena with megabytes (4096 packets of 1,448
// bytes: 6 MB among the shards), and a dozen of them, each kept at the largest
// it grew to, were 40 MB of a 2 GB bulk capture's 105 MB of live heap (peak
// RSS 171-185 MB; with 8 MB here 138-140 MB and no slower: 4 MB took as little
// memory and more time, 16 MB 150-157 MB). A capture of short snaps has small
// arenas but as many slots (4096 of 192 bytes a batch): counted too, they no
// longer pile up to some 11 MB of mixed's live data at 4x its length (peak
// RSS 146-155 MB, then 140-149).
const arenaBudget = 8 << 20

// batch is a batch of one shard's packets, whose captured payloads are copied
// into one arena.
type batch struct {
	seq      int64
	packets  []capture.Packet
	ordinals []int64
	payload  []byte
	// counted is the arena's capacity as counted in Stream.arenaBytes.
	counted   int
	watermark int64 // the latest capture time of the whole input so far
	captureNs int64 // the input's first packet time
	flush     bool  // the input ended: finish every connection
	snapshot  bool  // report the open connections too, as they stand
	// quiet is which open connections a snapshot reports: those whose last
	// packet came in it.
	quiet Quiet
}

// add appends a packet (decoded in place when it is the batch's next slot, see
// Stream.NextPacket) and copies its payload into the arena.
func (b *batch) add(p *capture.Packet, ordinal int64) {
	if n := len(b.packets); n < cap(b.packets) && p == &b.packets[:n+1][n] {
		b.packets = b.packets[:n+1]
	} else {
		b.packets = append(b.packets, *p)
	}
	b.ordinals = append(b.ordinals, ordinal)
	b.payload = append(b.payload, p.Payload...)
}

// bytes is the memory the batch holds: its arena, its packets' slots and
// their ordinals.
func (b *batch) bytes() int {
	return cap(b.payload) + cap(b.packets)*int(unsafe.Sizeof(capture.Packet{})) + cap(b.ordinals)*8
}

// reset empties the batch for reuse.
func (b *batch) reset() {
	b.packets, b.ordinals, b.payload = b.packets[:0], b.ordinals[:0], b.payload[:0]
	b.flush, b.snapshot = false, false
}

// finished is a connection's report from a shard, with what orders it: a
// finished TCP connection comes with its analyzer (c and analyzer), and its
// report is built (report) by whoever has room; a snapshot or a datagram
// connection comes with its report in conn.
type finished struct {
	shard    int
	local    int
	finishNs int64
	ordinal  int64
	conn     report.Connection
	c        *flow.Conn
	analyzer Conn
}

// report builds the report of a finished connection (once), and returns it.
func (f *finished) report() *report.Connection {
	if f.analyzer != nil {
		f.conn = f.analyzer.Report(f.c, true)
		f.c, f.analyzer = nil, nil
	}
	return &f.conn
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

// buildReports builds the reports of the finished connections of r, the first
// prebuiltConns of them.
func (r *shardResult) buildReports() {
	for i := range min(len(r.finished), prebuiltConns) {
		r.finished[i].report()
	}
}

// shard tracks and analyzes the connections of its share of the four-tuples.
type shard struct {
	id     int
	stream *Stream
	in     chan *batch
	out    chan shardResult
	free   chan *batch
	// spare takes back the finished slices the merger is done with, for reuse:
	// a report is large, and growing a fresh slice every batch made most of the
	// stream's garbage.
	spare     chan []finished
	tracker   *flow.Tracker
	captureNs int64 // the input's first packet time, for new analyzers
	result    shardResult
	// reported is what the tracker had counted at the last batch's end.
	reported flow.Stats
}

func newShard(id int, s *Stream) *shard {
	sh := &shard{id: id, stream: s,
		in:    make(chan *batch, batchesInFlight),
		out:   make(chan shardResult, batchesInFlight),
		free:  make(chan *batch, batchesInFlight+2),
		spare: make(chan []finished, batchesInFlight+2),
	}
	newConn := s.opts.NewShard(sh.finished)
	hint := s.opts.Server
	sh.tracker = flow.NewTrackerWith(func(c *flow.Conn) flow.Handler {
		return newConn(c, sh.captureNs)
	}, hint, flow.TrackerOptions{
		IdleNs:        s.opts.IdleNs,
		AttemptIdleNs: s.opts.AttemptIdleNs,
		Compact:       s.opts.Compact,
		Created: func(index int, ordinal int64, client, server netip.AddrPort) {
			if hint.IsSet() && !hint.Matches(server) {
				return // not reported: no number
			}
			sh.result.created = append(sh.result.created, creation{shard: sh.id, local: index, ordinal: ordinal})
		},
	})
	return sh
}

// freeBatch returns an empty batch to fill: one the shard gave back, a new one,
// or, when the arenas in existence hold more than arenaBudget, the next the
// shard gives back (nil if the stream was cancelled meanwhile).
func (sh *shard) freeBatch() *batch {
	select {
	case b := <-sh.free:
		return b
	default:
	}
	if sh.stream.arenaBytes.Load() <= arenaBudget {
		return &batch{}
	}
	select {
	case b := <-sh.free:
		return b
	case <-sh.stream.ctx.Done():
		return nil
	}
}

// recycle gives a batch the shard is done with back to the reader, or drops it
// (and its arena's count) when enough are waiting.
func (sh *shard) recycle(b *batch) {
	b.reset()
	select {
	case sh.free <- b:
	default:
		sh.stream.arenaBytes.Add(-int64(b.counted))
	}
}

// finished takes a finished connection. Its report is built by the merger
// (finished.report), on the other side of the pipeline: the shard is done with
// the connection, and building reports is a good part of the work.
func (sh *shard) finished(c *flow.Conn, a Conn) {
	if sh.result.finished == nil {
		select {
		case reuse := <-sh.spare:
			sh.result.finished = reuse[:0]
		default:
		}
	}
	sh.result.finished = append(sh.result.finished, finished{shard: sh.id, local: c.Index,
		finishNs: c.FinishNs, ordinal: c.FirstOrdinal, c: c, analyzer: a})
}

// send hands a result to the merger; false when the stream was cancelled.
func (sh *shard) send(r shardResult) bool {
	select {
	case sh.out <- r:
		return true
	case <-sh.stream.ctx.Done():
		return false
	}
}

// take returns the result gathered since the last one, for batch seq, with what
// the tracker counted since then.
func (sh *shard) take(seq int64) shardResult {
	st := sh.tracker.Stats()
	r := sh.result
	r.seq = seq
	r.stats = flow.Stats{Trailing: st.Trailing - sh.reported.Trailing, Duplicates: st.Duplicates - sh.reported.Duplicates}
	r.open = sh.tracker.Open()
	sh.reported = st
	sh.result = shardResult{}
	return r
}

func (sh *shard) run() {
	defer close(sh.out)
	for b := range sh.in {
		sh.track(b)
		if b.flush {
			if !sh.flushInChunks(b) {
				return
			}
			continue
		}
		if b.snapshot {
			sh.snapshot(b.quiet)
		}
		r := sh.take(b.seq)
		sh.recycle(b)
		if len(sh.in) == 0 {
			// No batch waiting: the shard is ahead of the reader, so it builds
			// its finished connections' reports itself rather than leave them
			// all to the merger (a report is the same whoever builds it).
			r.buildReports()
		}
		if !sh.send(r) {
			return
		}
	}
}

// track hands the batch's packets to the tracker, then moves its clock to the
// batch's watermark (finishing the connections due).
func (sh *shard) track(b *batch) {
	sh.captureNs = b.captureNs
	// The payloads were appended to the arena in order: point each packet at
	// its bytes there.
	offset := 0
	for i := range b.packets {
		p := &b.packets[i]
		n := len(p.Payload)
		p.Payload = b.payload[offset : offset+n : offset+n]
		offset += n
		sh.tracker.AddNumbered(p, b.ordinals[i])
	}
	sh.tracker.Advance(b.watermark)
}

// snapshot reports the open connections whose last packet came in quiet, as
// they stand. (The others are not built: a report is some 40 µs, and a busy
// link has thousands of connections open, most of them sending.)
func (sh *shard) snapshot(quiet Quiet) {
	sh.tracker.EachOpen(func(c *flow.Conn) {
		if !quiet.holds(c.LastNs) {
			return
		}
		if a, ok := c.Handler().(Conn); ok {
			sh.result.snapshots = append(sh.result.snapshots, finished{shard: sh.id, local: c.Index,
				ordinal: c.FirstOrdinal, conn: a.Report(c, false)})
		}
	})
}

// flushInChunks ends the input: the batch's own result first (what finished
// before the end, marked flushChunks), then the connections still open, finished
// in order of first packet, in results of flushChunkConns reports each, the last
// marked lastChunk. The merger merges the shards' chunks by connection number, so
// the end of a capture with a million open connections never holds a million
// reports at once. False when the stream was cancelled.
func (sh *shard) flushInChunks(b *batch) bool {
	r := sh.take(b.seq)
	r.flushChunks = true
	if !sh.send(r) {
		return false
	}
	// At the end the reader is done, and the merger, which builds and renders
	// the reports, would work alone: the shard builds them here instead.
	ok := true
	sh.tracker.FlushEach(flushChunkConns, func() {
		chunk := sh.result
		sh.result = shardResult{}
		chunk.seq = b.seq
		chunk.buildReports()
		ok = ok && sh.send(chunk)
	})
	last := sh.result
	sh.result = shardResult{}
	last.seq, last.lastChunk = b.seq, true
	last.buildReports()
	return ok && sh.send(last)
}
