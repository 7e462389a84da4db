package quicanalysis

import (
	"container/heap"
	"fmt"
	"sort"
	"testing"

	"github.com/slowstart/slowstart/quic"
)

// simConfig describes a simulated QUIC connection: a client fetching one response over
// a path with a fixed delay each way, and a server that keeps to the amplification
// limit and a congestion window that grows in slow start as quic-go's does. The
// simulation records, as it runs, what the server knew when it sent each datagram,
// so its rounds, the limit that ended each, and the window are known without reading
// the packets: they are the expected values of the tests.
type simConfig struct {
	name             string
	rttMs            float64
	initialBytes     int // the client's first datagram: one Initial, padded
	maxDatagram      int // the server's datagrams (quic-go: 1,280)
	certificateBytes int // the server's Certificate message
	windowBytes      int // the server's initial congestion window
	bodyBytes        int
	// turnaroundMs delays the server's handling of every datagram it receives (a
	// loaded server reading its socket late); acknowledgement round trips then look
	// that much longer than the path's.
	turnaroundMs float64
	// signMs and appMs delay the server's answer to the ClientHello (its signature)
	// and to the request (its application); the acknowledgements that go with those
	// answers, all the client's round-trip samples, are that much late, while the
	// rest of a flight the amplification limit held back leaves at once.
	signMs, appMs float64
	// slowReadMs delays, beyond turnaroundMs, the server's reading of the client
	// datagrams that hold ack-eliciting packets (the ClientHello, the Finished with
	// the request): every round-trip sample of the client is late, while the
	// acknowledgements that release the server's flights are read at once.
	slowReadMs float64
	// strict servers never send past three times what they received; otherwise the
	// limit is checked before each datagram, which may then pass it (quic-go).
	strict bool
	// lateAppAck: the client does not acknowledge the server's first 1-RTT packet in
	// its Finished datagram but 25 ms later (its ACK delay), while the server sends
	// the response: the window grows during the response's first round.
	lateAppAck bool
	// ackEvery: the client acknowledges every N ack-eliciting 1-RTT packets (2).
	ackEvery int
}

// simTruth is what the simulated server did.
type simTruth struct {
	clientView, serverView []Datagram // the datagrams as captured at each end
	rounds                 []simRound
	handshakeRounds        int // rounds that carried new handshake bytes
	amplificationRounds    int // handshake rounds the amplification limit ended
	firstFlightBytes       int // bytes sent before any acknowledgement arrived
	clientInitialBytes     int
	initialWindowBytes     int
	// windowGrew: the server's window had grown by the end of the response's first
	// round (acknowledgements while it was limited by the window).
	windowGrew bool
}

type simRound struct {
	index     int
	bytes     int
	datagrams int
	limit     string // "amplification", "cwnd", "end"
	handshake bool
}

type simPacket struct {
	space        quic.Space
	pn           int64
	bytes        int
	ackEliciting bool
	round        int
	acked        bool
}

// simDatagram is one datagram in flight: the bytes and what the receiving end needs.
type simDatagram struct {
	fromClient bool
	sentNs     int64
	payload    []byte
	packets    []*simPacket
	// client datagrams: the acknowledgements (per space, 0..largest) and contents.
	acks      [3]int64 // -1: none
	handshake bool     // holds a Handshake packet (validates the address)
	hello     bool
	finished  bool
	appPN     int64 // the client's 1-RTT packet with the request
	// server datagrams
	round        int
	newHandshake bool
	response     bool // carries response bytes
	cwnd         int  // the server's window when it sent the datagram
}

type simEvent struct {
	atNs int64
	seq  int
	run  func()
}

type simQueue []simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	if q[i].atNs != q[j].atNs {
		return q[i].atNs < q[j].atNs
	}
	return q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type sim struct {
	cfg    simConfig
	w      *wire
	oneWay int64
	queue  simQueue
	seq    int
	clock  int64 // the time of the event being run
	truth  *simTruth
	// the server
	received, sent  int
	validated       bool
	cwnd, inFlight  int
	sentPackets     map[[2]int64]*simPacket
	maxAckedRound   int
	pendingCrypto   [2][]byte // Initial, Handshake
	cryptoOffset    [2]uint64
	pendingApp      []byte // 1-RTT stream 0 (the response) after the control stream
	pendingControl  []byte // stream 3, the server's HTTP/3 control stream
	appOffset       uint64
	controlOffset   uint64
	handshakeDone   bool
	ackInitialTo    int64 // the client Initial to acknowledge, -1 none
	ackAppPN        int64 // the client 1-RTT packet to acknowledge (the request), -1 none
	ackAppSince     int64 // when it was read
	stops           []simStop
	serverDgrams    []*simDatagram
	firstAckKnownNs int64
	handshakeCrypto int
	// the client
	clientGot        [3]int64 // largest server packet number received per space
	clientAcked      [3]int64 // largest acknowledged so far
	clientCrypto     [2]uint64
	clientFinished   bool
	unackedApp       int
	appAckTimerSet   bool
	clientInitialPNs int
}

