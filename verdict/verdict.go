// Package verdict reads the server's initial congestion window (IW) from a
// connection's labeled rounds, and says what the reading rests on.
//
// A reading is exact only when the packets prove every obligation of
// report.Obligation*: the round was seen whole, the rounds are separable on this
// path, nothing near the capture answered for the server, the server's segment
// size is known, the round's frames are whole segments, the server had a full
// segment more queued at the cut, the next data left as soon as an
// acknowledgement reached the server, the round went out in one stretch and the
// next grew as slow start grows, and the receive window had room. Whatever is not
// proven gives a lower bound, a range whose two ends are each bounded by what the
// packets show, ambiguous or none, with the unproven obligations named
// (report.InitialWindow.Unproven); an exact reading carries its evidence.
//
// Read is a pure function of its Input: no side effects, no call order. The
// pipeline (package analysis) fills the Input from the rounds tracker, the TLS
// scanners and the flow; the rounds themselves (package rounds) label why each
// round ended, which this package turns into obligations. It knows nothing of
// packets, captures or QUIC (which fills report.InitialWindow from its own
// readings with the same obligation names).
package verdict

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/rounds"
)

// Span is a stretch of the server's stream: [Start, End) in stream offsets.
type Span struct{ Start, End int64 }

// Segment is what a full segment of the server's carried, and how that is known.
type Segment struct {
	// Bytes is the full segment's payload (rounds.Tracker.SegmentSize).
	Bytes int
	// Proven: the server's own frames show it (a frame of exactly the client's
	// MSS option less options, or a smaller size that recurs).
	Proven bool
	// Cap is the client's MSS option less options, the largest a segment of the
	// server's can be; 0 when the client's SYN or its option was not seen.
	Cap int
}

// boundBytes is the segment size a lower bound counts with when the size is not
// proven: the largest the server's segments can have been, so that the count is
// never above the truth.
func (s Segment) boundBytes() int {
	switch {
	case s.Proven:
		return s.Bytes
	case s.Cap > 0:
		return max(s.Cap, s.Bytes)
	}
	return max(s.Bytes, 1460)
}

// Path is what the rounds were read with.
type Path struct {
	// Vantage is where the capture was taken (report.Vantage*); Method how the
	// rounds were split (rounds.Method*).
	Vantage, Method string
	// MidStream: the capture began after the handshake.
	MidStream bool
	// HandshakeRTTNs is the handshake's round trip (0: not seen). DataRTTNs is the
	// round trip data and its acknowledgements show (flow.Conn.SampledRTTNs; 0: no
	// sample each way).
	HandshakeRTTNs, DataRTTNs int64
	// RoundsRTTNs is the round trip the rounds were split with (0: the
	// handshake's).
	RoundsRTTNs int64
	// ServerRTTNs is the round trip between the capture and the server, from
	// the SYN to the SYN/ACK as the capture saw them (0: not seen): the whole
	// round trip at the client, next to nothing at the server, between them
	// elsewhere.
	ServerRTTNs int64
	// BaseNs is the connection's start, from which the evidence counts times.
	BaseNs int64
}

// Handshake is the TLS handshake as the rounds show it. The rounds of Input begin
// with RetryRounds rounds of a HelloRetryRequest (released by the first
// ClientHello alone), then FlightRounds rounds of the server's flight (ServerHello
// ... Certificate ...).
type Handshake struct {
	RetryRounds, FlightRounds     int
	RetrySegments, FlightSegments int
	// FlightEnd is the offset where the server's flight ends, HandshakeEnd where
	// its handshake does (the rounds before it are the handshake's).
	FlightEnd, HandshakeEnd int64
}

// Input is everything a reading rests on.
type Input struct {
	// Rounds are the server's rounds, labeled (rounds.Tracker.Label).
	Rounds  []rounds.Round
	Segment Segment
	Path    Path
	// Records are the server's TLS records, in stream order: each was written
	// whole by the server's TLS library, so one that spans a cut shows what the
	// server had queued there. Nil for cleartext.
	Records []Span
	// Messages are the server's messages whose ends are known (HTTP responses,
	// the TLS flight), in stream order.
	Messages []Span
	// TLS is the handshake; nil when the connection is not TLS.
	TLS *Handshake
}

// Result is a connection's readings.
type Result struct {
	// InitialWindow is the connection's reading: over TLS, the server's flight,
	// narrowed by the first HTTP round where that is sound.
	InitialWindow *report.InitialWindow
	// TLSFlight is the reading from the TLS flight alone; nil without TLS.
	TLSFlight *report.InitialWindow
}

