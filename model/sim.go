package model

import (
	"container/heap"
	"fmt"
	"math"
)

// Kernel constants the simulation follows (Linux 6.x, net/ipv4/tcp_cubic.c and tcp.h).
const (
	kernelHZ            = 250 // jiffies per second (CONFIG_HZ of the lab's kernel)
	delayedACKNs        = 40_000_000
	maxQuickACKs        = 16
	hystartLowWindow    = 16
	hystartMinSamples   = 8
	hystartAckDeltaUs   = 2000
	hystartDelayMinUs   = 4000
	hystartDelayMaxUs   = 16000
	hystartAckDelayUs   = 1000 // hystart_ack_delay(): capped at 1 ms for every rate here
	cubicBetaScale      = 15   // 8*(1024+717)/3/(1024-717)
	cubicCubeRTTScale   = 410  // bic_scale 41 × 10
	cubicHZShift        = 10   // BICTCP_HZ
	cubicMaxInitialCnt  = 20   // cnt cap while last_max_cwnd is 0 (5% per RTT)
	infiniteSSThreshold = math.MaxInt32
)

// exchange is one request of the client and the server's answer.
type exchange struct {
	clientBytes int
	serverBytes int64
	phase       string
	atNs        int64 // HTTP requests: not sent before this time (Params.RequestAtNs, Request.AtNs)
}

// exchanges lists the connection's messages for the TLS version: the sizes are those
// of Go's crypto/tls (the lab's client and server) with an X25519 key share.
func exchanges(p Params) (ex []exchange) {
	ex = baseExchanges(p)
	ex[len(ex)-1].atNs = p.RequestAtNs
	defer func() {
		if p.TLS != "" && p.ServerPostHandshakeSegments > 0 {
			// Last, so that the other indexes stay: the Finished alone (when no
			// request goes with it), answered by the small segments.
			ex = append(ex, exchange{clientBytes: 6 + 58, serverBytes: int64(p.ServerPostHandshakeSegments * PostHandshakeSegmentBytes), phase: "post"})
		}
	}()
	for _, r := range p.Requests {
		e := exchange{clientBytes: requestBytes, serverBytes: r.Bytes, phase: "http", atNs: r.AtNs}
		switch p.TLS {
		case "1.3":
			e.clientBytes += 22
			e.serverBytes += 22 * ceilDiv(r.Bytes, 16384)
		case "1.2":
			e.clientBytes += 29
			e.serverBytes += 29 * ceilDiv(r.Bytes, 16384)
		}
		ex = append(ex, e)
	}
	return ex
}

// baseExchanges are the TLS handshake's exchanges and the first HTTP request.
func baseExchanges(p Params) []exchange {
	response := p.SizeBytes
	switch p.TLS {
	case "1.3":
		response += 22 * ceilDiv(p.SizeBytes, 16384) // record header, content type and AEAD tag
		return []exchange{
			{clientBytes: tlsClientHelloBytes, serverBytes: int64(TLSServerFlightBytes(p.TLS, p.ChainBytes)), phase: "tls"},
			{clientBytes: 6 + 58 + requestBytes + 22, serverBytes: response, phase: "http"},
		}
	case "1.2":
		response += 29 * ceilDiv(p.SizeBytes, 16384) // record header, explicit nonce and tag
		return []exchange{
			{clientBytes: tlsClientHelloBytes, serverBytes: int64(TLSServerFlightBytes(p.TLS, p.ChainBytes)), phase: "tls"},
			{clientBytes: 42 + 6 + 45, serverBytes: 6 + 45, phase: "tls"},
			{clientBytes: requestBytes + 29, serverBytes: response, phase: "http"},
		}
	}
	return []exchange{{clientBytes: requestBytes, serverBytes: response, phase: "http"}}
}

// tlsClientHelloBytes is Go's ClientHello with an X25519 and a P-256 key share.
const tlsClientHelloBytes = 300

