package verdict_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/internal/segscript"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/rounds"
	"github.com/slowstart/slowstart/verdict"
)

const (
	msNs = 1_000_000
	mss  = 1448
)

// conn is one connection written by hand: its segments, what the tracker is told,
// and what the verdict reads beside the rounds.
type conn struct {
	cfg rounds.Config
	s   segscript.Script
	// dataRTTMs is the floor of the data's round trip (0: the handshake's).
	dataRTTMs float64
	tls       *verdict.Handshake
	records   []verdict.Span
	messages  []verdict.Span
}

func (c *conn) read() (verdict.Result, []rounds.Round) {
	tr := rounds.New(c.cfg)
	for i := range c.s.Segs {
		tr.Add(&c.s.Segs[i])
	}
	var ends []int64
	for _, m := range c.messages {
		ends = append(ends, m.End)
	}
	rs := tr.Label(ends, rounds.EndingComplete)
	data := c.cfg.RTTNs
	if c.dataRTTMs > 0 {
		data = int64(c.dataRTTMs * msNs)
	}
	in := verdict.Input{Rounds: rs, Records: c.records, Messages: c.messages, TLS: c.tls,
		Path: verdict.Path{Vantage: c.cfg.Vantage, Method: tr.Method(), HandshakeRTTNs: c.cfg.RTTNs, DataRTTNs: data}}
	in.Segment.Bytes, in.Segment.Proven = tr.SegmentSize()
	in.Segment.Cap = c.cfg.SegmentCap
	return verdict.Read(in), rs
}

func atServer(rttMs float64) rounds.Config {
	return rounds.Config{Vantage: flow.VantageServer, RTTNs: int64(rttMs * msNs), SegmentCap: mss}
}

func dump(rs []rounds.Round) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "  round %d: %d segs %d bytes %s\n", r.Index, r.Segments, r.Bytes, r.Limit)
	}
	return b.String()
}