// serverTurnaroundNs is the longest a sender limited by its window takes, seen at
// the server, between an acknowledgement and the data it releases: a kernel answers
// within microseconds, and this allows for a busy host's softirq and capture. An
// application that writes when it is ready, not when the window opens, can take
// longer (7 ms after the acknowledgement: its second write of a TLS flight).
const serverTurnaroundNs = 3_000_000

// localPathNs is the round trip below which rounds are not told apart: a
// sender's turnaround, a capture's clock and delayed acknowledgements are all of
// that order, and a whole window leaves in less time than an acknowledgement
// takes to come back.
const localPathNs = 1_000_000

// Read reads the connection's initial window.
func Read(in Input) Result {
	if in.Path.MidStream {
		return Result{InitialWindow: &report.InitialWindow{Verdict: report.VerdictNone, Source: report.PhaseHTTP,
			Reason: "the capture started after the handshake, so the first round was not seen", Unproven: []string{report.ObligationStartSeen}}}
	}
	if in.TLS == nil {
		return Result{InitialWindow: in.judge(0, report.PhaseHTTP)}
	}
	flight := in.tlsFlight()
	return Result{InitialWindow: in.narrow(flight), TLSFlight: flight}
}

// judge reads the window from round i, the first the window sent (the
// connection's first round, or the TLS flight's first).
func (in Input) judge(i int, source string) *report.InitialWindow {
	rs := in.Rounds
	if i >= len(rs) {
		return &report.InitialWindow{Verdict: report.VerdictNone, Source: source, Reason: "the server sent no data"}
	}
	r := &rs[i]
	var next *rounds.Round
	if i+1 < len(rs) {
		next = &rs[i+1]
	}
	iw := &report.InitialWindow{Segments: r.WindowSegments(), Bytes: r.WindowBytes(), Source: source}
	c := in.cut(r, next)
	switch c.verdict {
	case report.VerdictExact:
		iw.Verdict, iw.Reason, iw.Evidence = report.VerdictExact, c.reason, c.evidence
	case report.VerdictRange:
		iw.Verdict, iw.Reason, iw.Evidence, iw.Unproven = report.VerdictRange, c.reason, c.evidence, c.unproven
		iw.Segments, iw.SegmentsMax, iw.Bytes, iw.BytesMax = c.lo, c.hi, c.loBytes, c.hiBytes
	default:
		iw.Verdict, iw.Reason, iw.Unproven = c.verdict, c.reason, c.unproven
		iw.Segments, iw.Bytes = c.lo, c.loBytes
	}
	iw.Reason += r.ProbeNote()
	return iw
}

// cutReading is what the obligations make of a round: a verdict, its numbers and
// its reasons.
type cutReading struct {
	verdict          string
	lo, hi           int // segments (hi: range only)
	loBytes, hiBytes int
	reason           string
	evidence         []report.Proof
	unproven         []string
}

