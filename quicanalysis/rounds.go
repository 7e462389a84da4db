package quicanalysis

import (
	"fmt"
	"sort"

	"github.com/slowstart/slowstart/report"
)

// buildRounds groups the server's ack-eliciting datagrams by round and labels why
// each round ended. It returns the rounds, the map from the raw round numbers of the
// datagrams to the reported (dense, 1-based) indexes, and each round's first and last
// datagram.
func buildRounds(dgs []serverDatagram, maxDatagram int, rttNs, startNs int64) ([]report.Round, map[int]int, []int, []int) {
	raw := map[int]bool{}
	for _, sd := range dgs {
		if sd.inFlight {
			raw[sd.round] = true
		}
	}
	order := sortedInts(raw)
	indexOf := map[int]int{}
	for i, r := range order {
		indexOf[r] = i + 1
	}
	rounds := make([]report.Round, len(order))
	last := make([]int, len(order))  // index in dgs of each round's last datagram
	first := make([]int, len(order)) // and first
	hasCrypto := make([]bool, len(order))
	hasStream := make([]bool, len(order))
	hasData := make([]bool, len(order))
	for i := range rounds {
		rounds[i].Index = i + 1
		first[i] = -1
	}
	var cumulative int64
	for i, sd := range dgs {
		if !sd.inFlight {
			continue
		}
		k := indexOf[sd.round] - 1
		r := &rounds[k]
		if first[k] < 0 {
			first[k] = i
			r.StartMs = float64(sd.timeNs-startNs) / 1e6
		}
		last[k] = i
		r.EndMs = float64(sd.timeNs-startNs) / 1e6
		r.Segments++
		r.Packets++
		r.Bytes += sd.bytes
		if sd.retx {
			r.Retransmissions++
		}
		hasCrypto[k] = hasCrypto[k] || sd.newCrypto
		hasStream[k] = hasStream[k] || sd.newStream
		hasData[k] = hasData[k] || sd.newData
	}
	for k := range rounds {
		r := &rounds[k]
		cumulative += int64(r.Bytes)
		r.CumulativeBytes = cumulative
		if rttNs > 0 {
			r.StartRTTs = (r.StartMs * 1e6) / float64(rttNs)
		}
		r.InFlightBytes = dgs[last[k]].inFlightAfter
		switch {
		case hasCrypto[k]:
			r.Phase = report.PhaseTLS
		case hasStream[k]:
			r.Phase = report.PhaseHTTP
		default:
			r.Phase = report.PhaseData
		}
		// Does the round's kind of data go on in a later round?
		continues := false
		for j := last[k] + 1; j < len(dgs) && !continues; j++ {
			switch r.Phase {
			case report.PhaseTLS:
				continues = dgs[j].newCrypto
			default:
				continues = dgs[j].newData
			}
		}
		end := dgs[last[k]]
		sentAfter := end.sentBefore + end.bytes
		switch {
		case r.Retransmissions > 0:
			r.Limit = report.LimitLoss
		case !continues:
			r.Limit = report.LimitEnd
		case !end.validated && 3*end.receivedBefore-sentAfter < maxDatagram:
			r.Limit = report.LimitAmplification
		case k+1 < len(rounds):
			r.Limit = endOfRound(dgs, first[k], last[k], first[k+1], rttNs)
		default:
			r.Limit = report.LimitApp
		}
	}
	return rounds, indexOf, first, last
}

