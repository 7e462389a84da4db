// Package segscript writes the segments of one TCP connection by hand, for tests
// of the rounds and the window verdict: server data at absolute stream offsets,
// client acknowledgements and requests, in capture order, with times in
// milliseconds. It is a test helper: nothing outside tests uses it.
package segscript

import "github.com/slowstart/slowstart/flow"

// Script is the segments of one connection so far.
type Script struct {
	// Segs are the segments, in capture order.
	Segs   []flow.Segment
	served int64 // the server's highest offset so far
	// requested is the client's highest offset so far.
	requested int64
}

const msNs = 1_000_000

// Data adds a server frame of n bytes at t ms, after the last one.
func (s *Script) Data(t float64, n int) *Script {
	return s.DataAt(t, s.served, n)
}

// DataAt adds a server frame of n bytes at t ms at the given offset: new bytes,
// a hole before them, or a retransmission.
func (s *Script) DataAt(t float64, offset int64, n int) *Script {
	seg := flow.Segment{Dir: flow.ToClient, TimeNs: int64(t * msNs), Offset: offset, Len: n, HasAck: true}
	end := offset + int64(n)
	if end > s.served {
		start := max(offset, s.served)
		seg.NewOffset, seg.NewLen = start, int(end-start)
		seg.Hole = offset > s.served
		s.served = end
	} else {
		seg.Retransmission = true
	}
	s.Segs = append(s.Segs, seg)
	return s
}

// Burst adds n full frames of mss bytes, spaced gapMs apart, starting at t ms.
func (s *Script) Burst(t float64, n, mss int, gapMs float64) *Script {
	for i := range n {
		s.Data(t+float64(i)*gapMs, mss)
	}
	return s
}

// Ack adds a client acknowledgement of everything up to offset at t ms.
func (s *Script) Ack(t float64, offset int64) *Script {
	s.Segs = append(s.Segs, flow.Segment{Dir: flow.ToServer, TimeNs: int64(t * msNs), HasAck: true, AckOffset: offset, WindowBytes: 1 << 20})
	return s
}

// Request adds client data (a request) of n bytes at t ms at the given offset.
func (s *Script) Request(t float64, offset int64, n int) *Script {
	return s.RequestAck(t, offset, n, 0)
}

// RequestAck adds client data of n bytes at t ms that also acknowledges the
// server's stream up to ack.
func (s *Script) RequestAck(t float64, offset int64, n int, ack int64) *Script {
	s.Segs = append(s.Segs, flow.Segment{Dir: flow.ToServer, TimeNs: int64(t * msNs), Offset: offset, Len: n,
		NewOffset: offset, NewLen: n, HasAck: true, AckOffset: ack, WindowBytes: 1 << 20})
	s.requested = max(s.requested, offset+int64(n))
	return s
}

// Served is one past the server's highest stream byte so far.
func (s *Script) Served() int64 { return s.served }

// SetServed moves the server's highest stream byte, as if the capture had missed
// the bytes up to end.
func (s *Script) SetServed(end int64) { s.served = end }

// AckClocked adds what a window-limited sender does when the acknowledgements of
// its last round come back: from t ms, spacingMs apart, an acknowledgement of two
// more segments after offset from (delayed ACKs), each followed at once by the
// four segments it lets go in slow start (two freed, two grown), until n
// segments of mss bytes went out. A single acknowledgement followed by a whole
// round is no sender's.
func (s *Script) AckClocked(t float64, from int64, n, mss int, spacingMs float64) *Script {
	for k := 0; n > 0; k++ {
		at := t + float64(k)*spacingMs
		s.Ack(at, from+int64(2*(k+1)*mss))
		burst := min(4, n)
		s.Burst(at+0.001, burst, mss, 0.001)
		n -= burst
	}
	return s
}

// DupAck adds a duplicate acknowledgement of offset at t ms, without SACK blocks
// (a segment beyond a hole arrived, on a connection without SACK).
func (s *Script) DupAck(t float64, offset int64) *Script {
	s.Segs = append(s.Segs, flow.Segment{Dir: flow.ToServer, TimeNs: int64(t * msNs), HasAck: true, AckOffset: offset, DupAck: true, WindowBytes: 1 << 20})
	return s
}

// AckSACK adds a client acknowledgement up to offset at t ms that also selectively
// acknowledges the bytes from sackLeft to sackHigh (segments beyond a hole arrived).
func (s *Script) AckSACK(t float64, offset, sackLeft, sackHigh int64) *Script {
	s.Segs = append(s.Segs, flow.Segment{Dir: flow.ToServer, TimeNs: int64(t * msNs), HasAck: true, AckOffset: offset,
		SACKHigh: sackHigh, SACKBytes: sackHigh - max(sackLeft, offset), WindowBytes: 1 << 20})
	return s
}
