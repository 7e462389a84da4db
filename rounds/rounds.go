// Package rounds splits the server's sending on one TCP connection into round trips
// by the ACK clock, labels why each round ended, and infers the server's initial
// congestion window (IW) from the first round.
//
// A data segment belongs to round 1 + the highest round of the data acknowledged by
// the client packets the server had received when it sent the segment. What the
// server "had received" is read, in order of preference:
//   - at the server's vantage point, from capture times: every client packet
//     captured before the segment (method "ack_clock");
//   - from TCP timestamps, at any vantage point: a server segment echoes (TSecr) the
//     timestamp of the latest client packet the server had seen (method "timestamps");
//   - at the client's vantage point without timestamps, from capture times shifted by
//     the round-trip time: client packets sent before t - (1-ε)·RTT (method "ack_clock");
//   - failing all of these, from gaps in the server's sending (method "gaps"), which the
//     report flags as a fallback.
//
// The package sees only flow segments; it knows nothing of TLS or HTTP except the
// message boundaries its caller passes to Label.
package rounds

import (
	"fmt"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/report"
)

// Methods of assigning segments to rounds.
const (
	MethodACKClock   = "ack_clock"
	MethodTimestamps = "timestamps"
	MethodGaps       = "gaps"
)

// Config describes the connection as far as rounds need it.
type Config struct {
	Vantage string // flow.VantageClient, flow.VantageServer or flow.VantageUnknown
	RTTNs   int64  // handshake round-trip time; 0 when unknown
	MSS     int    // full-segment payload size; 0 when unknown (then learned from data)
	// Timestamps: both SYNs carried the timestamp option, so TSecr can be used.
	Timestamps bool
}

// Round is one round trip of the server's sending, before labeling.
type Round struct {
	Index           int
	StartOffset     int64 // stream offset of the round's first new byte
	EndOffset       int64 // one past its last new byte
	FirstNs, LastNs int64 // capture times of its first and last new-data segment
	Bytes           int
	Segments        int
	Packets         int
	Retransmissions int
	OutOfOrder      int
	// Lost counts segments of this round that were sent again later, or that never
	// reached the capture point in order (holes in the sequence).
	Lost int
	// WindowRoomBytes is the room left in the client's advertised window after the
	// round's last segment, as the server knew it (negative: beyond the window).
	WindowRoomBytes    int64
	InFlightBytes      int64
	ReceiveWindowBytes int
	// FirstAckNs is when the first acknowledgement of any of the round's bytes was
	// sent (client vantage) or received (server vantage); 0 if never.
	FirstAckNs int64
	// ReleaseNs is the time of the latest client packet the server had seen when it
	// sent the round's first segment (what released it).
	ReleaseNs int64
	// ClientDataAtStart / ClientDataAtEnd: how much of the client's stream the server
	// had seen at the round's first and last segment.
	ClientDataAtStart int64
	ClientDataAtEnd   int64
	// ProbeSegments and ProbeBytes are the round's last segment when it was a tail loss
	// probe: one new segment the server sent after a silence of at least LossProbeRTTs
	// round trips with no acknowledgement (Linux sends one after 2·SRTT), beyond what
	// the congestion window allowed. They are counted in Segments and Bytes; the
	// round's window is WindowSegments.
	ProbeSegments, ProbeBytes int
	// ProbeGapNs is the silence before the probe.
	ProbeGapNs int64
	Limit      string
}

// WindowSegments is the round's segments less a tail loss probe: what the congestion
// window let through.
func (r *Round) WindowSegments() int { return r.Segments - r.ProbeSegments }

// ProbeNote is a clause for a reason that counted WindowSegments: "" without a probe.
func (r *Round) ProbeNote() string {
	if r.ProbeSegments == 0 {
		return ""
	}
	return fmt.Sprintf("; not counted: %d more segment the server sent %.1f ms later with nothing acknowledged, a tail loss probe", r.ProbeSegments, float64(r.ProbeGapNs)/1e6)
}

// WindowBytes is Bytes less a tail loss probe.
func (r *Round) WindowBytes() int { return r.Bytes - r.ProbeBytes }