// cut judges round r (followed by next, nil when it is the last) as a window's
// edge: which obligations the packets prove, and the reading they allow.
func (in Input) cut(r, next *rounds.Round) cutReading {
	w, wBytes := r.WindowSegments(), r.WindowBytes()
	full := in.Segment.Bytes
	bound := func(why string, unproven ...string) cutReading {
		// At least the round's segments, counted with the largest size a segment
		// of the server's can have had when the size is not proven.
		n, nBytes := w, wBytes
		if !in.Segment.Proven {
			n = max(r.WindowSegmentsWith(in.Segment.boundBytes()), 1)
		}
		if in.splitByCaptureTime() && 4*(r.LastNs-r.FirstNs) > in.roundsRTT() && r.SegmentsEarly < n {
			// By capture time at the client, a round spread over more than a
			// quarter of the round trip may hold later rounds merged in (a round
			// trip read too long): only what arrived in that first quarter surely
			// left before any acknowledgement could come back.
			n, nBytes = max(r.SegmentsEarly, 1), r.BytesEarly
			why += fmt.Sprintf(" (counting only the %d segments that arrived within a quarter of the round trip of its first: the round spread over %s ms, and later rounds may have merged into it)", n, ms(r.LastNs-r.FirstNs))
		}
		return cutReading{verdict: report.VerdictLowerBound, lo: n, loBytes: nBytes, reason: why, unproven: unproven}
	}
	switch {
	case r.Holes > 0:
		return cutReading{verdict: report.VerdictAmbiguous, lo: w, loBytes: wBytes, unproven: []string{report.ObligationCompleteRound},
			reason: "the capture missed packets in or right after the first round (a gap in the sequence, or bytes the client acknowledged that the capture never saw), so its size is unknown"}
	case r.Retransmissions > 0 || r.OutOfOrder > 0 || r.Lost > 0:
		return cutReading{verdict: report.VerdictAmbiguous, lo: w, loBytes: wBytes, unproven: []string{report.ObligationCompleteRound},
			reason: "loss, a retransmission or reordering in the first round blurs it"}
	case in.local():
		return cutReading{verdict: report.VerdictAmbiguous, unproven: []string{report.ObligationRoundsSeparable},
			reason: fmt.Sprintf("the path's round trip (%s ms) is too short to tell rounds apart: a window leaves in less time than an acknowledgement takes to come back, and the sender's turnaround and the capture's clock are of the same order, so no window is read", ms(in.Path.HandshakeRTTNs))}
	case r.Paused:
		n := max(r.SegmentsBeforePause, 1)
		return cutReading{verdict: report.VerdictLowerBound, lo: n, loBytes: r.BytesBeforePause, unproven: []string{report.ObligationWindowFilled},
			reason: fmt.Sprintf("the server paused in the first round and sent more with nothing acknowledged that the capture saw: the application paused, or the capture missed the acknowledgement that released the rest; the %d segments before the pause went out in one stretch, so the window is at least that", r.SegmentsBeforePause)}
	case r.Limit == report.LimitRwnd:
		return cutReading{verdict: report.VerdictRwndLimited, lo: w, loBytes: wBytes, unproven: []string{report.ObligationReceiveWindowRoom},
			reason: "the client's receive window, not the congestion window, capped the first round"}
	case r.Limit == report.LimitRate:
		return bound("the data arrived as one stream at the path's rate, with no idle gap where the first round seemed to end: more of the first window may have arrived after that point, so the window is at least this large", report.ObligationReleasedByAck)
	case r.Limit == report.LimitIncomplete:
		return bound("the transfer stopped before the response was complete (stalled, or the capture ended), so the window is at least this large", report.ObligationDataQueued)
	case r.NagleHeld:
		return bound("the second round began with a segment shorter than a full one, sent when an earlier short segment was acknowledged: Nagle's algorithm holds such a segment exactly that long, so the first round may have ended for want of a full segment to send, not for want of window; the window is at least this large", report.ObligationDataQueued)
	case r.Undergrown:
		return bound(strings.Replace(r.UndergrownReason(), "the next round", "the second round", 1)+"; an application short of data ends the first round the same way, so the window is at least this large", report.ObligationWindowFilled)
	case r.Outgrown && next != nil:
		return bound(fmt.Sprintf("the second round carried %d segments, more than slow start can grow a full first window of %d to (one segment per segment acknowledged): the first round did not fill the window, which is at least this large", next.WindowSegments(), w), report.ObligationWindowFilled)
	case r.UnclockedOwn() > 0 && 2*(r.LastNs-r.FirstNs) > in.Path.HandshakeRTTNs:
		// Paced sending (BBR, or any sender pacing at twice its rate in slow
		// start) spreads a window over at most half a round trip; an application
		// writing at its own pace spreads it over the whole round.
		return bound(fmt.Sprintf("part of the first round (%d of its frames) left after a pause of the server's own with nothing new from the client: an application writing at its own pace, so the round's size is not the window's, which is at least this large", r.UnclockedOwn()), report.ObligationWindowFilled)
	case r.ArrivalPauses > 0:
		n := max(r.SegmentsBeforeArrivalPause, 1)
		return cutReading{verdict: report.VerdictLowerBound, lo: n, loBytes: r.BytesBeforeArrivalPause, unproven: []string{report.ObligationWindowFilled},
			reason: fmt.Sprintf("the first round arrived in bursts with silences of a quarter of a round trip or more between them (a bottleneck spaces a flight evenly): the server paused, as an application writing at its own pace does, or the later bursts are later rounds; the %d segments before the first silence went out together, so the window is at least that", n)}
	case r.LateSends > 0:
		return bound(fmt.Sprintf("part of the first round (%d of its frames) left after a pause of the server's own, long after the last acknowledgement that could have released it: an application writing at its own pace, so the round's size is not the window's, which is at least this large", r.LateSends), report.ObligationWindowFilled)
	case r.PartialEnd && r.Limit == report.LimitApp:
		return bound("the first round ended with a segment shorter than a full one: the server had nothing more to send at that moment (not a window cut), so the window is at least this large", report.ObligationFullSegments)
	case r.Limit != report.LimitCwnd || next == nil:
		return bound("everything the server had to send fit in the first round, so the window is at least this large", report.ObligationDataQueued)
	}

	// The round's timing says the window cut it. Each obligation must now be
	// proven from the packets; any that is not leaves a bound.
	var proofs []report.Proof
	var unproven []string
	var why []string
	fail := func(obligation, reason string) {
		unproven = append(unproven, obligation)
		why = append(why, reason)
	}
	prove := func(obligation, detail string) {
		proofs = append(proofs, report.Proof{Obligation: obligation, Detail: detail})
	}
	prove(report.ObligationStartSeen, "the handshake and the first round are in the capture")
	prove(report.ObligationCompleteRound, fmt.Sprintf("the round's %d packets (stream bytes %d-%d) hold no retransmission, reordering or capture gap, and no later packet re-sent any of them", r.Packets, r.StartOffset, r.EndOffset))

	switch {
	case in.Path.Method == rounds.MethodGaps:
		fail(report.ObligationRoundsSeparable, "the rounds were split by gaps in the server's sending, not by the acknowledgements it received")
	case in.splitByCaptureTime():
		// By capture time at the client, without the server's timestamps: only a
		// round that arrived as one burst (a paced sender, or one its own host held
		// back, spreads it: BBR's window of 46 arrived as 36, a 31 ms silence, then
		// the rest with the next round), followed by a silence (a bottleneck's
		// queue drains a flight without one, and delays what an acknowledgement
		// released, so the ACK clock splits early), whose next data came a whole
		// round trip after the acknowledgement that released it, is where the round
		// trip put it.
		rtt := in.roundsRTT()
		span, idle := r.LastNs-r.FirstNs, next.FirstNs-r.LastNs
		turn := next.FirstNs - r.FirstAckNs
		switch {
		case 8*span <= rtt && 4*idle >= rtt && turn >= releaseFloorNs(rtt):
			prove(report.ObligationRoundsSeparable, in.methodDetail()+fmt.Sprintf(", the round arriving within %s ms, the next %s ms after it and %s ms after the client's first acknowledgement", ms(span), ms(idle), ms(turn)))
		case 8*span > rtt:
			fail(report.ObligationRoundsSeparable, fmt.Sprintf("at the client without the server's timestamps the round arrived over %s ms, more than an eighth of the %s ms round trip: a sender pacing its window out (BBR), or one its own host held back, spreads a round so, and a silence inside it can look like the window's end", ms(span), ms(rtt)))
		case turn < releaseFloorNs(rtt):
			fail(report.ObligationRoundsSeparable, fmt.Sprintf("at the client without the server's timestamps the next data arrived %s ms after the client's first acknowledgement of the round, less than the %s ms round trip: the server sent it before that acknowledgement could have reached it (an application's write), so the boundary is not the window's", ms(turn), ms(rtt)))
		default:
			fail(report.ObligationRoundsSeparable, fmt.Sprintf("at the client without the server's timestamps the next round arrived %s ms after this one: no silence of a quarter of the %s ms round trip, so a bottleneck or the sender's pace, not the round trip, may have placed the boundary", ms(idle), ms(rtt)))
		}
	default:
		prove(report.ObligationRoundsSeparable, in.methodDetail())
	}
	if ok, detail := in.endToEnd(); !ok {
		fail(report.ObligationEndToEnd, detail)
	} else if late, lateDetail := in.answeredARoundTripLate(r); late {
		fail(report.ObligationEndToEnd, lateDetail)
	} else {
		prove(report.ObligationEndToEnd, detail)
	}
	if in.Segment.Proven {
		prove(report.ObligationSegmentSize, in.segmentDetail())
	} else {
		fail(report.ObligationSegmentSize, in.segmentDetail())
	}
	switch {
	case r.Continuous:
		fail(report.ObligationReleasedByAck, "the server's sending went on into the next round without a pause beyond the round's own spacing: a sender pacing its data out (BBR) whose first acknowledgement came back mid-flight, not one that had filled its window and waited")
	case in.Path.Vantage == report.VantageServer && r.FirstAckNs > 0 && next.FirstNs-r.FirstAckNs > serverTurnaroundNs:
		fail(report.ObligationReleasedByAck, fmt.Sprintf("the next data left %s ms after the round's first acknowledgement reached the server, longer than a kernel takes to answer one (%s ms): the application had not written it yet", ms(next.FirstNs-r.FirstAckNs), ms(serverTurnaroundNs)))
	case in.Path.Vantage != report.VantageServer && r.FirstAckNs > 0 && in.serverRTTNs() > 0 &&
		next.FirstNs > max(r.FirstAckNs+in.serverRTTNs(), r.LastNs)+max(serverTurnaroundNs, in.serverRTTNs()/10, 2*r.Spacing()):
		// Away from the server, what the acknowledgement released comes back
		// within a round trip of it (or behind the round's own last packet,
		// queued at a bottleneck, a packet's time or two later), and a
		// kernel's turnaround.
		fail(report.ObligationReleasedByAck, fmt.Sprintf("the next data came %s ms after the client first acknowledged the round, later than the %s ms round trip to the server and a sender's turnaround allow: the server sent it after the acknowledgement had let it go, so its application (or an origin it relays, farther away than the client) wrote it then", ms(next.FirstNs-r.FirstAckNs), ms(in.serverRTTNs())))
	case next.BytesOnSACK > next.SACKedAtSend+int64(next.DupAcksAtSend*full):
		// Linux's CUBIC and Reno grow no window on acknowledgements that
		// acknowledge nothing new; a window that grew on them (BBR) is no
		// reading of the initial one either.
		fail(report.ObligationReleasedByAck, fmt.Sprintf("before any of the round's bytes was acknowledged, the server sent %s of the next data on selective or duplicate acknowledgements (a segment reordered or lost on the way) that reported %s received: more than they took out of flight, so the window did not hold that data back; the application may have written it then", report.Size(next.BytesOnSACK), report.Size(next.SACKedAtSend+int64(next.DupAcksAtSend*full))))
	case next.BytesOnSACK > 0 && next.BytesOnSACK >= int64(next.Bytes):
		// A window shows itself on such acknowledgements by rationing: what
		// they free goes out, the rest waits for the acknowledgement. Each of
		// a burst of them is a moment the application's next write may meet.
		fail(report.ObligationReleasedByAck, fmt.Sprintf("all of the next data (%s) left on selective or duplicate acknowledgements (a segment reordered or lost on the way), before any of the round's bytes was acknowledged: nothing was held back for the acknowledgement, so nothing shows the window, rather than the application's writes, ended the round", report.Size(next.BytesOnSACK)))
	case next.OutranAcks:
		fail(report.ObligationReleasedByAck, fmt.Sprintf("on the acknowledgements it had then, the server sent %d packets of the next data where a window that had cut the round could have let %d go (each packet acknowledged frees one and grows the window by one at most): the application wrote them then, and the round ended where its writes did", next.OutranSent, next.OutranAllowed))
	case r.ClientDataAtFirstAck > r.ClientDataAtEnd:
		fail(report.ObligationReleasedByAck, "the packet that first acknowledged the round also brought new data from the client (a request), which may have released the next data as well as the acknowledgement did, so the round may have ended the server's answer, not its window")
	case r.MaybeProbe:
		// Handled below as a range.
	default:
		prove(report.ObligationReleasedByAck, in.releaseDetail(r, next))
	}
	queued, queuedDetail := in.queued(r, next)
	if queued {
		prove(report.ObligationDataQueued, queuedDetail)
	} else {
		fail(report.ObligationDataQueued, queuedDetail)
	}
	prove(report.ObligationWindowFilled, in.growthDetail(r, next))
	if r.WindowRoomBytes >= int64(max(full, 1)) {
		prove(report.ObligationReceiveWindowRoom, fmt.Sprintf("the client's window had %s of room at the cut", report.Size(min(r.WindowRoomBytes, 1<<40))))
	} else {
		fail(report.ObligationReceiveWindowRoom, fmt.Sprintf("the client's window had only %d bytes of room at the cut, less than a full segment", r.WindowRoomBytes))
	}
	partialInside := r.PartialInside(full)
	switch {
	case r.PartialEnd && !(next.ReleaseAckMax >= 0 && next.ReleaseAckMax < r.EndOffset):
		fail(report.ObligationFullSegments, fmt.Sprintf("the round's last frame (%d bytes) is not a whole number of %d-byte segments, and the rest went out only once everything was acknowledged", r.LastFrameBytes, full))
	case r.PartialEnd && in.Path.Vantage != report.VantageServer:
		// The short frame ended one of the server's writes; whether the next write
		// came before the acknowledgement (the window held it) or with it (the
		// application had not written it yet: an OpenSSL server's second write of
		// its flight, 74 ms later) only the server's own timing shows.
		fail(report.ObligationFullSegments, fmt.Sprintf("the round's last frame (%d bytes) ended one of the server's writes, and away from the server nothing shows that the next write came before the acknowledgement that let it go", r.LastFrameBytes))
	case r.PartialEnd:
		// The short last frame ended one of the server's writes; the rest of its
		// data went out on an acknowledgement that left part of the round in
		// flight, which Nagle's algorithm (either variant) would not do: the
		// window held it. A sender counting packets had the round's; one counting
		// bytes, the round's bytes and less than the next frame more.
		if !partialInside {
			prove(report.ObligationFullSegments, fmt.Sprintf("the round's frames carried whole %d-byte segments but the last (%d bytes), which ended a write: the rest went out on an acknowledgement that left part of the round unacknowledged (to byte %d of %d at most), so the window, not the writes, ended the round", full, r.LastFrameBytes, next.ReleaseAckMax, r.EndOffset))
		}
	case !partialInside:
		prove(report.ObligationFullSegments, fmt.Sprintf("every frame of the round carried whole %d-byte segments", full))
	}

	// The least the round shows of the window, for the bound and the ranges
	// below: a sender that counts its window in bytes had room for the round's
	// bytes only (10 packets of 10.9 KB are 7 segments' worth of 1,448 bytes);
	// a last segment that may be a tail loss probe was sent beyond the window.
	byteWindow := w
	if partialInside {
		byteWindow = max(wBytes/full, 1)
	}
	probeLo, probeLoBytes := w-1, wBytes-r.LastFrameBytes
	if len(unproven) > 0 {
		out := bound("the first round looks cut by the congestion window, but "+strings.Join(why, "; and ")+"; so the window is at least this large", unproven...)
		if partialInside && in.Segment.Proven {
			out.lo = min(out.lo, byteWindow)
		}
		if r.MaybeProbe && w > 1 && out.lo >= w {
			out.lo, out.loBytes = probeLo, probeLoBytes
		}
		return out
	}
	if partialInside && wBytes/full < w {
		// Packets and bytes disagree: a sender counting its window in packets
		// (Linux) had as many as it sent; one counting bytes (RFC 5681) had room
		// for the bytes it sent and less than one more full segment.
		return cutReading{verdict: report.VerdictRange, lo: byteWindow, hi: w, loBytes: wBytes, hiBytes: wBytes + full - 1,
			evidence: proofs, unproven: []string{report.ObligationFullSegments},
			reason: fmt.Sprintf("the server stopped after the first round with data left and sent more as soon as the first acknowledgement came back, but the round's %d packets carried only %d bytes (a segment shorter than a full one inside it): %d segments for a sender that counts its window in packets (Linux), %d to %d bytes for one that counts bytes",
				w, wBytes, w, wBytes, wBytes+full-1)}
	}
	if r.MaybeProbe && w > 1 {
		// A tail loss probe is not part of the window; a late write is. Either
		// way the window is one of these two.
		return cutReading{verdict: report.VerdictRange, lo: probeLo, hi: w, loBytes: probeLoBytes, hiBytes: wBytes,
			evidence: proofs, unproven: []string{report.ObligationReleasedByAck},
			reason: fmt.Sprintf("the server stopped after the first round with data left and sent more as soon as the first acknowledgement came back, but its last segment came alone %.1f ms later on the server's clock, before any acknowledgement reached it (its timestamp echo is the same): a tail loss probe, not part of the window (%d segments), or a late write (%d)",
				float64(r.MaybeProbeGapNs)/1e6, probeLo, w)}
	}
	if r.MaybeProbe || partialInside {
		return bound("the first round's last segment may have been a tail loss probe or a late write", report.ObligationReleasedByAck)
	}
	return cutReading{verdict: report.VerdictExact, lo: w, loBytes: wBytes, evidence: proofs,
		reason: "the server stopped after the first round with data left and room in the receive window, and sent more as soon as the first acknowledgement came back"}
}

