// Package truthcheck judges slowstart's readings of lab captures against what the lab
// set up (the server route's initcwnd, the path's RTT, a HelloRetryRequest, a dropped
// SYN), and edits lab captures for tests: it lists a capture's TCP packets and writes
// a copy with some of them removed, as a capture that lost them would be.
//
// It is shared by the fast tests over committed captures (package analysis) and the
// live lab tests that make fresh ones (package lab). The expected values come from the
// lab's configuration and from counting packets, never from slowstart's own output.
package truthcheck

import (
	"fmt"

	"github.com/slowstart/slowstart/report"
)

// Expectations of a trial's initial-window reading.
const (
	// ExpectExact: the transfer was built so that its packets prove the window (a
	// response of full segments, at least twice the window, written at once): the
	// reading must be the true IW, exact.
	ExpectExact = "exact"
	// ExpectBound: any reading that holds the truth (an exact reading equal to it, a
	// lower bound at or below it, a range around it, ambiguous).
	ExpectBound = "bound"
	// ExpectNotExact: the situation was built to defeat a rule that would otherwise
	// give an exact reading (a capture that lost round 1's last segment, Nagle holding
	// a short segment, an application's pace): the reading must hold the truth and not
	// be exact.
	ExpectNotExact = "not_exact"
	// ExpectAmbiguous: the reading must be ambiguous (a capture that lost a segment of
	// round 1).
	ExpectAmbiguous = "ambiguous"
	// ExpectRange: a TLS flight that fits the window, then a first HTTP round cut by
	// the window: the reading must be a range that holds the truth (BBR grows its
	// window during the handshake, CUBIC and Reno do not, and the packets do not show
	// which one the server runs); at the client a lower bound below the truth is
	// accepted too (see Check).
	ExpectRange = "range"
)

// Truth is what a lab trial was set up with.
type Truth struct {
	IW    int     // the server route's initcwnd, in segments
	RTTMs float64 // the emulated path's round trip
	// TLS is "", "1.2" or "1.3"; HelloRetry says the server asked for another key
	// share (TLS 1.3).
	TLS        string
	HelloRetry bool
	// SYNsDropped is how many of the client's SYNs the path dropped.
	SYNsDropped int
	Expect      string
}

// Check judges the connection's readings seen from vantage ("client" or "server"):
// wrong lists answers that are wrong whatever the host did; timing lists what a busy
// host can cause (a lower bound at exactly the true IW where an exact reading was
// expected, a handshake RTT inflated by a stall).
func Check(c *report.Connection, vantage string, t Truth) (wrong, timing []string) {
	wrong, timing = checkRTT(c, t, wrong, timing)
	if c.Vantage != vantage {
		problem := fmt.Sprintf("vantage %q, want %q", c.Vantage, vantage)
		if len(timing) > 0 {
			// The vantage is read from the handshake's timing, which a stall upset
			// (checkRTT said so).
			timing = append(timing, problem)
		} else {
			wrong = append(wrong, problem)
		}
	}
	iw := c.InitialWindow
	if iw == nil {
		return append(wrong, "no initial-window reading"), timing
	}
	if why := Contradicts(iw, t.IW); why != "" {
		wrong = append(wrong, "IW: "+why)
	}
	if c.TLS != nil && c.TLS.InitialWindow != nil {
		if why := Contradicts(c.TLS.InitialWindow, t.IW); why != "" {
			wrong = append(wrong, "TLS flight's IW: "+why)
		}
	}
	describe := func() string {
		return fmt.Sprintf("%d..%d %s (%s)", iw.Segments, iw.SegmentsMax, iw.Verdict, iw.Reason)
	}
	switch t.Expect {
	case ExpectExact:
		switch {
		case iw.Verdict == report.VerdictExact && iw.Segments == t.IW:
		case iw.Verdict == report.VerdictLowerBound && iw.Segments == t.IW:
			timing = append(timing, fmt.Sprintf("IW %s, want %d exact", describe(), t.IW))
		default:
			wrong = append(wrong, fmt.Sprintf("IW %s, want %d exact", describe(), t.IW))
		}
	case ExpectNotExact:
		if iw.Verdict == report.VerdictExact {
			wrong = append(wrong, fmt.Sprintf("IW %s: the situation leaves the window unproven", describe()))
		}
	case ExpectAmbiguous:
		if iw.Verdict != report.VerdictAmbiguous {
			wrong = append(wrong, fmt.Sprintf("IW %s, want ambiguous", describe()))
		}
	case ExpectRange:
		switch {
		case iw.Verdict == report.VerdictRange:
		case iw.Verdict == report.VerdictLowerBound && iw.Segments <= t.IW && vantage == "client":
			// At the client the rounds follow the server's timestamp echoes, which
			// lag behind while the client has data the server has not acknowledged
			// (RFC 7323 updates TS.Recent only from segments at or below the last
			// acknowledgement sent: HTTP/2 WINDOW_UPDATEs): later rounds can merge,
			// and a merged round after the first HTTP round outgrows it.
		case iw.Verdict == report.VerdictLowerBound && iw.Segments <= t.IW:
			// A stall on the host can make the first HTTP round look cut short
			// by the application.
			timing = append(timing, fmt.Sprintf("IW %s, want a range around %d", describe(), t.IW))
		default:
			wrong = append(wrong, fmt.Sprintf("IW %s, want a range around %d", describe(), t.IW))
		}
	case ExpectBound:
	default:
		wrong = append(wrong, fmt.Sprintf("unknown expectation %q", t.Expect))
	}
	if t.TLS != "" {
		wrong = append(wrong, checkTLS(c, t)...)
	}
	return wrong, timing
}