type simStop struct {
	atNs   int64
	reason string
}

func (s *sim) at(t int64, run func()) {
	s.seq++
	heap.Push(&s.queue, simEvent{atNs: t, seq: s.seq, run: run})
}

func runSim(t testing.TB, cfg simConfig) *simTruth {
	if cfg.ackEvery == 0 {
		cfg.ackEvery = 2
	}
	s := &sim{cfg: cfg, w: newWire(t), oneWay: int64(cfg.rttMs * 1e6 / 2), truth: &simTruth{initialWindowBytes: cfg.windowBytes},
		cwnd: cfg.windowBytes, sentPackets: map[[2]int64]*simPacket{}, ackInitialTo: -1, ackAppPN: -1, firstAckKnownNs: -1}
	for i := range s.clientGot {
		s.clientGot[i], s.clientAcked[i] = -1, -1
	}
	s.handshakeCrypto = len(serverHandshake(cfg.certificateBytes))
	// The client's first flight: the ClientHello in one Initial padded to initialBytes.
	s.at(0, func() {
		p, _ := s.w.packet(true, quic.SpaceInitial, cryptoFrame(0, s.w.clientHello()), cfg.initialBytes)
		s.clientInitialPNs++
		s.clientSend(&simDatagram{payload: p, acks: [3]int64{-1, -1, -1}, hello: true})
	})
	for s.queue.Len() > 0 {
		e := heap.Pop(&s.queue).(simEvent)
		s.clock = e.atNs
		e.run()
	}
	return s.finish()
}

// clientSend sends a client datagram: captured now at the client, at the server one
// way later, handled by the server after its turnaround.
func (s *sim) clientSend(d *simDatagram) {
	now := s.now()
	d.fromClient, d.sentNs = true, now
	s.truth.clientView = append(s.truth.clientView, s.w.datagram(now, true, d.payload))
	arrive := now + s.oneWay
	s.at(arrive, func() {
		s.truth.serverView = append(s.truth.serverView, s.w.datagram(arrive, true, d.payload))
		delay := s.cfg.turnaroundMs
		if d.hello || d.finished {
			delay += s.cfg.slowReadMs
		}
		s.at(arrive+int64(delay*1e6), func() { s.serverReceive(d) })
	})
}

func (s *sim) now() int64 { return s.clock }

func (s *sim) serverReceive(d *simDatagram) {
	s.received += len(d.payload)
	if d.handshake {
		s.validated = true
	}
	prior := s.inFlight
	for space, largest := range d.acks {
		for pn := int64(0); pn <= largest; pn++ {
			p := s.sentPackets[[2]int64{int64(space), pn}]
			if p == nil || p.acked {
				continue
			}
			p.acked = true
			s.maxAckedRound = max(s.maxAckedRound, p.round)
			if s.firstAckKnownNs < 0 {
				s.firstAckKnownNs = s.now()
			}
			if !p.ackEliciting {
				continue
			}
			s.inFlight -= p.bytes
			// quic-go's slow start: a datagram more per acknowledged packet while the
			// sender is limited by its window (more than half of it in flight, or
			// less than three datagrams of room).
			if prior >= s.cwnd || prior > s.cwnd/2 || s.cwnd-prior <= 3*s.cfg.maxDatagram {
				s.cwnd += s.cfg.maxDatagram
			}
		}
	}
	if d.hello {
		s.at(s.now()+int64(s.cfg.signMs*1e6), func() {
			s.ackInitialTo = 0
			s.pendingCrypto[0] = serverHello()
			s.pendingCrypto[1] = serverHandshake(s.cfg.certificateBytes)
			s.pendingControl = h3ControlStream()
			s.serverSend()
		})
	}
	if d.finished && !s.handshakeDone {
		s.handshakeDone = true
		s.ackAppPN, s.ackAppSince = d.appPN, s.now()
		s.at(s.now()+int64(s.cfg.appMs*1e6), func() {
			s.pendingApp = h3Response(s.cfg.bodyBytes)
			s.serverSend()
		})
	}
	s.serverSend()
}

func h3ControlStream() []byte { return []byte{0x00, 0x04, 0x04, 0x01, 0x40, 0x64, 0x06} }