// splitByCaptureTime reports whether the rounds were split by capture time away
// from the server, with nothing of the server's (its timestamps) to anchor them.
func (in Input) splitByCaptureTime() bool {
	return in.Path.Method == rounds.MethodACKClock && in.Path.Vantage != report.VantageServer
}

// roundsRTT is the round trip the rounds were split with.
func (in Input) roundsRTT() int64 {
	if in.Path.RoundsRTTNs > 0 {
		return in.Path.RoundsRTTNs
	}
	return in.Path.HandshakeRTTNs
}

// answeredARoundTripLate reports whether the server answered the client data
// that released round r one, two or three round trips later than it could
// have: what a TCP-terminating proxy does when it relays an origin as far from
// it as the client is (it connects, perhaps over TLS, and forwards the
// request). The origin's rounds then reach the proxy as the client's
// acknowledgements do, and what the client reads is the origin's window, not the
// proxy's (the truth campaign: a proxy with IW 53, its origin 49.5 ms away and
// the client 48.3 ms: "6 to 9" from both ends). An application that took about
// a round trip to answer looks the same and loses its exact reading too. A
// relay much nearer or farther than the client is paces its data out of step
// with the client's acknowledgements, which the other obligations see.
func (in Input) answeredARoundTripLate(r *rounds.Round) (bool, string) {
	rtt := in.Path.HandshakeRTTNs
	if rtt <= 0 || r.ClientDataAtStart <= 0 || r.RequestNs > r.FirstNs {
		return false, ""
	}
	for i := range in.Rounds {
		if q := &in.Rounds[i]; q.FirstNs >= r.RequestNs && q.FirstNs < r.FirstNs {
			return false, "" // the server answered the data with an earlier round
		}
	}
	wait := r.FirstNs - r.RequestNs
	if in.Path.Vantage != report.VantageServer {
		wait -= rtt // the data's way to the server and the answer's back
	}
	// One upstream round trip for a pooled connection to the origin, two when
	// the proxy connects first, three or more with TLS to the origin.
	for k := int64(1); k <= relayRoundTrips; k++ {
		if wait >= k*(rtt-max(rtt/10, releaseJitterNs)) && wait <= k*rtt+rtt/2 {
			return true, fmt.Sprintf("the server answered the client's data (sent at %s ms) %s ms after it could have, about %d more round trips of %s ms: a TCP-terminating proxy relaying an origin as far from it as the client is answers so (a round trip per exchange with the origin), and the origin's rounds then reach it as the client's acknowledgements do, so the rounds may be the origin's window, not this connection's", in.at(r.RequestNs), ms(wait), k, ms(rtt))
		}
	}
	return false, ""
}

