package analysis

import (
	"fmt"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/rounds"
	"github.com/slowstart/slowstart/tlsrec"
)

// tlsSummary is what the TLS scanners and the rounds say of the handshake.
type tlsSummary struct {
	version string
	http    bool // ALPN or the port says the application data is HTTP
	// helloRetry: the server answered the first ClientHello with a HelloRetryRequest.
	helloRetry bool
	// clientHelloEnd: end offset of the client's first flight. retryHelloEnd: end of
	// its second ClientHello after a HelloRetryRequest (-1 without one).
	// clientAppStart: offset of the client's first application-data record (TLS
	// 1.3: its encrypted Finished).
	clientHelloEnd int64
	retryHelloEnd  int64
	clientAppStart int64
	// Filled by locate: the rounds the first ClientHello alone released (the
	// HelloRetryRequest, when there was one), the server's flight (ServerHello …
	// Certificate), and the end of the server's handshake.
	retryRounds    []rounds.Round
	flightRounds   []rounds.Round
	flightEnd      int64
	handshakeEnd   int64
	flightBytes    int
	flightSegments int
	retrySegments  int
	handshakeRTs   int
	iw             *report.InitialWindow
	fullSegment    int // bytes of a full segment
}

func (ca *connAnalyzer) summarizeTLS(c *flow.Conn) *tlsSummary {
	port := c.Server.Port()
	t := &tlsSummary{clientHelloEnd: -1, retryHelloEnd: -1, clientAppStart: -1, http: port == 443 || port == 8443}
	cs, ss := ca.tls[flow.ToServer], ca.tls[flow.ToClient]
	ch, sh := cs.Hello(), ss.Hello()
	if v := sh.NegotiatedVersion; v != 0 {
		t.version = tlsrec.VersionString(v)
	}
	t.helloRetry = sh.HelloRetryRequest
	for _, p := range append(append([]string{}, ch.ALPN...), sh.ALPN...) {
		if p == "h2" || p == "http/1.1" || p == "http/1.0" {
			t.http = true
		}
	}
	hellos := 0
	for _, r := range cs.Records() {
		if t.clientHelloEnd < 0 {
			t.clientHelloEnd = r.End()
		}
		for _, ht := range r.HandshakeTypes {
			if ht == tlsrec.HandshakeClientHello {
				hellos++
				if hellos == 2 && t.helloRetry {
					t.retryHelloEnd = r.End()
				}
			}
		}
		if r.ContentType == tlsrec.ContentApplicationData && t.clientAppStart < 0 {
			t.clientAppStart = r.Offset
		}
	}
	if t.clientHelloEnd < 0 {
		t.clientHelloEnd = 1 // at least one byte: the hello started the stream
	}
	if t.helloRetry && t.retryHelloEnd < 0 {
		// The second ClientHello was not seen whole: take everything before the
		// client's first application data (or its Finished) for it.
		t.retryHelloEnd = t.clientAppStart
	}
	return t
}

// locate finds the server's first flight (rounds released by the ClientHello alone;
// after a HelloRetryRequest, by the second ClientHello) and its handshake (rounds
// released before the client's first application data).
func (t *tlsSummary) locate(raw []rounds.Round) {
	appStart := t.clientAppStart
	flightHello := t.clientHelloEnd
	if t.helloRetry && t.retryHelloEnd > 0 {
		flightHello = t.retryHelloEnd
		for i, r := range raw {
			if r.ClientDataAtStart <= t.clientHelloEnd {
				t.retryRounds = raw[:i+1]
				t.retrySegments += r.Segments
			}
		}
	}
	first := len(t.retryRounds)
	for i := first; i < len(raw); i++ {
		r := raw[i]
		if r.ClientDataAtStart <= flightHello {
			t.flightEnd = r.EndOffset
			t.flightBytes += r.Bytes
			t.flightSegments += r.Segments
			t.flightRounds = raw[first : i+1]
		}
	}
	for _, r := range raw {
		if appStart < 0 || r.ClientDataAtStart <= appStart {
			if appStart < 0 && r.ClientDataAtStart > flightHello && t.handshakeRTs >= 2+len(t.retryRounds) {
				// Unknown client records: assume the classic two round trips at most.
				continue
			}
			t.handshakeEnd = r.EndOffset
			t.handshakeRTs++
		}
	}
	if t.version == "1.3" {
		// The server's handshake is its first flight; what follows the client's
		// Finished (session tickets) rides with the response.
		t.handshakeEnd = t.flightEnd
		t.handshakeRTs = len(t.retryRounds) + len(t.flightRounds)
	}
}