// endOfRound tells why a round (datagrams first..last of dgs) that had more to send
// ended, from the silence between its last datagram and the acknowledgement that
// released the next round (whose first datagram is next): a server stopped by its
// window is silent until the acknowledgement returns and sends again at once; a
// server still pacing its window out when the acknowledgement came has no silence
// beyond its pacing interval; one that waited for its application sent late, or fell
// silent inside the round too.
func endOfRound(dgs []serverDatagram, first, last, next int, rttNs int64) string {
	var gaps []int64
	prev := int64(-1)
	for i := first; i <= last; i++ {
		if !dgs[i].inFlight {
			continue
		}
		if prev >= 0 {
			gaps = append(gaps, dgs[i].timeNs-prev)
		}
		prev = dgs[i].timeNs
	}
	spacing, longest := int64(0), int64(0)
	if len(gaps) > 0 {
		sort.Slice(gaps, func(a, b int) bool { return gaps[a] < gaps[b] })
		spacing, longest = gaps[len(gaps)/2], gaps[len(gaps)-1]
	}
	release := dgs[next].releasedNs
	silence := release - dgs[last].timeNs
	prompt := dgs[next].timeNs-release <= max(rttNs/8, 2_000_000)+spacing
	switch {
	case silence <= max(2*spacing, 1_000_000):
		return report.LimitPacing
	case longest >= silence/2:
		// The server fell silent inside the round for half as long as at its end and
		// went on by itself (a stalled process, a slow application): its silence at
		// the end tells nothing of its window.
		return report.LimitApp
	case prompt:
		return report.LimitCwnd
	}
	return report.LimitApp
}