// relayRoundTrips is the most exchanges with an origin a relay's first answer
// is taken to wait on: a connection, a TLS handshake and the request.
const relayRoundTrips = 3

// serverRTTNs is the round trip between the capture and the server: from the
// SYN to the SYN/ACK when both were seen and that is the shorter, else the
// handshake's.
func (in Input) serverRTTNs() int64 {
	if r := in.Path.ServerRTTNs; r > 0 && (in.Path.HandshakeRTTNs <= 0 || r < in.Path.HandshakeRTTNs) {
		return r
	}
	return in.Path.HandshakeRTTNs
}

// releaseFloorNs is the soonest, after the client's acknowledgement, that data
// the acknowledgement released can reach a capture away from the server: a
// round trip, less what jitter may take off one (5% of it, 1 ms at least).
func releaseFloorNs(rtt int64) int64 {
	return rtt - max(rtt/20, releaseJitterNs)
}

// releaseJitterNs is the least a round trip may vary by between the
// handshake's and a later one's.
const releaseJitterNs = 1_000_000

// local reports whether the path is too short to tell rounds apart.
func (in Input) local() bool {
	hs, data := in.Path.HandshakeRTTNs, in.Path.DataRTTNs
	if hs <= 0 {
		return data > 0 && data < localPathNs
	}
	return hs < localPathNs && (data <= 0 || data < localPathNs)
}

