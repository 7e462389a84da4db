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
	"slices"
	"strconv"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/report"
)

// Methods of assigning segments to rounds.
const (
	MethodACKClock   = "ack_clock"
	MethodTimestamps = "timestamps"
	MethodGaps       = "gaps"
)

// minTicksPerRTT is how many ticks of the client's timestamp clock a round trip
// must span for the timestamps method: with fewer, one echoed value covers
// acknowledgements from more than a quarter of a round trip, and rounds merge.
const minTicksPerRTT = 4

// Config describes the connection as far as rounds need it.
type Config struct {
	Vantage string // flow.VantageClient, flow.VantageServer or flow.VantageUnknown
	RTTNs   int64  // handshake round-trip time; 0 when unknown
	// SegmentCap is the largest payload one of the server's segments may carry: the
	// client's MSS option less options (flow.Conn.SegmentCap). Larger frames are
	// segments merged by the capture (GRO, TSO). 0 when unknown: the segment size is
	// then inferred from the frames, and said to be.
	SegmentCap int
	// OwnMSS is the server's own MSS option less options (0: none): it bounds only
	// what the server receives, but a server often derives it from its own MTU,
	// which bounds its segments too (an IPv6 server on a 1280-byte path announces
	// 1220 and sends 1208-byte segments to a client that allows 1408).
	OwnMSS int
	// Timestamps: both SYNs carried the timestamp option, so TSecr can be used (if
	// the client's timestamp clock ticks fast enough to resolve the round trip).
	Timestamps bool
	// SYNACKTSVal, captured at SYNACKNs, is the timestamp of the server's one
	// SYN/ACK (SYNACKNs 0: none known): the server's clock is read from there on.
	SYNACKTSVal uint32
	SYNACKNs    int64
	// ClientSYNTSVal, captured at ClientSYNNs (0: none known), is the timestamp of
	// the client's SYN: the client's clock is judged from there, over the whole
	// handshake, not from the few packets after it (a 2 Hz clock that does not tick
	// between the handshake's ACK and the request looks like any other).
	ClientSYNTSVal uint32
	ClientSYNNs    int64
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
	// Lost counts segments of this round that were sent again later.
	Lost int
	// Holes counts places where the capture missed bytes of this round or right
	// after it: a gap in the sequence at or next to it, or bytes the client
	// acknowledged that the capture never saw. Such a round's size is unknown.
	Holes int
	// LastFrameBytes is the new bytes of the round's last new-data frame; a round
	// whose last frame ends in a partial segment was not cut by the congestion
	// window (a window-limited sender with more to send sends full segments).
	LastFrameBytes int
	// MinInsideFrameBytes is the new bytes of the round's shortest new-data frame
	// before its last one (0 for a round of one frame): a round with a frame
	// shorter than a full segment inside it sent fewer bytes than its packets'
	// worth of full segments.
	MinInsideFrameBytes int
	// WindowRoomBytes is the room left in the client's advertised window after the
	// round's last segment, as the server knew it (negative: beyond the window).
	WindowRoomBytes    int64
	InFlightBytes      int64
	ReceiveWindowBytes int
	// FirstAckNs is when the first acknowledgement of any of the round's bytes was
	// sent (client vantage) or received (server vantage); 0 if never.
	FirstAckNs int64
	// ClientDataAtFirstAck is how much of the client's stream the server had seen
	// with that first acknowledgement: beyond ClientDataAtEnd, the packet that
	// acknowledged the round also brought new client data (a request), which may
	// have released the next round as well as the acknowledgement did.
	ClientDataAtFirstAck int64
	// ReleaseNs is the time of the latest client packet the server had seen when it
	// sent the round's first segment (what released it).
	ReleaseNs int64
	// RequestNs is the time of the latest client packet with new data (a request,
	// a TLS message) the server had seen then (none when ClientDataAtStart is 0): the round's first segment
	// less this is how long the server took to answer that data, a round trip
	// more away from the server.
	RequestNs int64
	// ReleaseAck is the highest acknowledgement the server had seen when it sent the
	// round's first segment (-1: none).
	ReleaseAck int64
	// ReleaseAckMax is the highest acknowledgement the server may have seen then
	// (-1: none): away from the server, what it surely saw (ReleaseAck) is read
	// conservatively, and a proof that it had *not* yet seen an acknowledgement
	// needs the other bound: at the client with timestamps every client packet
	// stamped with the echoed value or earlier, by capture time every one sent a
	// quarter of a round trip before the data arrived.
	ReleaseAckMax int64
	// BytesOnSACK is how much of the round the server sent before any byte of the
	// round before it was acknowledged: on SACK blocks or duplicate ACKs alone,
	// which take out of flight only what they report received. SACKedAtSend and
	// DupAcksAtSend are what they had reported when the last of those bytes left:
	// the bytes the SACK blocks of one acknowledgement covered beyond it (the
	// most), and the duplicate ACKs (a segment each). The capture's view is the
	// least the server knew.
	BytesOnSACK   int64
	SACKedAtSend  int64
	DupAcksAtSend int
	// OutranAcks: before the server had acknowledgements of more of the round
	// before, it sent more of this round's segments (OutranSent) than any
	// window could have let go on the ones it had (OutranAllowed): each packet
	// acknowledged frees one and grows a window by one at most (BBR: to 4 at
	// least). The application wrote them then; the round before was not cut
	// by the window. Weighed in packets, for the first rounds of a connection
	// while a round has at most earlyMaxPackets.
	OutranAcks                bool
	OutranSent, OutranAllowed int
	// RenoDupAcksBefore counts the duplicate ACKs without SACK blocks the server
	// had seen when it sent the round's first segment, over the connection: each
	// counts as a segment delivered (Linux's Reno emulation of SACK), so a window
	// growing on deliveries may have grown by that many more than the segments
	// acknowledged.
	RenoDupAcksBefore int
	// ClientDataAtStart / ClientDataAtEnd: how much of the client's stream the server
	// had seen at the round's first and last segment.
	ClientDataAtStart int64
	ClientDataAtEnd   int64
	// ProbeSegments and ProbeBytes are the round's last segment when it was a tail loss
	// probe: one new segment the server sent after a silence with no acknowledgement
	// that the LossProbe rule takes for a timer's (Linux sends one after 2·SRTT), beyond what
	// the congestion window allowed. They are counted in Segments and Bytes; the
	// round's window is WindowSegments.
	ProbeSegments, ProbeBytes int
	// ProbeGapNs is the silence before the probe.
	ProbeGapNs int64
	// MaybeProbe: the round's last segment came alone after a silence on the
	// server's own clock, with the server's timestamp echo showing it had heard
	// nothing new from the client (so no acknowledgement released it), but the
	// silence was shorter than the round trip measured, which a loaded path or host
	// can overstate: a tail loss probe (Linux fires one at 2·SRTT of the server's
	// own, smaller, estimate) or a late write, which the packets cannot tell apart.
	MaybeProbe      bool
	MaybeProbeGapNs int64
	// maybeFromTS and maybeToTS are the server's timestamps around that silence,
	// read on its clock once the clock's rate is known (label).
	maybeFromTS, maybeToTS uint32
	maybeSpacingNs         int64
	// PartialEnd: the round's last frame ended in a segment shorter than a full one.
	PartialEnd bool
	// RatePaced: at the client, the next round's data arrived without an idle gap
	// after this round's, at the pace of the round's own arrivals: the path's rate,
	// not the window, set where this round seemed to end.
	RatePaced bool
	// Outgrown: the next round was more than twice this one, which slow start cannot
	// do from a full window: this round did not fill the window.
	Outgrown bool
	// Undergrown: the next round was no larger than this one and the data went on
	// after it, without loss or a full receive window: a window never shrinks in slow
	// start, so the sender ran short of data there, and a steady application pace
	// explains this round's end as well as the window does.
	Undergrown bool
	// undergrownWhy says which sign showed it, for the reason.
	undergrownWhy string
	// NagleHeld: the next round began with a segment shorter than a full one, sent
	// when an earlier short segment still unacknowledged at this round's end was
	// acknowledged: Nagle's algorithm (Linux's Minshall variant) holds such a segment
	// exactly that long, so the window is not shown to have held it.
	NagleHeld bool
	Limit     string
	// FirstFrameBytes is the new bytes of the round's first new-data frame.
	FirstFrameBytes int
	// UnclockedSends counts the round's new-data frames after its first that the
	// server sent after a pause in its sending (Tracker.pause) with no client packet
	// reaching it in between: nothing opened the window for them, so the sender had
	// had room and nothing to send (the application's pace), or was pacing.
	// UnclockedLong counts those after a pause of a quarter of a round trip or more,
	// longer than a sender paces a window out in slow start.
	UnclockedSends, UnclockedLong int
	// LateSends counts the round's new-data frames after its first that the server
	// sent after a pause in its sending, well after (beyond the idle threshold) the
	// last client packet that could have opened its window: it had had room and
	// nothing to send, as an application writing at its own pace (2,801 bytes
	// every 28 ms on a 196 ms path) while acknowledgements keep coming.
	LateSends int
	// ArrivalPauses counts, away from the server and without its timestamps, the
	// round's frames that arrived after a gap of a quarter of a round trip or more
	// and twice the gap before (bursts with a silence between them): a path's
	// bottleneck spaces a flight evenly, so the server paused there (an
	// application writing every 30 ms on a 40 ms path put two writes in one round).
	ArrivalPauses int
	// SegmentsBeforeArrivalPause and BytesBeforeArrivalPause are what arrived
	// before the first of those pauses: the part of the round surely sent before
	// any acknowledgement of it could return (when the round trip the rounds were
	// split with is too long, the later bursts are later rounds merged in).
	SegmentsBeforeArrivalPause, BytesBeforeArrivalPause int
	// SegmentsEarly and BytesEarly are what of the round arrived within a
	// quarter of the round trip of its first frame (away from the server): what
	// the server surely sent before any acknowledgement of the round could have
	// come back, even if the round trip the rounds were split with was up to four
	// times too long (a loaded host's handshake) and later rounds merged in.
	SegmentsEarly, BytesEarly int
	// unclockedProbe: the last unclocked send is the round's tail loss probe so far
	// (probeLong: after a long pause).
	unclockedProbe, probeLong bool
	// Paused: the round holds a long unclocked pause (not a tail loss probe): the
	// application paused in it, or the capture missed the acknowledgement that
	// released the rest (then the round is two). Only the segments before the pause,
	// SegmentsBeforePause and BytesBeforePause, went out in one stretch.
	Paused                                bool
	SegmentsBeforePause, BytesBeforePause int
	// shortBefore and shortBeforeOther are the last new-data frame shorter than the
	// MSS sent before the round's first frame, and the last one of another size (one
	// of them is a partial segment when the path's full segment is below the MSS).
	shortBefore, shortBeforeOther shortFrame
	// singleFrames counts the frames counted as one segment, mergedFrames the sizes
	// of those counted as more (mergedRest*: past maxMergedKept), so that the round
	// can be counted again with another segment size (recount).
	singleFrames                      int
	mergedFrames                      []int32
	mergedRestFrames, mergedRestBytes int
	// firstTS and lastTS are the server's timestamps on the round's first and last
	// new-data frames (tsSet: it sent timestamps).
	firstTS, lastTS uint32
	tsSet           bool
	// Continuous: the server's sending went on into the next round without a
	// pause beyond the round's own spacing (on the capture's clock at the server,
	// on the server's timestamp clock elsewhere): a sender pacing its data out
	// (BBR) whose first acknowledgement came back mid-flight, not one that had
	// filled its window and waited.
	Continuous bool
}

