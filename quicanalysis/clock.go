package quicanalysis

import (
	"sort"

	"github.com/slowstart/slowstart/quic"
	"github.com/slowstart/slowstart/report"
)

// ackClock replays a connection's datagrams as the server lived them: each client
// datagram becomes known to the server shift nanoseconds after its capture time (0 at
// the server's vantage point, about a round trip at the client's), and each server
// datagram belongs to round 1 + the highest round of the server packets the client's
// known acknowledgements name. The parts that do not depend on the shift (which
// datagrams carry new data, which packets are in flight) are computed once.
type ackClock struct {
	c           *conn
	base        []serverDatagram // timing-free fields only
	events      []clientEvent    // knownNs is the capture time: replay adds the shift
	bySpace     [3][]sentPacket
	maxDatagram int
	rttNs       int64
	startNs     int64
}

// clockReading is one replay: the server's datagrams with their rounds and what the
// server knew when it sent each, and the rounds they make.
type clockReading struct {
	shiftNs     int64
	dgs         []serverDatagram
	validated   bool
	validatedNs int64 // when the server knew the address was validated (known time)
	rounds      []report.Round
	indexOf     map[int]int // raw round number → reported index
	firsts      []int       // each round's first and last datagram (index in dgs)
	lasts       []int
	// excess is the most the server went past three times what it had received,
	// before the address was validated; excessAt the bytes it had sent then.
	excess, excessAt int
	// acks are the client datagrams that newly acknowledged ack-eliciting packets,
	// as the server came to know them.
	acks []ackEvent
	// unexplained is the first server datagram that ends a silence of a quarter round
	// trip or more with new data though no client datagram reached the server during
	// the silence; -1 for none. A server that was held back by its window or by the
	// amplification limit cannot go on without one.
	unexplained int
}

// ackEvent is a client datagram that acknowledged ack-eliciting packets for the first
// time: known before server datagram beforeDatagram was sent, with priorInFlight
// bytes in flight just before it.
type ackEvent struct {
	beforeDatagram int
	priorInFlight  int
	newlyAcked     int
}

func newAckClock(c *conn, rttNs, startNs int64) *ackClock {
	ck := &ackClock{c: c, rttNs: rttNs, startNs: startNs}
	ck.events = make([]clientEvent, len(c.clientDgrams))
	for i, d := range c.clientDgrams {
		ev := clientEvent{knownNs: d.timeNs, bytes: d.bytes, packets: d.packets}
		for _, pi := range d.packets {
			if c.packets[pi].Type == quic.PacketHandshake {
				ev.handshake = true
			}
		}
		ck.events[i] = ev
	}
	ck.base = make([]serverDatagram, len(c.serverDgrams))
	crypto, streams := byteRanges{}, byteRanges{}
	for i, d := range c.serverDgrams {
		sd := serverDatagram{timeNs: d.timeNs, bytes: d.bytes}
		ck.maxDatagram = max(ck.maxDatagram, d.bytes)
		oldData := false
		for _, pi := range d.packets {
			p := &c.packets[pi]
			if p.Decrypted && p.Space <= quic.SpaceApplication {
				ck.bySpace[p.Space] = append(ck.bySpace[p.Space], sentPacket{p.Number, pi, i})
			}
			if p.AckEliciting() || !p.Decrypted {
				sd.inFlight = true // an undecrypted packet is taken as ack-eliciting
			}
			for _, f := range p.Frames {
				switch f.Type {
				case quic.FrameCrypto:
					if crypto.add(uint64(p.Space), f.Offset+f.Length) {
						// 1-RTT CRYPTO frames carry post-handshake messages
						// (NewSessionTicket): data, not the handshake.
						sd.newData = true
						sd.newCrypto = sd.newCrypto || p.Space != quic.SpaceApplication
					} else {
						oldData = true
					}
				case quic.FrameStream:
					if streams.add(f.StreamID, f.Offset+f.Length) || (f.Length == 0 && f.Fin) {
						sd.newData = true
						if f.StreamID%4 == 0 {
							sd.newStream = true
						}
					} else {
						oldData = true
					}
				}
			}
		}
		sd.retx = oldData && !sd.newData
		ck.base[i] = sd
	}
	for s := range ck.bySpace {
		sort.Slice(ck.bySpace[s], func(a, b int) bool { return ck.bySpace[s][a].pn < ck.bySpace[s][b].pn })
	}
	return ck
}