// TestObligations: each case is a situation where the timing alone reads a window
// cut, and one obligation is not proven; the reading must not be exact, and the
// unproven obligation is named. The control case proves every one.
func TestObligations(t *testing.T) {
	// tenCut is ten full segments cut by the window at the server, on a 100 ms
	// path, answering the request answerMs after it came.
	tenCut := func(answerMs float64) func() *conn {
		return func() *conn {
			c := &conn{cfg: atServer(100)}
			c.s.Request(0, 0, 100).Burst(answerMs, 10, mss, 0.01)
			c.s.AckClocked(answerMs+100, 0, 20, mss, 0.02)
			c.messages = []verdict.Span{{Start: 0, End: 100 * mss}}
			return c
		}
	}
	for _, tc := range []struct {
		name string
		conn func() *conn
		// verdict and segments (0: any) of the connection's reading; unproven: the
		// obligation named first.
		verdict  string
		segments int
		unproven string
	}{
		{
			name:    "control: ten full segments cut by the window",
			conn:    tenCut(1),
			verdict: report.VerdictExact, segments: 10,
		},
		{
			// A BSD or macOS server holds any short segment while data is
			// unacknowledged (RFC 896), whatever its window: two full segments and
			// a short tail once both were acknowledged is what a window of 2 and a
			// window of 10 both send.
			name: "classic Nagle holds the tail",
			conn: func() *conn {
				c := &conn{cfg: atServer(100)}
				c.s.Request(0, 0, 100).Burst(1, 2, mss, 0.01)
				c.s.Ack(101, 2*mss).Data(101.01, 500)
				return c
			},
			verdict: report.VerdictLowerBound, segments: 2, unproven: report.ObligationDataQueued,
		},
		{
			// Something near the capture acknowledged the data in 0.3 ms while the
			// handshake took 8 ms: a split-TCP box or proxy, whose sending is paced
			// by what reaches it from upstream.
			name: "a middlebox answers for the server",
			conn: func() *conn {
				c := &conn{cfg: atServer(8), dataRTTMs: 0.3}
				c.s.Request(0, 0, 100).Burst(1, 2, mss, 0.01)
				c.s.Ack(1.3, 2*mss).Burst(1.31, 4, mss, 0.01)
				c.s.Ack(1.6, 6*mss).Burst(1.61, 4, mss, 0.01)
				return c
			},
			verdict: report.VerdictLowerBound, unproven: report.ObligationEndToEnd,
		},
		{
			// A TCP-terminating proxy relaying an origin as far from it as the
			// client is: it answers the request a round trip late, and the
			// origin's rounds reach it as the client's acknowledgements do. The
			// same packets with the answer 1 ms after the request are the
			// control case above.
			name:    "a relay answers a round trip late",
			conn:    tenCut(101),
			verdict: report.VerdictLowerBound, segments: 10, unproven: report.ObligationEndToEnd,
		},
		{
			// A server on the local network: 0.2 ms round trips. No window is read.
			name: "a local path",
			conn: func() *conn {
				c := &conn{cfg: atServer(0.2)}
				c.s.Request(0, 0, 100).Burst(0.01, 20, mss, 0.001)
				c.s.Ack(0.21, 2*mss).Burst(0.211, 40, mss, 0.001)
				return c
			},
			verdict: report.VerdictAmbiguous, unproven: report.ObligationRoundsSeparable,
		},
		{
			// The first acknowledgement of the round came with the next request:
			// the next data may answer the request, not the window.
			name: "released by a new request",
			conn: func() *conn {
				c := &conn{cfg: atServer(100)}
				c.s.Request(0, 0, 100).Burst(1, 4, mss, 0.01)
				c.s.RequestAck(101, 100, 100, 4*mss).Burst(101.01, 8, mss, 0.01)
				return c
			},
			verdict: report.VerdictLowerBound, segments: 4, unproven: report.ObligationReleasedByAck,
		},
		{
			// No MSS option from the client: a 92-byte record is no segment size.
			// A 3-segment flight merged by the capture into one frame of 4,344
			// bytes is not "47 segments", and nothing is exact.
			name: "segment size from tiny frames",
			conn: func() *conn {
				c := &conn{cfg: rounds.Config{Vantage: flow.VantageServer, RTTNs: 100 * msNs}}
				c.s.Request(0, 0, 100).Data(1, 92).Data(1.01, 92).Data(1.02, 3*mss)
				c.s.Ack(101, 92).Burst(101.01, 6, mss, 0.01)
				return c
			},
			verdict: report.VerdictLowerBound, unproven: report.ObligationSegmentSize,
		},
		{
			// Reordering on the path: the client's acknowledgements repeat ack 0 with
			// SACK blocks for the segments past the hole, and the server sends on
			// them (Linux counts SACKed segments out of flight). What it sent then is
			// round 2: read as round 1 it made IW 6 "at least 10".
			name: "data released by SACK blocks",
			conn: func() *conn {
				c := &conn{cfg: atServer(100)}
				c.s.Request(0, 0, 100).Burst(1, 6, mss, 0.01)
				c.s.AckSACK(101, 0, mss, 3*mss).Burst(101.01, 2, mss, 0.01)
				c.s.AckSACK(101.1, 0, mss, 5*mss).Burst(101.11, 2, mss, 0.01)
				c.s.Ack(102, 6*mss).Burst(102.01, 8, mss, 0.01)
				c.s.Ack(201, 8*mss).Burst(201.01, 20, mss, 0.01)
				return c
			},
			verdict: report.VerdictExact, segments: 6,
		},
		{
			// The same reordering, but what the server sent on the SACK blocks is
			// more than they reported received: a sender with a window of 9 and 2
			// segments out of flight sends 2, not 3. A server with a larger
			// window whose application wrote its next piece just then does that
			// (a CUBIC server with IW 27, its writes paused for about a round trip).
			name: "more sent on SACK blocks than they freed",
			conn: func() *conn {
				c := &conn{cfg: atServer(100)}
				c.s.Request(0, 0, 100).Burst(1, 9, mss, 0.01)
				c.s.AckSACK(101, 0, 6*mss, 7*mss)
				c.s.AckSACK(101.1, 0, 5*mss, 7*mss).Burst(101.2, 3, mss, 0.01)
				c.s.Ack(102, 9*mss)
				c.s.Ack(201.3, 12*mss)
				c.messages = []verdict.Span{{Start: 0, End: 12 * mss}}
				return c
			},
			verdict: report.VerdictLowerBound, segments: 9, unproven: report.ObligationReleasedByAck,
		},
		{
			// The SACK blocks reported 3 segments received and the server sent 3,
			// the end of its data: what a window of 9 would do, and what a larger
			// one does whose application wrote its last piece then (seen: a
			// CUBIC server with IW 27 whose write paused 20.7 ms on a 21.8 ms
			// path, its 3 segments leaving 0.35 ms after the first SACK). Nothing
			// was held back for the acknowledgement: no window showed itself.
			name: "all the next data sent on SACK blocks",
			conn: func() *conn {
				c := &conn{cfg: atServer(100)}
				c.s.Request(0, 0, 100).Burst(1, 9, mss, 0.01)
				c.s.AckSACK(101, 0, 6*mss, 7*mss)
				c.s.AckSACK(101.1, 0, 4*mss, 7*mss).Burst(101.2, 3, mss, 0.01)
				c.s.Ack(102, 9*mss)
				c.s.Ack(201.3, 12*mss)
				c.messages = []verdict.Span{{Start: 0, End: 12 * mss}}
				return c
			},
			verdict: report.VerdictLowerBound, segments: 9, unproven: report.ObligationReleasedByAck,
		},
		{
			// An OpenSSL server writes its flight through a 4 KB buffer (3
			// packets, the last short) and then signs; a busy one's signature
			// took as long as the round trip, and its next 4 packets left as the
			// first acknowledgement (of 1 packet) arrived. A window of 3 lets 2
			// go on that acknowledgement: the application, not the window, ended
			// the round (IW 11 read "exact 3").
			name: "more sent on the first acknowledgement than a window lets go",
			conn: func() *conn {
				c := &conn{cfg: atServer(12)}
				c.s.Request(0, 0, 517).Data(1, mss).Data(1, mss).Data(1, 1200)
				c.s.Ack(13, mss).Data(13.5, mss).Data(13.5, mss).Data(13.5, 1200).Data(13.5, 15)
				c.s.Ack(17, 4096).Ack(25, 8207)
				c.messages = []verdict.Span{{Start: 0, End: 8207}}
				return c
			},
			verdict: report.VerdictLowerBound, segments: 3, unproven: report.ObligationReleasedByAck,
		},
		{
			// An application writing 2,800 bytes every 30 ms on a 200 ms path
			// spreads a round over the round trip, each write a pause of the
			// server's own with nothing new from the client: the round's size is
			// the application's pace, not the window.
			name: "an application's pace spreads the round",
			conn: func() *conn {
				c := &conn{cfg: atServer(200)}
				c.s.Request(0, 0, 100)
				for i := range 6 {
					c.s.Burst(1+30*float64(i), 2, mss, 0.01)
				}
				c.s.Ack(201, 4*mss).Burst(201.01, 14, mss, 0.01)
				c.s.Ack(401, 14*mss).Burst(401.01, 20, mss, 0.01)
				return c
			},
			verdict: report.VerdictLowerBound, unproven: report.ObligationWindowFilled,
		},
		{
			// Loopback: the MSS (65,483) exceeds the window (43,690): an 8-byte
			// round followed by more is not capped by the receive window.
			name: "a loopback round is not receive-window limited",
			conn: func() *conn {
				c := &conn{cfg: rounds.Config{Vantage: flow.VantageServer, RTTNs: 50 * msNs, SegmentCap: 65483}}
				c.s.Request(0, 0, 100)
				c.s.Segs = append(c.s.Segs, flow.Segment{Dir: flow.ToServer, TimeNs: 1, HasAck: true, AckOffset: 0, WindowBytes: 43690})
				c.s.Data(1, 8)
				c.s.Ack(51, 8).Data(51.01, 3000)
				return c
			},
			verdict: report.VerdictLowerBound, segments: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, rs := tc.conn().read()
			iw := res.InitialWindow
			if iw.Verdict != tc.verdict {
				t.Fatalf("verdict %s (%d segments: %s; unproven %v), want %s\n%s", iw.Verdict, iw.Segments, iw.Reason, iw.Unproven, tc.verdict, dump(rs))
			}
			if tc.segments > 0 && iw.Segments != tc.segments {
				t.Errorf("%d segments, want %d (%s)\n%s", iw.Segments, tc.segments, iw.Reason, dump(rs))
			}
			if iw.Verdict == report.VerdictExact {
				if len(iw.Unproven) > 0 {
					t.Errorf("exact with unproven obligations %v", iw.Unproven)
				}
				var got []string
				for _, p := range iw.Evidence {
					got = append(got, p.Obligation)
					if p.Detail == "" {
						t.Errorf("obligation %s has no detail", p.Obligation)
					}
				}
				for _, want := range []string{report.ObligationStartSeen, report.ObligationCompleteRound, report.ObligationRoundsSeparable,
					report.ObligationEndToEnd, report.ObligationSegmentSize, report.ObligationFullSegments, report.ObligationReleasedByAck,
					report.ObligationDataQueued, report.ObligationWindowFilled, report.ObligationReceiveWindowRoom} {
					if !slices.Contains(got, want) {
						t.Errorf("exact reading without evidence for %s (has %v)", want, got)
					}
				}
				return
			}
			if tc.unproven != "" && (len(iw.Unproven) == 0 || iw.Unproven[0] != tc.unproven) {
				t.Errorf("unproven %v, want %s first (%s)", iw.Unproven, tc.unproven, iw.Reason)
			}
			if iw.Verdict == report.VerdictLowerBound && len(iw.Unproven) == 0 {
				t.Errorf("a lower bound names no unproven obligation (%s)", iw.Reason)
			}
		})
	}
}