// shortFrame is a new-data frame shorter than the MSS: its size and end offset
// (end 0: none).
type shortFrame struct {
	bytes int
	end   int64
}

// Spacing is the mean time between the round's packets as the capture saw
// them (0 for one packet): at a bottleneck, its serialization of one.
func (r *Round) Spacing() int64 {
	if r.Packets < 2 {
		return 0
	}
	return (r.LastNs - r.FirstNs) / int64(r.Packets-1)
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

// PartialInside reports whether a frame before the round's last one ended in a
// partial segment (full: the connection's full segment size).
func (r *Round) PartialInside(full int) bool {
	return full > 0 && r.MinInsideFrameBytes > 0 && r.MinInsideFrameBytes%full != 0
}

// UnclockedOwn counts the round's unclocked sends (UnclockedSends) other than a
// tail loss probe: frames the server sent after a pause of its own with nothing new
// from the client, which a sender limited by its window does not do.
func (r *Round) UnclockedOwn() int {
	n := r.UnclockedSends
	if r.ProbeSegments > 0 && r.unclockedProbe {
		n--
	}
	return n
}

// UndergrownReason is a clause saying which sign showed the round undergrown ("" when
// it was not).
func (r *Round) UndergrownReason() string { return r.undergrownWhy }

// WindowBytes is Bytes less a tail loss probe.
func (r *Round) WindowBytes() int { return r.Bytes - r.ProbeBytes }

// LossProbeRule is the one test of a tail loss probe: a lone new segment at the end
// of a round, sent after a silence in which nothing was acknowledged. A sender
// limited by its window cannot send after such a silence but by a timer; one that
// had paused for its application would have had its ACKs back. The rule's numbers
// are its parameters; LossProbe holds those of a passive reading, and a reader that
// measures otherwise (probe/exact, which sends no ACKs at all) names its own.
type LossProbeRule struct {
	// RTTs is the least silence in round trips (of the RTT the reader knows).
	RTTs float64
	// MinGapNs is the least silence whatever the RTT.
	MinGapNs int64
	// SpacingTimes: the silence must also exceed this many times the mean spacing
	// of the round's segments before it, so that a flight spread out by pacing or
	// a slow link is not taken for silence and probe; 0 skips the test.
	SpacingTimes int64
}

// LossProbe is the rule of a passive reading. Linux's probe timeout is 2·SRTT, at
// least 10 ms; one RTT leaves room for a handshake RTT inflated by a stall on the
// way, and four times the round's spacing keeps a paced round whole.
var LossProbe = LossProbeRule{RTTs: 1, MinGapNs: 10_000_000, SpacingTimes: 4}

// maybeLossProbe is the same rule without the RTT, for a lone segment the server's
// timestamp echo shows no acknowledgement released (Round.MaybeProbe): the RTT a
// loaded path measures can be far above the server's own SRTT.
var maybeLossProbe = LossProbeRule{MinGapNs: LossProbe.MinGapNs, SpacingTimes: LossProbe.SpacingTimes}

// Holds reports whether a silence of gapNs before a lone new segment makes it a
// tail loss probe, on a path of rttNs (0: unknown, when only MinGapNs bounds the
// silence) whose round so far had its segments spacingNs apart on average (0: one
// segment, or unknown).
func (r LossProbeRule) Holds(gapNs, rttNs, spacingNs int64) bool {
	return r.silenceHolds(gapNs, rttNs) && (r.SpacingTimes == 0 || gapNs > r.SpacingTimes*spacingNs)
}

// silenceHolds is the part of Holds that does not depend on the round's
// spacing: the silence is long enough for the minimum and the RTT.
func (r LossProbeRule) silenceHolds(gapNs, rttNs int64) bool {
	return gapNs >= r.MinGapNs && float64(gapNs) >= r.RTTs*float64(max(rttNs, 0))
}

type clientPacket struct {
	timeNs int64
	ack    int64
	// reach is how far the packet shows the client's receiving got: its
	// acknowledgement, its highest SACK block, or for a duplicate ACK one byte
	// beyond the acknowledgement (a segment past the hole arrived).
	reach  int64
	hasAck bool
	window int
	tsVal  uint32
	// dataEnd is one past the client's highest stream byte as of this packet.
	dataEnd int64
	// sacked: the bytes its SACK blocks report received beyond ack; dup: a
	// duplicate ACK.
	sacked int64
	dup    bool
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
	knownAck int64 // (when knownAckSet)
	// knownReach is the furthest the server knew the client had received: its
	// acknowledgement, SACK blocks, duplicate ACKs (clientPacket.reach).
	knownReach int64
	// knownSACKed and knownDups: what the server knew had left the network beyond
	// its latest acknowledgement: the bytes the SACK blocks of an acknowledgement
	// of it reported (the most of any one), and the duplicate ACKs of it.
	knownSACKed int64
	knownDups   int
	// knownRenoDups counts the duplicate ACKs without SACK blocks the server knew
	// of: Linux counts each as a segment delivered (and the acknowledgement that
	// later covers it at least one more), so each may grow a window once more.
	knownRenoDups int
	knownWindow   int
	knownDataEnd  int64
	knownLatestNs int64
	// knownDataNs is the time of the latest client packet with new data known;
	// lastClientDataNs and lastClientDataStart the time and offset of the latest
	// client packet with new data captured.
	knownDataNs                           int64
	lastClientDataNs, lastClientDataStart int64
	lastPopTS                             uint32
	lastPopTSSet                          bool
	knownAckSet                           bool
	// learnedSinceData: a client packet became known since the last new-data segment.
	learnedSinceData bool
	// openedSinceData: one of those told the server something new (a higher
	// acknowledgement, a larger window, new client data) that could have released
	// data; a packet it had long seen (learned late by the timestamps) could not.
	openedSinceData bool
	clientDataEnd   int64

	sndNxt int64
	// log holds the rounds so far.
	log roundLog
	// lastOpenNs is the capture time of the latest client packet that told the
	// server something new (LateSends).
	lastOpenNs int64
	// The server's TCP timestamp clock and the last new-data segment's timestamp,
	// to time a silence on the server's own clock.
	serverClock   flow.SenderClock
	lastDataTS    uint32
	lastDataTSEcr uint32 // the last new-data segment's timestamp echo
	firstAckIdx   int    // first round whose FirstAckNs is not yet set
	lastDataNs    int64
	// The new-data segment before the last one, to tell a pause from a pace.
	prevDataNs              int64
	prevDataTS              uint32
	prevDataTSSet, prevData bool
	lastDataTSSet           bool // (see lastDataTS)
	// holeBeforeData: the client acknowledged bytes the capture never saw before any
	// round began.
	holeBeforeData bool
	// largestSegment is the largest new-data frame no larger than the cap (or, with
	// no cap, a jumbo frame's payload), and how many frames had that size: what a
	// full segment carries on this path. capFrames counts the frames that show the
	// server sending segments of exactly the cap: single frames of that size, and
	// merged ones of a multiple of it.
	largestSegment, largestSegmentCount int
	capFrames, capMerged, ownMerged     int
	// overCap counts frames larger than the cap: the capture merged segments
	// (GRO), so a frame no larger than the cap may hold several short ones too.
	overCap int
	// The client's timestamp clock, to judge whether it resolves the round trip.
	clientTSFirst, clientTSLast     uint32
	clientTSFirstNs, clientTSLastNs int64
	clientTSSeen                    bool
	methodDecided                   bool
	// coarseClock: the timestamps method was given up for a client timestamp
	// clock that ticked coarseTicks times over coarseElapsedNs, too few for
	// the round trip coarseRTTNs (MethodNote).
	coarseClock                               bool
	coarseTicks, coarseElapsedNs, coarseRTTNs int64
	// early weighs what the first acknowledgements released against what a window
	// could let go (Round.OutranAcks) while the connection is young (nil
	// before the first new data and after earlyMaxRounds rounds: a
	// keep-alive connection open for long holds none).
	early *earlyPackets
	// lastShort is the latest new-data frame shorter than the MSS, lastShortOther
	// the latest one of another size than lastShort.
	lastShort, lastShortOther shortFrame

	// (The flags are kept in the room beside 32-bit fields: with the early
	// packets apart, an HTTP connection's state fits 1,536 bytes.)
}

// New makes a Tracker.
func New(cfg Config) *Tracker {
	t := new(Tracker)
	t.Init(cfg)
	return t
}

// Init makes t a new tracker with cfg, as New does, in place: a tracker kept
// inside the state of its connection.
func (t *Tracker) Init(cfg Config) {
	*t = Tracker{cfg: cfg}
	if cfg.SYNACKNs != 0 {
		t.serverClock.Observe(cfg.SYNACKTSVal, cfg.SYNACKNs)
	}
	if cfg.ClientSYNNs != 0 {
		t.clientTSFirst, t.clientTSFirstNs, t.clientTSSeen = cfg.ClientSYNTSVal, cfg.ClientSYNNs, true
		t.clientTSLast, t.clientTSLastNs = cfg.ClientSYNTSVal, cfg.ClientSYNNs
	}
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
}

// formatMs writes a duration in milliseconds with the digits that matter.
func formatMs(ns int64) string {
	if ns < 1e6 {
		return strconv.FormatFloat(float64(ns)/1e6, 'f', 3, 64)
	}
	return strconv.FormatFloat(float64(ns)/1e6, 'f', 1, 64)
}

// SetRTT updates the round-trip time as better samples arrive (a retried
// handshake's RTT may hold a retransmission timeout).
func (t *Tracker) SetRTT(rttNs int64) {
	if rttNs > 0 {
		t.cfg.RTTNs = rttNs
	}
}

// Method says how segments were assigned to rounds.
func (t *Tracker) Method() string { return t.method }

// MethodNote is a sentence saying why the method is not what the vantage point
// suggested (a timestamp clock too coarse for the round trip), or "".
func (t *Tracker) MethodNote() string {
	if !t.coarseClock {
		return ""
	}
	// (Concatenated, not formatted: one note per connection of a large capture.)
	clock := "did not tick"
	if t.coarseTicks > 0 {
		clock = "ticks every " + strconv.FormatFloat(float64(t.coarseElapsedNs)/float64(t.coarseTicks)/1e6, 'f', 1, 64) + " ms"
	}
	instead := "gaps in the server's sending"
	if t.method == MethodACKClock {
		instead = "ACK clock by capture time"
	}
	return "the client's TCP timestamp clock " + clock + " over " + formatMs(t.coarseElapsedNs) + " ms of the capture, too coarse for a " +
		formatMs(t.coarseRTTNs) + " ms round trip: rounds follow the " + instead + " instead of the timestamps"
}

// decideMethod checks, at the server's first data, that the client's timestamp
// clock ticks often enough in a round trip for the timestamps method; otherwise it
// falls back to the ACK clock by capture time (client vantage) or to gaps.
func (t *Tracker) decideMethod() {
	t.methodDecided = true
	if t.method != MethodTimestamps {
		return
	}
	elapsedNs := t.clientTSLastNs - t.clientTSFirstNs
	ticks := int64(int32(t.clientTSLast - t.clientTSFirst))
	rttNs := t.cfg.RTTNs
	if !t.clientTSSeen || elapsedNs <= 0 {
		return // nothing to judge by: keep the timestamps
	}
	if rttNs <= 0 {
		rttNs = 100e6 // judge against a typical Internet round trip
	}
	// Ticks per round trip = ticks / elapsed * RTT.
	if ticks > 0 && float64(ticks)*float64(rttNs) >= minTicksPerRTT*float64(elapsedNs) {
		return
	}
	if ticks <= 0 && elapsedNs < rttNs/minTicksPerRTT {
		return // too short a span to tell
	}
	fallback := MethodGaps
	if t.cfg.Vantage == flow.VantageClient && t.cfg.RTTNs > 0 {
		fallback = MethodACKClock
	}
	// The note is written when asked for (MethodNote), from the clock as it was here.
	t.coarseClock, t.coarseTicks, t.coarseElapsedNs, t.coarseRTTNs = true, ticks, elapsedNs, t.cfg.RTTNs
	t.method = fallback
	if fallback == MethodGaps {
		// Gaps learn every client packet at once.
		for t.head < len(t.pending) {
			t.learn(&t.pending[t.head])
			t.head++
		}
	}
}

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
		t.lastClientDataNs, t.lastClientDataStart = s.TimeNs, s.NewOffset
	}
	if s.HasTS {
		if !t.clientTSSeen {
			t.clientTSFirst, t.clientTSFirstNs, t.clientTSSeen = s.TSVal, s.TimeNs, true
		}
		t.clientTSLast, t.clientTSLastNs = s.TSVal, s.TimeNs
	}
	if s.AckBeyond > 0 {
		// The client acknowledged server bytes the capture never saw: they were sent
		// in the latest round (or one the capture missed whole).
		if last := t.log.Last(); last != nil {
			last.Holes++
		} else {
			t.holeBeforeData = true
		}
	}
	// Known at once by the method, or when a client packet without a timestamp
	// can't be matched (it can only make rounds start later, never earlier);
	// else pending until a server segment shows it seen.
	known := t.method == MethodACKClock && t.cfg.Vantage == flow.VantageServer || t.method == MethodGaps ||
		t.method == MethodTimestamps && !s.HasTS
	// Written where it stays, field by field: a composite literal copied into
	// pending reads back the stack's narrow stores as wide loads the processor
	// cannot forward.
	var now clientPacket
	p := &now
	if !known {
		t.pending = append(t.pending, clientPacket{})
		p = &t.pending[len(t.pending)-1]
	}
	p.timeNs, p.ack, p.reach, p.hasAck, p.window, p.tsVal = s.TimeNs, s.AckOffset, s.AckOffset, s.HasAck, s.WindowBytes, s.TSVal
	p.dataEnd, p.sacked, p.dup = t.clientDataEnd, s.SACKBytes, s.DupAck
	switch {
	case s.SACKHigh > p.reach:
		p.reach = s.SACKHigh
	case s.DupAck:
		p.reach = s.AckOffset + 1
	}
	if known {
		t.learn(p)
	}
}