// replay puts the server's datagrams in rounds with the client's datagrams known
// shiftNs after they were captured.
func (ck *ackClock) replay(shiftNs int64) *clockReading {
	c := ck.c
	r := &clockReading{shiftNs: shiftNs, dgs: append([]serverDatagram(nil), ck.base...), unexplained: -1}
	dgs := r.dgs
	roundOfLargest := func(space quic.Space, largest int64) int {
		list := ck.bySpace[space]
		k := sort.Search(len(list), func(i int) bool { return list[i].pn > largest }) - 1
		if k < 0 {
			return 0
		}
		return dgs[list[k].datagram].round
	}
	acked := map[int]bool{} // server packets acknowledged, by index
	inFlight := 0
	// ackRange removes the packets of an ACK range from flight and returns how many
	// ack-eliciting packets it newly acknowledged.
	ackRange := func(space quic.Space, rg quic.AckRange) int {
		list := ck.bySpace[space]
		newly := 0
		k := sort.Search(len(list), func(i int) bool { return list[i].pn >= rg.Smallest })
		for ; k < len(list) && list[k].pn <= rg.Largest; k++ {
			pi := list[k].packet
			if !acked[pi] {
				acked[pi] = true
				if c.packets[pi].AckEliciting() {
					inFlight -= c.packets[pi].Bytes
					newly++
				}
			}
		}
		return newly
	}

	next, received, sentBytes, maxAckedRound := 0, 0, 0, 0
	var releasedNs int64
	for i := range dgs {
		sd := &dgs[i]
		knownBefore := next
		for next < len(ck.events) && ck.events[next].knownNs+shiftNs <= sd.timeNs {
			ev := ck.events[next]
			known := ev.knownNs + shiftNs
			next++
			prior, newly := inFlight, 0
			received += ev.bytes
			if ev.handshake && !r.validated {
				r.validated, r.validatedNs = true, known
			}
			for _, pi := range ev.packets {
				p := &c.packets[pi]
				for _, f := range p.Frames {
					if f.Type != quic.FrameAck && f.Type != quic.FrameAckECN {
						continue
					}
					if rd := roundOfLargest(p.Space, f.AckRanges[0].Largest); rd > maxAckedRound {
						maxAckedRound, releasedNs = rd, known
					}
					for _, rg := range f.AckRanges {
						newly += ackRange(p.Space, rg)
					}
				}
			}
			if newly > 0 {
				r.acks = append(r.acks, ackEvent{beforeDatagram: i, priorInFlight: prior, newlyAcked: newly})
			}
		}
		if i > 0 && r.unexplained < 0 && next == knownBefore && ck.resumes(i) {
			r.unexplained = i
		}
		sd.receivedBefore, sd.sentBefore, sd.validated = received, sentBytes, r.validated
		sd.round = maxAckedRound + 1
		sd.releasedNs = releasedNs
		sentBytes += sd.bytes
		for _, pi := range c.serverDgrams[i].packets {
			if p := &c.packets[pi]; p.AckEliciting() {
				inFlight += p.Bytes
			}
		}
		sd.inFlightAfter = inFlight
	}
	// RFC 9000 §8.1: at most three times the bytes received, until the address is
	// validated. Some servers check the limit before each datagram, not within it.
	for _, sd := range dgs {
		if sd.validated {
			continue
		}
		over := sd.sentBefore + sd.bytes - 3*sd.receivedBefore
		if over > r.excess {
			r.excess, r.excessAt = over, sd.sentBefore+sd.bytes
		}
	}
	r.rounds, r.indexOf, r.firsts, r.lasts = buildRounds(dgs, ck.maxDatagram, ck.rttNs, ck.startNs)
	return r
}

