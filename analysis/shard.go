package analysis

import (
	"net/netip"

	"github.com/slowstart/slowstart/flow"
)

// batchesInFlight is how many batches a shard may have queued: enough to keep it
// busy while the reader fills the next, few enough to bound memory.
const batchesInFlight = 4

// connEnv is what a shard's connection analyzers share.
type connEnv struct {
	opts      Options
	captureNs int64 // the input's first packet time: connections' start_ms count from it
	// finish takes a finished connection, whose report the merger builds.
	finish func(c *flow.Conn, ca *connAnalyzer)
}

// shard tracks and analyzes the connections of its share of the four-tuples.
type shard struct {
	id     int
	stream *Stream
	in     chan *shardBatch
	out    chan shardResult
	free   chan *shardBatch
	// spare takes back the finished slices the merger is done with, for reuse:
	// a report is large, and growing a fresh slice every batch made most of the
	// stream's garbage.
	spare   chan []finished
	tracker *flow.Tracker
	env     connEnv
	result  shardResult
	// reported is what the tracker had counted at the last batch's end.
	reported flow.Stats
}

func newShard(id int, s *Stream) *shard {
	sh := &shard{id: id, stream: s,
		in:    make(chan *shardBatch, batchesInFlight),
		out:   make(chan shardResult, batchesInFlight),
		free:  make(chan *shardBatch, batchesInFlight+2),
		spare: make(chan []finished, batchesInFlight+2),
	}
	sh.env = connEnv{opts: s.opts.Options, finish: sh.finished}
	hint := s.opts.Server
	sh.tracker = flow.NewTrackerWith(func(c *flow.Conn) flow.Handler {
		return newConnAnalyzer(&sh.env, c)
	}, hint, flow.TrackerOptions{
		IdleNs:        s.opts.IdleNs,
		AttemptIdleNs: s.opts.AttemptIdleNs,
		// Per-packet lists need every packet from the first: no compact SYNs
		// then, unless asked for (a page bounded in memory).
		Compact: !s.opts.Packets || s.opts.CompactAttempts,
		Created: func(index int, ordinal int64, client, server netip.AddrPort) {
			if hint.IsSet() && !hint.Matches(server) {
				return // not reported: no number
			}
			sh.result.created = append(sh.result.created, creation{shard: sh.id, local: index, ordinal: ordinal})
		},
	})
	return sh
}

// freeBatch returns an empty batch to fill.
func (sh *shard) freeBatch() *shardBatch {
	select {
	case b := <-sh.free:
		return b
	default:
		return &shardBatch{}
	}
}

// finished takes a finished connection. Its report is built by the merger
// (finished.report), on the other side of the pipeline: the shard is done with
// the connection, and building reports is a good part of the work.
func (sh *shard) finished(c *flow.Conn, ca *connAnalyzer) {
	if sh.result.finished == nil {
		select {
		case reuse := <-sh.spare:
			sh.result.finished = reuse[:0]
		default:
		}
	}
	sh.result.finished = append(sh.result.finished, finished{shard: sh.id, local: c.Index,
		finishNs: c.FinishNs, ordinal: c.FirstOrdinal, c: c, ca: ca})
}

// flushInChunks ends the input: the batch's own result first (what finished
// before the end, marked flushChunks), then the connections still open, finished
// in order of first packet, in results of flushChunkConns reports each, the last
// marked lastChunk. The merger merges the shards' chunks by connection number, so
// the end of a capture with a million open connections never holds a million
// reports at once. False when the stream was cancelled.
func (sh *shard) flushInChunks(b *shardBatch) bool {
	send := func(r shardResult) bool {
		select {
		case sh.out <- r:
			return true
		case <-sh.stream.ctx.Done():
			return false
		}
	}
	st := sh.tracker.Stats()
	r := sh.result
	r.seq, r.flushChunks = b.seq, true
	r.stats = flow.Stats{Trailing: st.Trailing - sh.reported.Trailing, Duplicates: st.Duplicates - sh.reported.Duplicates}
	r.open = sh.tracker.Open()
	sh.reported = st
	sh.result = shardResult{}
	if !send(r) {
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
		ok = ok && send(chunk)
	})
	last := sh.result
	sh.result = shardResult{}
	last.seq, last.lastChunk = b.seq, true
	last.buildReports()
	return ok && send(last)
}

// flushChunkConns is how many connections' reports a shard hands over at once
// at the end of the input.
const flushChunkConns = 2048

func (sh *shard) run() {
	defer close(sh.out)
	for b := range sh.in {
		sh.env.captureNs = b.captureNs
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
		if b.flush {
			if !sh.flushInChunks(b) {
				return
			}
			continue
		}
		if b.snapshot {
			sh.tracker.EachOpen(func(c *flow.Conn) {
				if ca, ok := c.Handler().(*connAnalyzer); ok {
					sh.result.snapshots = append(sh.result.snapshots, finished{shard: sh.id, local: c.Index,
						ordinal: c.FirstOrdinal, conn: ca.build(c, false)})
				}
			})
		}
		st := sh.tracker.Stats()
		r := sh.result
		r.seq = b.seq
		r.stats = flow.Stats{Trailing: st.Trailing - sh.reported.Trailing, Duplicates: st.Duplicates - sh.reported.Duplicates}
		r.open = sh.tracker.Open()
		sh.reported = st
		sh.result = shardResult{}
		b.packets, b.ordinals, b.payload = b.packets[:0], b.ordinals[:0], b.payload[:0]
		b.flush, b.snapshot = false, false
		select {
		case sh.free <- b:
		default:
		}
		if len(sh.in) == 0 {
			// No batch waiting: the shard is ahead of the reader, so it builds
			// its finished connections' reports itself rather than leave them
			// all to the merger (a report is the same whoever builds it).
			r.buildReports()
		}
		select {
		case sh.out <- r:
		case <-sh.stream.ctx.Done():
			return
		}
	}
}

// buildReports builds the reports of the finished connections of r.
func (r *shardResult) buildReports() {
	for i := range r.finished {
		r.finished[i].report()
	}
}