func (t *tlsSummary) report(labeled []rounds.Round) *report.TLS {
	// The flight's rounds were labeled in place; re-slice from the labeled rounds.
	first := len(t.retryRounds)
	fr := labeled[first : first+len(t.flightRounds)]
	t.iw = rounds.InitialWindow(fr, "tls", t.fullSegment)
	switch {
	case len(fr) > 0 && fr[0].Limit == report.LimitCwnd && t.iw.Verdict == report.VerdictExact:
		t.iw.Reason = fmt.Sprintf("the server's TLS flight (%d segments) was cut after %d segments and finished one round trip later", t.flightSegments, fr[0].WindowSegments()) + fr[0].ProbeNote()
	case t.iw.Verdict == report.VerdictLowerBound && len(fr) > 0 && (fr[0].Limit == report.LimitEnd || len(fr) == 1):
		t.iw.Reason = fmt.Sprintf("the server's whole TLS flight (%d segments) fit in the first round, so the window is at least that", t.flightSegments)
	}
	if first > 0 && len(fr) > 0 {
		// After a HelloRetryRequest the flight went out a round later, when the
		// window may have grown by one segment per retry segment acknowledged.
		floor := max(t.retrySegments, 1)
		if t.iw.Verdict == report.VerdictLowerBound {
			// The flight fit in a window that was at most retrySegments larger than
			// the initial one: the initial window held at least the flight less
			// that growth (Linux grows a window under slow start whenever it is less
			// than twice what is in flight: a retry request of two segments grows an
			// initial window of 3 to 5, and a flight of 4 then fits).
			fit := t.iw.Segments
			segs := max(floor, fit-t.retrySegments)
			t.iw = &report.InitialWindow{Segments: segs, Bytes: min(segs*t.fullSegment, t.iw.Bytes), Verdict: report.VerdictLowerBound, Source: "tls",
				Reason: fmt.Sprintf("the HelloRetryRequest (%d segments) fit in the first round, and %d segments of the server's flight after it fit in a window that the retry request's acknowledgement may have grown by %d, so the window is at least %d", t.retrySegments, fit, t.retrySegments, segs)}
		} else if later := laterRound(t.iw, fr[0], t.retrySegments, floor,
			"the server's flight after its HelloRetryRequest"); later != nil {
			t.iw = later
		} else {
			t.iw = &report.InitialWindow{Segments: floor, Verdict: report.VerdictLowerBound, Source: "tls",
				Reason: "the HelloRetryRequest fit in the first round"}
		}
	}
	return &report.TLS{
		Version:              t.version,
		ServerFlightBytes:    t.flightBytes,
		ServerFlightSegments: t.flightSegments,
		HandshakeRoundTrips:  t.handshakeRTs,
		InitialWindow:        t.iw,
	}
}