// TestHTTP2ControlFramesAreNoWindow: after a TLS 1.3 handshake whose flight fit, the
// server sends HTTP/2's SETTINGS, WINDOW_UPDATE and PING records (39 + 41 + 24
// bytes); the client's request acknowledges them, and the response follows one
// round trip later. That round ended short and its next data answered a request:
// it says nothing of the window, and the reading stays the flight's bound (it
// read "2 to 3 segments" when such a round was taken for a cut).
func TestHTTP2ControlFramesAreNoWindow(t *testing.T) {
	c := &conn{cfg: atServer(100)}
	// The flight: 4 segments released by the ClientHello (517 bytes).
	c.s.Request(0, 0, 517).Burst(1, 3, mss, 0.01).Data(1.03, 400)
	flightEnd := int64(3*mss + 400)
	// The client's Finished (80 bytes) acknowledges the flight; the server's
	// control frames follow at once.
	c.s.RequestAck(101, 517, 80, flightEnd).Data(101.01, 39).Data(101.02, 41).Data(101.03, 24)
	control := flightEnd + 39 + 41 + 24
	// The request acknowledges them; the response, one round trip later.
	c.s.RequestAck(201, 597, 120, control).Burst(201.01, 10, mss, 0.01)
	c.s.Ack(301, control+2*mss).Burst(301.01, 20, mss, 0.01)
	c.tls = &verdict.Handshake{FlightRounds: 1, FlightSegments: 4, FlightEnd: flightEnd, HandshakeEnd: flightEnd}
	c.messages = []verdict.Span{{Start: 0, End: flightEnd}}
	res, rs := c.read()
	iw := res.InitialWindow
	if iw.Verdict != report.VerdictLowerBound || iw.Segments != 4 || iw.Source != report.PhaseTLS {
		t.Fatalf("IW %s %d-%d from %s (%s), want at least 4 from the TLS flight\n%s", iw.Verdict, iw.Segments, iw.SegmentsMax, iw.Source, iw.Reason, dump(rs))
	}
}