// settle looks, at the client's vantage point, for a reading in which the server
// never goes on after a silence without having heard from the client. The smallest
// round trip the acknowledgements show includes the server's own delays (reading its
// socket under load, signing, running its application) when every acknowledgement of
// the connection waited for one; the client's datagrams are then known too late, and
// a flight released by one of them falls into the round before: the rounds of a
// response merge, a flight held back by the amplification limit reads as sent past
// it. A server silent for a quarter round trip or more was held back (by its window,
// the amplification limit or its application) and goes on when something reaches it.
// When the reading has it go on with nothing new from the client since it fell silent,
// the shift is shortened to make the earliest client datagram that could have
// released it known in time; never below three quarters of the round trip (the
// margin package rounds allows for TCP), so that a server that went on by itself (a
// timer, its application) is not taken for one released by the client. It returns r
// itself when no shorter reading is needed or possible.
func (ck *ackClock) settle(r *clockReading) (*clockReading, bool) {
	floor := ck.rttNs - ck.rttNs/4
	changed := false
	j := r.unexplained
	for range 16 {
		if j < 0 {
			break
		}
		at := ck.base[j].timeNs
		shift := int64(-1)
		for _, ev := range ck.events {
			if ev.knownNs+r.shiftNs > at && ev.knownNs+floor <= at {
				shift = at - ev.knownNs // the earliest client datagram not known yet
				break
			}
		}
		if shift < 0 {
			// Nothing the client sent could have released it: the server went on by
			// itself (a timer, its application). Look past it.
			j = ck.nextUnexplained(r, j)
			continue
		}
		r, changed = ck.replay(shift), true
		j = r.unexplained
	}
	return r, changed
}

// resumes reports whether server datagram i ends a silence of a quarter round trip or
// more with new data. A datagram that only repeats data or probes (PING) after a
// silence is the server's own timer (a probe timeout), which nothing from the
// client released.
func (ck *ackClock) resumes(i int) bool {
	sd := ck.base[i]
	return i > 0 && sd.timeNs-ck.base[i-1].timeNs >= ck.rttNs/4 && sd.inFlight && sd.newData && !sd.retx
}

// nextUnexplained finds the next server datagram after j that ends a silence with
// nothing known from the client during it, in reading r.
func (ck *ackClock) nextUnexplained(r *clockReading, j int) int {
	next := 0
	for i := range r.dgs {
		prevKnown := next
		for next < len(ck.events) && ck.events[next].knownNs+r.shiftNs <= r.dgs[i].timeNs {
			next++
		}
		if i > j && next == prevKnown && ck.resumes(i) {
			return i
		}
	}
	return -1
}

// firstHTTPRound is the index (in r.rounds) of the first round of response data; -1
// for none.
func (r *clockReading) firstHTTPRound() int {
	for k, rd := range r.rounds {
		if rd.Phase == report.PhaseHTTP {
			return k
		}
	}
	return -1
}

// windowGrowth bounds how much the window may have grown by the end of round k: it
// counts the ack-eliciting packets newly acknowledged before the round's last datagram
// by acknowledgements that found the sender limited by its window, each of which may
// have grown it by a datagram in slow start (by its bytes in RFC 9002 §7.3.1, by a
// whole datagram in quic-go and Chromium). A sender is taken as limited unless its
// bytes in flight were at most half the window and more than three datagrams below it
// (RFC 9002 §7.8: no growth while the window is not used; quic-go, Chromium and Linux
// grow only past half of it in slow start). The window is at least lowest bytes, so
// an acknowledgement that came with at most half of that in flight grew nothing; the
// bound is narrowed until it holds still. It returns the packets that may have grown
// the window, those of them acknowledged while round k was being sent, and the
// window's lower bound lowest: more than the reading less a datagram for the last
// datagram's overshoot and a datagram per such packet.
func (r *clockReading) windowGrowth(k, maxDatagram int) (packets, during, lowest int) {
	reading := r.rounds[k].InFlightBytes
	packets = -1
	for {
		n, d := 0, 0
		for _, a := range r.acks {
			if a.beforeDatagram > r.lasts[k] {
				break
			}
			if packets >= 0 && 2*a.priorInFlight <= lowest && lowest-a.priorInFlight > 3*maxDatagram {
				continue
			}
			n += a.newlyAcked
			if a.beforeDatagram > r.firsts[k] {
				d += a.newlyAcked
			}
		}
		next := max(1, reading-(n+1)*maxDatagram+1)
		if n == packets {
			return n, d, next
		}
		packets, during, lowest = n, d, next
	}
}