// LossProbeRTTs is the least silence, in round trips (and at least
// lossProbeMinGapNs), before a lone new segment at a round's end that the tracker
// takes for a tail loss probe. Linux's probe timeout is 2·SRTT, at least 10 ms; one
// RTT leaves room for a handshake RTT inflated by a stall on the way. A sender limited
// by its window cannot send after such a silence with nothing acknowledged but by a
// timer; one that had paused for its application would have had its ACKs back.
const LossProbeRTTs = 1.0

// lossProbeMinGapNs is Linux's least probe timeout.
const lossProbeMinGapNs = 10_000_000

type clientPacket struct {
	timeNs int64
	ack    int64
	hasAck bool
	window int
	tsVal  uint32
	// dataEnd is one past the client's highest stream byte as of this packet.
	dataEnd int64
}

// Tracker assigns the server's segments of one connection to rounds. Feed it every
// segment of the connection in capture order, then call Label.
type Tracker struct {
	cfg    Config
	method string
	// Client packets not yet known to the server (client vantage), in order.
	pending []clientPacket
	head    int
	// What the server knew of the client.
	knownAck      int64
	knownAckSet   bool
	knownWindow   int
	knownDataEnd  int64
	knownLatestNs int64
	lastPopTS     uint32
	lastPopTSSet  bool
	clientDataEnd int64

	sndNxt int64
	rounds []Round
	// learnedSinceData: a client packet became known since the last new-data segment.
	learnedSinceData bool
	// The server's TCP timestamp clock and the last new-data segment's timestamp,
	// to time a silence on the server's own clock.
	serverClock   flow.SenderClock
	lastDataTS    uint32
	lastDataTSSet bool
	firstAckIdx   int // first round whose FirstAckNs is not yet set
	lastDataNs    int64
	mssLearned    int
}

// New makes a Tracker.
func New(cfg Config) *Tracker {
	t := &Tracker{cfg: cfg}
	switch {
	case cfg.Vantage == flow.VantageServer:
		t.method = MethodACKClock
	case cfg.Timestamps:
		t.method = MethodTimestamps
	case cfg.Vantage == flow.VantageClient && cfg.RTTNs > 0:
		t.method = MethodACKClock
	default:
		t.method = MethodGaps
	}
	return t
}

// Method says how segments were assigned to rounds.
func (t *Tracker) Method() string { return t.method }

// Add processes one segment of the connection, in capture order.
func (t *Tracker) Add(s *flow.Segment) {
	if s.Dir == flow.ToServer {
		t.addClient(s)
		return
	}
	t.addServer(s)
}

func (t *Tracker) addClient(s *flow.Segment) {
	if s.NewLen > 0 {
		t.clientDataEnd = max(t.clientDataEnd, s.NewOffset+int64(s.NewLen))
	}
	p := clientPacket{timeNs: s.TimeNs, ack: s.AckOffset, hasAck: s.HasAck, window: s.WindowBytes, tsVal: s.TSVal, dataEnd: t.clientDataEnd}
	if t.method == MethodACKClock && t.cfg.Vantage == flow.VantageServer || t.method == MethodGaps {
		t.learn(&p)
		return
	}
	if t.method == MethodTimestamps && !s.HasTS {
		// A client packet without a timestamp can't be matched; treat it as known
		// at once (it can only make rounds start later, never earlier).
		t.learn(&p)
		return
	}
	t.pending = append(t.pending, p)
}

// learn records that the server has seen client packet p.
func (t *Tracker) learn(p *clientPacket) {
	t.knownLatestNs = p.timeNs
	t.learnedSinceData = true
	t.knownDataEnd = max(t.knownDataEnd, p.dataEnd)
	if !p.hasAck {
		return
	}
	if !t.knownAckSet || p.ack > t.knownAck {
		t.knownAck, t.knownAckSet = p.ack, true
		for t.firstAckIdx < len(t.rounds) && p.ack > t.rounds[t.firstAckIdx].StartOffset {
			t.rounds[t.firstAckIdx].FirstAckNs = p.timeNs
			t.firstAckIdx++
		}
	}
	if p.ack >= t.knownAck {
		t.knownWindow = p.window
	}
}

