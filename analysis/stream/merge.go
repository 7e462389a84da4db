package stream

import (
	"sort"
	"sync"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/report"
)

// mergeItem is one batch as the reader sent it, for the merger.
type mergeItem struct {
	seq          int64
	datagramsNew []creation
	datagrams    []report.Connection // at the end: the datagram connections
	snapshot     chan []report.Connection
}

// merger numbers connections and emits their reports, batch by batch, in an order
// that depends only on the input. It runs on a goroutine of its own.
type merger struct {
	s     *Stream
	items chan mergeItem
	done  chan struct{}
	err   error // the first error (Emit's or the context's); read after done
	// numbers holds the number of each open connection, by openKey (shard,
	// number in its shard); next is the last number given.
	numbers map[uint64]int
	next    int
	results []shardResult // one per shard, for the batch being merged
	emitErr error

	mu     sync.Mutex
	counts Stats // Connections, Open and the flow.Stats, under mu
}

func newMerger(s *Stream) *merger {
	return &merger{s: s, items: make(chan mergeItem, 4), done: make(chan struct{}), numbers: map[uint64]int{}}
}

// openKey packs a connection's shard (-1 for datagrams) and number in its shard
// into one map key: the merger holds one per open connection, a SYN flood's
// million among them.
func openKey(shard, local int) uint64 { return uint64(shard+1)<<40 | uint64(local) }

func (m *merger) stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts
}

// fail records the first error.
func (m *merger) fail(err error) {
	if m.err == nil {
		m.err = err
	}
}

func (m *merger) run() {
	defer close(m.done)
	m.results = make([]shardResult, len(m.s.shards))
	for item := range m.items {
		if !m.collect() {
			return
		}
		m.number(item)
		if item.snapshot != nil {
			item.snapshot <- m.snapshot()
		}
		atEnd := m.results[0].flushChunks
		var datagrams []finished
		for i, c := range item.datagrams {
			datagrams = append(datagrams, finished{shard: -1, local: i + 1, finishNs: m.s.reader.maxNs, conn: c})
		}
		var order []*finished
		if atEnd {
			order = m.finishedInOrder() // the datagrams' go with the chunks
		} else {
			order = m.finishedInOrder(datagrams...)
			datagrams = nil
		}
		emitted := 0
		for _, f := range order {
			emitted += m.emit(f)
		}
		m.recycle()
		if atEnd {
			n, ok := m.mergeFlushChunks(datagrams)
			if !ok {
				return
			}
			emitted += n
		}
		m.account(emitted)
		if m.emitErr != nil && m.err == nil {
			m.err = m.emitErr
			m.s.cancel()
		}
	}
}

// collect receives every shard's result for the batch; false when cancelled.
func (m *merger) collect() bool {
	for i, sh := range m.s.shards {
		select {
		case m.results[i] = <-sh.out:
		case <-m.s.ctx.Done():
			m.fail(m.s.ctx.Err())
			return false
		}
	}
	return true
}

// number numbers the connections begun in this batch, in order of first packet.
func (m *merger) number(item mergeItem) {
	var created []creation
	for _, r := range m.results {
		created = append(created, r.created...)
	}
	created = append(created, item.datagramsNew...)
	sort.Slice(created, func(i, j int) bool { return created[i].ordinal < created[j].ordinal })
	for _, c := range created {
		m.next++
		m.numbers[openKey(c.shard, c.local)] = m.next
	}
}

// snapshot returns the shards' snapshots of their open connections, numbered, in
// order of number.
func (m *merger) snapshot() []report.Connection {
	var conns []report.Connection
	for i := range m.results {
		for _, f := range m.results[i].snapshots {
			if index, ok := m.numbers[openKey(f.shard, f.local)]; ok {
				f.conn.Index = index
				conns = append(conns, f.conn)
			}
		}
	}
	sort.Slice(conns, func(i, j int) bool { return conns[i].Index < conns[j].Index })
	return conns
}

// finishedInOrder returns the connections the shards finished in this batch,
// and more, in the order they are emitted: by the time they finished, then by
// number.
func (m *merger) finishedInOrder(more ...finished) []*finished {
	var out []*finished
	for i := range m.results {
		for k := range m.results[i].finished {
			out = append(out, &m.results[i].finished[k])
		}
	}
	for k := range more {
		out = append(out, &more[k])
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].finishNs != out[j].finishNs {
			return out[i].finishNs < out[j].finishNs
		}
		return m.numberOf(out[i]) < m.numberOf(out[j])
	})
	return out
}