// endToEnd reports whether the data's round trip agrees with the handshake's, and
// says what shows it. Data acknowledged in far less than the handshake took shows
// something near the capture answering for the server (a split-TCP middlebox, a
// proxy that held the SYN/ACK until its own connection was up): the rounds are
// then that box's, paced by what reaches it from upstream. DataRTTNs is a floor
// (flow.Conn.DataRTTFloorNs), so one at least half the handshake's proves it.
func (in Input) endToEnd() (bool, string) {
	hs, data := in.Path.HandshakeRTTNs, in.Path.DataRTTNs
	switch {
	case hs <= 0:
		return false, "the handshake was not seen, so nothing shows that the data's round trip is the server's"
	case data <= 0:
		return false, "no data of the side the capture is away from was acknowledged, so nothing shows that the server itself (not a middlebox near the capture) acknowledged it"
	case 2*data < hs:
		return false, fmt.Sprintf("data was acknowledged within %s ms while the handshake took %s ms: something near the capture (a split-TCP middlebox or proxy) answers for the server, and its sending is paced by what reaches it", ms(data), ms(hs))
	}
	return true, fmt.Sprintf("data took at least %s ms to be acknowledged, as long as the handshake's %s ms allows: no middlebox near the capture answered for the server", ms(data), ms(hs))
}

