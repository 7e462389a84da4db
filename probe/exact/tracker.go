package exact

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/slowstart/slowstart/capture"
	tcpflow "github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/rounds"
)

// tracker follows one connection's packets as the capture delivers them and
// signals when the run can end: at the server's first retransmission, FIN or
// RST. It is safe for one goroutine adding packets while another reads.
type tracker struct {
	remote     netip.Addr
	remotePort uint16
	localPort  uint16

	mu sync.Mutex
	// The handshake, as seen on the wire.
	synAtNs, synAckAtNs int64
	clientMSS           int // the MSS our SYN carried on the wire
	serverMSS           int
	clientWindowScale   int // -1: no window scaling
	serverWindowScale   int
	serverISN           uint32
	haveSynAck          bool
	// synCount and synAckCount count the handshake's packets: more than one
	// means the handshake lost a packet.
	synCount, synAckCount int
	// clientWindowBytes is the receive window of this side's last packet (scaled).
	clientWindowBytes int
	// windowAtFirstDataBytes is clientWindowBytes when the first counted byte came.
	windowAtFirstDataBytes int
	// baseOffset: server stream bytes below it are not part of the flight
	// (the TLS handshake, when measuring after it). Until armed, data is kept
	// in pending, for when the base is known.
	baseOffset int64
	armed      bool
	pending    []serverSegment
	// segments are the server's data segments from baseOffset on, in arrival
	// order, up to and including the first retransmission.
	segments []serverSegment
	covered  []byteRange // distinct bytes seen, sorted and merged
	// firstRetransmission is the index in segments of the first segment with
	// bytes seen before; -1 until then.
	firstRetransmission int
	finAtNs, rstAtNs    int64
	finOffset           int64
	ended               chan struct{} // closed at the first retransmission, FIN or RST
	endedOnce           sync.Once
	// handshakeSeen is closed once the SYN and the SYN/ACK have been seen.
	handshakeSeen chan struct{}
	// serverClock reads the server's TCP timestamps as time on the server.
	serverClock tcpflow.SenderClock
	// packets counts the connection's packets, both ways.
	packets int
}

type serverSegment struct {
	atNs       int64
	start, end int64 // stream offsets (0 = the server's first data byte)
	headerLen  int
	tsVal      uint32 // the server's TCP timestamp, when hasTS
	hasTS      bool
}

type byteRange struct{ start, end int64 }

// newTracker follows the connection from localPort to remote:remotePort. When
// armed, the flight starts with the server's first data byte; otherwise at the
// offset given to setBase later.
func newTracker(remote netip.Addr, remotePort, localPort uint16, armed bool) *tracker {
	return &tracker{
		remote: remote.Unmap(), remotePort: remotePort, localPort: localPort,
		clientWindowScale: -1, serverWindowScale: -1, firstRetransmission: -1,
		armed: armed, ended: make(chan struct{}), handshakeSeen: make(chan struct{}),
	}
}

func (t *tracker) end() { t.endedOnce.Do(func() { close(t.ended) }) }

// setBase arms the tracker: the flight starts at the server's stream offset
// baseOffset (bytes), and the data seen so far beyond it is counted.
func (t *tracker) setBase(baseOffset int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.baseOffset, t.armed = baseOffset, true
	pending := t.pending
	t.pending = nil
	for _, s := range pending {
		if t.firstRetransmission < 0 {
			t.addData(s)
		}
	}
}

// clientMSSSeen is the MSS option of this side's SYN as it left.
func (t *tracker) clientMSSSeen() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.clientMSS
}

func (t *tracker) checkHandshake() {
	if t.synCount > 0 && t.haveSynAck {
		select {
		case <-t.handshakeSeen:
		default:
			close(t.handshakeSeen)
		}
	}
}

