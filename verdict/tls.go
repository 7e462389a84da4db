package verdict

import (
	"fmt"

	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/rounds"
)

// tlsFlight reads the window from the server's TLS flight: a chain larger than
// the window is cut after IW segments and finished a round trip later; a flight
// that fits gives a lower bound. After a HelloRetryRequest the flight went out a
// round later, when the window may have grown by a segment per retry segment
// acknowledged.
func (in Input) tlsFlight() *report.InitialWindow {
	t := in.TLS
	first := t.RetryRounds
	if first+t.FlightRounds > len(in.Rounds) || t.FlightRounds == 0 {
		return &report.InitialWindow{Verdict: report.VerdictNone, Source: report.PhaseTLS, Reason: "the server sent no TLS flight"}
	}
	// The flight's rounds alone: its last round ends the flight, whatever came
	// after it.
	flight := in
	flight.Rounds = in.Rounds[:first+t.FlightRounds]
	iw := flight.judge(first, report.PhaseTLS)
	fr := in.Rounds[first : first+t.FlightRounds]
	switch {
	case iw.Verdict == report.VerdictExact:
		iw.Reason = fmt.Sprintf("the server's TLS flight (%d segments) was cut after %d segments and finished one round trip later", t.FlightSegments, fr[0].WindowSegments()) + fr[0].ProbeNote()
	case iw.Verdict == report.VerdictLowerBound && (fr[0].Limit == report.LimitEnd || len(fr) == 1):
		iw.Reason = fmt.Sprintf("the server's whole TLS flight (%d segments) fit in the first round, so the window is at least that", t.FlightSegments)
	}
	if first == 0 {
		return iw
	}
	// The window held at least the retry request's first round.
	floor := max(in.Rounds[0].WindowSegments(), 1)
	// What may have grown it since: the retry request's segments, and each
	// duplicate ACK without SACK blocks (Linux counts one as a segment delivered).
	grown := t.RetrySegments + fr[0].RenoDupAcksBefore
	if iw.Verdict == report.VerdictLowerBound {
		// The flight fit in a window that was at most RetrySegments larger than the
		// initial one: the initial window held at least the flight less that growth
		// (Linux grows a window under slow start whenever it is less than twice what
		// is in flight: a retry request of two segments grows an initial window of
		// 3 to 5, and a flight of 4 then fits).
		fit := iw.Segments
		segs := max(floor, grownFrom(fit, grown))
		retry := fmt.Sprintf("the HelloRetryRequest (%d segments) fit in the first round", t.RetrySegments)
		if t.RetryRounds > 1 {
			retry = fmt.Sprintf("the HelloRetryRequest (%d segments) took %d rounds, the first of %d", t.RetrySegments, t.RetryRounds, floor)
		}
		return &report.InitialWindow{Segments: segs, Bytes: min(segs*in.Segment.Bytes, iw.Bytes), Verdict: report.VerdictLowerBound, Source: report.PhaseTLS,
			Unproven: append(iw.Unproven, report.ObligationWindowUngrown),
			Reason:   fmt.Sprintf("%s, and %d segments of the server's flight after it fit in a window that the retry request's acknowledgement may have grown by %d, so the window is at least %d", retry, fit, grown, segs)}
	}
	if later := laterRound(iw, fr[0], grown, floor, "the server's flight after its HelloRetryRequest"); later != nil {
		return later
	}
	return &report.InitialWindow{Segments: floor, Verdict: report.VerdictLowerBound, Source: report.PhaseTLS,
		Unproven: []string{report.ObligationDataQueued}, Reason: fmt.Sprintf("the HelloRetryRequest's first round carried %d segments", floor)}
}

// narrow picks the connection's reading over TLS: the flight's, narrowed by the
// first HTTP round where the flight fit and that round was cut by the window. That
// round shows the window after the handshake, which slow start may have grown by
// a segment per segment acknowledged during the handshake.
func (in Input) narrow(flight *report.InitialWindow) *report.InitialWindow {
	if flight == nil || flight.Verdict != report.VerdictLowerBound {
		return flight
	}
	var hsSegs int
	for i := range in.Rounds {
		r := &in.Rounds[i]
		if r.StartOffset < in.TLS.HandshakeEnd {
			if in.lossBefore(i) {
				// A loss during the handshake (seen, or a timeout's silence)
				// cut the window the later round shows.
				return flight
			}
			hsSegs += r.Segments
			continue
		}
		// The round must be proven cut by the window on its own: a round that ends
		// short, or whose next data answers a new request (HTTP/2's SETTINGS,
		// WINDOW_UPDATE and PING records after the handshake), says nothing.
		reading := in.judge(i, report.PhaseHTTP)
		if !cutByWindow(reading) {
			return flight
		}
		// Each duplicate ACK without SACK blocks counts as a segment delivered
		// as well (Linux's Reno emulation of SACK).
		out := laterRound(reading, *r, hsSegs+r.RenoDupAcksBefore, flight.Segments, "the first HTTP round")
		if out == nil {
			return flight
		}
		if len(in.Rounds) > in.TLS.RetryRounds && in.TLS.FlightRounds == 1 {
			out.Reason = fmt.Sprintf("the TLS flight (%d segments) fit in the window; ", in.TLS.FlightSegments) + out.Reason
		} else {
			out.Reason = fmt.Sprintf("the TLS flight shows a window of at least %d segments; ", flight.Segments) + out.Reason
		}
		if n := r.RenoDupAcksBefore; n > 0 && out != reading {
			out.Reason += fmt.Sprintf(" (of the %d, %d were duplicate ACKs without SACK blocks, each of which Linux counts as a segment delivered)", hsSegs+n, n)
		}
		if out.Verdict == report.VerdictRange && out.Segments <= flight.Segments {
			out.Segments, out.Bytes = flight.Segments, flight.Bytes
		}
		return out
	}
	return flight
}

