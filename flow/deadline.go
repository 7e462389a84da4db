package flow

import (
	"container/heap"
	"net/netip"

	"github.com/slowstart/slowstart/capture"
)

// deadline is when an open connection may be finished. Each connection has at
// most one entry (Conn.heapPos says where), removed when it is finished, so a
// finished connection is never kept alive by the heap.
type deadline struct {
	atNs int64
	conn *Conn
}

// deadlineHeap orders deadlines, soonest first: finishing connections costs
// O(log n) each, whatever their number.
type deadlineHeap []deadline

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].atNs < h[j].atNs }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].conn.heapPos, h[j].conn.heapPos = i+1, j+1
}
func (h *deadlineHeap) Push(x any) {
	e := x.(deadline)
	e.conn.heapPos = len(*h) + 1
	*h = append(*h, e)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = deadline{}
	*h = old[:len(old)-1]
	e.conn.heapPos = 0
	return e
}

// set puts c's deadline at atNs, moving its entry if it has one.
func (h *deadlineHeap) set(c *Conn, atNs int64) {
	if c.heapPos > 0 {
		(*h)[c.heapPos-1].atNs = atNs
		heap.Fix(h, c.heapPos-1)
		return
	}
	heap.Push(h, deadline{atNs: atNs, conn: c})
}

// remove takes c's entry off the heap, if it has one.
func (h *deadlineHeap) remove(c *Conn) {
	if c.heapPos > 0 {
		heap.Remove(h, c.heapPos-1)
	}
}

func (h *deadlineHeap) pop() deadline { return heap.Pop(h).(deadline) }

// attempt is a connection that is only SYNs from its client so far, kept small: a
// SYN flood or a scan makes millions of them.
type attempt struct {
	key          compactKey // its client is key's a, or its b with clientIsB
	index        int32
	heapPos      int32 // 1 + its place in Tracker.attemptDeadlines, 0 when not there
	firstOrdinal int64
	firstNs      int64 // the first SYN
	lastNs       int64 // the latest SYN (or copy of one)
	isn          uint32
	count        int32 // SYNs sent (copies not counted)
	duplicates   int32
	tsVal, tsEcr uint32
	mss          uint16
	window       uint16
	ipID         uint16
	windowScale  int8
	flags        uint8 // the SYN's flags (ECE and CWR with ECN)
	clientIsB    bool
	sackOK, ts   bool
	done         bool
}

// endpoints are the attempt's client and server.
func (at *attempt) endpoints() (client, server netip.AddrPort) {
	k := at.key.full()
	if at.clientIsB {
		return k.b, k.a
	}
	return k.a, k.b
}

// compactKey is a connKey in 38 bytes instead of 64 (a netip.AddrPort carries a
// zone pointer and padding): the key of a SYN-only attempt, of which a SYN flood
// makes millions. Addresses of captured packets have no zone.
type compactKey struct {
	a, b   [16]byte
	pa, pb uint16
	a4, b4 bool // the address is IPv4 (4-byte form), not IPv6
}

func compact(k connKey) compactKey {
	return compactKey{a: k.a.Addr().As16(), b: k.b.Addr().As16(), pa: k.a.Port(), pb: k.b.Port(), a4: k.a.Addr().Is4(), b4: k.b.Addr().Is4()}
}

func (k compactKey) full() connKey {
	addr := func(b [16]byte, is4 bool) netip.Addr {
		a := netip.AddrFrom16(b)
		if is4 {
			return a.Unmap()
		}
		return a
	}
	return connKey{netip.AddrPortFrom(addr(k.a, k.a4), k.pa), netip.AddrPortFrom(addr(k.b, k.b4), k.pb)}
}

// options are the SYN's TCP options (a SYN carries no SACK blocks).
func (at *attempt) options() capture.TCPOptions {
	return capture.TCPOptions{MSS: at.mss, WindowScale: at.windowScale, SACKPermitted: at.sackOK, HasTimestamps: at.ts, TSVal: at.tsVal, TSEcr: at.tsEcr}
}

type attemptDeadline struct {
	atNs    int64
	attempt *attempt
}

type attemptHeap []attemptDeadline