// serverSend sends datagrams while there is data and the limits allow, and records
// why it stopped.
func (s *sim) serverSend() {
	for {
		if len(s.pendingCrypto[0]) == 0 && len(s.pendingCrypto[1]) == 0 && len(s.pendingApp) == 0 && len(s.pendingControl) == 0 && s.ackInitialTo < 0 {
			s.stop("end")
			return
		}
		if !s.validated {
			if s.cfg.strict && s.sent+s.cfg.maxDatagram > 3*s.received || !s.cfg.strict && s.sent >= 3*s.received {
				s.stop("amplification")
				return
			}
		}
		if s.inFlight >= s.cwnd {
			s.stop("cwnd")
			return
		}
		s.sendDatagram()
	}
}

func (s *sim) stop(reason string) {
	s.stops = append(s.stops, simStop{s.now(), reason})
}

// sendDatagram fills one datagram of up to maxDatagram bytes: an Initial packet (the
// acknowledgement of the client's Initial and the ServerHello), Handshake packets, and
// 1-RTT packets (the control stream, HANDSHAKE_DONE and the response).
func (s *sim) sendDatagram() {
	room := s.cfg.maxDatagram
	d := &simDatagram{round: s.maxAckedRound + 1}
	var packets [][]byte
	add := func(space quic.Space, frames []byte, padTo int) {
		p, pn := s.w.packet(false, space, frames, padTo)
		packets = append(packets, p)
		room -= len(p)
		eliciting := false
		for _, f := range mustFrames(frames) {
			eliciting = eliciting || f.AckEliciting()
		}
		sp := &simPacket{space: space, pn: pn, bytes: len(p), ackEliciting: eliciting, round: d.round}
		d.packets = append(d.packets, sp)
		s.sentPackets[[2]int64{int64(space), pn}] = sp
	}
	take := func(pending *[]byte, n int) []byte {
		n = min(n, len(*pending))
		out := (*pending)[:n]
		*pending = (*pending)[n:]
		return out
	}
	const frameHeader = 8
	if s.ackInitialTo >= 0 || len(s.pendingCrypto[0]) > 0 {
		var frames []byte
		if s.ackInitialTo >= 0 {
			frames = ackFrame(0, int64(s.clientInitialPNs-1), 0)
			s.ackInitialTo = -1
		}
		if len(s.pendingCrypto[0]) > 0 {
			data := take(&s.pendingCrypto[0], room-overhead(quic.SpaceInitial)-len(frames)-frameHeader)
			frames = append(frames, cryptoFrame(s.cryptoOffset[0], data)...)
			s.cryptoOffset[0] += uint64(len(data))
			d.newHandshake = true
		}
		add(quic.SpaceInitial, frames, 0)
	}
	if len(s.pendingCrypto[1]) > 0 && room > overhead(quic.SpaceHandshake)+frameHeader+16 {
		data := take(&s.pendingCrypto[1], room-overhead(quic.SpaceHandshake)-frameHeader)
		add(quic.SpaceHandshake, cryptoFrame(s.cryptoOffset[1], data), 0)
		s.cryptoOffset[1] += uint64(len(data))
		d.newHandshake = true
	}
	// 1-RTT data goes out once the server's handshake flight is all out (0.5-RTT
	// data: the control stream), the response once the client's Finished arrived.
	if len(s.pendingCrypto[1]) == 0 && room > overhead(quic.SpaceApplication)+2*frameHeader+16 {
		var frames []byte
		if s.ackAppPN >= 0 && s.handshakeDone && len(s.pendingApp) > 0 {
			// The request's acknowledgement, with the time it was held as its ACK
			// Delay (in units of 8 µs, the default exponent), as RFC 9000 §13.2.5 asks.
			frames = ackFrame(s.ackAppPN, s.ackAppPN, uint64((s.now()-s.ackAppSince)/8000))
			s.ackAppPN = -1
		}
		if len(s.pendingControl) > 0 {
			frames = append(frames, streamFrame(3, s.controlOffset, s.pendingControl, false)...)
			s.controlOffset += uint64(len(s.pendingControl))
			s.pendingControl = nil
		}
		if s.handshakeDone && s.appOffset == 0 && len(s.pendingApp) > 0 {
			frames = append(frames, 0x1e) // HANDSHAKE_DONE
		}
		if n := room - overhead(quic.SpaceApplication) - len(frames) - frameHeader; len(s.pendingApp) > 0 && n > 0 {
			data := take(&s.pendingApp, n)
			d.response = true
			frames = append(frames, streamFrame(0, s.appOffset, data, len(s.pendingApp) == 0)...)
			s.appOffset += uint64(len(data))
		}
		if len(frames) > 0 {
			add(quic.SpaceApplication, frames, 0)
		}
	}
	// Datagrams with an Initial packet are padded to the full size (RFC 9000 §14.1),
	// in the last packet.
	if d.packets[0].space == quic.SpaceInitial && room > 0 {
		last := len(packets) - 1
		sp := d.packets[last]
		frames := s.reopen(*sp, packets[last])
		s.w.nextPN[1][sp.space]--
		p, _ := s.w.packet(false, sp.space, frames, len(packets[last])+room)
		packets[last] = p
		sp.bytes = len(p)
	}
	d.payload = concat(packets)
	d.sentNs = s.now()
	d.cwnd = s.cwnd
	s.sent += len(d.payload)
	for _, p := range d.packets {
		if p.ackEliciting {
			s.inFlight += p.bytes
		}
	}
	s.serverDgrams = append(s.serverDgrams, d)
	s.truth.serverView = append(s.truth.serverView, s.w.datagram(d.sentNs, false, d.payload))
	arrive := d.sentNs + s.oneWay
	s.at(arrive, func() { s.clientReceive(d, arrive) })
}