func (in Input) methodDetail() string {
	v := in.Path.Vantage
	switch in.Path.Method {
	case rounds.MethodTimestamps:
		return fmt.Sprintf("the rounds follow the server's timestamp echoes (capture at the %s's side), whose clock resolves the %s ms round trip", v, ms(in.Path.HandshakeRTTNs))
	default:
		if v == report.VantageServer {
			return "the rounds follow the acknowledgements the server had received, captured at the server"
		}
		return fmt.Sprintf("the rounds follow the client's acknowledgements shifted by the %s ms round trip, captured at the %s", ms(in.Path.HandshakeRTTNs), v)
	}
}

func (in Input) segmentDetail() string {
	s := in.Segment
	switch {
	case s.Cap == 0:
		return fmt.Sprintf("no MSS option of the client's bounds the server's segments: their size (%d bytes) is inferred from the frames, and a count in segments rests on it", s.Bytes)
	case s.Proven && s.Bytes == s.Cap:
		return fmt.Sprintf("the server sent segments of %d bytes, the most the client's MSS option (less options) allows", s.Bytes)
	case s.Proven:
		return fmt.Sprintf("the server's segments carried %d bytes (a size that recurs, below the %d the client's MSS option allows: a smaller path MTU)", s.Bytes, s.Cap)
	}
	return fmt.Sprintf("no frame of the server's shows its segment size: none carried the %d bytes the client's MSS option allows, and no smaller size recurs", s.Cap)
}