// add takes one captured packet of the connection.
func (t *tracker) add(p *capture.Packet) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fromServer := p.Src.Unmap() == t.remote && p.SrcPort == t.remotePort && p.DstPort == t.localPort
	if fromServer && p.Options.HasTimestamps {
		t.serverClock.Observe(p.Options.TSVal, p.TimestampNs)
	}
	if !fromServer {
		if p.Dst.Unmap() != t.remote || p.DstPort != t.remotePort || p.SrcPort != t.localPort {
			return
		}
		t.packets++
		t.addClient(p)
		return
	}
	t.packets++
	switch {
	case p.Has(capture.FlagSYN | capture.FlagACK):
		t.synAckCount++
		if !t.haveSynAck {
			t.haveSynAck = true
			t.synAckAtNs = p.TimestampNs
			t.serverISN = p.Seq
			t.serverMSS = int(p.Options.MSS)
			t.serverWindowScale = int(p.Options.WindowScale)
			t.checkHandshake()
		}
		return
	case !t.haveSynAck:
		return
	}
	offset := int64(p.Seq - t.serverISN - 1)
	if p.Has(capture.FlagRST) {
		if t.rstAtNs == 0 {
			t.rstAtNs = p.TimestampNs
		}
		t.end()
		return
	}
	if p.PayloadLen > 0 && t.firstRetransmission < 0 {
		t.addData(serverSegment{atNs: p.TimestampNs, start: offset, end: offset + int64(p.PayloadLen), headerLen: p.HeaderLen,
			tsVal: p.Options.TSVal, hasTS: p.Options.HasTimestamps})
	}
	if p.Has(capture.FlagFIN) && t.finAtNs == 0 {
		t.finAtNs = p.TimestampNs
		t.finOffset = offset + int64(p.PayloadLen)
		t.end()
	}
}

func (t *tracker) addClient(p *capture.Packet) {
	if p.Has(capture.FlagSYN) {
		t.synCount++
		if t.synCount == 1 {
			t.synAtNs = p.TimestampNs
		}
		t.clientMSS = int(p.Options.MSS)
		t.clientWindowScale = int(p.Options.WindowScale)
		t.clientWindowBytes = int(p.Window) // not scaled in a SYN
		t.checkHandshake()
		return
	}
	shift := 0
	if t.clientWindowScale >= 0 && t.serverWindowScale >= 0 {
		shift = t.clientWindowScale
	}
	t.clientWindowBytes = int(p.Window) << shift
}

func (t *tracker) addData(s serverSegment) {
	if !t.armed {
		t.pending = append(t.pending, s)
		return
	}
	if s.end <= t.baseOffset {
		return
	}
	s.start = max(s.start, t.baseOffset)
	start, end := s.start, s.end
	if len(t.segments) == 0 {
		t.windowAtFirstDataBytes = t.clientWindowBytes
	}
	t.segments = append(t.segments, s)
	// Without ACKs a server sends its flight in sequence order: a segment that
	// starts below the highest byte seen is a retransmission, of bytes seen
	// (the usual first one) or of bytes lost on the way (a hole, which the
	// classification calls loss). Network reordering looks the same and is
	// called loss too.
	if len(t.covered) > 0 && start < t.covered[len(t.covered)-1].end {
		t.firstRetransmission = len(t.segments) - 1
		t.end()
		return
	}
	t.covered = insertRange(t.covered, byteRange{start, end})
}

// insertRange adds r to sorted, merged ranges, keeping them so.
func insertRange(ranges []byteRange, r byteRange) []byteRange {
	ranges = append(ranges, r)
	slices.SortFunc(ranges, func(a, b byteRange) int { return int(a.start - b.start) })
	merged := ranges[:1]
	for _, next := range ranges[1:] {
		last := &merged[len(merged)-1]
		if next.start <= last.end {
			last.end = max(last.end, next.end)
			continue
		}
		merged = append(merged, next)
	}
	return merged
}

// sawFIN reports whether the server's FIN has been captured.
func (t *tracker) sawFIN() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.finAtNs != 0
}

// handshakeRTTNs is the SYN to SYN/ACK time seen on the wire; 0 when unknown.
func (t *tracker) handshakeRTTNs() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.synCount == 0 || !t.haveSynAck {
		return 0
	}
	return t.synAckAtNs - t.synAtNs
}

// acklessLossProbe is rounds' tail loss probe rule with the thresholds of a
// measurement that sends no ACKs. A passive reading (rounds.LossProbe) must tell a
// probe timer from a server that paused for its application with its ACKs back, and
// asks for a full RTT and Linux's 10 ms floor. Here no ACK ever reaches the server:
// once its window is out it can send again only on a timer, so the bar has only to
// clear the flight's own spacing and a handshake RTT inflated by a stall on the way
// (Linux's probe timeout is 2·SRTT, so three quarters of the measured RTT leaves room
// for a handshake RTT read at up to 2.6 times the true one), and 4 ms stays under the
// 10 ms floor, which a timer counted in whole kernel ticks can cut short by a tick.
var acklessLossProbe = rounds.LossProbeRule{RTTs: 0.75, MinGapNs: 4_000_000, SpacingTimes: rounds.LossProbe.SpacingTimes}