// reopen decrypts a packet the server just built to get its frames back (to rebuild
// it padded).
func (s *sim) reopen(sp simPacket, packet []byte) []byte {
	keys := s.w.seal[1][sp.space]
	buf := append([]byte(nil), packet...)
	cidLen := len(s.w.clientCID)
	h, err := quic.ParseHeader(buf, cidLen)
	if err != nil {
		panic(err)
	}
	u, err := keys.Open(buf, &h, sp.pn-1)
	if err != nil {
		panic(err)
	}
	return append([]byte(nil), u.Payload...)
}

func concat(ps [][]byte) []byte {
	var out []byte
	for _, p := range ps {
		out = append(out, p...)
	}
	return out
}

func mustFrames(payload []byte) []quic.Frame {
	fs, err := quic.ParseFrames(payload, nil)
	if err != nil {
		panic(err)
	}
	return fs
}

// clientReceive handles a server datagram at the client: acknowledgements of the
// Initial and Handshake packets at once, the Finished and the request when the
// server's handshake is complete, 1-RTT acknowledgements every ackEvery packets or
// after 25 ms.
func (s *sim) clientReceive(d *simDatagram, arrive int64) {
	s.truth.clientView = append(s.truth.clientView, s.w.datagram(arrive, false, d.payload))
	var newInitial, newHandshake bool
	var appEliciting int
	for _, p := range d.packets {
		s.clientGot[p.space] = max(s.clientGot[p.space], p.pn)
		switch p.space {
		case quic.SpaceInitial:
			newInitial = true
		case quic.SpaceHandshake:
			newHandshake = true
		default:
			if p.ackEliciting {
				appEliciting++
			}
		}
	}
	for _, f := range s.framesOf(d) {
		if f.space < 2 && f.frame.Type == quic.FrameCrypto {
			if end := f.frame.Offset + f.frame.Length; f.frame.Offset <= s.clientCrypto[f.space] && end > s.clientCrypto[f.space] {
				s.clientCrypto[f.space] = end
			}
		}
	}
	s.unackedApp += appEliciting
	if newInitial || newHandshake {
		out := &simDatagram{acks: [3]int64{-1, -1, -1}}
		var packets [][]byte
		if newInitial {
			p, _ := s.w.packet(true, quic.SpaceInitial, ackFrame(0, s.clientGot[0], 0), 0)
			packets = append(packets, p)
			out.acks[0] = s.clientGot[0]
		}
		if s.clientGot[1] >= 0 {
			frames := ackFrame(0, s.clientGot[1], 0)
			out.acks[1] = s.clientGot[1]
			complete := s.clientCrypto[1] >= uint64(s.handshakeCrypto)
			if complete && !s.clientFinished {
				frames = append(frames, cryptoFrame(0, clientFinished())...)
				out.finished = true
			}
			p, _ := s.w.packet(true, quic.SpaceHandshake, frames, 0)
			packets = append(packets, p)
			out.handshake = true
			if out.finished {
				s.clientFinished = true
				frames := streamFrame(0, 0, h3Request(fmt.Sprintf("/bytes/%d", s.cfg.bodyBytes)), true)
				if !s.cfg.lateAppAck && s.clientGot[2] >= 0 {
					frames = append(ackFrame(0, s.clientGot[2], 0), frames...)
					out.acks[2] = s.clientGot[2]
					s.unackedApp = 0
				}
				p, pn := s.w.packet(true, quic.SpaceApplication, frames, 0)
				out.appPN = pn
				packets = append(packets, p)
			}
		}
		if newInitial { // datagrams with an Initial are padded to 1,200 bytes
			if n := len(concat(packets)); n < 1200 {
				last := len(packets) - 1
				space := quic.SpaceInitial
				if last > 0 {
					space = quic.SpaceHandshake
					if out.finished {
						space = quic.SpaceApplication
					}
				}
				frames := s.clientReopen(space, packets[last])
				s.w.nextPN[0][space]--
				packets[last], _ = s.w.packet(true, space, frames, len(packets[last])+1200-n)
			}
		}
		out.payload = concat(packets)
		s.clientSend(out)
	}
	if s.unackedApp >= s.cfg.ackEvery {
		s.sendAppAck()
	} else if s.unackedApp > 0 && !s.appAckTimerSet {
		s.appAckTimerSet = true
		s.at(arrive+25_000_000, func() {
			s.appAckTimerSet = false
			if s.unackedApp > 0 {
				s.sendAppAck()
			}
		})
	}
}