// catchUp learns the pending client packets the server had seen when it sent s.
func (t *Tracker) catchUp(s *flow.Segment) {
	switch t.method {
	case MethodTimestamps:
		if !s.HasTS {
			return
		}
		for t.head < len(t.pending) {
			p := &t.pending[t.head]
			d := int32(p.tsVal - s.TSEcr)
			if d > 0 {
				break
			}
			if d == 0 {
				// Of the client packets stamped with the echoed value, the server
				// surely saw the first; the others it may not have.
				if t.lastPopTSSet && t.lastPopTS == p.tsVal {
					break
				}
			}
			t.lastPopTS, t.lastPopTSSet = p.tsVal, true
			t.learn(p)
			t.head++
		}
	case MethodACKClock:
		// Client vantage: an ACK sent at ta can release data arriving at ta + RTT at
		// the earliest; allow a quarter of the RTT for jitter.
		cutoff := s.TimeNs - t.cfg.RTTNs*3/4
		for t.head < len(t.pending) && t.pending[t.head].timeNs < cutoff {
			t.learn(&t.pending[t.head])
			t.head++
		}
	}
	if t.head > 1024 && t.head*2 > len(t.pending) {
		n := copy(t.pending, t.pending[t.head:])
		t.pending = t.pending[:n]
		t.head = 0
	}
}