// classifyInput is what the run knew besides the packets.
type classifyInput struct {
	announcedMSS int
	// flightBytes is the length of the response or TLS flight (from baseOffset)
	// when this side saw it complete; -1 when it did not.
	flightBytes int64
	// requestAtNs is when the request (or ClientHello) was written.
	requestAtNs int64
}

// classify turns what the tracker saw into a run's outcome.
func (t *tracker) classify(in classifyInput) Run {
	t.mu.Lock()
	defer t.mu.Unlock()
	run := Run{ServerMSS: t.serverMSS, ReceiveWindowBytes: t.windowAtFirstDataBytes, Packets: t.packets}
	if in.flightBytes >= 0 {
		run.FlightBytes = int(in.flightBytes)
	}
	if t.synCount > 0 && t.haveSynAck {
		run.HandshakeRTTMs = float64(t.synAckAtNs-t.synAtNs) / 1e6
	}
	newData := t.segments
	if t.firstRetransmission >= 0 {
		run.Retransmission = true
		newData = t.segments[:t.firstRetransmission]
		if in.requestAtNs > 0 {
			run.FirstRetransmissionMs = float64(t.segments[t.firstRetransmission].atNs-in.requestAtNs) / 1e6
		}
	}
	if len(newData) == 0 {
		t.classifyNoData(&run)
		return run
	}
	run.SegmentBytes, run.MergedSegments = t.segmentSize(newData, in.announcedMSS)
	probeBytes := t.lossProbeBytes(newData, run.SegmentBytes)
	run.LossProbeBytes = int(probeBytes)
	t.judge(&run, newData, probeBytes, in.flightBytes)
	return run
}

// classifyNoData is the outcome of a run in which the server sent no new data.
func (t *tracker) classifyNoData(run *Run) {
	if run.ReceiveWindowBytes == 0 {
		run.ReceiveWindowBytes = t.clientWindowBytes
	}
	switch {
	case t.rstAtNs != 0:
		run.Outcome, run.Reason = OutcomeRST, "the server reset the connection before sending any data"
	case t.finAtNs != 0:
		run.Outcome, run.Reason = OutcomeFIN, "the server closed the connection before sending any data"
	default:
		run.Outcome, run.Reason = OutcomeTimeout, "the server sent no data in time"
	}
}

// segmentSize is the size of the server's segments: the largest payload seen, or
// the announced MSS less the server's TCP options when every segment was short;
// merged tells that the capture saw several segments as one packet.
func (t *tracker) segmentSize(newData []serverSegment, announcedMSS int) (segmentBytes int, merged bool) {
	maxPayload := 0
	for _, s := range newData {
		maxPayload = max(maxPayload, int(s.end-s.start))
	}
	optionBytes := max(newData[0].headerLen-20, 0)
	segmentBytes = max(maxPayload, announcedMSS-optionBytes, 1)
	full := announcedMSS - optionBytes
	if full <= 0 || maxPayload <= full {
		return segmentBytes, false
	}
	// Longer than the server may send: either the server raised the MSS
	// (a higher minimum than Linux's 48 bytes: every full segment then has
	// that one larger size), or the capture saw segments merged (GSO on
	// loopback, GRO on a receiving NIC: sizes that vary, sums of segments).
	larger := map[int]int{}
	for _, s := range newData {
		if n := int(s.end - s.start); n > full {
			larger[n]++
		}
	}
	if len(larger) > 1 || (len(larger) == 1 && maxPayload%full == 0 && larger[maxPayload] == 1) {
		segmentBytes, merged = full, true
	}
	// The first retransmission resends the flight's first segment, one segment
	// whatever offload merged on the way out: a shorter one that divides the
	// larger packets proves they were merged segments of its size (not a raised
	// MSS, whose segments are all one larger size, retransmissions included).
	if retx := t.firstRetransmission; retx >= 0 {
		n := int(t.segments[retx].end - t.segments[retx].start)
		if n > 0 && n < maxPayload && maxPayload%n == 0 {
			segmentBytes, merged = n, true
		}
	}
	return segmentBytes, merged
}