func (s *sim) sendAppAck() {
	s.unackedApp = 0
	if s.clientGot[2] <= s.clientAcked[2] {
		return
	}
	s.clientAcked[2] = s.clientGot[2]
	p, _ := s.w.packet(true, quic.SpaceApplication, ackFrame(0, s.clientGot[2], 0), 0)
	s.clientSend(&simDatagram{payload: p, acks: [3]int64{-1, -1, s.clientGot[2]}})
}

func (s *sim) clientReopen(space quic.Space, packet []byte) []byte {
	buf := append([]byte(nil), packet...)
	h, err := quic.ParseHeader(buf, len(s.w.serverCID))
	if err != nil {
		panic(err)
	}
	u, err := s.w.seal[0][space].Open(buf, &h, s.w.nextPN[0][space]-2)
	if err != nil {
		panic(err)
	}
	return append([]byte(nil), u.Payload...)
}

type spaceFrame struct {
	space quic.Space
	frame quic.Frame
}

// framesOf reads back the frames of a server datagram.
func (s *sim) framesOf(d *simDatagram) []spaceFrame {
	var out []spaceFrame
	b := append([]byte(nil), d.payload...)
	for _, sp := range d.packets {
		h, err := quic.ParseHeader(b, len(s.w.clientCID))
		if err != nil {
			panic(err)
		}
		u, err := s.w.seal[1][sp.space].Open(b[:h.Size], &h, sp.pn-1)
		if err != nil {
			panic(err)
		}
		for _, f := range mustFrames(u.Payload) {
			out = append(out, spaceFrame{sp.space, f})
		}
		b = b[h.Size:]
	}
	return out
}

// finish turns what the server did into the expected values.
func (s *sim) finish() *simTruth {
	tr := s.truth
	sort.SliceStable(tr.clientView, func(i, j int) bool { return tr.clientView[i].TimeNs < tr.clientView[j].TimeNs })
	sort.SliceStable(tr.serverView, func(i, j int) bool { return tr.serverView[i].TimeNs < tr.serverView[j].TimeNs })
	tr.clientInitialBytes = s.cfg.initialBytes
	byRound := map[int]*simRound{}
	var order []int
	for _, d := range s.serverDgrams {
		r := byRound[d.round]
		if r == nil {
			r = &simRound{index: d.round}
			byRound[d.round] = r
			order = append(order, d.round)
		}
		r.bytes += len(d.payload)
		r.datagrams++
		r.handshake = r.handshake || d.newHandshake
		if d.round == 1 {
			tr.firstFlightBytes += len(d.payload)
		}
	}
	firstResponseRound := -1
	for _, d := range s.serverDgrams {
		if d.response && firstResponseRound < 0 {
			firstResponseRound = d.round
		}
		if d.round == firstResponseRound && d.cwnd != s.cfg.windowBytes {
			tr.windowGrew = true
		}
	}
	// A round ended by the last stop before the next round's first datagram.
	for k, idx := range order {
		r := byRound[idx]
		end := int64(1 << 62)
		if k+1 < len(order) {
			for _, d := range s.serverDgrams {
				if d.round == order[k+1] {
					end = d.sentNs
					break
				}
			}
		}
		r.limit = "end"
		for _, st := range s.stops {
			if st.atNs < end {
				r.limit = st.reason
			}
		}
		tr.rounds = append(tr.rounds, *r)
		if r.handshake {
			tr.handshakeRounds = k + 1
			if r.limit == "amplification" {
				tr.amplificationRounds++
			}
		}
	}
	return tr
}