func (h attemptHeap) Len() int           { return len(h) }
func (h attemptHeap) Less(i, j int) bool { return h[i].atNs < h[j].atNs }
func (h attemptHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].attempt.heapPos, h[j].attempt.heapPos = int32(i+1), int32(j+1)
}
func (h *attemptHeap) Push(x any) {
	e := x.(attemptDeadline)
	e.attempt.heapPos = int32(len(*h) + 1)
	*h = append(*h, e)
}
func (h *attemptHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	e.attempt.heapPos = 0
	*h = old[:len(old)-1]
	return e
}
func (h *attemptHeap) push(e attemptDeadline) { heap.Push(h, e) }
func (h *attemptHeap) pop() attemptDeadline   { return heap.Pop(h).(attemptDeadline) }

// newAttempt keeps a connection's first SYN in the compact form.
func (t *Tracker) newAttempt(key connKey, src, dst netip.AddrPort, p *capture.Packet) {
	t.next++
	o := &p.Options
	at := &attempt{key: compact(key), clientIsB: src == key.b, index: int32(t.next), firstOrdinal: t.ordinal,
		firstNs: p.TimestampNs, lastNs: p.TimestampNs, isn: p.Seq, count: 1,
		tsVal: o.TSVal, tsEcr: o.TSEcr, mss: o.MSS, windowScale: o.WindowScale, sackOK: o.SACKPermitted, ts: o.HasTimestamps,
		window: p.Window, ipID: p.IPID, flags: p.Flags}
	t.attempts[at.key] = at
	if t.created != nil {
		t.created(int(at.index), at.firstOrdinal, src, dst)
	}
	if t.attemptIdleNs > 0 {
		t.attemptDeadlines.push(attemptDeadline{atNs: at.lastNs + t.attemptIdleNs, attempt: at})
	}
}

// addToAttempt takes a client SYN of an attempt: a copy, or the SYN sent again
// with the same ISN; false for a SYN with another ISN (the connection then goes on
// as a full one, as a full one would take it).
func (t *Tracker) addToAttempt(at *attempt, p *capture.Packet) bool {
	if p.Seq != at.isn {
		return false
	}
	elapsed := p.TimestampNs - at.lastNs
	copyOf := elapsed >= 0 && ((p.IPID != 0 && p.IPID == at.ipID && elapsed <= duplicateIPIDWindowNs) ||
		(p.IPID == 0 && elapsed <= duplicateSYNWindowNs && p.Options.TSVal == at.tsVal))
	if copyOf {
		at.duplicates++
		t.stats.Duplicates++
	} else {
		at.count++
	}
	at.lastNs, at.ipID = p.TimestampNs, p.IPID
	return true
}

// promote makes an attempt a full connection: its handler sees its first SYN, and
// its SYN count and times are the attempt's.
func (t *Tracker) promote(at *attempt) *Conn {
	at.done = true
	delete(t.attempts, at.key)
	if at.heapPos > 0 {
		// Off the deadline heap now, not when its deadline (an hour later by
		// default) comes: every connection of a capture began as an attempt,
		// and the heap held them all (16 MB for mixed at 4× the length).
		heap.Remove(&t.attemptDeadlines, int(at.heapPos-1))
	}
	client, server := at.endpoints()
	syn := capture.Packet{TimestampNs: at.firstNs, Src: client.Addr(), Dst: server.Addr(),
		SrcPort: client.Port(), DstPort: server.Port(), Seq: at.isn,
		Protocol: capture.ProtocolTCP, Window: at.window, Options: at.options(), IPID: at.ipID, HeaderLen: 20, Flags: at.flags}
	c := t.makeConn(client, server, &syn, int(at.index), at.firstOrdinal)
	// The latest SYN is the one a later copy must be recognized by, as a full
	// connection would have recorded it.
	latest := syn
	latest.TimestampNs = at.lastNs
	c.isDuplicate(ToServer, &latest)
	t.segment(c, ToServer, &syn)
	d := &c.Dirs[ToServer]
	d.SYNCount, d.Duplicates = at.count, at.duplicates
	d.Packets = int64(at.count + at.duplicates)
	c.lastSYNNs, c.LastNs = at.lastNs, at.lastNs
	if c.heapPos > 0 {
		t.schedule(c) // from the latest SYN, not the first
	}
	return c
}