// lossProbeBytes is the length of a tail loss probe ending newData, or 0: the last
// new data came alone, one segment at most, after a silence the acklessLossProbe
// rule takes for a timer's, beyond everything sent before. The silence is timed on
// the server's clock too where its timestamps allow: a stall on the way can bunch
// the flight and the probe up on arrival, and inflate the handshake's RTT.
func (t *tracker) lossProbeBytes(newData []serverSegment, segmentBytes int) int64 {
	n := len(newData)
	if n < 2 {
		return 0
	}
	last, previous := newData[n-1], newData[n-2]
	highest := int64(0)
	for _, s := range newData[:n-1] {
		highest = max(highest, s.end)
	}
	rttNs := max(t.synAckAtNs-t.synAtNs, 0)
	silenceNs := last.atNs - previous.atNs
	if last.hasTS && previous.hasTS {
		if serverNs, ok := t.serverClock.GapNs(previous.tsVal, last.tsVal, last.atNs); ok {
			silenceNs = max(silenceNs, serverNs)
		}
	}
	var spacingNs int64
	if n > 2 {
		spacingNs = (previous.atNs - newData[0].atNs) / int64(n-2)
	}
	if acklessLossProbe.Holds(silenceNs, rttNs, spacingNs) && last.end-last.start <= int64(segmentBytes) && last.start >= highest {
		return last.end - last.start
	}
	return 0
}

// judge counts the flight's bytes and segments (less the probe) and gives the
// run its outcome and reason.
func (t *tracker) judge(run *Run, newData []serverSegment, probeBytes, flightBytes int64) {
	var covered []byteRange
	for _, s := range newData {
		covered = insertRange(covered, byteRange{s.start, s.end})
	}
	contiguous := len(covered) == 1 && covered[0].start == t.baseOffset
	// The distinct bytes less the probe (with a hole, those seen).
	distinct := int64(0)
	for _, r := range covered {
		distinct += r.end - r.start
	}
	run.Bytes = int(distinct - probeBytes)
	countedEnd := t.baseOffset + int64(run.Bytes)
	run.Segments = (run.Bytes + run.SegmentBytes - 1) / run.SegmentBytes
	complete := flightBytes >= 0 && t.baseOffset+flightBytes <= countedEnd
	finInFlight := t.finAtNs != 0 && t.finOffset <= countedEnd && (t.firstRetransmission < 0 || t.finAtNs <= t.segments[t.firstRetransmission].atNs)

	switch {
	case t.synCount > 1 || t.synAckCount > 1:
		run.Outcome = OutcomeLoss
		run.Reason = fmt.Sprintf("the handshake lost a packet (%d SYNs, %d SYN/ACKs seen): a server then starts with a smaller window (RFC 5681 allows one segment), so the count is not the initial window", t.synCount, t.synAckCount)
	case !contiguous:
		missing := int64(0)
		previousEnd := t.baseOffset
		for _, r := range covered {
			missing += max(r.start-previousEnd, 0)
			previousEnd = r.end
		}
		run.Outcome = OutcomeLoss
		run.Reason = fmt.Sprintf("%d bytes of the flight never arrived before the first retransmission: a segment was lost, so the count is not trustworthy", missing)
	case t.rstAtNs != 0 && (t.firstRetransmission < 0 || t.rstAtNs < t.segments[t.firstRetransmission].atNs):
		run.Outcome = OutcomeLoss
		run.Reason = fmt.Sprintf("the server reset the connection after %d bytes, before any retransmission: the count is not trustworthy", run.Bytes)
	case probeBytes == 0 && (complete || finInFlight):
		run.Outcome = OutcomeTooShort
		run.Reason = fmt.Sprintf("the server's answer ended after %d bytes (%d segments), inside its window: a lower bound", run.Bytes, run.Segments)
	case t.firstRetransmission < 0 && probeBytes == 0:
		run.Outcome = OutcomeTimeout
		run.Reason = fmt.Sprintf("the server sent %d bytes and then neither more data nor a retransmission in time", run.Bytes)
	case run.ReceiveWindowBytes > 0 && run.Bytes+run.SegmentBytes > run.ReceiveWindowBytes:
		run.Outcome = OutcomeRwndLimited
		run.Reason = fmt.Sprintf("the %d bytes in flight reached the %d-byte receive window this side advertised: the window is at least %d segments", run.Bytes, run.ReceiveWindowBytes, run.Segments)
	default:
		run.Outcome = OutcomeSuccess
		run.Reason = fmt.Sprintf("%d segments of %d bytes (%d bytes) before the first retransmission", run.Segments, run.SegmentBytes, run.Bytes)
		if probeBytes > 0 {
			run.Reason += fmt.Sprintf("; a %d-byte tail loss probe excluded", probeBytes)
		}
	}
}