// TestRenoDupAcksGrowTheWindow: without SACK, Linux counts each duplicate ACK as a
// segment delivered (and the acknowledgement that later covers it once more), so a
// window that grows on deliveries (BBR) grows by more than the segments
// acknowledged. A flight of 5 segments reordered on the way (4 duplicate ACKs),
// then a first HTTP round of 14 cut by the window: 5 + 4 deliveries may have grown
// an IW of 5 to 14. Counting the 5 segments alone read "9 to 14" (seen: a BBR
// server with IW 5, read "8 to 19").
func TestRenoDupAcksGrowTheWindow(t *testing.T) {
	c := &conn{cfg: atServer(100)}
	c.s.Request(0, 0, 517).Burst(1, 5, mss, 0.01)
	flightEnd := int64(5 * mss)
	for i := range 4 {
		c.s.DupAck(101+0.01*float64(i), 0)
	}
	c.s.Ack(101.5, flightEnd)
	c.s.RequestAck(101.6, 517, 200, flightEnd).Burst(101.7, 14, mss, 0.01)
	c.s.AckClocked(201.7, flightEnd, 20, mss, 0.02)
	c.tls = &verdict.Handshake{FlightRounds: 1, FlightSegments: 5, FlightEnd: flightEnd, HandshakeEnd: flightEnd}
	c.messages = []verdict.Span{{Start: 0, End: flightEnd}, {Start: flightEnd, End: flightEnd + 34*mss}}
	res, rs := c.read()
	iw := res.InitialWindow
	if iw.Verdict != report.VerdictRange || iw.Segments > 5 || iw.SegmentsMax != 14 {
		t.Fatalf("IW %s %d-%d (%s), want a range from at most 5 to 14\n%s", iw.Verdict, iw.Segments, iw.SegmentsMax, iw.Reason, dump(rs))
	}
}