// initialWindow picks the connection's IW reading: the TLS server flight where the
// connection is TLS, narrowed by the first HTTP round where that is sound; the
// first round otherwise.
func (ca *connAnalyzer) initialWindow(c *flow.Conn, raw []rounds.Round, t *tlsSummary) *report.InitialWindow {
	if c.MidStream {
		return &report.InitialWindow{Verdict: report.VerdictNone, Source: report.PhaseHTTP,
			Reason: "the capture started after the handshake, so the first round was not seen"}
	}
	if t == nil {
		return rounds.InitialWindow(raw, report.PhaseHTTP, ca.rounds.FullSegmentBytes())
	}
	iw := t.iw
	if iw == nil || iw.Verdict != report.VerdictLowerBound {
		return iw
	}
	// The flight fit in the window. The first HTTP round shows the window after the
	// handshake, which slow start may have grown by one segment per segment
	// acknowledged during the handshake.
	var hsSegs int
	for _, r := range raw {
		if r.StartOffset < t.handshakeEnd {
			hsSegs += r.Segments
			continue
		}
		if r.Limit != report.LimitCwnd || r.Retransmissions > 0 || r.OutOfOrder > 0 || r.Lost > 0 || r.Holes > 0 {
			break
		}
		out := laterRound(&report.InitialWindow{Verdict: report.VerdictExact, Source: report.PhaseHTTP}, r, hsSegs, iw.Segments, "the first HTTP round")
		if out != nil {
			out.Reason = fmt.Sprintf("the TLS flight (%d segments) fit in the window; ", t.flightSegments) + out.Reason
			if out.Verdict == report.VerdictRange && out.Segments <= iw.Segments {
				out.Segments, out.Bytes = iw.Segments, iw.Bytes
			}
			return out
		}
		break
	}
	return iw
}

// laterRound reads the IW from a round cut by the congestion window after earlier
// segments of the connection were acknowledged: the window was then at most
// `priorSegments` larger than the IW (slow start grows it by at most one segment per
// segment acknowledged) and never smaller. floor is what is already known of the IW
// (at least that many segments). reading is the round's reading so far (its verdict
// from the round alone); an exact one becomes a range unless the prior segments
// could not have grown it. Which end holds depends on the sender's congestion
// control, which the packets do not show: Linux's CUBIC and Reno do not grow a
// window while at most half of it is in use, BBR grows it on every acknowledgement.
func laterRound(reading *report.InitialWindow, r rounds.Round, priorSegments, floor int, what string) *report.InitialWindow {
	if reading.Verdict != report.VerdictExact || r.Limit != report.LimitCwnd {
		return reading
	}
	window, windowBytes := r.WindowSegments(), r.WindowBytes()
	if window < floor {
		// Fewer segments than an earlier round already proved fit: this round was
		// not cut by the window, whatever its timing said.
		return nil
	}
	segBytes := max(windowBytes/max(window, 1), 1)
	lo := max(floor, window-priorSegments)
	if lo >= window {
		out := *reading
		out.Segments, out.Bytes = window, windowBytes
		out.Reason = fmt.Sprintf("%s was cut by the congestion window at %d segments, and nothing acknowledged before it could have grown the window", what, window) + r.ProbeNote()
		return &out
	}
	out := &report.InitialWindow{
		Segments: lo, Bytes: min(lo*segBytes, windowBytes),
		SegmentsMax: window, BytesMax: windowBytes,
		Verdict: report.VerdictRange, Source: reading.Source,
	}
	if window >= 3*priorSegments {
		out.ExactIf = "cubic_or_reno"
		out.Reason = fmt.Sprintf("%s was cut by the congestion window at %d segments after %d earlier segments were acknowledged: that is the initial window if the server runs CUBIC or Reno (Linux does not grow a window while at most half of it is in use), and %d to %d if its congestion control grows the window on every acknowledgement (BBR)",
			what, window, priorSegments, lo, window)
	} else {
		out.Reason = fmt.Sprintf("%s was cut by the congestion window at %d segments after %d earlier segments were acknowledged, which may have grown the window by up to that many (slow start; BBR always, CUBIC and Reno once more than half the window was in use), so the initial window is %d to %d segments",
			what, window, priorSegments, lo, window)
	}
	out.Reason += r.ProbeNote()
	return out
}
