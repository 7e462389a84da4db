package verdict_test

import (
	"testing"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/rounds"
	"github.com/slowstart/slowstart/verdict"
)

// clientCut is a connection captured at the client over a 33.4 ms path without
// timestamps: a first round of ten segments, acknowledged two at a time, and the
// next data arriving shiftMs after each acknowledgement, four segments to each.
func clientCut(shiftMs float64) *conn {
	const rtt = 33.4
	c := &conn{cfg: rounds.Config{Vantage: flow.VantageClient, RTTNs: int64(rtt * msNs), SegmentCap: mss}}
	c.s.Request(0, 0, 100)
	for k := range 5 {
		at := rtt + 0.02*float64(k)
		c.s.Burst(at, 2, mss, 0.001)
		c.s.Ack(at+0.005, int64(2*(k+1)*mss))
	}
	for k := range 5 {
		c.s.Burst(rtt+0.02*float64(k)+0.005+shiftMs, 4, mss, 0.001)
	}
	c.messages = []verdict.Span{{Start: 0, End: 100 * mss}}
	return c
}

// TestClientReleaseNeedsARoundTrip: at the client, data the acknowledgement
// released comes back a round trip after it at the soonest, and not much later. Data that arrived
// sooner (0.9 of the round trip: the server had sent it before the
// acknowledgement reached it, on a write of its own) proves no cut; the same
// data a round trip after the acknowledgements reads the window.
func TestClientReleaseNeedsARoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name     string
		shiftMs  float64
		verdict  string
		segments int
		unproven string
	}{
		{"a round trip after the acknowledgements", 33.4, report.VerdictExact, 10, ""},
		{"0.9 of a round trip after them", 30.1, report.VerdictLowerBound, 10, report.ObligationRoundsSeparable},
		// 1.15 round trips: the server sent it 5 ms after the acknowledgement
		// reached it (an application's write, or an origin it relays 19.6 ms
		// away while the client is 15: IW 86 read exact 10).
		{"1.15 round trips after them", 38.4, report.VerdictLowerBound, 10, report.ObligationReleasedByAck},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, rs := clientCut(tc.shiftMs).read()
			iw := res.InitialWindow
			if iw.Verdict != tc.verdict || iw.Segments != tc.segments {
				t.Fatalf("read %s %d segments (%s), want %s %d\n%s", iw.Verdict, iw.Segments, iw.Reason, tc.verdict, tc.segments, dump(rs))
			}
			if tc.unproven != "" && (len(iw.Unproven) == 0 || iw.Unproven[0] != tc.unproven) {
				t.Errorf("unproven %v, want %s first (%s)\n%s", iw.Unproven, tc.unproven, iw.Reason, dump(rs))
			}
		})
	}
}