// lossBefore reports whether round i shows a loss that may have cut the window
// before a later round: a retransmission or a capture gap in it, or a silence
// before it of a retransmission timeout's length (more than three round trips
// and 200 ms) that no new client data broke, while the server had more to send:
// a segment lost before the capture, sent again on the timer (a TLS 1.2 flight
// whose third segment came 240 ms after the first two, on an 18 ms path, and
// a window of 35 after it for an initial window of 50).
func (in Input) lossBefore(i int) bool {
	r := &in.Rounds[i]
	if r.Retransmissions > 0 || r.Lost > 0 || r.Holes > 0 {
		return true
	}
	if i == 0 {
		return false
	}
	prev := &in.Rounds[i-1]
	silence := r.FirstNs - prev.LastNs
	return silence > max(3*in.Path.HandshakeRTTNs, timeoutSilenceNs) && r.ClientDataAtStart <= prev.ClientDataAtEnd
}

// timeoutSilenceNs is the least silence read as a retransmission timeout (Linux's
// smallest RTO is 200 ms).
const timeoutSilenceNs = 200_000_000

// grownFrom is the least initial window that slow start can have grown to window
// segments with priorSegments acknowledged: each acknowledged segment grows a window
// by at most one (RFC 5681; BBR in startup adds what is acknowledged), but BBR
// also raises any window to 4 (bbr_cwnd_min_target) at its first acknowledgement,
// so a window of 1 to 3 can have grown to priorSegments + 3 (IW 1 grew to 14 after
// 11 acknowledged). A window more than 3 above what was acknowledged came from an
// initial window of at least window - priorSegments.
func grownFrom(window, priorSegments int) int {
	if window-priorSegments > bbrMinWindow-1 {
		return window - priorSegments
	}
	return 1
}

// bbrMinWindow is Linux BBR's least congestion window, in segments.
const bbrMinWindow = 4

// cutByWindow reports whether a round's own reading shows the window cut it: exact,
// or a range only for a shorter frame inside it (packets and bytes disagree).
func cutByWindow(reading *report.InitialWindow) bool {
	switch reading.Verdict {
	case report.VerdictExact:
		return true
	case report.VerdictRange:
		return len(reading.Unproven) == 1 && reading.Unproven[0] == report.ObligationFullSegments
	}
	return false
}

// laterRound reads the IW from a round cut by the congestion window after earlier
// segments of the connection were acknowledged: the window was then at most
// priorSegments larger than the IW (slow start grows it by at most one segment per
// segment acknowledged) and never smaller. floor is what is already known of the
// IW (at least that many segments). reading is the round's reading on its own; an
// exact one becomes a range unless the prior segments could not have grown it. Which
// end holds depends on the sender's congestion control, which the packets do not
// show: Linux's CUBIC and Reno do not grow a window while at most half of it is in
// use, BBR grows it on every acknowledgement. It returns nil when the round carried
// fewer segments than the floor (it was not cut by the window).
func laterRound(reading *report.InitialWindow, r rounds.Round, priorSegments, floor int, what string) *report.InitialWindow {
	if !cutByWindow(reading) {
		return reading
	}
	window, windowBytes := r.WindowSegments(), r.WindowBytes()
	if window <= floor {
		// No more than the window already known to hold (which never shrinks
		// without loss, and grew while the earlier segments were acknowledged
		// with more than half of it in use): the round was not cut by it (a
		// server that thought for a round trip before the rest read "8 to 8" for
		// IW 10).
		return nil
	}
	segBytes := max(windowBytes/max(window, 1), 1)
	lo := max(floor, grownFrom(window, priorSegments))
	if reading.Verdict == report.VerdictRange {
		// A shorter frame inside the round: a sender that counts bytes had fewer
		// segments' worth.
		lo = max(floor, min(lo, reading.Segments))
	}
	if lo >= window && reading.Verdict == report.VerdictExact {
		out := *reading
		out.Segments, out.Bytes = window, windowBytes
		out.Evidence = append(append([]report.Proof(nil), reading.Evidence...), report.Proof{Obligation: report.ObligationWindowUngrown,
			Detail: fmt.Sprintf("at most %d segments were acknowledged before the round, and the window is known to hold at least %d: they could not have grown it past %d", priorSegments, floor, window)})
		out.Reason = fmt.Sprintf("%s was cut by the congestion window at %d segments, and nothing acknowledged before it could have grown the window", what, window) + r.ProbeNote()
		return &out
	}
	out := &report.InitialWindow{
		Segments: lo, Bytes: min(lo*segBytes, windowBytes),
		SegmentsMax: window, BytesMax: windowBytes,
		Verdict: report.VerdictRange, Source: reading.Source,
		Evidence: reading.Evidence, Unproven: append([]string{report.ObligationWindowUngrown}, reading.Unproven...),
	}
	if window >= 3*priorSegments {
		out.ExactIf = report.ExactIfLinuxCubicOrReno
		out.Reason = fmt.Sprintf("%s was cut by the congestion window at %d segments after %d earlier segments were acknowledged: that is the initial window if the server runs Linux's CUBIC or Reno (which grow no window while at most half of it is in use), and %d to %d if its congestion control grows the window on every acknowledgement (BBR, other stacks' slow start)",
			what, window, priorSegments, lo, window)
	} else {
		out.Reason = fmt.Sprintf("%s was cut by the congestion window at %d segments after %d earlier segments were acknowledged, which may have grown the window by up to that many (slow start; BBR always, CUBIC and Reno once more than half the window was in use), so the initial window is %d to %d segments",
			what, window, priorSegments, lo, window)
	}
	out.Reason += r.ProbeNote()
	return out
}