// TestExactCarriesEvidence: an exact reading's evidence names the packets: the
// times and offsets a reader can find in the capture.
func TestExactCarriesEvidence(t *testing.T) {
	c := &conn{cfg: atServer(100)}
	c.s.Request(0, 0, 100).Burst(1, 10, mss, 0.01)
	c.s.AckClocked(101, 0, 20, mss, 0.02)
	res, _ := c.read()
	iw := res.InitialWindow
	if iw.Verdict != report.VerdictExact {
		t.Fatalf("verdict %s (%s)", iw.Verdict, iw.Reason)
	}
	for _, p := range iw.Evidence {
		if p.Obligation == report.ObligationReleasedByAck && !strings.Contains(p.Detail, "101.0 ms") {
			t.Errorf("release evidence %q does not give the acknowledgement's time (101.0 ms)", p.Detail)
		}
	}
}

// TestTimeoutInTheHandshakeCutsTheWindow: a TLS 1.2 flight of 3 segments whose
// third was lost before the capture and sent again on the timer, 240 ms later on
// an 18 ms path (the client, waiting for the whole flight, sent nothing), and a
// first HTTP round of 35 cut by the window. The timeout cut the window (50 to
// 35 in the lab): the later round shows no initial window, and the reading stays
// the flight's bound ("31 to 35" for IW 50 before). The same flight without the
// silence reads the range.
func TestTimeoutInTheHandshakeCutsTheWindow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gapMs   float64
		verdict string
	}{
		{"a timeout's silence", 240, report.VerdictLowerBound},
		{"no silence", 0.02, report.VerdictRange},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &conn{cfg: atServer(18)}
			c.s.Request(0, 0, 517).Burst(1, 2, mss, 0.01)
			c.s.Ack(19, 2*mss)
			c.s.Data(1.02+tc.gapMs, 915)
			flightEnd := int64(2*mss + 915)
			c.s.RequestAck(1.02+tc.gapMs+18, 517, 300, flightEnd).Data(1.03+tc.gapMs+18, 51)
			hsEnd := flightEnd + 51
			at := 1.04 + tc.gapMs + 36
			c.s.RequestAck(at, 817, 200, hsEnd).Burst(at+0.01, 35, mss, 0.01)
			c.s.AckClocked(at+18, hsEnd, 20, mss, 0.02)
			c.tls = &verdict.Handshake{FlightRounds: 1, FlightSegments: 3, FlightEnd: flightEnd, HandshakeEnd: hsEnd}
			c.messages = []verdict.Span{{Start: hsEnd, End: hsEnd + 55*mss}}
			res, rs := c.read()
			iw := res.InitialWindow
			if iw.Verdict != tc.verdict {
				t.Fatalf("IW %s %d-%d (%s), want %s\n%s", iw.Verdict, iw.Segments, iw.SegmentsMax, iw.Reason, tc.verdict, dump(rs))
			}
		})
	}
}