// numberOf is a connection's number, 0 when it has none (filtered out).
func (m *merger) numberOf(f *finished) int { return m.numbers[openKey(f.shard, f.local)] }

// emit hands a finished connection's report to Emit (building it if the shard
// did not), and forgets its number; 1 when it was one to report, 0 when it was
// filtered out (another server than the one asked for).
func (m *merger) emit(f *finished) int {
	key := openKey(f.shard, f.local)
	index, ok := m.numbers[key]
	delete(m.numbers, key)
	if !ok {
		return 0
	}
	if m.emitErr == nil && m.s.opts.Emit != nil {
		rc := f.report()
		rc.Index = index
		m.emitErr = m.s.opts.Emit(rc)
		if m.s.opts.Emitted != nil {
			m.s.opts.Emitted(index, f.ordinal)
		}
	}
	// Emitted: the report goes now, not with the rest of its batch (thousands
	// of keep-alive connections ending in one batch held all their reports).
	f.conn = report.Connection{}
	f.c, f.analyzer = nil, nil
	return 1
}

// recycle gives the shards' finished slices back to them for their next batches,
// but for one grown past maxSpareFinished: a batch in which thousands of
// connections finished at once (a capture's quiet minute, after which every
// connection still lingering is due) would otherwise keep its room, 520 bytes
// a connection, for the rest of the input (mixed at 4× the length: 8.75 MB).
func (m *merger) recycle() {
	for i := range m.results {
		if f := m.results[i].finished; cap(f) > 0 && cap(f) <= maxSpareFinished {
			clear(f)
			select {
			case m.s.shards[i].spare <- f[:0]:
			default:
			}
		}
	}
}

// maxSpareFinished is the most connections a finished slice given back for
// reuse holds room for: many times what a batch of a busy capture finishes
// (a few dozen per shard).
const maxSpareFinished = 512

// account adds the batch's counts to the stream's.
func (m *merger) account(emitted int) {
	var stats flow.Stats
	open := 0
	for _, r := range m.results {
		stats.Trailing += r.stats.Trailing
		stats.Duplicates += r.stats.Duplicates
		open += r.open
	}
	m.mu.Lock()
	m.counts.Trailing += stats.Trailing
	m.counts.Duplicates += stats.Duplicates
	m.counts.Open = open
	m.counts.Connections += int64(emitted)
	m.mu.Unlock()
}

// mergeFlushChunks emits, at the end of the input, the connections still open:
// each shard's chunks come in order of first packet (and the datagram
// connections in theirs); all finished at the same time, they are emitted by
// number, merging the shards' streams, a chunk at a time. It returns how many it
// emitted; false when cancelled.
func (m *merger) mergeFlushChunks(datagrams []finished) (int, bool) {
	heads := make([]chunkHead, len(m.s.shards)+1)
	heads[len(m.s.shards)] = chunkHead{items: datagrams, done: true}
	emitted := 0
	for {
		best := -1
		for i := range heads {
			if i < len(m.s.shards) && !m.refill(&heads[i], m.s.shards[i]) {
				return emitted, false
			}
			if len(heads[i].items) == 0 {
				continue
			}
			// A filtered-out connection has number 0: it goes first, and emit
			// drops it.
			if best < 0 || m.numberOf(&heads[i].items[0]) < m.numberOf(&heads[best].items[0]) {
				best = i
			}
		}
		if best < 0 {
			return emitted, true
		}
		emitted += m.emit(&heads[best].items[0])
		heads[best].items = heads[best].items[1:]
	}
}

// chunkHead is what is left of a shard's current chunk at the end of the input.
type chunkHead struct {
	items []finished
	done  bool // the shard's last chunk came
}

// refill takes the shard's next chunk when the head is empty and more are to
// come; false when cancelled.
func (m *merger) refill(h *chunkHead, sh *shard) bool {
	for len(h.items) == 0 && !h.done {
		select {
		case r, ok := <-sh.out:
			if !ok {
				h.done = true
				return true
			}
			h.items, h.done = r.finished, r.lastChunk
		case <-m.s.ctx.Done():
			m.fail(m.s.ctx.Err())
			return false
		}
	}
	return true
}