// TLSServerFlightBytes estimates the server's first TLS flight for a certificate chain
// of chainBytes, as Go's crypto/tls sends it with an RSA-2048 key and X25519 (checked
// against the lab's captures: 4536 bytes for a 4000-byte chain over TLS 1.3, 4387 over
// TLS 1.2): ServerHello … Finished (1.3, encrypted records) or ServerHello …
// ServerHelloDone (1.2, ECDHE_RSA).
func TLSServerFlightBytes(version string, chainBytes int) int {
	switch version {
	case "1.3":
		// ServerHello 127, ChangeCipherSpec 6, then EncryptedExtensions, Certificate,
		// CertificateVerify (a 256-byte signature) and Finished, each in a record with
		// 22 bytes of overhead.
		return 127 + 6 + (6 + 22) + (chainBytes + 12 + 22) + (264 + 22) + (36 + 22)
	case "1.2":
		// ServerHello 61, Certificate, ServerKeyExchange with a 256-byte signature 305,
		// ServerHelloDone 9.
		return 61 + (chainBytes + 12) + 305 + 9
	}
	return 0
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// segment is one data segment of the server.
type segment struct {
	startByte, endByte int64
	exchange           int
	sentNs             int64
	round              int
	stopReason         string // why the sender stopped right after this segment, if it did
	arrivedNs          int64
	echoNs             int64 // when the client sent the packet that released the segment
	cwndAtSend         int
}

// pipe is one direction's bottleneck and propagation delay.
type pipe struct {
	rateBitsPerSecond int64
	oneWayNs          int64
	freeNs            int64 // when the link finishes its last packet
	// busyStartNs is when the current busy period began; idleGaps records the start of
	// every busy period after an idle link, for the rate-limited analysis.
	busyStarts []int64
}

func (l *pipe) serializationNs(bytes int) int64 {
	if l.rateBitsPerSecond <= 0 {
		return 0
	}
	return int64(bytes) * 8 * 1e9 / l.rateBitsPerSecond
}

// send puts a packet of bytes on the link at nowNs and returns when it arrives.
func (l *pipe) send(nowNs int64, bytes int, hostDelayNs int64) int64 {
	start := max(nowNs, l.freeNs)
	if nowNs >= l.freeNs {
		l.busyStarts = append(l.busyStarts, nowNs)
	}
	l.freeNs = start + l.serializationNs(bytes)
	return l.freeNs + l.oneWayNs + hostDelayNs
}

type eventKind int

const (
	evServerGetsClientPacket eventKind = iota
	evServerGetsACK
	evClientGetsSegment
	evClientGetsServerACK
	evClientDelayedACK
	evServerResponds
	evClientSendsRequest
)

type event struct {
	atNs  int64
	order int64
	kind  eventKind
	// for ACKs and client packets
	ackBytes    int64
	windowBytes int64
	exchange    int
	segment     int
	sentNs      int64 // when a client packet left the client
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].atNs != q[j].atNs {
		return q[i].atNs < q[j].atNs
	}
	return q[i].order < q[j].order
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// sender is the server's TCP sender: congestion window in packets, CUBIC with HyStart
// or Reno, the peer's receive window.
type sender struct {
	p                Params
	cwnd, cwndCnt    int
	ssthresh         int
	segments         []segment
	next             int   // first unsent segment
	acked            int   // segments fully acknowledged
	sndUnaBytes      int64 // cumulative ACK
	sndWndBytes      int64
	packetsOut       int
	maxPacketsOut    int
	isCwndLimited    bool
	cwndUsageSeq     int64
	roundOfAcked     int // round of the newest acknowledged segment
	lastClientSentNs int64
	hystartExitRound int
	cubic            cubicState
}

type cubicState struct {
	// HyStart
	found      bool
	roundStart int64 // µs
	lastACK    int64 // µs
	endSeq     int64
	currRTT    int64 // µs
	sampleCnt  int
	delayMin   int64 // µs
	// CUBIC
	cnt          int
	lastMaxCwnd  int
	lastCwnd     int
	lastTime     int64 // jiffies
	originPoint  int
	epochStart   int64 // jiffies; 0: none
	ackCnt       int
	tcpCwnd      int
	epochStarted bool
}

func jiffies(ns int64) int64 { return ns * kernelHZ / 1e9 }

func usecsToJiffies(us int64) int64 { return (us*kernelHZ + 999_999) / 1_000_000 }

func (s *sender) sndNxtBytes() int64 {
	if s.next == 0 {
		return 0
	}
	return s.segments[s.next-1].endByte
}

func (s *sender) inSlowStart() bool { return s.cwnd < s.ssthresh }

func (s *sender) cwndLimited() bool {
	if s.isCwndLimited {
		return true
	}
	if s.inSlowStart() {
		return s.cwnd < 2*s.maxPacketsOut
	}
	return false
}

func (s *sender) hystartReset(nowNs int64) {
	s.cubic.roundStart = nowNs / 1000
	s.cubic.lastACK = nowNs / 1000
	s.cubic.endSeq = s.sndNxtBytes()
	s.cubic.currRTT = math.MaxInt64
	s.cubic.sampleCnt = 0
}

// pktsAcked is CUBIC's pkts_acked hook: HyStart's two exit tests.
func (s *sender) pktsAcked(nowNs, rttUs int64) {
	c := &s.cubic
	if s.p.CC != CCCubic {
		return
	}
	delay := max(rttUs, 1)
	if c.delayMin == 0 || c.delayMin > delay {
		c.delayMin = delay
	}
	if c.found || !s.inSlowStart() {
		return
	}
	// Every round of the ACK clock starts a new HyStart round (end_seq: what had been
	// sent when the round began), whatever the window; the tests run from 16 packets.
	if s.sndUnaBytes > c.endSeq {
		s.hystartReset(nowNs)
	}
	if s.cwnd < hystartLowWindow {
		return
	}
	now := nowNs / 1000
	if now-c.lastACK <= hystartAckDeltaUs {
		c.lastACK = now
		threshold := (c.delayMin + hystartAckDelayUs) >> 1
		if now-c.roundStart > threshold {
			c.found = true
			s.ssthresh = s.cwnd
		}
	}
	if c.currRTT > delay {
		c.currRTT = delay
	}
	if c.sampleCnt < hystartMinSamples {
		c.sampleCnt++
	} else if c.currRTT > c.delayMin+min(max(c.delayMin>>3, hystartDelayMinUs), hystartDelayMaxUs) {
		c.found = true
		s.ssthresh = s.cwnd
	}
}

// congAvoid grows the window for acked newly acknowledged packets.
func (s *sender) congAvoid(nowNs int64, acked int) {
	if !s.cwndLimited() {
		return
	}
	if s.inSlowStart() {
		newCwnd := min(s.cwnd+acked, s.ssthresh)
		acked -= newCwnd - s.cwnd
		s.cwnd = newCwnd
		if acked <= 0 {
			return
		}
	}
	w := s.cwnd // Reno: one packet per window
	if s.p.CC == CCCubic {
		s.cubicUpdate(nowNs, acked)
		w = s.cubic.cnt
	}
	if s.cwndCnt >= w {
		s.cwndCnt = 0
		s.cwnd++
	}
	s.cwndCnt += acked
	if s.cwndCnt >= w {
		delta := s.cwndCnt / w
		s.cwndCnt -= delta * w
		s.cwnd += delta
	}
}

// cubicUpdate is bictcp_update: the window target of the cubic function.
func (s *sender) cubicUpdate(nowNs int64, acked int) {
	c := &s.cubic
	cwnd := s.cwnd
	now := jiffies(nowNs + s.p.ClockPhaseNs)
	c.ackCnt += acked
	if c.lastCwnd == cwnd && now-c.lastTime <= kernelHZ/32 {
		return
	}
	if !(c.epochStarted && now == c.lastTime) {
		c.lastCwnd = cwnd
		c.lastTime = now
		if !c.epochStarted {
			c.epochStarted = true
			c.epochStart = now
			c.ackCnt = acked
			c.tcpCwnd = cwnd
			c.originPoint = cwnd // last_max_cwnd is 0 without a loss: K = 0
		}
		t := now - c.epochStart + usecsToJiffies(c.delayMin)
		t = (t << cubicHZShift) / kernelHZ
		offs := t
		delta := int64(cubicCubeRTTScale) * offs * offs * offs >> (10 + 3*cubicHZShift)
		target := c.originPoint + int(delta)
		if target > cwnd {
			c.cnt = cwnd / (target - cwnd)
		} else {
			c.cnt = 100 * cwnd
		}
		if c.lastMaxCwnd == 0 && c.cnt > cubicMaxInitialCnt {
			c.cnt = cubicMaxInitialCnt
		}
	}
	// TCP friendliness.
	delta := (cwnd * cubicBetaScale) >> 3
	for delta > 0 && c.ackCnt > delta {
		c.ackCnt -= delta
		c.tcpCwnd++
	}
	if c.tcpCwnd > cwnd {
		maxCnt := cwnd / (c.tcpCwnd - cwnd)
		if c.cnt > maxCnt {
			c.cnt = maxCnt
		}
	}
	c.cnt = max(c.cnt, 2)
}

// receiver is the client's TCP receiver and its application.
type receiver struct {
	p              Params
	rcvNxtBytes    int64
	windowBytes    int64
	clampBytes     int64
	unacked        int // full segments received and not yet acknowledged
	quickACKs      int
	timerArmed     bool
	segmentsSeen   int
	measureStartNs int64
	measureSeq     int64
	spaceBytes     int64
	rttUs8         int64 // the receiver's RTT estimate × 8 (rcv_rtt_est)
	lastEchoNs     int64
	autotuned      bool
}

// dataArrived updates the receive window for one segment of n bytes at nowNs, sent by
// the server in answer to the client packet sent at echoNs (its TSecr). Linux grows
// rcv_ssthresh by two segments per full segment up to the window clamp; receive-buffer
// autotuning (tcp_rcv_space_adjust) raises the clamp once the application has read
// more in one receiver RTT (estimated from timestamps) than the space estimate.
func (r *receiver) dataArrived(nowNs, echoNs, n int64) {
	r.rcvNxtBytes += n
	r.segmentsSeen++
	if r.p.RwndBytes > 0 {
		return
	}
	if n >= int64(r.p.MSS) && echoNs != r.lastEchoNs {
		r.lastEchoNs = echoNs
		// TCP timestamps tick every millisecond.
		sampleUs := max((nowNs+r.p.ClockPhaseNs)/1e6-(echoNs+r.p.ClockPhaseNs)/1e6, 1) * 1000
		if r.rttUs8 == 0 || sampleUs<<3 < r.rttUs8 {
			r.rttUs8 = sampleUs << 3
		} else {
			r.rttUs8 = r.rttUs8 - r.rttUs8>>3 + sampleUs
		}
	}
	if r.rttUs8 != 0 && (nowNs-r.measureStartNs)/1000 >= r.rttUs8>>3 {
		if copied := r.rcvNxtBytes - r.measureSeq; copied > r.spaceBytes {
			r.clampBytes = math.MaxInt32
			r.autotuned = true
			r.spaceBytes = copied
		}
		r.measureStartNs, r.measureSeq = nowNs, r.rcvNxtBytes
	}
	if n >= int64(r.p.MSS) {
		r.windowBytes = min(r.windowBytes+linuxWindowGrowthBytes, r.clampBytes)
	}
}

// Simulate runs the packet-level model of one fetch: handshake, TLS, request and
// response over one bottleneck, and returns the times and rounds the lab would see.
// HTTPRoundsMin and HTTPRoundsMax are the HTTP round counts over the phases of the
// kernels' clock ticks (see Params.ClockPhaseNs) when p leaves the phase at 0.
func Simulate(p Params) (Result, error) { return SimulateProgress(p, nil) }

// SimulateProgress is Simulate, telling progress (when not nil) how many of
// SimulationBytes(p) bytes it has simulated so far, as it goes.
func SimulateProgress(p Params, progress func(doneBytes int64)) (Result, error) {
	var before int64 // bytes of the runs finished
	run := func(q Params) (Result, error) {
		var report func(int64)
		if progress != nil {
			report = func(n int64) { progress(before + min(n, q.SizeBytes)) }
		}
		r, err := simulate(q, report)
		before += q.SizeBytes
		if progress != nil && err == nil {
			progress(before)
		}
		return r, err
	}
	res, err := run(p)
	if err != nil {
		return res, err
	}
	res.HTTPRoundsMin, res.HTTPRoundsMax = res.RoundTrips.HTTP, res.RoundTrips.HTTP
	if p.ClockPhaseNs != 0 {
		return res, nil
	}
	// CUBIC's clock ticks every 4 ms (HZ 250) and TCP timestamps every 1 ms: the
	// phase of a connection's start against them moves the window's growth in
	// congestion avoidance by a few packets, which can move a round's last segments
	// into the next round.
	for phase := int64(clockPhaseStepNs); phase < 1e9/kernelHZ; phase += clockPhaseStepNs {
		q := p
		q.ClockPhaseNs = phase
		r, err := run(q)
		if err != nil {
			return res, err
		}
		res.HTTPRoundsMin = min(res.HTTPRoundsMin, r.RoundTrips.HTTP)
		res.HTTPRoundsMax = max(res.HTTPRoundsMax, r.RoundTrips.HTTP)
	}
	// A last round of a few segments after the round in which HyStart left slow
	// start holds the window's last few packets of growth: HyStart's delay
	// samples, which the path's timing noise moves by an ACK or two, decide
	// whether they fit in the round before. (In slow start proper the window
	// doubles exactly and no such doubt arises.)
	if n := len(res.Rounds); n >= 2 && res.HyStartExitRound > 0 && res.HyStartExitRound >= res.RoundTrips.HTTP-1 {
		last, prev := res.Rounds[n-1], res.Rounds[n-2]
		if last.Phase == "http" && prev.Phase == "http" && last.Segments <= tailSegments && prev.Segments >= 16*last.Segments {
			res.HTTPRoundsMin = min(res.HTTPRoundsMin, res.RoundTrips.HTTP-1)
		}
	}
	return res, nil
}

// tailSegments is the largest last round that timing noise can fold into the
// round before it (see Simulate).
const tailSegments = 4

// clockPhaseStepNs is the step of the clock phases Simulate tries.
const clockPhaseStepNs = 250_000

// SimulationBytes is the work of Simulate(p), in bytes of responses
// simulated: one run of the packet-level model per clock phase it tries, each
// of p.SizeBytes.
func SimulationBytes(p Params) int64 {
	if p.ClockPhaseNs != 0 {
		return p.SizeBytes
	}
	return p.SizeBytes * (1e9 / kernelHZ / clockPhaseStepNs)
}

// progressEvents is how many events a run handles between two reports of its
// progress.
const progressEvents = 1 << 14

// simulate runs the model once; report, when not nil, receives the bytes the
// client has received so far, every progressEvents events.
func simulate(p Params, report func(receivedBytes int64)) (Result, error) {
	if err := p.Normalize(); err != nil {
		return Result{}, err
	}
	sim := newSimulation(p)
	sim.start()
	for n := 1; sim.q.Len() > 0; n++ {
		sim.handle(heap.Pop(&sim.q).(event))
		if report != nil && n%progressEvents == 0 {
			report(sim.rcv.rcvNxtBytes)
		}
	}
	return sim.result()
}

// simulation is one run of the model: the two directions of the path, the server's
// sender and the client's receiver, the queue of events, and what the run records
// on the way.
type simulation struct {
	p        Params
	ex       []exchange
	c2s, s2c *pipe
	snd      *sender
	rcv      *receiver
	q        eventQueue
	order    int64

	// exchangeEnd holds the server message ends, in bytes of its stream, set as
	// the server answers each (in the order the requests reach it).
	exchangeEnd                []int64
	streamBytes, appendedBytes int64
	// baseHTTP is the first HTTP exchange and lastHTTP the last request; postIdx
	// the post-handshake segments' exchange (last), or -1.
	baseHTTP, lastHTTP, postIdx int
	postSent                    bool
	sentNs                      []int64

	connectNs, readyNs, firstByteNs, lastByteNs, tlsDoneNs int64
}

func newSimulation(p Params) *simulation {
	ex := exchanges(p)
	oneWay := p.RTTNs / 2
	sim := &simulation{p: p, ex: ex,
		c2s: &pipe{rateBitsPerSecond: p.RateBitsPerSecond, oneWayNs: p.RTTNs - oneWay},
		s2c: &pipe{rateBitsPerSecond: p.RateBitsPerSecond, oneWayNs: oneWay},
		snd: &sender{p: p, cwnd: p.IW, ssthresh: infiniteSSThreshold},
		rcv: &receiver{p: p, windowBytes: linuxInitialWindowBytes, clampBytes: linuxWindowClampBytes,
			spaceBytes: linuxAutotuneSpaceSegments * int64(p.MSS), quickACKs: maxQuickACKs},
	}
	if p.RwndBytes > 0 {
		sim.rcv.windowBytes, sim.rcv.clampBytes = p.RwndBytes, p.RwndBytes
	}
	sim.rcv.quickACKs = int(min(int64(maxQuickACKs), sim.rcv.windowBytes/int64(2*p.MSS)))
	sim.exchangeEnd = make([]int64, len(ex))
	for _, e := range ex {
		sim.streamBytes += e.serverBytes
	}
	sim.baseHTTP = len(baseExchanges(p)) - 1
	sim.lastHTTP, sim.postIdx = len(ex)-1, -1
	if ex[len(ex)-1].phase == "post" {
		sim.lastHTTP, sim.postIdx = len(ex)-2, len(ex)-1
	}
	sim.sentNs = make([]int64, len(ex))
	return sim
}

func (sim *simulation) push(e event) {
	sim.order++
	e.order = sim.order
	heap.Push(&sim.q, e)
}

// start runs the handshake (SYN, SYN/ACK, then the client's ACK and first message
// back to back) and sends the client's first message.
func (sim *simulation) start() {
	hd := sim.p.HostDelayNs
	synAtServer := sim.c2s.send(0, synBytes, hd)
	sim.connectNs = sim.s2c.send(synAtServer, synBytes, hd)
	handshakeACKAtServer := sim.c2s.send(sim.connectNs, HeaderBytes, hd)
	sim.snd.hystartReset(handshakeACKAtServer)
	sim.rcv.measureStartNs = sim.connectNs
	if sim.baseHTTP == 0 {
		sim.ready(sim.connectNs)
	} else {
		sim.sendClientMessage(sim.connectNs, 0)
	}
}

// sendClientMessage sends exchange i's client message, in segments.
func (sim *simulation) sendClientMessage(nowNs int64, i int) {
	sim.sentNs[i] = nowNs
	at := nowNs
	bytes := sim.ex[i].clientBytes
	for bytes > 0 {
		n := min(bytes, sim.p.MSS)
		at = sim.c2s.send(nowNs, HeaderBytes+n, sim.p.HostDelayNs)
		bytes -= n
	}
	sim.push(event{atNs: at, sentNs: nowNs, kind: evServerGetsClientPacket, exchange: i, ackBytes: sim.rcv.rcvNxtBytes, windowBytes: sim.rcv.windowBytes})
}

// ready sends the HTTP requests once the connection is ready: each now, or at its
// time.
func (sim *simulation) ready(nowNs int64) {
	sim.readyNs = nowNs
	sent := false
	for i := sim.baseHTTP; i <= sim.lastHTTP; i++ {
		if sim.ex[i].atNs > nowNs {
			sim.push(event{atNs: sim.ex[i].atNs, kind: evClientSendsRequest, exchange: i})
			continue
		}
		sim.rcv.unacked = 0
		sim.sendClientMessage(nowNs, i)
		sent = true
	}
	if !sent && sim.postIdx >= 0 {
		// No request yet: the client's Finished goes alone.
		sim.rcv.unacked = 0
		sim.sendClientMessage(nowNs, sim.postIdx)
	}
}

func (sim *simulation) sendACK(nowNs int64) {
	sim.rcv.unacked = 0
	at := sim.c2s.send(nowNs, HeaderBytes, sim.p.HostDelayNs)
	sim.push(event{atNs: at, sentNs: nowNs, kind: evServerGetsACK, ackBytes: sim.rcv.rcvNxtBytes, windowBytes: sim.rcv.windowBytes})
}

// trySend sends what the congestion and receive windows allow.
func (sim *simulation) trySend(nowNs int64) {
	snd := sim.snd
	stop := ""
	for snd.next < len(snd.segments) {
		sg := &snd.segments[snd.next]
		if snd.packetsOut >= snd.cwnd {
			stop = "cwnd"
			break
		}
		if sg.endByte > snd.sndUnaBytes+snd.sndWndBytes {
			stop = "rwnd"
			break
		}
		sg.sentNs = nowNs
		sg.round = snd.roundOfAcked + 1
		sg.echoNs = snd.lastClientSentNs
		sg.cwndAtSend = snd.cwnd
		at := sim.s2c.send(nowNs, HeaderBytes+int(sg.endByte-sg.startByte), sim.p.HostDelayNs)
		sim.push(event{atNs: at, kind: evClientGetsSegment, segment: snd.next})
		snd.next++
		snd.packetsOut++
	}
	if snd.next > 0 && stop != "" {
		snd.segments[snd.next-1].stopReason = stop
	}
	// tcp_cwnd_validate
	isLimited := stop == "cwnd"
	if snd.sndUnaBytes >= snd.cwndUsageSeq || isLimited || (!snd.isCwndLimited && snd.packetsOut > snd.maxPacketsOut) {
		snd.isCwndLimited = isLimited
		snd.maxPacketsOut = snd.packetsOut
		snd.cwndUsageSeq = snd.sndNxtBytes()
	}
}

// appendMessage queues exchange i's server message in segments of segmentBytes.
func (sim *simulation) appendMessage(i int, segmentBytes int64) {
	start := sim.appendedBytes
	sim.appendedBytes += sim.ex[i].serverBytes
	sim.exchangeEnd[i] = sim.appendedBytes
	for b := start; b < sim.appendedBytes; b += segmentBytes {
		sim.snd.segments = append(sim.snd.segments, segment{startByte: b, endByte: min(b+segmentBytes, sim.appendedBytes), exchange: i})
	}
}

// handle runs one event.
func (sim *simulation) handle(e event) {
	now := e.atNs
	switch e.kind {
	case evServerGetsClientPacket:
		sim.serverGetsClientPacket(now, e)
	case evServerResponds:
		sim.appendMessage(e.exchange, int64(sim.p.MSS))
		sim.trySend(now)
	case evClientSendsRequest:
		sim.rcv.unacked = 0
		sim.sendClientMessage(now, e.exchange)
	case evServerGetsACK:
		sim.snd.lastClientSentNs = e.sentNs
		serverProcessACK(sim.snd, now, e.ackBytes, e.windowBytes)
		sim.trySend(now)
	case evClientGetsSegment:
		sim.clientGetsSegment(now, e.segment)
	case evClientDelayedACK:
		sim.rcv.timerArmed = false
		if sim.rcv.unacked > 0 {
			sim.sendACK(now)
		}
	}
}

// serverGetsClientPacket: the client's packet acknowledges what it had received
// and carries its message.
func (sim *simulation) serverGetsClientPacket(now int64, e event) {
	sim.snd.lastClientSentNs = e.sentNs
	serverProcessACK(sim.snd, now, e.ackBytes, e.windowBytes)
	if sim.postIdx >= 0 && !sim.postSent && (e.exchange == sim.postIdx || e.exchange >= sim.baseHTTP) {
		// The client's Finished: the post-handshake segments go at once.
		sim.postSent = true
		sim.appendMessage(sim.postIdx, PostHandshakeSegmentBytes)
		sim.trySend(now)
	}
	if e.exchange == sim.postIdx {
		return
	}
	sim.s2c.send(now, HeaderBytes, sim.p.HostDelayNs) // the server's immediate ACK of the data
	sim.push(event{atNs: now + sim.p.ServerDelayNs, kind: evServerResponds, exchange: e.exchange})
}

// clientGetsSegment: the client takes a segment, ACKs it (at once or delayed),
// and sends its next message when one of the handshake's is complete.
func (sim *simulation) clientGetsSegment(now int64, index int) {
	rcv := sim.rcv
	sg := &sim.snd.segments[index]
	sg.arrivedNs = now
	n := sg.endByte - sg.startByte
	rcv.dataArrived(now, sg.echoNs, n)
	if sg.exchange == sim.baseHTTP {
		if sim.firstByteNs == 0 {
			sim.firstByteNs = now
		}
		sim.lastByteNs = now
	}
	rcv.unacked++
	complete := sg.endByte == sim.exchangeEnd[sg.exchange]
	switch {
	case !sim.p.DelayedACK:
		sim.sendACK(now)
	case rcv.quickACKs > 0:
		rcv.quickACKs--
		sim.sendACK(now)
	case rcv.unacked >= 2:
		sim.sendACK(now)
	case !rcv.timerArmed:
		rcv.timerArmed = true
		sim.push(event{atNs: now + delayedACKNs, kind: evClientDelayedACK})
	}
	if complete && sg.exchange < sim.baseHTTP {
		if sg.exchange+1 == sim.baseHTTP {
			sim.tlsDoneNs = now
			sim.ready(now)
		} else {
			rcv.unacked = 0
			sim.sendClientMessage(now, sg.exchange+1)
		}
	}
}

// result is what the run saw: times, rounds and responses.
func (sim *simulation) result() (Result, error) {
	p, ex, snd := sim.p, sim.ex, sim.snd
	res := Result{Params: p, ConnectMs: float64(sim.connectNs) / 1e6}
	res.RoundTrips.TCP = 1
	if sim.rcv.rcvNxtBytes < sim.streamBytes {
		return res, fmt.Errorf("model: the transfer stalled at %d of %d bytes (a bug in the model)", sim.rcv.rcvNxtBytes, sim.streamBytes)
	}
	firstByteNs, lastByteNs := sim.firstByteNs, sim.lastByteNs
	if p.SizeBytes == 0 {
		firstByteNs, lastByteNs = sim.connectNs, sim.connectNs
	}
	res.TLSMs = float64(sim.tlsDoneNs) / 1e6
	res.FirstByteMs = float64(firstByteNs) / 1e6
	res.LastByteMs = float64(lastByteNs) / 1e6
	res.FCTPaperMs = float64(lastByteNs-firstByteNs) / 1e6
	res.FCTUserMs = float64(lastByteNs) / 1e6
	if p.RateBitsPerSecond > 0 {
		res.SerializationMs = float64(p.SizeBytes) * 8 / float64(p.RateBitsPerSecond) * 1e3
	}
	if p.TLS != "" {
		res.ServerFlightBytes = int(ex[0].serverBytes)
		res.ServerFlightSegments = int(ceilDiv(ex[0].serverBytes, int64(p.MSS)))
	}
	res.Rounds = collectRounds(snd, ex, sim.s2c)
	for _, r := range res.Rounds {
		if r.Phase == "tls" {
			res.RoundTrips.TLS++
		} else {
			res.RoundTrips.HTTP++
		}
	}
	res.RoundTrips.Total = res.RoundTrips.TCP + res.RoundTrips.TLS + res.RoundTrips.HTTP
	res.ReadyMs = float64(sim.readyNs) / 1e6
	for i := sim.baseHTTP; i <= sim.lastHTTP; i++ {
		res.Responses = append(res.Responses, sim.response(i))
	}
	res.RateLimitedFromRound = rateLimitedFrom(snd, sim.s2c, res.Rounds)
	res.HyStartExitRound = snd.hystartExitRound
	return res, nil
}

// response is HTTP exchange i's response as the client received it.
func (sim *simulation) response(i int) Response {
	r := Response{SentMs: float64(sim.sentNs[i]) / 1e6}
	var start int64 = -1
	for _, sg := range sim.snd.segments[:sim.snd.next] {
		if sg.exchange != i {
			continue
		}
		if r.FirstRound == 0 {
			r.FirstRound, r.FirstByteMs = sg.round, float64(sg.arrivedNs)/1e6
			start = sg.startByte
		}
		r.LastRound, r.LastByteMs = sg.round, float64(sg.arrivedNs)/1e6
		r.Segments = append(r.Segments, SegmentArrival{EndByte: sg.endByte - start, ArrivedMs: float64(sg.arrivedNs) / 1e6, Round: sg.round})
	}
	return r
}

// serverProcessACK is the sender's tcp_ack: clean the retransmission queue, run the
// congestion control's hooks, take the new window.
func serverProcessACK(s *sender, nowNs, ackBytes, windowBytes int64) {
	s.sndWndBytes = windowBytes
	if ackBytes <= s.sndUnaBytes {
		return
	}
	newly := 0
	var newestSentNs int64
	for s.acked < s.next && s.segments[s.acked].endByte <= ackBytes {
		newestSentNs = s.segments[s.acked].sentNs
		s.roundOfAcked = s.segments[s.acked].round
		s.acked++
		newly++
	}
	s.sndUnaBytes = ackBytes
	if newly == 0 {
		return
	}
	wasFound := s.cubic.found
	s.pktsAcked(nowNs, (nowNs-newestSentNs)/1000)
	if !wasFound && s.cubic.found && s.next < len(s.segments) {
		s.hystartExitRound = s.segments[s.next].round
		if s.hystartExitRound == 0 {
			s.hystartExitRound = s.roundOfAcked + 1
		}
	}
	s.congAvoid(nowNs, newly)
	s.packetsOut -= newly
}

// collectRounds groups the segments by round.
func collectRounds(s *sender, ex []exchange, s2c *pipe) []Round {
	var out []Round
	var cum int64
	for i := 0; i < s.next; i++ {
		sg := s.segments[i]
		if len(out) == 0 || out[len(out)-1].Index != sg.round {
			if len(out) > 0 && out[len(out)-1].Phase != ex[sg.exchange].phase {
				cum = 0
			}
			out = append(out, Round{Index: sg.round, Phase: ex[sg.exchange].phase, StartMs: float64(sg.sentNs) / 1e6, CwndSegments: sg.cwndAtSend, Limit: "end"})
		}
		r := &out[len(out)-1]
		r.Segments++
		r.Bytes += sg.endByte - sg.startByte
		cum += sg.endByte - sg.startByte
		r.CumulativeBytes = cum
		switch {
		case i+1 >= s.next || s.segments[i+1].exchange != sg.exchange:
			r.Limit = "end"
		case s.segments[i+1].round != sg.round && sg.stopReason != "":
			r.Limit = sg.stopReason
		case s.segments[i+1].round != sg.round:
			r.Limit = "cwnd"
		}
	}
	return out
}

// rateLimitedFrom finds the first HTTP round from which the bottleneck stayed busy to
// the end of the response (0 when it went idle between the last two rounds).
func rateLimitedFrom(s *sender, s2c *pipe, rounds []Round) int {
	if s2c.rateBitsPerSecond <= 0 || len(rounds) < 2 || s.next == 0 {
		return 0
	}
	// The last busy period of the data link began with the first segment sent at or
	// after its start.
	lastBusyStart := s2c.busyStarts[len(s2c.busyStarts)-1]
	for i := 0; i < s.next; i++ {
		if s.segments[i].sentNs >= lastBusyStart {
			r := s.segments[i].round
			if r == rounds[len(rounds)-1].Index {
				return 0
			}
			for j := range rounds {
				if rounds[j].Index >= r && rounds[j].Index != rounds[len(rounds)-1].Index {
					rounds[j].Limit = "rate"
				}
			}
			return r
		}
	}
	return 0
}