func (in Input) releaseDetail(r, next *rounds.Round) string {
	if in.Path.Vantage == report.VantageServer {
		return fmt.Sprintf("the first acknowledgement of the round reached the server at %s ms and the next data left at %s ms, with no new data from the client", in.at(r.FirstAckNs), in.at(next.FirstNs))
	}
	return fmt.Sprintf("the client acknowledged the round first at %s ms, and the next data (at %s ms) was released by that acknowledgement's turn, with no new data from the client", in.at(r.FirstAckNs), in.at(next.FirstNs))
}

func (in Input) growthDetail(r, next *rounds.Round) string {
	w, n := r.WindowSegments(), next.WindowSegments()
	switch {
	case n <= w && next.Limit == report.LimitIncomplete:
		return fmt.Sprintf("the round's %d segments went out in one stretch; the next round (%d segments seen) was cut short where the transfer stopped", w, n)
	case n <= w:
		return fmt.Sprintf("the round's %d segments went out in one stretch, and the next round (%d segments) ended the data", w, n)
	}
	return fmt.Sprintf("the round's %d segments went out in one stretch, and the next round carried %d, as slow start grows a full window (%d to %d)", w, n, w+1, 2*w+1)
}

// queued reports whether the server had a full segment or more to send when
// round r ended, and says what shows it or what is missing: the next round began
// with a full segment (a sender with less queued sends a short one, and Nagle's
// algorithm holds a short one), or with a short one that left while part of the
// round was still unacknowledged (Nagle would have held it).
func (in Input) queued(r, next *rounds.Round) (bool, string) {
	cut := r.EndOffset - int64(r.ProbeBytes)
	full := max(in.Segment.Bytes, 1)
	// (A TLS record spanning the cut shows what was to come, not that it was
	// written yet: OpenSSL writes a record through a 4 KB buffer, and an nginx
	// server's second write of its Certificate record left 74 ms after the first.)
	msg := ""
	if rec, ok := spanning(in.Records, cut); ok {
		msg = fmt.Sprintf("a TLS record (stream bytes %d-%d) goes on past the cut at byte %d, and ", rec.Start, rec.End, cut)
	} else if m, ok := spanning(in.Messages, cut); ok {
		msg = fmt.Sprintf("the message (stream bytes %d-%d) goes on past the cut at byte %d, and ", m.Start, m.End, cut)
	}
	switch {
	case next.StartOffset != cut && next.StartOffset != r.EndOffset:
		return false, "the next round does not begin where this one ended"
	case next.FirstFrameBytes >= full:
		return true, msg + fmt.Sprintf("the next round began with a full segment (%d bytes) at %s ms: a sender with less queued sends a short one", next.FirstFrameBytes, in.at(next.FirstNs))
	case next.ReleaseAckMax >= 0 && next.ReleaseAckMax < r.EndOffset && !r.NagleHeld:
		return true, msg + fmt.Sprintf("the next round began with a %d-byte segment that left while part of the round was still unacknowledged (acknowledged to byte %d of %d at most): Nagle's algorithm would have held it, so the window did", next.FirstFrameBytes, next.ReleaseAckMax, r.EndOffset)
	}
	return false, fmt.Sprintf("the next round began with a %d-byte segment, less than a full one, once everything was acknowledged: a sender with less than a segment queued (Nagle's algorithm, as BSD and macOS run it, holds a short segment while data is unacknowledged) shows the same", next.FirstFrameBytes)
}

// spanning finds the span of spans (in order) that holds offset x strictly inside.
func spanning(spans []Span, x int64) (Span, bool) {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].End > x })
	if i < len(spans) && spans[i].Start < x && spans[i].End > x {
		return spans[i], true
	}
	return Span{}, false
}

func (in Input) at(ns int64) string {
	if ns == 0 {
		return "?"
	}
	return ms(ns - in.Path.BaseNs)
}

// ms writes a duration in milliseconds with the digits that matter.
func ms(ns int64) string {
	if ns < 1e6 {
		return strconv.FormatFloat(float64(ns)/1e6, 'f', 3, 64)
	}
	return strconv.FormatFloat(float64(ns)/1e6, 'f', 1, 64)
}
