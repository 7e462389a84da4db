package analysis

import (
	"container/heap"
	"context"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"testing"

	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/report"
)

// simPath describes a connection for the packet-sequence simulator: an HTTP/1.1
// GET answered by a Linux-like slow-start sender over a path with a fixed delay.
type simPath struct {
	iw            int     // server's initial window, segments
	mss           int     // payload bytes per full segment
	rttMs         float64 // round-trip propagation delay
	rateMbps      float64 // bottleneck rate server→client; 0: unlimited
	responseBytes int     // bytes after the response header
	vantage       string  // "client" or "server"
	delayedAck    bool    // the client acknowledges every second segment (and the last)
	groMerge      int     // the client-side capture shows up to this many segments merged
	thinkAfter    int     // response bytes sent before the server pauses
	thinkMs       float64 // the pause
	rwndBytes     int     // client receive window (fixed); 0: 1 MB
	dropSegment   int     // 1-based index of a server data segment lost once; 0: none
	noTimestamps  bool
	ipv6          bool
	requests      int // pipelined requests on the connection (default 1)
}

type simEvent struct {
	atNs int64
	seq  int // tie-break: order of scheduling
	fn   func()
}

type simQueue []*simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	if q[i].atNs != q[j].atNs {
		return q[i].atNs < q[j].atNs
	}
	return q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(*simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type simulator struct {
	p        simPath
	q        simQueue
	n        int
	nowNs    int64
	captured []capture.Packet
	client   netip.AddrPort
	server   netip.AddrPort
	// server state
	data       []byte // the whole server stream (headers + bodies)
	sndUna     int
	sndNxt     int
	cwnd       int
	segsSent   int
	available  int // bytes the application has handed to TCP
	linkFreeNs int64
	retxTimer  bool
	// client state
	rcvNxt       int
	unackedSegs  int
	clientTS     uint32
	serverTS     uint32
	lastClientTS uint32 // latest client TSval the server received
	lastServerTS uint32
	ooo          map[int]int // out-of-order segments held by the client: seq → len
	merge        []capture.Packet
	reqLen       int
}

const simISNClient, simISNServer = 1000, 5000

func simulate(t testing.TB, p simPath) []capture.Packet {
	t.Helper()
	if p.mss == 0 {
		p.mss = 1448
	}
	if p.rwndBytes == 0 {
		p.rwndBytes = 1 << 20
	}
	if p.requests == 0 {
		p.requests = 1
	}
	s := &simulator{p: p, cwnd: p.iw, ooo: map[int]int{}}
	if p.ipv6 {
		s.client = netip.MustParseAddrPort("[2001:db8::2]:40000")
		s.server = netip.MustParseAddrPort("[2001:db8::1]:80")
	} else {
		s.client = netip.MustParseAddrPort("192.0.2.2:40000")
		s.server = netip.MustParseAddrPort("192.0.2.1:80")
	}
	for i := 0; i < p.requests; i++ {
		hdr := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", p.responseBytes)
		s.data = append(s.data, hdr...)
		s.data = append(s.data, make([]byte, p.responseBytes)...)
	}
	s.run()
	return s.captured
}

func (s *simulator) oneWayNs() int64 { return int64(s.p.rttMs * 1e6 / 2) }

func (s *simulator) at(atNs int64, fn func()) {
	s.n++
	heap.Push(&s.q, &simEvent{atNs: atNs, seq: s.n, fn: fn})
}

func (s *simulator) run() {
	ow := s.oneWayNs()
	// Handshake: SYN from the client at 0.
	s.clientTS, s.serverTS = 100, 900000
	s.at(0, func() {
		s.record("client", s.pkt(true, simISNClient, 0, capture.FlagSYN, nil, 0))
		s.at(s.nowNs+ow, func() {
			s.record("server", s.pkt(true, simISNClient, 0, capture.FlagSYN, nil, 0))
			s.lastClientTS = s.clientTS
			s.record("server", s.pkt(false, simISNServer, simISNClient+1, capture.FlagSYN|capture.FlagACK, nil, 0))
			s.at(s.nowNs+ow, func() {
				s.record("client", s.pkt(false, simISNServer, simISNClient+1, capture.FlagSYN|capture.FlagACK, nil, 0))
				s.clientAck()
				s.sendRequests()
			})
		})
	})
	for s.q.Len() > 0 {
		e := heap.Pop(&s.q).(*simEvent)
		s.nowNs = e.atNs
		s.clientTS = 100 + uint32(s.nowNs/1e6)
		s.serverTS = 900000 + uint32(s.nowNs/1e6)
		e.fn()
	}
	s.flushMerge()
	sort.SliceStable(s.captured, func(i, j int) bool { return s.captured[i].TimestampNs < s.captured[j].TimestampNs })
}

// pkt builds a packet; fromClient selects the direction.
func (s *simulator) pkt(fromClient bool, seq, ack uint32, flags uint8, payload []byte, length int) capture.Packet {
	p := capture.Packet{Seq: seq, Ack: ack, Flags: flags, Window: 65535, PayloadLen: length, Payload: payload}
	p.Options.WindowScale = -1
	if fromClient {
		p.Src, p.SrcPort, p.Dst, p.DstPort = s.client.Addr(), s.client.Port(), s.server.Addr(), s.server.Port()
		p.Window = uint16(min(s.p.rwndBytes>>4, 65535))
		if !s.p.noTimestamps {
			p.Options.HasTimestamps, p.Options.TSVal, p.Options.TSEcr = true, s.clientTS, s.lastServerTS
		}
	} else {
		p.Src, p.SrcPort, p.Dst, p.DstPort = s.server.Addr(), s.server.Port(), s.client.Addr(), s.client.Port()
		if !s.p.noTimestamps {
			p.Options.HasTimestamps, p.Options.TSVal, p.Options.TSEcr = true, s.serverTS, s.lastClientTS
		}
	}
	if flags&capture.FlagSYN != 0 {
		p.Options.MSS = uint16(s.p.mss)
		if !s.p.noTimestamps {
			p.Options.MSS += 12
		}
		p.Options.WindowScale = 4
		p.Options.SACKPermitted = true
		p.Window = 65535
	}
	return p
}

func (s *simulator) record(where string, p capture.Packet) {
	if where != s.p.vantage {
		return
	}
	p.TimestampNs = s.nowNs + 1_700_000_000_000_000_000
	if p.Payload != nil {
		p.Payload = append([]byte(nil), p.Payload...)
	}
	s.captured = append(s.captured, p)
}

func (s *simulator) sendRequests() {
	var reqs []byte
	for i := 0; i < s.p.requests; i++ {
		reqs = append(reqs, fmt.Sprintf("GET /r%d HTTP/1.1\r\nHost: x\r\n\r\n", i)...)
	}
	s.reqLen = len(reqs)
	p := s.pkt(true, simISNClient+1, simISNServer+1, capture.FlagACK|capture.FlagPSH, reqs, len(reqs))
	s.record("client", p)
	s.at(s.nowNs+s.oneWayNs(), func() {
		s.record("server", p)
		s.lastClientTS = p.Options.TSVal
		// The application answers at once, but may pause after thinkAfter bytes.
		if s.p.thinkAfter > 0 && s.p.thinkMs > 0 {
			s.available = len(s.data) - s.p.responseBytes*s.p.requests + s.p.thinkAfter
			s.at(s.nowNs+int64(s.p.thinkMs*1e6), func() {
				s.available = len(s.data)
				s.trySend()
			})
		} else {
			s.available = len(s.data)
		}
		s.trySend()
	})
}

// trySend sends what cwnd, the receive window and the application allow.
func (s *simulator) trySend() {
	for s.sndNxt < s.available {
		inflightSegs := (s.sndNxt - s.sndUna + s.p.mss - 1) / s.p.mss
		if inflightSegs >= s.cwnd {
			return
		}
		n := min(s.p.mss, s.available-s.sndNxt)
		if s.sndNxt+n-s.sndUna > s.p.rwndBytes {
			return
		}
		s.sendSegment(s.sndNxt, n, false)
		s.sndNxt += n
	}
}

func (s *simulator) sendSegment(off, n int, retx bool) {
	seq := uint32(simISNServer + 1 + off)
	p := s.pkt(false, seq, uint32(simISNClient+1+s.reqLen), capture.FlagACK, s.data[off:off+n], n)
	s.record("server", p)
	s.segsSent++
	if !retx && s.p.dropSegment == s.segsSent {
		// Lost on the way: retransmit after a timeout of 3 RTTs.
		if !s.retxTimer {
			s.retxTimer = true
			s.at(s.nowNs+int64(3*s.p.rttMs*1e6), func() {
				s.cwnd = 1
				s.sendSegment(off, n, true)
			})
		}
		return
	}
	depart := s.nowNs
	if s.p.rateMbps > 0 {
		ser := int64(float64((n+52)*8) / s.p.rateMbps * 1e3)
		depart = max(depart, s.linkFreeNs) + ser
		s.linkFreeNs = depart
	}
	s.at(depart+s.oneWayNs(), func() { s.clientReceive(p) })
}

func (s *simulator) clientReceive(p capture.Packet) {
	s.lastServerTS = p.Options.TSVal
	s.recordMerged(p)
	off := int(p.Seq - simISNServer - 1)
	if off == s.rcvNxt {
		s.rcvNxt += p.PayloadLen
		for {
			n, ok := s.ooo[s.rcvNxt]
			if !ok {
				break
			}
			delete(s.ooo, s.rcvNxt)
			s.rcvNxt += n
		}
	} else if off > s.rcvNxt {
		s.ooo[off] = p.PayloadLen
		s.clientAck() // duplicate ACK at once
		return
	}
	s.unackedSegs++
	if !s.p.delayedAck || s.unackedSegs >= 2 || s.rcvNxt >= len(s.data) {
		s.clientAck()
		return
	}
	mark := s.rcvNxt
	s.at(s.nowNs+40e6, func() {
		if s.rcvNxt == mark && s.unackedSegs > 0 {
			s.clientAck()
		}
	})
}

// recordMerged records a server segment at the client, merging consecutive ones as
// GRO does when asked.
func (s *simulator) recordMerged(p capture.Packet) {
	if s.p.vantage != "client" || s.p.groMerge <= 1 {
		s.record("client", p)
		return
	}
	if n := len(s.merge); n > 0 {
		last := s.merge[n-1]
		if last.Seq+uint32(last.PayloadLen) != p.Seq || n >= s.p.groMerge || s.nowNs+1_700_000_000_000_000_000-last.TimestampNs > 200_000 {
			s.flushMerge()
		}
	}
	p.TimestampNs = s.nowNs + 1_700_000_000_000_000_000
	s.merge = append(s.merge, p)
}

func (s *simulator) flushMerge() {
	if len(s.merge) == 0 {
		return
	}
	m := s.merge[0]
	m.Payload = append([]byte(nil), m.Payload...)
	for _, x := range s.merge[1:] {
		m.PayloadLen += x.PayloadLen
		m.Payload = append(m.Payload, x.Payload...)
	}
	m.TimestampNs = s.merge[len(s.merge)-1].TimestampNs
	s.captured = append(s.captured, m)
	s.merge = s.merge[:0]
}

func (s *simulator) clientAck() {
	s.unackedSegs = 0
	p := s.pkt(true, uint32(simISNClient+1+s.reqLen), uint32(simISNServer+1+s.rcvNxt), capture.FlagACK, nil, 0)
	if s.reqLen == 0 {
		p.Seq = simISNClient + 1
	}
	s.flushMerge()
	s.record("client", p)
	s.at(s.nowNs+s.oneWayNs(), func() {
		s.record("server", p)
		s.lastClientTS = p.Options.TSVal
		ack := int(p.Ack - simISNServer - 1)
		if ack > s.sndUna {
			newly := (ack - s.sndUna + s.p.mss - 1) / s.p.mss
			s.sndUna = ack
			s.cwnd += newly // slow start
			s.trySend()
		}
	})
}

// sliceSource replays packets as a PacketSource.
type sliceSource struct {
	pkts []capture.Packet
	i    int
}

func (s *sliceSource) Next(p *capture.Packet) error {
	if s.i >= len(s.pkts) {
		return io.EOF
	}
	*p = s.pkts[s.i]
	s.i++
	return nil
}

func analyzePackets(t testing.TB, pkts []capture.Packet) *report.Report {
	t.Helper()
	rep, err := Run(context.Background(), &sliceSource{pkts: pkts}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func itoa(n int) string     { return fmt.Sprint(n) }
func ftoa(f float64) string { return fmt.Sprintf("%.1f", f) }
