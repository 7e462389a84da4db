package analysis

import (
	"testing"

	"github.com/slowstart/slowstart/report"
)

// TestSimulatedConnections runs the whole pipeline on packet sequences made by a
// small slow-start simulator, one per situation the analysis must get right, seen
// from each end.
func TestSimulatedConnections(t *testing.T) {
	type want struct {
		verdict  string
		segments int    // IW segments the verdict must carry
		limit1   string // limit of round 1 ("" = don't check)
		method   string
	}
	cases := []struct {
		name string
		path simPath
		want want
	}{
		{"iw10", simPath{iw: 10, rttMs: 100, responseBytes: 100_000}, want{report.VerdictExact, 10, report.LimitCwnd, ""}},
		{"iw3", simPath{iw: 3, rttMs: 40, responseBytes: 100_000}, want{report.VerdictExact, 3, report.LimitCwnd, ""}},
		{"iw32", simPath{iw: 32, rttMs: 150, responseBytes: 300_000}, want{report.VerdictExact, 32, report.LimitCwnd, ""}},
		{"delayed acks", simPath{iw: 10, rttMs: 80, responseBytes: 200_000, delayedAck: true}, want{report.VerdictExact, 10, report.LimitCwnd, ""}},
		{"delayed acks iw3", simPath{iw: 3, rttMs: 80, responseBytes: 100_000, delayedAck: true}, want{report.VerdictExact, 3, report.LimitCwnd, ""}},
		{"gro merged", simPath{iw: 10, rttMs: 60, responseBytes: 100_000, groMerge: 4}, want{report.VerdictExact, 10, report.LimitCwnd, ""}},
		{"short response", simPath{iw: 10, rttMs: 60, responseBytes: 6000}, want{report.VerdictLowerBound, 5, report.LimitEnd, ""}},
		{"think time", simPath{iw: 10, rttMs: 60, responseBytes: 100_000, thinkAfter: 3000, thinkMs: 200}, want{report.VerdictLowerBound, 3, report.LimitApp, ""}},
		{"receive window", simPath{iw: 10, rttMs: 60, responseBytes: 100_000, rwndBytes: 8192}, want{report.VerdictRwndLimited, 5, report.LimitRwnd, ""}},
		{"loss in round 1", simPath{iw: 10, rttMs: 60, responseBytes: 100_000, dropSegment: 4}, want{report.VerdictAmbiguous, 0, "", ""}},
		{"ipv6", simPath{iw: 10, rttMs: 100, responseBytes: 100_000, ipv6: true}, want{report.VerdictExact, 10, report.LimitCwnd, ""}},
		{"pipelined", simPath{iw: 10, rttMs: 50, responseBytes: 20_000, requests: 3}, want{report.VerdictExact, 10, report.LimitCwnd, ""}},
		{"slow link", simPath{iw: 32, rttMs: 70, rateMbps: 1.2, responseBytes: 100_000}, want{report.VerdictExact, 32, report.LimitCwnd, ""}},
	}
	for _, tc := range cases {
		for _, vantage := range []string{"client", "server"} {
			t.Run(tc.name+"/"+vantage, func(t *testing.T) {
				p := tc.path
				p.vantage = vantage
				rep := analyzePackets(t, simulate(t, p))
				if len(rep.Connections) != 1 {
					t.Fatalf("got %d connections, want 1", len(rep.Connections))
				}
				c := rep.Connections[0]
				if c.Vantage != vantage {
					t.Errorf("vantage = %q, want %q", c.Vantage, vantage)
				}
				iw := c.InitialWindow
				if iw.Verdict != tc.want.verdict {
					t.Fatalf("verdict = %s (%d segments: %s), want %s; rounds:\n%s", iw.Verdict, iw.Segments, iw.Reason, tc.want.verdict, dumpRounds(c))
				}
				if tc.want.segments > 0 && iw.Segments != tc.want.segments {
					t.Errorf("IW = %d segments, want %d; rounds:\n%s", iw.Segments, tc.want.segments, dumpRounds(c))
				}
				if tc.want.limit1 != "" && c.Rounds[0].Limit != tc.want.limit1 {
					t.Errorf("round 1 limit = %s, want %s", c.Rounds[0].Limit, tc.want.limit1)
				}
				checkSlowStart(t, c, p)
			})
		}
	}
}

// checkSlowStart checks properties every analysis must have: bytes add up to the
// stream, rounds start in order, and (for plain slow start) each round at most
// doubles the previous one.
func checkSlowStart(t *testing.T, c report.Connection, p simPath) {
	t.Helper()
	var total int64
	for i, r := range c.Rounds {
		total += int64(r.Bytes)
		if i > 0 && r.StartMs < c.Rounds[i-1].StartMs {
			t.Errorf("round %d starts before round %d", r.Index, i)
		}
		if i > 0 && p.dropSegment == 0 && p.thinkMs == 0 && p.rwndBytes == 0 && p.requests <= 1 && r.Segments > 2*c.Rounds[i-1].Segments+1 {
			t.Errorf("round %d has %d segments after %d: more than slow start allows\n%s", r.Index, r.Segments, c.Rounds[i-1].Segments, dumpRounds(c))
		}
	}
	if total != c.BytesToClient {
		t.Errorf("rounds hold %d bytes, the stream %d", total, c.BytesToClient)
	}
	if p.requests <= 1 && p.dropSegment == 0 && len(c.HTTP) != 1 {
		t.Errorf("got %d HTTP messages, want 1", len(c.HTTP))
	}
	if p.requests > 1 && len(c.HTTP) != p.requests {
		t.Errorf("got %d HTTP messages, want %d", len(c.HTTP), p.requests)
	}
}

func dumpRounds(c report.Connection) string {
	s := ""
	for _, r := range c.Rounds {
		s += "  " + itoa(r.Index) + ": " + itoa(r.Segments) + " segs " + itoa(r.Bytes) + " bytes at " + ftoa(r.StartMs) + " ms, " + r.Limit + "\n"
	}
	return s
}