// Contradicts says how a reading contradicts a true initial window of truth
// segments ("" when it holds the truth): an exact reading of another size, a lower
// bound above it, a range that leaves it out.
func Contradicts(iw *report.InitialWindow, truth int) string {
	switch iw.Verdict {
	case report.VerdictExact:
		if iw.Segments != truth {
			return fmt.Sprintf("exact %d segments, the truth is %d (%s)", iw.Segments, truth, iw.Reason)
		}
	case report.VerdictLowerBound, report.VerdictRwndLimited:
		// A round the receive window capped still went out under the congestion
		// window: the window is at least what it carried.
		if iw.Segments > truth {
			return fmt.Sprintf("a lower bound of %d segments, above the truth %d (%s)", iw.Segments, truth, iw.Reason)
		}
	case report.VerdictRange:
		if truth < iw.Segments || truth > iw.SegmentsMax {
			return fmt.Sprintf("a range of %d to %d segments without the truth %d (%s)", iw.Segments, iw.SegmentsMax, truth, iw.Reason)
		}
	}
	return ""
}

// checkTLS checks the version and the handshake's round trips: TLS 1.3 takes one,
// TLS 1.2 two, a HelloRetryRequest one more, and a flight larger than the window one
// more again. The lab's flight (about 4 segments) fits a window of 10 or more; below
// that the window may or may not have grown enough during a HelloRetryRequest, so only
// the least count is checked.
func checkTLS(c *report.Connection, t Truth) (wrong []string) {
	if c.TLS == nil {
		return []string{"no TLS seen"}
	}
	if c.TLS.Version != t.TLS {
		wrong = append(wrong, fmt.Sprintf("TLS version %q, want %q", c.TLS.Version, t.TLS))
	}
	want := map[string]int{"1.2": 2, "1.3": 1}[t.TLS]
	if t.HelloRetry {
		want++
	}
	switch got := c.TLS.HandshakeRoundTrips; {
	case t.IW >= 10 && got != want:
		wrong = append(wrong, fmt.Sprintf("%d TLS round trips, want %d (TLS %s, HelloRetryRequest %v)", got, want, t.TLS, t.HelloRetry))
	case got < want:
		wrong = append(wrong, fmt.Sprintf("%d TLS round trips, want at least %d (TLS %s, HelloRetryRequest %v)", got, want, t.TLS, t.HelloRetry))
	}
	return wrong
}

// checkRTT checks the handshake RTT: never shorter than the path; never holding a
// SYN's retransmission timeout (1 s) when the path dropped the first SYN; longer
// than half again the path only when the host stalled a packet (timing).
func checkRTT(c *report.Connection, t Truth, wrong, timing []string) ([]string, []string) {
	if c.HandshakeRTTMs == nil {
		return append(wrong, "no handshake RTT"), timing
	}
	rtt := *c.HandshakeRTTMs
	switch {
	case rtt < t.RTTMs:
		wrong = append(wrong, fmt.Sprintf("handshake RTT %.3f ms, shorter than the %.0f ms path", rtt, t.RTTMs))
	case t.SYNsDropped > 0 && rtt >= t.RTTMs+500:
		wrong = append(wrong, fmt.Sprintf("handshake RTT %.3f ms on a %.0f ms path: it holds the retransmission timeout of the dropped SYN", rtt, t.RTTMs))
	case rtt > t.RTTMs*1.5+5:
		timing = append(timing, fmt.Sprintf("handshake RTT %.3f ms, want %.0f ms", rtt, t.RTTMs))
	}
	return wrong, timing
}