// initialWindow reads the server's initial congestion window from the first round of
// response data after the handshake. QUIC counts its window in bytes of packets in
// flight, and a sender may go past it by less than one datagram (it sends while bytes
// in flight are below the window). The acknowledgements that may have grown the window
// before the round ended widen the reading by a datagram each (windowGrowth).
func initialWindow(rd *clockReading, maxDatagram int) *report.InitialWindow {
	rounds := rd.rounds
	for k := range rounds {
		r := rounds[k]
		if r.Phase != report.PhaseHTTP {
			continue
		}
		growth, during, lowest := rd.windowGrowth(k, maxDatagram)
		segments := func(bytes int) int { return (bytes + maxDatagram - 1) / maxDatagram }
		iw := &report.InitialWindow{Source: "http", Segments: r.Segments, Bytes: r.InFlightBytes}
		why := ""
		switch {
		case during == growth:
			why = fmt.Sprintf("%d acknowledged while the round was sent", during)
		case during > 0:
			why = fmt.Sprintf("%d before the round, with more than half the window in flight, and %d while it was sent", growth-during, during)
		default:
			why = fmt.Sprintf("%d before the round, with more than half the window in flight", growth)
		}
		switch r.Limit {
		case report.LimitCwnd:
			if growth == 0 {
				iw.Verdict = report.VerdictExact
				iw.Evidence = []report.Proof{
					{Obligation: report.ObligationCompleteRound, Detail: fmt.Sprintf("round %d had no retransmission", r.Index)},
					{Obligation: report.ObligationReleasedByAck, Detail: fmt.Sprintf("round %d stopped with %d bytes in flight in %d datagrams and went on as soon as an acknowledgement returned", r.Index, r.InFlightBytes, r.Segments)},
					{Obligation: report.ObligationWindowUngrown, Detail: "no acknowledgement came while the round was sent, and those before came with at most half the window in flight (RFC 9002 §7.8)"},
				}
				iw.Reason = fmt.Sprintf("round %d, the first of the response, stopped with %d bytes in flight in %d datagrams and went on as soon as an acknowledgement returned; QUIC senders send while bytes in flight are below the window, so the window was more than %d bytes and at most %d. No acknowledgement could have grown it before: none came while the round was sent, and those before came with at most half of it in flight (RFC 9002 §7.8)",
					r.Index, r.InFlightBytes, r.Segments, r.InFlightBytes-maxDatagram, r.InFlightBytes)
				break
			}
			iw.Verdict = report.VerdictRange
			iw.Unproven = []string{report.ObligationWindowUngrown}
			iw.Bytes, iw.Segments = lowest, segments(lowest)
			iw.BytesMax, iw.SegmentsMax = r.InFlightBytes, r.Segments
			iw.Reason = fmt.Sprintf("round %d, the first of the response, stopped with %d bytes in flight when the window was full, but the window may have grown by a datagram for each of %d packets acknowledged before (%s): the initial window was between %d and %d bytes",
				r.Index, r.InFlightBytes, growth, why, lowest, r.InFlightBytes)
		case report.LimitLoss:
			iw.Verdict = report.VerdictAmbiguous
			iw.Unproven = []string{report.ObligationCompleteRound}
			iw.Reason = fmt.Sprintf("round %d had retransmissions", r.Index)
		default:
			iw.Verdict = report.VerdictLowerBound
			iw.Bytes, iw.Segments = lowest, segments(lowest)
			var what string
			switch r.Limit {
			case report.LimitAmplification:
				what = fmt.Sprintf("round %d was cut by the amplification limit, not by the window", r.Index)
				iw.Unproven = []string{report.ObligationReleasedByAck}
			case report.LimitPacing:
				what = fmt.Sprintf("the server was still pacing out round %d when the first acknowledgement returned (no silence before it)", r.Index)
				iw.Unproven = []string{report.ObligationReleasedByAck}
			case report.LimitEnd:
				what = fmt.Sprintf("the response ended inside round %d", r.Index)
				iw.Unproven = []string{report.ObligationDataQueued}
			default:
				what = fmt.Sprintf("the server paused inside round %d with room left (limit %s)", r.Index, r.Limit)
				iw.Unproven = []string{report.ObligationWindowFilled}
			}
			if growth > 0 {
				iw.Unproven = append(iw.Unproven, report.ObligationWindowUngrown)
			}
			if lowest <= 1 {
				// A sender may send a datagram whenever anything at all is left
				// in its window: a round this small proves no window.
				iw.Verdict, iw.Bytes, iw.Segments = report.VerdictNone, 0, 0
				iw.Reason = fmt.Sprintf("%s with %s in flight, too little to show a window (a QUIC sender may send a datagram while anything is left in its window; the acknowledgements before the round may have grown it by a datagram for each of %s): fetch a response larger than the window (100 KB or more) to read it",
					what, report.Count(r.InFlightBytes, "byte", "bytes"), report.Count(growth, "packet", "packets"))
				break
			}
			iw.Reason = fmt.Sprintf("%s, with %d bytes in flight; a QUIC sender sends while bytes in flight are below the window, so the window was more than %d bytes", what, r.InFlightBytes, r.InFlightBytes-maxDatagram)
			if growth > 0 {
				iw.Reason += fmt.Sprintf(" then, and it may have grown by a datagram for each of %s acknowledged before (%s)", report.Count(growth, "packet", "packets"), why)
			}
			iw.Reason += fmt.Sprintf(": the initial window is at least %d bytes", lowest)
		}
		return iw
	}
	return &report.InitialWindow{Verdict: report.VerdictNone, Reason: "no response data after the handshake to judge by"}
}

// handshakeReading is what the server's first handshake round says of its window.
func handshakeReading(r report.Round) *report.InitialWindow {
	iw := &report.InitialWindow{Source: "tls", Segments: r.Segments, Bytes: r.Bytes, Verdict: report.VerdictLowerBound,
		Unproven: []string{report.ObligationDataQueued}}
	switch r.Limit {
	case report.LimitAmplification:
		iw.Verdict, iw.Unproven = report.VerdictNone, []string{report.ObligationReleasedByAck}
		iw.Reason = fmt.Sprintf("the handshake flight was cut at %d bytes by the amplification limit, before the congestion window could show", r.Bytes)
	case report.LimitEnd:
		iw.Reason = fmt.Sprintf("the whole handshake flight (%d bytes) fit in round 1", r.Bytes)
	default:
		iw.Reason = fmt.Sprintf("round 1 ended by %s after %d bytes", r.Limit, r.Bytes)
	}
	return iw
}

// sortedKeys returns the keys of a map of stream IDs in order.
func sortedKeys[V any](m map[uint64]V) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