// learn records that the server has seen client packet p.
func (t *Tracker) learn(p *clientPacket) {
	opened := t.openedSinceData
	t.openedSinceData = false
	defer func() {
		if t.openedSinceData {
			t.lastOpenNs = p.timeNs
		}
		t.openedSinceData = t.openedSinceData || opened
	}()
	t.knownLatestNs = p.timeNs
	t.learnedSinceData = true
	if p.dataEnd > t.knownDataEnd {
		t.knownDataEnd = p.dataEnd
		t.knownDataNs = p.timeNs
		t.openedSinceData = true
	}
	if !p.hasAck {
		return
	}
	if p.ack >= t.knownAck && p.window > t.knownWindow {
		t.openedSinceData = true
	}
	if !t.knownAckSet || p.ack > t.knownAck {
		t.openedSinceData = true
		t.knownAck, t.knownAckSet = p.ack, true
		t.knownSACKed, t.knownDups = 0, 0
	}
	if p.ack == t.knownAck {
		t.knownSACKed = max(t.knownSACKed, p.sacked)
		if p.dup {
			t.knownDups++
		}
	}
	if p.dup && p.sacked == 0 {
		t.knownRenoDups++
	}
	if p.reach > t.knownReach {
		// A SACK block or a duplicate ACK also tells the server that data left the
		// network, and a sender sends on it (Linux counts SACKed and, without SACK,
		// duplicate-acknowledged segments out of flight): what it sends then was
		// released by this round's data, so it belongs to the next round.
		t.openedSinceData = true
		t.knownReach = p.reach
		for t.firstAckIdx < t.log.Len() && p.reach > t.log.Start(t.firstAckIdx) {
			r := t.log.Open(t.firstAckIdx)
			r.FirstAckNs = p.timeNs
			r.ClientDataAtFirstAck = t.knownDataEnd
			t.firstAckIdx++
		}
		// Rounds an acknowledgement reached change no more (but for Lost).
		t.log.freeze(t.firstAckIdx)
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
		// A sender never sends past the receive window it knows of: a segment
		// beyond the known window shows that later acknowledgements stamped with the
		// echoed value had reached it too.
		end := s.Offset + int64(s.Len)
		for t.head < len(t.pending) && t.knownAckSet && end > t.knownAck+int64(t.knownWindow) {
			p := &t.pending[t.head]
			if p.tsVal != s.TSEcr {
				break
			}
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

// mayHaveSeenAck is the highest acknowledgement among the client packets the server
// may have seen when it sent s, beyond those it surely had (learned): -1 when none.
func (t *Tracker) mayHaveSeenAck(s *flow.Segment) int64 {
	highest := int64(-1)
	for i := t.head; i < len(t.pending); i++ {
		p := &t.pending[i]
		switch t.method {
		case MethodTimestamps:
			if !s.HasTS || int32(p.tsVal-s.TSEcr) > 0 {
				return highest
			}
		case MethodACKClock:
			if p.timeNs >= s.TimeNs-t.cfg.RTTNs/4 {
				return highest
			}
		default:
			return highest
		}
		if p.hasAck {
			highest = max(highest, p.ack)
		}
	}
	return highest
}

// roundOf returns the round holding stream byte x (0 when x precedes all rounds).
// The byte is most often in the latest round or the one before (what the client
// acknowledged last), whose starts were just written: those are tried before a
// binary search, whose first probes, far apart in a long-lived connection's
// hundreds of rounds, each missed the processor's cache (rounds.assign 5.5% of
// the samples on 5,000 connections of 200 responses each, perf).
func (t *Tracker) roundOf(x int64) int {
	n := t.log.Len()
	if n > 0 && t.log.Start(n-1) <= x {
		return n
	}
	if n > 1 && t.log.Start(n-2) <= x {
		return n - 1
	}
	lo, hi := 0, max(n-2, 0)
	for lo < hi {
		mid := (lo + hi) / 2
		if t.log.Start(mid) <= x {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo // number of rounds starting at or before x = index (1-based) of x's round
}

// mss is the segment size the data is counted with as it comes: the cap, or with
// none the largest frame so far, at least an Ethernet segment's 1460 bytes (so
// that a merged frame is never counted as more segments than it can hold).
func (t *Tracker) mss() int {
	if t.cfg.SegmentCap > 0 {
		return t.cfg.SegmentCap
	}
	return max(t.largestSegment, assumedSegmentBytes)
}

// assumedSegmentBytes is the segment size assumed when nothing gives one: an
// Ethernet MTU's payload without options. Counting with it never makes more
// segments than an Ethernet path can have carried.
const assumedSegmentBytes = 1460

// minInferredSegmentBytes is the smallest frame taken for a full segment when no
// MSS option bounds the server's segments: RFC 9293's default MSS for IPv4. A
// smaller frame is a short message (a 92-byte TLS record), not the path's segment.
const minInferredSegmentBytes = 536

func (t *Tracker) addServer(s *flow.Segment) {
	if s.HasTS {
		t.serverClock.Observe(s.TSVal, s.TimeNs)
	}
	if s.Len == 0 {
		return
	}
	if !t.methodDecided {
		t.decideMethod()
	}
	t.catchUp(s)
	if s.HasAck && s.AckOffset > t.knownDataEnd {
		// The server acknowledges client data it has surely seen.
		t.knownDataEnd = s.AckOffset
		if s.AckOffset > t.lastClientDataStart {
			t.knownDataNs = max(t.knownDataNs, t.lastClientDataNs)
		}
	}
	if s.NewLen == 0 {
		if rd := t.log.Last(); rd != nil {
			if s.OutOfOrder {
				rd.OutOfOrder++
			} else {
				rd.Retransmissions++
			}
			if s.FilledLen > 0 {
				// Bytes seen for the first time count where they first appear.
				rd.Bytes += s.FilledLen
				rd.Segments += t.count(rd, s.FilledLen)
			}
			if k := t.roundOf(s.Offset); k > 0 && !s.OutOfOrder {
				t.log.AddLost(k - 1)
			}
		}
		return
	}
	if s.Len <= t.segmentLimit() {
		switch {
		case s.Len > t.largestSegment:
			t.largestSegment, t.largestSegmentCount = s.Len, 1
		case s.Len == t.largestSegment:
			t.largestSegmentCount++
		}
	}
	if c := t.cfg.SegmentCap; c > 0 && s.Len >= c { // most frames are full: no division for them
		if s.Len == c {
			t.capFrames++
		} else if s.Len%c == 0 {
			t.capMerged++
		}
	}
	if c := t.cfg.SegmentCap; c > 0 && s.Len > c {
		t.overCap++
	}
	if o := t.cfg.OwnMSS; o > 0 && o < t.cfg.SegmentCap && s.Len > t.cfg.SegmentCap && s.Len%o == 0 {
		t.ownMerged++
	}
	r := t.assign(s)
	// A tail loss probe is a round's last segment: one that another segment joins is
	// not, and this one may be.
	var probeGapNs int64
	isProbe := false
	if r == t.log.Len() {
		last := t.log.Last()
		last.ProbeSegments, last.ProbeBytes, last.ProbeGapNs = 0, 0, 0
		last.MaybeProbe, last.MaybeProbeGapNs = false, 0
		last.maybeFromTS, last.maybeToTS, last.maybeSpacingNs = 0, 0, 0
		last.unclockedProbe, last.probeLong = false, false
		probeGapNs, isProbe = t.probeGap(s)
		if !isProbe && t.unclockedLone(s) {
			last.maybeFromTS, last.maybeToTS = t.lastDataTS, s.TSVal
			if last.Packets > 1 {
				last.maybeSpacingNs = (last.LastNs - last.FirstNs) / int64(last.Packets-1)
			}
		}
		if t.cfg.Vantage != flow.VantageServer && !(s.HasTS && t.lastDataTSSet) && t.prevData && t.cfg.RTTNs > 0 {
			gap, prev := s.TimeNs-t.lastDataNs, t.lastDataNs-t.prevDataNs
			if gap >= 1_000_000 && gap >= 2*prev && gap >= t.cfg.RTTNs/4 {
				if last.ArrivalPauses == 0 {
					last.SegmentsBeforeArrivalPause, last.BytesBeforeArrivalPause = last.Segments, last.Bytes
				}
				last.ArrivalPauses++
			}
		}
		if t.openedSinceData && t.openedLongAgo(s) {
			if paused, _ := t.pause(s); paused {
				last.LateSends++
			}
		}
		if !t.openedSinceData {
			if paused, long := t.pause(s); paused {
				last.UnclockedSends++
				last.unclockedProbe = isProbe
				if long {
					if last.UnclockedLong == 0 {
						last.SegmentsBeforePause, last.BytesBeforePause = last.Segments, last.Bytes
					}
					last.UnclockedLong++
					last.probeLong = isProbe
				}
			}
		}
	}
	if r > t.log.Len() {
		if last := t.log.Last(); s.Hole && last != nil {
			// The bytes the capture missed may have been the end of the round before.
			last.Holes++
		}
		releaseAck := int64(-1)
		if t.knownAckSet {
			releaseAck = t.knownAck
		}
		releaseAckMax := max(releaseAck, t.mayHaveSeenAck(s)) // before the new round is in the log
		nr := t.log.AppendNew(s.NewOffset, t.firstAckIdx)     // filled in place: no copy
		nr.Index = r
		nr.ReleaseAck = releaseAck
		nr.ReleaseAckMax = releaseAckMax
		nr.RenoDupAcksBefore = t.knownRenoDups
		nr.FirstNs = s.TimeNs
		nr.ReleaseNs = t.knownLatestNs
		nr.RequestNs = t.knownDataNs
		nr.ClientDataAtStart = t.knownDataEnd
		nr.FirstFrameBytes = s.NewLen
		nr.shortBefore = t.lastShort
		nr.shortBeforeOther = t.lastShortOther
		nr.firstTS = s.TSVal
		nr.tsSet = s.HasTS
		if t.holeBeforeData && t.log.Len() == 1 {
			t.log.Last().Holes++
		}
	}
	rd := t.log.Last()
	added := s.NewLen + s.FilledLen
	segments := t.count(rd, added)
	t.weighEarly(rd, s, segments)
	rd.Bytes += added
	rd.Segments += segments
	if 4*(s.TimeNs-rd.FirstNs) <= t.cfg.RTTNs {
		rd.SegmentsEarly += segments
		rd.BytesEarly += added
	}
	if prev, ok := t.log.Prev(); ok && (!t.knownAckSet || t.knownAck <= prev.StartOffset) {
		// Sent before any byte of the round before was acknowledged: on SACK
		// blocks or duplicate ACKs alone.
		rd.BytesOnSACK += int64(added)
		rd.SACKedAtSend = max(rd.SACKedAtSend, t.knownSACKed)
		rd.DupAcksAtSend = max(rd.DupAcksAtSend, t.knownDups)
	}
	if rd.Packets > 0 && (rd.MinInsideFrameBytes == 0 || rd.LastFrameBytes < rd.MinInsideFrameBytes) {
		rd.MinInsideFrameBytes = rd.LastFrameBytes
	}
	rd.Packets++
	rd.LastFrameBytes = s.NewLen
	if isProbe {
		rd.ProbeSegments, rd.ProbeBytes, rd.ProbeGapNs = segments, added, probeGapNs
	}
	if s.Retransmission {
		rd.Retransmissions++
		if k := t.roundOf(s.Offset); k > 0 {
			t.log.AddLost(k - 1)
		}
	}
	if s.Hole {
		rd.Holes++
	}
	if s.OutOfOrder {
		rd.OutOfOrder++
	}
	rd.LastNs = s.TimeNs
	rd.lastTS = s.TSVal
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
	if s.NewLen < t.mss() {
		if s.NewLen != t.lastShort.bytes {
			t.lastShortOther = t.lastShort
		}
		t.lastShort = shortFrame{bytes: s.NewLen, end: end}
	}
	t.sndNxt = end
	t.prevDataNs, t.prevDataTS, t.prevDataTSSet, t.prevData = t.lastDataNs, t.lastDataTS, t.lastDataTSSet, true
	t.lastDataNs = s.TimeNs
	t.lastDataTS, t.lastDataTSSet = s.TSVal, s.HasTS
	t.lastDataTSEcr = s.TSEcr
	t.learnedSinceData, t.openedSinceData = false, false
}

// segmentLimit is the largest frame that can be one segment: the cap the client's
// SYN set, else a jumbo frame's payload.
func (t *Tracker) segmentLimit() int {
	if t.cfg.SegmentCap > 0 {
		return t.cfg.SegmentCap
	}
	return 9000
}

// segmentsOf counts the segments of n bytes sent in one frame (a merged frame
// carries several).
func (t *Tracker) segmentsOf(n int) int {
	m := t.mss()
	return (n + m - 1) / m
}

// count counts the segments of n new bytes in one frame of round rd, and keeps
// what label needs to count them again with another segment size: frames of one
// segment by number, merged ones by size (the first maxMergedKept of a round,
// the rest by their sum).
func (t *Tracker) count(rd *Round, n int) int {
	if n <= t.mss() {
		rd.singleFrames++
		return 1
	}
	if len(rd.mergedFrames) < maxMergedKept {
		rd.mergedFrames = append(rd.mergedFrames, int32(n))
	} else {
		rd.mergedRestFrames++
		rd.mergedRestBytes += n
	}
	return t.segmentsOf(n)
}

// maxMergedKept bounds the merged frames a round keeps by size.
const maxMergedKept = 64

// WindowSegmentsWith is WindowSegments counted with a full segment of m bytes: a
// lower bound of the round's segments when the server's segments may have been as
// large as m.
func (r *Round) WindowSegmentsWith(m int) int {
	c := *r
	c.recount(m)
	return c.WindowSegments()
}

// recount counts a round's segments again with a full segment of m bytes.
func (r *Round) recount(m int) {
	n := r.singleFrames
	for _, f := range r.mergedFrames {
		n += (int(f) + m - 1) / m
	}
	if r.mergedRestFrames > 0 {
		n += max(r.mergedRestFrames, (r.mergedRestBytes+m-1)/m)
	}
	r.Segments = n
	if r.ProbeBytes > 0 {
		r.ProbeSegments = (r.ProbeBytes + m - 1) / m
	}
}

// FullSegmentBytes is what a full segment carried on this connection
// (SegmentSize without how it is known).
func (t *Tracker) FullSegmentBytes() int {
	n, _ := t.SegmentSize()
	return n
}

// SegmentSize is what a full segment of the server's carried on this connection,
// and whether its frames prove it:
//   - with the client's MSS option (the cap): the cap, proven by a frame of that
//     size; or a smaller size that recurs (three times or more, at least half the
//     cap: a path MTU below the one the option assumed, as with PPPoE or a
//     tunnel), proven by the recurrence; or, where only frames merged by the
//     capture show it, the server's own MSS (its MTU's) or the cap, proven by a
//     merged frame of an exact multiple of it. A lone shorter frame is a message
//     shorter than a segment. With none of these, the cap, unproven: the server may
//     have used less.
//   - without one: the largest frame, inferred (never proven: a sender may have had
//     nothing larger to send), and only from a frame of at least 536 bytes seen
//     twice; otherwise the larger of that frame and 1460 bytes, assumed, so that a
//     small record is never taken for a segment.
func (t *Tracker) SegmentSize() (bytes int, proven bool) {
	if t == nil {
		return 0, false
	}
	if c := t.cfg.SegmentCap; c > 0 {
		l := t.largestSegment
		switch {
		case t.capFrames > 0 || t.capMerged > 0:
			// (A merged frame of an exact multiple of the cap outweighs a smaller
			// size that recurs: an application writing 1,255-byte TLS records
			// makes one.)
			return c, true
		case l > 0 && l < c && 2*l >= c && t.largestSegmentCount >= 3 && t.overCap == 0:
			// (Where the capture merged segments, a recurring frame below the cap
			// may be short segments merged: three of an application's 340-byte
			// records read as a 1,020-byte segment.)
			return l, true
		case t.ownMerged > 0 && l <= t.cfg.OwnMSS:
			return t.cfg.OwnMSS, true
		}
		return c, false
	}
	if t.largestSegment >= minInferredSegmentBytes && t.largestSegmentCount >= 2 {
		return t.largestSegment, false
	}
	return max(t.largestSegment, assumedSegmentBytes), false
}

// SegmentSizeInferred says whether no MSS option bounded the server's segments, so
// that their size was inferred from the frames.
func (t *Tracker) SegmentSizeInferred() bool { return t != nil && t.cfg.SegmentCap == 0 }

// serverGapNs is the time between the last new-data segment and s: the larger of the
// capture's gap and the server's own, from its TCP timestamps (flow.SenderClock). Away
// from the server, delays on the path can shrink the capture's gap.
func (t *Tracker) serverGapNs(s *flow.Segment) int64 {
	gapNs := s.TimeNs - t.lastDataNs
	if s.HasTS && t.lastDataTSSet && s.TSVal == t.lastDataTS && t.cfg.Vantage != flow.VantageServer {
		// The same timestamp: the server sent both within one tick of its clock,
		// whatever the path did to them on the way (a bottleneck's queue spread a
		// burst 48 ms apart at 3 Mbit/s).
		return min(gapNs, sameTickNs)
	}
	if s.HasTS && t.lastDataTSSet {
		if serverNs, ok := t.serverClock.GapNs(t.lastDataTS, s.TSVal, s.TimeNs); ok {
			gapNs = max(gapNs, serverNs)
		}
	}
	return gapNs
}

// pause reports whether new-data segment s came after a pause in the server's
// sending: at least 1 ms after its previous segment (the segments of one burst leave
// within microseconds), and twice the gap before that one (a sender pacing segments
// out one at a time spaces them evenly); long reports a pause of a quarter of a round
// trip or more as well, longer than a sender pacing a window out in slow start waits
// between segments (BBR paces 2.89 windows per round trip).
//
// At the server the capture times the sending, but a capture process that stalls reads
// a burst late: where the server stamps its segments, its TCP timestamp clock caps the
// gap (plus one tick for its rounding). Away from the server a bottleneck spreads one
// burst over time and a queue can hide a pause: the pause must show both in the
// capture and on the server's clock (less one tick), and nothing is read without it.
func (t *Tracker) pause(s *flow.Segment) (paused, long bool) {
	const minGapNs, tickNs = 1e6, 1e6
	gapNs := s.TimeNs - t.lastDataNs
	var prevNs int64
	if t.prevData {
		prevNs = t.lastDataNs - t.prevDataNs
	}
	var serverGapNs int64
	clock := s.HasTS && t.lastDataTSSet
	if clock {
		serverGapNs, clock = t.serverClock.GapNs(t.lastDataTS, s.TSVal, s.TimeNs)
	}
	if t.cfg.Vantage == flow.VantageServer {
		if clock {
			gapNs = min(gapNs, serverGapNs+tickNs)
		}
	} else {
		if !clock || t.prevData && !t.prevDataTSSet {
			return false, false
		}
		gapNs = min(gapNs, serverGapNs-tickNs)
		if t.prevData {
			// Early on the server's clock may not be readable yet: the capture's gap
			// stands alone then.
			if serverPrevNs, ok := t.serverClock.GapNs(t.prevDataTS, t.lastDataTS, t.lastDataNs); ok {
				prevNs = max(prevNs, serverPrevNs)
			}
		}
	}
	paused = gapNs >= minGapNs && gapNs >= 2*prevNs
	return paused, paused && gapNs >= t.cfg.RTTNs/4
}

// openedLongAgo reports whether the latest client packet that opened the server's
// window came longer before s than the server takes to answer one (the idle
// threshold): at the server, by capture time; elsewhere, a round trip later.
func (t *Tracker) openedLongAgo(s *flow.Segment) bool {
	if t.lastOpenNs == 0 || t.cfg.RTTNs <= 0 {
		return false
	}
	stall := s.TimeNs - t.lastOpenNs
	if t.cfg.Vantage != flow.VantageServer {
		stall -= t.cfg.RTTNs
	}
	return stall > t.idleThresholdNs()
}

// probeGap reports whether new-data segment s, in the same round as the last one
// (before s joins it), looks like a tail loss probe, and the silence before it: one
// segment, after a silence that the LossProbe rule takes for a probe timer's, in
// which no client packet became known.
func (t *Tracker) probeGap(s *flow.Segment) (gapNs int64, ok bool) {
	if t.cfg.RTTNs <= 0 || t.learnedSinceData || s.NewLen > t.mss() || t.log.Len() == 0 {
		return 0, false
	}
	gapNs = t.serverGapNs(s)
	if !LossProbe.silenceHolds(gapNs, t.cfg.RTTNs) {
		// Too short a silence whatever the round was (most segments, in a
		// burst): the round's frames and spacing, a division each, are not read.
		return gapNs, false
	}
	rd := t.log.Last()
	if full := t.FullSegmentBytes(); full > 0 && rd.LastFrameBytes%full != 0 {
		// The round so far ended in a short frame: the server had run out of data
		// then, so its window need not have been full, and a lone segment after a
		// silence is as likely the application's late write (OpenSSL's second write
		// of a TLS flight, 74 ms on) as a timer's probe past a full window.
		return 0, false
	}
	return gapNs, LossProbe.Holds(gapNs, t.cfg.RTTNs, t.sendSpacingNs(rd))
}

// sendSpacingNs is the mean time between the round's frames as the server sent
// them: by the capture at the server; elsewhere by the server's timestamp clock
// where it is readable (a bottleneck stretches arrivals: 26 ms apart at 3 Mbit/s
// for a burst the server sent within its clock's millisecond), else by the
// capture. 0 for a round of one frame.
func (t *Tracker) sendSpacingNs(rd *Round) int64 {
	if rd.Packets < 2 {
		return 0
	}
	spacing := (rd.LastNs - rd.FirstNs) / int64(rd.Packets-1)
	if t.cfg.Vantage != flow.VantageServer && rd.tsSet {
		if rd.firstTS == rd.lastTS {
			return min(spacing, sameTickNs/int64(rd.Packets-1))
		}
		if ns, ok := t.serverClock.GapNs(rd.firstTS, rd.lastTS, rd.LastNs); ok {
			spacing = min(spacing, ns/int64(rd.Packets-1))
		}
	}
	return spacing
}

// sameTickNs bounds the time between two segments the server stamped with the same
// timestamp: one tick of a millisecond clock (Linux's).
const sameTickNs = 1_000_000

// continuous reports whether the server's sending went on from round r into next
// without a pause beyond r's own spacing (Round.Continuous).
func (t *Tracker) continuous(r, next *Round) bool {
	if t.cfg.Vantage == flow.VantageServer {
		return next.FirstNs-r.LastNs <= 2*t.sendSpacingNs(r)
	}
	if !r.tsSet || !next.tsSet {
		return false
	}
	gap, ok := t.serverClock.GapNs(r.lastTS, next.firstTS, next.FirstNs)
	if !ok || r.Packets < 2 {
		return false
	}
	span, _ := t.serverClock.GapNs(r.firstTS, r.lastTS, next.FirstNs)
	// One tick of the clock is rounding.
	return gap <= 2*span/int64(r.Packets-1)+1_000_000
}

// unclockedLone reports whether new-data segment s, joining the last round, came
// alone (at most one segment) after the server's clock moved on, while by its
// timestamp echo the server had heard nothing new from the client: not released
// by an acknowledgement. label decides, with the server's clock, whether the
// silence makes it a possible tail loss probe (MaybeProbe).
func (t *Tracker) unclockedLone(s *flow.Segment) bool {
	return s.HasTS && t.lastDataTSSet && s.TSEcr == t.lastDataTSEcr && s.NewLen <= t.mss() &&
		t.log.Len() > 0 && int32(s.TSVal-t.lastDataTS) > 0
}

// assign returns the round of a new-data segment.
func (t *Tracker) assign(s *flow.Segment) int {
	last := t.log.Len()
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
	if t.knownAckSet && t.knownReach > 0 {
		r = 1 + t.roundOf(t.knownReach-1)
	}
	// Rounds never go back (client-vantage timing can only make them look earlier).
	return max(r, last)
}

// Rounds returns the rounds so far (unlabeled until Label), in a slice of their
// own (Count says how many there are without making one).
func (t *Tracker) Rounds() []Round { return t.log.All() }

// Count is the number of rounds so far.
func (t *Tracker) Count() int { return t.log.Len() }

// Ending says how the server's data ended, for the last round's label.
type Ending int

// Endings.
const (
	// EndingComplete: the data is known to have ended (a FIN after it, or the last
	// message complete), or nothing says otherwise.
	EndingComplete Ending = iota
	// EndingIncomplete: a message the data was part of had not ended when the
	// capture (or the connection) did: the transfer stalled or was cut.
	EndingIncomplete
)

// Label decides why each round ended. messageEnds are stream offsets where a
// message of the server ended (an HTTP response, the TLS handshake flight); a round
// ending exactly there ended because the message did. The last round is "end",
// unless ending says the data was cut ("incomplete").
func (t *Tracker) Label(messageEnds []int64, ending Ending) []Round {
	rounds := t.label(t.log.All(), messageEnds, ending)
	t.log.Replace(rounds)
	return rounds
}

// Release ends the tracker: the rounds Label returned go back to be reused by
// another tracker's, and the tracker is left empty. Call it once nothing reads
// those rounds any more (the report was built from them, as copies).
func (t *Tracker) Release() {
	if l := &t.log; l.replaced && cap(l.tail) > 0 && cap(l.tail) <= maxScratchRounds {
		rounds := l.tail[:0]
		roundScratch.Put(&rounds)
	}
	*t = Tracker{}
}

// LabelCopy labels a copy of the rounds so far, leaving the tracker as it was: a
// snapshot of a connection still open, which goes on taking segments.
func (t *Tracker) LabelCopy(messageEnds []int64, ending Ending) []Round {
	return t.label(t.log.All(), messageEnds, ending)
}

// hasOffset reports whether the sorted offsets hold off.
func hasOffset(sorted []int64, off int64) bool {
	_, found := slices.BinarySearch(sorted, off)
	return found
}

func (t *Tracker) label(rounds []Round, messageEnds []int64, ending Ending) []Round {
	if n := len(rounds); n > 0 {
		// Only a later round shows that a lone segment at a round's end was a probe:
		// one at the end of the last round is left as data.
		last := &rounds[n-1]
		last.ProbeSegments, last.ProbeBytes, last.ProbeGapNs = 0, 0, 0
		last.maybeToTS = 0
	}
	for i := range rounds {
		r := &rounds[i]
		r.MaybeProbe, r.MaybeProbeGapNs = false, 0
		if r.maybeToTS == 0 || r.ProbeSegments > 0 {
			continue
		}
		// Read on the server's clock as known now (its rate from the whole
		// connection so far): at least Linux's least probe timeout, and far beyond
		// the round's own spacing.
		if _, known := t.serverClock.GapNs(t.lastDataTS, t.lastDataTS, t.lastDataNs); !known || !t.lastDataTSSet {
			continue
		}
		if ns := int64(int32(r.maybeToTS-r.maybeFromTS)) * 1_000_000; maybeLossProbe.Holds(ns, 0, r.maybeSpacingNs) {
			r.MaybeProbe, r.MaybeProbeGapNs = true, ns
		}
	}
	if full := t.FullSegmentBytes(); full != t.mss() {
		// The data was counted with another segment size as it came (the cap, or
		// the largest frame so far): count again with the final one.
		for i := range rounds {
			rounds[i].recount(full)
		}
	}
	// Looked up by binary search (a map of thousands of a keep-alive
	// connection's responses was most of what its report allocated); the ends
	// usually come in order.
	ends := messageEnds
	if !slices.IsSorted(ends) {
		ends = slices.Sorted(slices.Values(messageEnds))
	}
	full := t.FullSegmentBytes()
	idle := t.idleThresholdNs()
	for i := range rounds {
		r := &rounds[i]
		r.PartialEnd = full > 0 && r.LastFrameBytes%full != 0
		switch {
		case r.Retransmissions > 0:
			r.Limit = report.LimitLoss
		case i == len(rounds)-1 && ending == EndingIncomplete:
			r.Limit = report.LimitIncomplete
		case i == len(rounds)-1:
			r.Limit = report.LimitEnd
		case hasOffset(ends, r.EndOffset):
			r.Limit = report.LimitEnd
		case r.WindowRoomBytes < int64(min(full, r.LastFrameBytes)):
			// No room for another segment like the last one: a round that ended in
			// a short segment with the window's room far beyond it (an 8-byte
			// round on loopback, whose 65,483-byte MSS exceeds any window) was not
			// stopped by the window.
			r.Limit = report.LimitRwnd
		default:
			r.Limit = t.idleLimit(r, &rounds[i+1], idle)
		}
		if i+1 < len(rounds) && r.Limit == report.LimitCwnd && r.ProbeSegments == 0 {
			// (A round ended by a tail loss probe had a silence before the probe.)
			r.Continuous = t.continuous(r, &rounds[i+1])
		}
		if r.Limit == report.LimitCwnd && t.ratePaced(r, &rounds[i+1]) {
			r.RatePaced = true
			r.Limit = report.LimitRate
		}
		if r.Limit == report.LimitCwnd && outgrown(r, &rounds[i+1]) {
			// Slow start at most doubles a window in a round (one segment per segment
			// acknowledged): a next round more than twice this one's size shows that
			// this round did not fill the window.
			r.Outgrown = true
			r.Limit = report.LimitApp
		}
		if r.UnclockedLong > 1 || r.UnclockedLong == 1 && !(r.ProbeSegments > 0 && r.probeLong) {
			// A sender limited by its window sends after a pause with nothing
			// acknowledged only a tail loss probe.
			r.Paused = true
			if r.Limit == report.LimitCwnd {
				r.Limit = report.LimitApp
			}
		}
		if r.Limit == report.LimitCwnd && nagleHeld(r, &rounds[i+1], full) {
			r.NagleHeld = true
			r.Limit = report.LimitApp
		}
	}
	// A round is undergrown by the label of the round after it, which the loop
	// above has settled.
	for i := 0; i+2 < len(rounds); i++ {
		r, next := &rounds[i], &rounds[i+1]
		if why := undergrown(r, next); r.Limit == report.LimitCwnd && why != "" {
			r.Undergrown, r.undergrownWhy = true, why
			r.Limit = report.LimitApp
		}
	}
	return rounds
}

// undergrown reports whether the round after r, itself followed by more data and cut
// neither by loss, nor the receive window, nor the end of a message, shows the sender
// short of data:
//   - it was no larger than r: a window that r filled would have grown as r was
//     acknowledged (slow start; CUBIC and Reno never shrink it without loss);
//   - or it sent unclocked after a long pause (UnclockedLong): the sender stopped
//     with room in its window and resumed with nothing acknowledged, at the
//     application's pace;
//   - or it sent unclocked after a shorter pause and carried less than one and a
//     half times r: slow start doubles a window in a round trip, and a sender pacing
//     a doubled window out (BBR) pauses only briefly;
//   - or it ended in a partial segment (PartialEnd): the sender had nothing more
//     queued then (one with more queued sends full segments), and its data went on
//     later.
//
// A sender short of data in the next round may have been short at r's end too: an
// application writing at its own pace makes rounds whose ends the ACK clock cannot
// tell from window cuts (its next write may come as the first acknowledgement does),
// so r's end is not shown to be the window's.
//
// It returns a clause saying which sign showed it, or "".
func undergrown(r, next *Round) string {
	if next.Limit != report.LimitCwnd && next.Limit != report.LimitApp || next.Retransmissions > 0 || next.Holes > 0 {
		return ""
	}
	unclocked, long := next.UnclockedSends, next.UnclockedLong
	if next.ProbeSegments > 0 && next.unclockedProbe {
		// A tail loss probe is sent by a timer, not the application.
		unclocked--
		if next.probeLong {
			long--
		}
	}
	w, n := r.WindowSegments(), next.WindowSegments()
	switch {
	case n <= w:
		return fmt.Sprintf("the next round carried %d segments, no more than the %d of the round before, and the data went on after it: a full window would have grown, so the server was short of data there", n, w)
	case long > 0 || unclocked > 0 && 2*n < 3*w:
		return fmt.Sprintf("in the next round (%d segments) the server paused and sent again with nothing acknowledged, as an application writing at its own pace does, not a sender waiting for its window", n)
	case next.PartialEnd:
		return "the next round ended in a segment shorter than a full one and the data went on later: the server had nothing more queued then"
	}
	return ""
}

// nagleHeld reports whether Nagle's algorithm explains why the data after round r
// waited: the next round began with a partial segment, and some earlier partial
// segment, still unacknowledged when r ended, was acknowledged by the packet that
// released it. Linux holds a partial segment while an earlier one is
// unacknowledged (Minshall's variant of Nagle), whatever the window; a sender cut by
// its window with a segment's worth or more queued sends a full one first.
func nagleHeld(r, next *Round, full int) bool {
	if full <= 0 || next.FirstFrameBytes%full == 0 || next.ReleaseAck < 0 {
		return false
	}
	ackAtEnd := r.EndOffset - r.InFlightBytes
	for _, short := range []shortFrame{next.shortBefore, next.shortBeforeOther} {
		if short.end > 0 && short.bytes%full != 0 && short.end > ackAtEnd && short.end <= next.ReleaseAck {
			return true
		}
	}
	return false
}

// ratePaced reports whether, at the client without timestamps, round r's data and
// the next round's arrived as one stream at the path's pace: no idle gap at the
// boundary beyond the arrivals' own spacing. A window-limited sender's round ends
// with the link going idle until acknowledgements return; where a slow path
// stretches a flight over the round trip, the boundary the ACK clock draws cuts the
// flight at a point the window did not choose.
func (t *Tracker) ratePaced(r, next *Round) bool {
	if t.cfg.Vantage == flow.VantageServer || t.method == MethodTimestamps {
		return false
	}
	spacing := arrivalSpacingNs(r)
	if spacing == 0 {
		spacing = arrivalSpacingNs(next)
	}
	if spacing == 0 {
		return false
	}
	gap := next.FirstNs - r.LastNs
	return gap <= 2*spacing
}

// outgrown reports whether the round after r carried more than slow start could
// have grown r's window to: twice its segments, and one more for a tail loss probe.
func outgrown(r, next *Round) bool {
	return next.Retransmissions == 0 && next.WindowSegments() > 2*r.WindowSegments()+1
}

// arrivalSpacingNs is the mean time between a round's frames, or 0 for a round of
// one frame.
func arrivalSpacingNs(r *Round) int64 {
	if r.Packets < 2 {
		return 0
	}
	return (r.LastNs - r.FirstNs) / int64(r.Packets-1)
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
		switch {
		case newClientData:
			return report.LimitEnd
		case r.FirstAckNs == 0 || r.FirstAckNs > next.FirstNs:
			// No acknowledgement of this round came before the next one: the pause
			// was the sender's own, not the window's.
			return report.LimitApp
		case r.PartialEnd && next.ReleaseAckMax >= r.EndOffset:
			return report.LimitApp
		case t.cfg.RTTNs > 0 && next.FirstNs-r.FirstAckNs > t.cfg.RTTNs+idleNs:
			// Wherever the capture was taken, an acknowledgement reaches the server
			// and the data it releases comes back within a round trip: the server
			// waited longer than that.
			return report.LimitApp
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
	if r.PartialEnd && next.ReleaseAckMax >= r.EndOffset {
		// The last frame ended in a partial segment: the sender had nothing more at
		// that moment (a window-limited sender with more queued sends full
		// segments). What came next went out only once everything was acknowledged,
		// as Nagle's algorithm holds a small segment, so the window is not shown to
		// have been the limit. (Released while data was still in flight, the next
		// data was held by the window: Nagle would have held it longer.)
		waited = true
	}
	switch {
	case !waited:
		return report.LimitCwnd
	case newClientData:
		return report.LimitEnd
	}
	return report.LimitApp
}

// earlyMaxRounds and earlyMaxPackets bound what earlyPackets follows: the rounds
// of a connection's start, of a small window's size, where an application's
// write that meets an acknowledgement can pass for a window's cut.
const (
	earlyMaxRounds  = 6
	earlyMaxPackets = 24
)

// earlyPackets keeps the ends of the packets (as offsets from the round's start)
// of the latest round and the one before it, and what the server knew of the
// client when the one before ended.
type earlyPackets struct {
	ends       [2][]int32 // [0]: the round before the latest, [1]: the latest
	round      int        // the latest round's index
	overflow   [2]bool    // a round with more than earlyMaxPackets packets
	reachAtEnd int64      // knownReach at the round before's last packet
	dupsAtEnd  int        // knownRenoDups then
	reach      int64      // knownReach at the latest round's last packet so far
	dups       int
}

// weighEarly records a new-data frame of segments packets in round rd and,
// from the second round on, checks that what the server had sent of rd so far
// fits what the acknowledgements it may have had could release under a window
// that cut the round before (Round.OutranAcks).
func (t *Tracker) weighEarly(rd *Round, s *flow.Segment, segments int) {
	if rd.Index > earlyMaxRounds {
		// (rd is the latest round: no later one is early again.)
		t.early = nil
		return
	}
	if t.early == nil {
		t.early = new(earlyPackets)
	}
	e := t.early
	if rd.Index != e.round {
		// A new round: the latest becomes the one before.
		e.ends[0], e.ends[1] = e.ends[1], e.ends[0][:0]
		e.overflow[0], e.overflow[1] = e.overflow[1], false
		e.reachAtEnd, e.dupsAtEnd = e.reach, e.dups
		e.round = rd.Index
	}
	e.reach, e.dups = t.knownReach, t.knownRenoDups
	start := rd.StartOffset
	end := s.NewOffset + int64(s.NewLen) - start
	if e.overflow[1] || len(e.ends[1])+segments > earlyMaxPackets || end > 1<<30 {
		e.overflow[1] = true
		return
	}
	first := int64(0)
	if n := len(e.ends[1]); n > 0 {
		first = int64(e.ends[1][n-1])
	}
	for i := 1; i <= segments; i++ {
		// A merged frame's packets: full ones, the last the rest.
		e.ends[1] = append(e.ends[1], int32(min(first+int64(i*t.mss()), end)))
	}
	if rd.Index < 2 || rd.OutranAcks || e.overflow[0] || len(e.ends[0]) == 0 || !t.knownAckSet {
		return
	}
	prev, _ := t.log.Prev()
	if t.knownReach > t.knownAck || e.reachAtEnd > prev.EndOffset || t.knownRenoDups > e.dupsAtEnd {
		// SACK blocks or duplicate ACKs in play: weighed by BytesOnSACK.
		return
	}
	ack := t.knownAck
	if t.cfg.Vantage != flow.VantageServer {
		// Away from the server, the most it may have had.
		ack = max(ack, t.mayHaveSeenAck(s))
	}
	// Packets of the round before acknowledged in all (the ones acknowledged
	// before its cut cancel out below), and of this round.
	acked := 0
	for _, x := range e.ends[0] {
		if prev.StartOffset+int64(x) <= ack {
			acked++
		}
	}
	for _, x := range e.ends[1] {
		if start+int64(x) <= ack {
			acked++
		}
	}
	ackAtCut := prev.EndOffset - prev.InFlightBytes
	if ackAtCut < prev.StartOffset {
		// Data from before the round before was in flight at its cut too.
		return
	}
	before := 0
	if prev.InFlightBytes > 0 {
		for _, x := range e.ends[0] {
			if prev.StartOffset+int64(x) <= ackAtCut {
				before++
			}
		}
	}
	// In flight at the cut: the round before's packets not yet acknowledged
	// (what a window that cut it held). Each acknowledged since frees one and
	// grows the window by one at most; BBR raises a window to 4 at least.
	inFlight := len(e.ends[0]) - before
	released := acked - before
	allowed := max(2*released, 4-inFlight+released)
	if sent := len(e.ends[1]); sent > allowed {
		rd.OutranAcks, rd.OutranSent, rd.OutranAllowed = true, sent, allowed
	}
}