// roundOf returns the round holding stream byte x (0 when x precedes all rounds).
func (t *Tracker) roundOf(x int64) int {
	lo, hi := 0, len(t.rounds)
	for lo < hi {
		mid := (lo + hi) / 2
		if t.rounds[mid].StartOffset <= x {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo // number of rounds starting at or before x = index (1-based) of x's round
}

func (t *Tracker) mss() int {
	if t.cfg.MSS > 0 {
		return t.cfg.MSS
	}
	if t.mssLearned > 0 {
		return t.mssLearned
	}
	return 1448
}

func (t *Tracker) addServer(s *flow.Segment) {
	if s.HasTS {
		t.serverClock.Observe(s.TSVal, s.TimeNs)
	}
	if s.Len == 0 {
		return
	}
	t.catchUp(s)
	if s.HasAck && s.AckOffset > t.knownDataEnd {
		// The server acknowledges client data it has surely seen.
		t.knownDataEnd = s.AckOffset
	}
	if s.NewLen == 0 {
		if n := len(t.rounds); n > 0 {
			if s.OutOfOrder {
				t.rounds[n-1].OutOfOrder++
			} else {
				t.rounds[n-1].Retransmissions++
			}
			if k := t.roundOf(s.Offset); k > 0 {
				t.rounds[k-1].Lost++
			}
		}
		return
	}
	if t.cfg.MSS == 0 && s.Len > t.mssLearned && s.Len <= 9000 {
		t.mssLearned = s.Len
	}
	r := t.assign(s)
	// A tail loss probe is a round's last segment: one that another segment joins is
	// not, and this one may be.
	var probeGapNs int64
	isProbe := false
	if r == len(t.rounds) {
		last := &t.rounds[len(t.rounds)-1]
		last.ProbeSegments, last.ProbeBytes, last.ProbeGapNs = 0, 0, 0
		probeGapNs, isProbe = t.probeGap(s)
	}
	if r > len(t.rounds) {
		t.rounds = append(t.rounds, Round{
			Index:             r,
			StartOffset:       s.NewOffset,
			FirstNs:           s.TimeNs,
			ReleaseNs:         t.knownLatestNs,
			ClientDataAtStart: t.knownDataEnd,
		})
	}
	rd := &t.rounds[len(t.rounds)-1]
	segments := (s.NewLen + t.mss() - 1) / t.mss()
	rd.Bytes += s.NewLen
	rd.Segments += segments
	rd.Packets++
	if isProbe {
		rd.ProbeSegments, rd.ProbeBytes, rd.ProbeGapNs = segments, s.NewLen, probeGapNs
	}
	if s.Retransmission {
		rd.Retransmissions++
		if k := t.roundOf(s.Offset); k > 0 {
			t.rounds[k-1].Lost++
		}
	}
	if s.Hole {
		rd.Lost++
	}
	if s.OutOfOrder {
		rd.OutOfOrder++
	}
	rd.LastNs = s.TimeNs
	end := s.NewOffset + int64(s.NewLen)
	rd.EndOffset = end
	rd.ClientDataAtEnd = t.knownDataEnd
	if t.knownAckSet {
		rd.InFlightBytes = end - t.knownAck
		rd.ReceiveWindowBytes = t.knownWindow
		rd.WindowRoomBytes = t.knownAck + int64(t.knownWindow) - end
	} else {
		rd.InFlightBytes = end - rd.StartOffset
		rd.WindowRoomBytes = 1 << 40
	}
	t.sndNxt = end
	t.lastDataNs = s.TimeNs
	t.lastDataTS, t.lastDataTSSet = s.TSVal, s.HasTS
	t.learnedSinceData = false
}

// serverGapNs is the time between the last new-data segment and s: the larger of the
// capture's gap and the server's own, from its TCP timestamps (flow.SenderClock). Away
// from the server, delays on the path can shrink the capture's gap.
func (t *Tracker) serverGapNs(s *flow.Segment) int64 {
	gapNs := s.TimeNs - t.lastDataNs
	if s.HasTS && t.lastDataTSSet {
		if serverNs, ok := t.serverClock.GapNs(t.lastDataTS, s.TSVal, s.TimeNs); ok {
			gapNs = max(gapNs, serverNs)
		}
	}
	return gapNs
}

// probeGap reports whether new-data segment s, in the same round as the last one
// (before s joins it), looks like a tail loss probe, and the silence before it: one
// segment, after a silence of LossProbeRTTs round trips (and far beyond the round's
// own spacing of segments) in which no client packet became known.
func (t *Tracker) probeGap(s *flow.Segment) (gapNs int64, ok bool) {
	if t.cfg.RTTNs <= 0 || t.learnedSinceData || s.NewLen > t.mss() || len(t.rounds) == 0 {
		return 0, false
	}
	rd := &t.rounds[len(t.rounds)-1]
	gapNs = t.serverGapNs(s)
	if gapNs < lossProbeMinGapNs || float64(gapNs) < LossProbeRTTs*float64(t.cfg.RTTNs) {
		return 0, false
	}
	var spacingNs int64
	if rd.Packets > 1 {
		spacingNs = (rd.LastNs - rd.FirstNs) / int64(rd.Packets-1)
	}
	return gapNs, gapNs > 4*spacingNs
}

// assign returns the round of a new-data segment.
func (t *Tracker) assign(s *flow.Segment) int {
	last := len(t.rounds)
	if last == 0 {
		return 1
	}
	if t.method == MethodGaps {
		gap := int64(5e6)
		if t.cfg.RTTNs > 0 {
			gap = max(t.cfg.RTTNs/4, 1e6)
		}
		if s.TimeNs-t.lastDataNs > gap {
			return last + 1
		}
		return last
	}
	r := 1
	if t.knownAckSet {
		r = 1 + t.roundOf(t.knownAck-1)
	}
	// Rounds never go back (client-vantage timing can only make them look earlier).
	return max(r, last)
}

// Rounds returns the rounds so far (unlabeled until Label).
func (t *Tracker) Rounds() []Round { return t.rounds }

// Label decides why each round ended. messageEnds are stream offsets where a
// message of the server ended (an HTTP response, the TLS handshake flight); a round
// ending exactly there ended because the message did. The last round is "end".
func (t *Tracker) Label(messageEnds []int64) []Round {
	if n := len(t.rounds); n > 0 {
		// Only a later round shows that a lone segment at a round's end was a probe:
		// one at the end of the last round is left as data.
		last := &t.rounds[n-1]
		last.ProbeSegments, last.ProbeBytes, last.ProbeGapNs = 0, 0, 0
	}
	isEnd := make(map[int64]bool, len(messageEnds))
	for _, e := range messageEnds {
		isEnd[e] = true
	}
	mss := int64(t.mss())
	idle := t.idleThresholdNs()
	for i := range t.rounds {
		r := &t.rounds[i]
		switch {
		case r.Retransmissions > 0:
			r.Limit = report.LimitLoss
		case i == len(t.rounds)-1:
			r.Limit = report.LimitEnd
		case isEnd[r.EndOffset]:
			r.Limit = report.LimitEnd
		case r.WindowRoomBytes < mss:
			r.Limit = report.LimitRwnd
		default:
			r.Limit = t.idleLimit(r, &t.rounds[i+1], idle)
		}
	}
	return t.rounds
}

func (t *Tracker) idleThresholdNs() int64 {
	switch {
	case t.cfg.Vantage == flow.VantageServer:
		// A cwnd-limited sender answers an ACK within microseconds; allow for a
		// loaded host (softirq and capture delays) before calling it idle.
		return max(int64(2e6), t.cfg.RTTNs/8)
	default:
		// Away from the server, queues and scheduling add jitter to every
		// arrival: claim the server waited only past a quarter of the RTT.
		return max(int64(3e6), t.cfg.RTTNs/4)
	}
}

// idleLimit labels round r, followed by next, as cwnd-limited unless the server
// could have sent the next round earlier than it did (app), or the next round
// answered new data from the client (end of an exchange).
func (t *Tracker) idleLimit(r, next *Round, idleNs int64) string {
	newClientData := next.ClientDataAtStart > r.ClientDataAtEnd
	if t.method == MethodGaps {
		if newClientData {
			return report.LimitEnd
		}
		return report.LimitCwnd
	}
	waited := false
	if r.FirstAckNs == 0 {
		// The next round was released by something other than an acknowledgement of
		// this one.
		waited = true
	} else if t.cfg.Vantage == flow.VantageServer {
		waited = next.FirstNs-r.FirstAckNs > idleNs
	} else {
		waited = next.ReleaseNs-r.FirstAckNs > idleNs
		if !waited && t.cfg.RTTNs > 0 {
			// The server held data after the releasing packet reached it, and the
			// link went idle (beyond the round's own spacing of arrivals, which a
			// slow bottleneck stretches).
			var spacing int64
			if r.Packets > 1 {
				spacing = (r.LastNs - r.FirstNs) / int64(r.Packets-1)
			}
			held := next.FirstNs - (next.ReleaseNs + t.cfg.RTTNs)
			waited = held > idleNs && next.FirstNs-r.LastNs > idleNs+2*spacing
		}
	}
	switch {
	case !waited:
		return report.LimitCwnd
	case newClientData:
		return report.LimitEnd
	}
	return report.LimitApp
}

// InitialWindow judges the IW from round 1 of the given rounds (labeled), counting
// segments with mss.
func InitialWindow(rs []Round, source string) *report.InitialWindow {
	if len(rs) == 0 {
		return &report.InitialWindow{Verdict: report.VerdictNone, Source: source, Reason: "the server sent no data"}
	}
	r := rs[0]
	iw := &report.InitialWindow{Segments: r.WindowSegments(), Bytes: r.WindowBytes(), Source: source}
	defer func() { iw.Reason += r.ProbeNote() }()
	switch {
	case r.Retransmissions > 0 || r.OutOfOrder > 0 || r.Lost > 0:
		iw.Verdict = report.VerdictAmbiguous
		iw.Reason = "loss, a retransmission or reordering in the first round blurs it"
	case r.Limit == report.LimitCwnd:
		iw.Verdict = report.VerdictExact
		iw.Reason = "the server stopped after the first round with data left and room in the receive window, and sent more as soon as the first acknowledgement came back"
	case r.Limit == report.LimitRwnd:
		iw.Verdict = report.VerdictRwndLimited
		iw.Reason = "the client's receive window, not the congestion window, capped the first round"
	default:
		iw.Verdict = report.VerdictLowerBound
		iw.Reason = "everything the server had to send fit in the first round, so the window is at least this large"
	}
	return iw
}
