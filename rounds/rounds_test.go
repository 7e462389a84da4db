package rounds_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/internal/segscript"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/rounds"
	"github.com/slowstart/slowstart/verdict"
)

// script builds the segments of one connection for the tracker.
type script struct{ segscript.Script }

const msNs = 1_000_000

func (s *script) run(cfg rounds.Config, ending rounds.Ending) ([]rounds.Round, *report.InitialWindow, *rounds.Tracker) {
	t := rounds.New(cfg)
	for i := range s.Segs {
		t.Add(&s.Segs[i])
	}
	rs := t.Label(nil, ending)
	return rs, readWindow(cfg, t, rs), t
}

const mss = 1448

func serverCfg() rounds.Config {
	return rounds.Config{Vantage: flow.VantageServer, RTTNs: 100 * msNs, SegmentCap: mss}
}

func TestInitialWindow(t *testing.T) {
	cases := []struct {
		name     string
		cfg      rounds.Config
		build    func(s *script)
		ending   rounds.Ending
		verdict  string
		segments int
		limit1   string
		reason   string // a phrase the reason must hold
	}{
		{
			name: "window cut",
			cfg:  serverCfg(),
			build: func(s *script) {
				s.Request(0, 0, 100).Burst(1, 10, mss, 0.01)
				s.Ack(101, 2*mss).Burst(101.01, 4, mss, 0.01)
			},
			verdict: report.VerdictExact, segments: 10, limit1: report.LimitCwnd,
		},
		{
			// rounds.Round 1 ends in a partial segment and the rest went out only once all was
			// acknowledged: Nagle holding a small segment, or the application, not the
			// window.
			name: "partial end released when all was acknowledged",
			cfg:  serverCfg(),
			build: func(s *script) {
				s.Request(0, 0, 100).Data(1, 201)
				s.Ack(101, 201).Data(101.01, 500)
			},
			verdict: report.VerdictLowerBound, segments: 1, limit1: report.LimitApp, reason: "shorter than a full one",
		},
		{
			// The same partial end, but the next data went out on an acknowledgement
			// that left data in flight: Nagle (either variant) would have held it;
			// the window did. The short frame ended a write (the TLS flight's first
			// 4096 bytes, as the lab's servers write it).
			name: "partial end released with data in flight",
			cfg:  serverCfg(),
			build: func(s *script) {
				s.Request(0, 0, 100).Burst(1, 2, mss, 0.01).Data(1.03, 1200)
				s.Ack(101, mss).Data(101.01, 503)
			},
			verdict: report.VerdictExact, segments: 3, limit1: report.LimitCwnd,
		},
		{
			// A short frame inside the round: packets and bytes disagree.
			name: "partial segment inside",
			cfg:  serverCfg(),
			build: func(s *script) {
				s.Request(0, 0, 100).Data(1, 221).Burst(1.01, 3, mss, 0.01)
				// Each acknowledged packet lets one go and grows the window by one.
				s.Ack(101, 221).Burst(101.01, 2, mss, 0.01)
				s.Ack(101.05, 221+2*mss).Burst(101.06, 3, mss, 0.01)
			},
			// 4 packets (Linux counts packets) carrying 221 + 3*1448 = 4565 bytes, room
			// for 3 full segments and less than one more (a sender counting bytes).
			verdict: report.VerdictRange, segments: 3, limit1: report.LimitCwnd, reason: "counts its window in packets",
		},
		{
			// rounds.Round 2 is more than twice round 1: slow start can't do that from a full
			// window, so round 1 did not fill it.
			name: "outgrown",
			cfg:  serverCfg(),
			build: func(s *script) {
				s.Request(0, 0, 100).Burst(1, 5, mss, 0.01)
				s.Ack(101, 2*mss).Burst(101.01, 34, mss, 0.01)
			},
			verdict: report.VerdictLowerBound, segments: 5, limit1: report.LimitApp, reason: "more than slow start",
		},
		{
			// The next round starts after a gap: the bytes the capture missed may have
			// been round 1's end.
			name: "hole at the round's end",
			cfg:  serverCfg(),
			build: func(s *script) {
				s.Request(0, 0, 100).Burst(1, 8, mss, 0.01)
				s.Ack(101, 2*mss)
				s.DataAt(101.01, 10*mss, mss).Burst(101.02, 3, mss, 0.01)
			},
			verdict: report.VerdictAmbiguous, segments: 8, reason: "capture missed",
		},
		{
			// The client acknowledges bytes the capture never saw.
			name: "acknowledged but not captured",
			cfg:  serverCfg(),
			build: func(s *script) {
				s.Request(0, 0, 100).Burst(1, 8, mss, 0.01)
				s.Segs = append(s.Segs, flow.Segment{Dir: flow.ToServer, TimeNs: 101 * msNs, HasAck: true, AckOffset: 10 * mss, AckBeyond: 2 * mss, WindowBytes: 1 << 20})
				s.SetServed(10 * mss)
				s.Burst(101.01, 4, mss, 0.01)
			},
			verdict: report.VerdictAmbiguous, segments: 8, reason: "capture missed",
		},
		{
			// At the client without timestamps, a slow link stretches the first flight
			// past a round trip: arrivals run on without an idle gap where the ACK
			// clock draws the boundary.
			name: "paced by the path",
			cfg:  rounds.Config{Vantage: flow.VantageClient, RTTNs: 70 * msNs, SegmentCap: mss},
			build: func(s *script) {
				s.Request(0, 0, 100)
				for i := range 30 {
					at := 70 + float64(i)*10 // a segment every 10 ms, on and on
					s.Data(at, mss)
					s.Ack(at+0.01, s.Served())
				}
			},
			verdict: report.VerdictLowerBound, limit1: report.LimitRate, reason: "path's rate",
		},
		{
			// Rounds by gaps, and no acknowledgement came between them: the pauses
			// were the sender's.
			name: "gaps without acknowledgements",
			cfg:  rounds.Config{Vantage: flow.VantageUnknown, SegmentCap: mss},
			build: func(s *script) {
				s.Request(0, 0, 100)
				for i := range 10 {
					s.Data(10+float64(i)*10, mss)
				}
			},
			verdict: report.VerdictLowerBound, segments: 1, limit1: report.LimitApp,
		},
		{
			// A header segment, then full segments as the application writes them
			// with Nagle on: the short rest of a write waits for the header's
			// acknowledgement (Linux's Minshall variant), which looks like a window
			// cut at 1 + 25.
			name: "Nagle holds a short segment until the short one before is acknowledged",
			cfg:  serverCfg(),
			build: func(s *script) {
				s.Request(0, 0, 100).Data(1, 150).Burst(1.01, 25, mss, 1)
				s.Ack(101, 150).Data(101.05, 1000).Burst(102, 10, mss, 1)
				s.Ack(202, 150+26*mss).Burst(202.01, 20, mss, 0.01)
			},
			verdict: report.VerdictLowerBound, segments: 26, limit1: report.LimitApp, reason: "Nagle",
		},
		{
			// An application writing at its own pace, below the window: every round
			// the same size, each boundary where an acknowledgement came.
			name: "the next round no larger",
			cfg:  serverCfg(),
			build: func(s *script) {
				s.Request(0, 0, 100).Burst(1, 8, mss, 1)
				s.Ack(101, mss).Burst(101.01, 8, mss, 1)
				s.Ack(201, 9*mss).Burst(201.01, 8, mss, 1)
			},
			verdict: report.VerdictLowerBound, segments: 8, limit1: report.LimitApp, reason: "no more than the 8 of the round before",
		},
		{
			// The second round is twice the first, but half of it went out after a
			// pause with nothing acknowledged: the application's pace.
			name: "the next round paused with nothing acknowledged",
			cfg:  serverCfg(),
			build: func(s *script) {
				s.Request(0, 0, 100).Burst(1, 5, mss, 0.01)
				s.Ack(101, mss).Burst(101.01, 5, mss, 0.01).Burst(141, 5, mss, 0.01)
				s.Ack(201, 6*mss).Burst(201.01, 5, mss, 0.01)
			},
			verdict: report.VerdictLowerBound, segments: 5, limit1: report.LimitApp, reason: "paused and sent again",
		},
		{
			// The second round ran dry: its last segment is short, and the data went
			// on only later. An application's write met the first acknowledgement.
			name: "the next round ran dry",
			cfg:  serverCfg(),
			build: func(s *script) {
				s.Request(0, 0, 100).Burst(1, 5, mss, 0.01)
				s.Ack(101, 5*mss).Burst(101.01, 5, mss, 0.01).Data(101.06, 968)
				s.Ack(201, 10*mss+968).Burst(201.01, 5, mss, 0.01)
			},
			verdict: report.VerdictLowerBound, segments: 5, limit1: report.LimitApp, reason: "nothing more queued",
		},
		{
			// An application writing a segment 1.1 ms, then 2.2 ms, after the last
			// (a timer's granularity), an acknowledgement before every other write:
			// the second round grew by a few segments only, and half of them left
			// after a pause with nothing acknowledged.
			name: "the next round paced by the application",
			cfg:  serverCfg(),
			build: func(s *script) {
				s.Request(0, 0, 100).Burst(1, 20, mss, 1.65)
				at := 101.05
				s.Ack(101, mss).Data(at, mss)
				for i := range 11 {
					at += 1.1
					s.Ack(at-0.05, int64(2*i+2)*mss).Data(at, mss)
					at += 2.2
					s.Data(at, mss)
				}
				s.Ack(202, 30*mss).Burst(202.01, 20, mss, 0.01)
			},
			verdict: report.VerdictLowerBound, segments: 20, limit1: report.LimitApp, reason: "paused and sent again",
		},
		{
			// The same at the server's pace, evenly spaced (BBR pacing out a
			// doubled window): no pause stands out, the window cut stands.
			name: "the next round paced out",
			cfg:  serverCfg(),
			build: func(s *script) {
				s.Request(0, 0, 100).Burst(1, 5, mss, 0.01)
				s.Ack(101, 5*mss).Burst(101.01, 10, mss, 3)
				s.Ack(201, 15*mss).Burst(201.01, 5, mss, 0.01)
			},
			verdict: report.VerdictExact, segments: 5, limit1: report.LimitCwnd,
		},
		{
			// Ten segments, then two more a round trip later with no acknowledgement
			// captured in between: the capture missed the one that released them (or
			// the application paused). Not a round of twelve.
			name: "a pause inside the first round",
			cfg:  serverCfg(),
			build: func(s *script) {
				s.Request(0, 0, 100).Burst(1, 10, mss, 0.01)
				s.Burst(101, 2, mss, 0.01)
				s.Ack(101.5, 2*mss).Burst(101.6, 4, mss, 0.01)
				s.Ack(102, 4*mss).Burst(102.1, 20, mss, 0.01)
			},
			verdict: report.VerdictLowerBound, segments: 10, limit1: report.LimitApp, reason: "paused in the first round",
		},
		{
			name: "the transfer stalled",
			cfg:  serverCfg(),
			build: func(s *script) {
				s.Request(0, 0, 100).Burst(1, 2, mss, 0.01)
			},
			ending:  rounds.EndingIncomplete,
			verdict: report.VerdictLowerBound, segments: 2, limit1: report.LimitIncomplete, reason: "stopped before the response was complete",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &script{}
			tc.build(s)
			rs, iw, _ := s.run(tc.cfg, tc.ending)
			if iw.Verdict != tc.verdict {
				t.Fatalf("verdict %s (%d segments: %s), want %s\n%s", iw.Verdict, iw.Segments, iw.Reason, tc.verdict, dump(rs))
			}
			if tc.segments > 0 && iw.Segments != tc.segments {
				t.Errorf("%d segments, want %d\n%s", iw.Segments, tc.segments, dump(rs))
			}
			if tc.limit1 != "" && rs[0].Limit != tc.limit1 {
				t.Errorf("round 1 limit %s, want %s\n%s", rs[0].Limit, tc.limit1, dump(rs))
			}
			if !strings.Contains(iw.Reason, tc.reason) {
				t.Errorf("reason %q lacks %q", iw.Reason, tc.reason)
			}
		})
	}
}

// TestCoarseTimestampClock: a client timestamp clock that ticks twice a second
// can't tell which acknowledgements the server had on a 20 ms path: the rounds
// follow the ACK clock by capture time instead, and say so.
func TestCoarseTimestampClock(t *testing.T) {
	cfg := rounds.Config{Vantage: flow.VantageClient, RTTNs: 20 * msNs, SegmentCap: mss, Timestamps: true}
	tr := rounds.New(cfg)
	ts := func(ms float64) uint32 { return uint32(ms / 500) } // 2 Hz
	segs := []flow.Segment{
		{Dir: flow.ToServer, TimeNs: 0, HasTS: true, TSVal: ts(0)},
		{Dir: flow.ToServer, TimeNs: 20 * msNs, HasTS: true, TSVal: ts(20), HasAck: true},
		{Dir: flow.ToServer, TimeNs: 21 * msNs, HasTS: true, TSVal: ts(21), HasAck: true, Len: 100, NewLen: 100},
		{Dir: flow.ToClient, TimeNs: 41 * msNs, Len: mss, NewLen: mss, HasTS: true, TSEcr: ts(21)},
	}
	for i := range segs {
		tr.Add(&segs[i])
	}
	if tr.Method() != rounds.MethodACKClock || !strings.Contains(tr.MethodNote(), "too coarse") {
		t.Errorf("method %s (%q), want ack_clock with a note", tr.Method(), tr.MethodNote())
	}
	// A millisecond clock resolves a 20 ms round trip.
	tr = rounds.New(cfg)
	for i := range segs {
		s := segs[i]
		s.TSVal, s.TSEcr = uint32(s.TimeNs/msNs), uint32(21)
		tr.Add(&s)
	}
	if tr.Method() != rounds.MethodTimestamps || tr.MethodNote() != "" {
		t.Errorf("method %s (%q), want timestamps", tr.Method(), tr.MethodNote())
	}
}

// TestCoarseClockAfterTheSYN: a 2 Hz client clock (as on an SSL 3.0-era host)
// that does not tick between the handshake's ACK and the request looks, from those
// packets alone, like any clock; judged from the SYN it has not ticked in a 180 ms
// round trip, and the timestamps (which would merge three rounds into one) are not
// used.
func TestCoarseClockAfterTheSYN(t *testing.T) {
	ts := func(ms float64) uint32 { return 1000 + uint32(ms/500) } // 2 Hz
	cfg := rounds.Config{Vantage: flow.VantageClient, RTTNs: 180 * msNs, SegmentCap: mss, Timestamps: true,
		ClientSYNTSVal: ts(0), ClientSYNNs: 1}
	tr := rounds.New(cfg)
	segs := []flow.Segment{
		{Dir: flow.ToServer, TimeNs: 180 * msNs, HasTS: true, TSVal: ts(180), HasAck: true},
		{Dir: flow.ToServer, TimeNs: 180.1 * msNs, HasTS: true, TSVal: ts(180.1), HasAck: true, Len: 100, NewLen: 100},
	}
	for i := range segs {
		tr.Add(&segs[i])
	}
	data := flow.Segment{Dir: flow.ToClient, TimeNs: 360 * msNs, Len: mss, NewLen: mss, HasTS: true, TSEcr: ts(180.1), HasAck: true}
	tr.Add(&data)
	if tr.Method() == rounds.MethodTimestamps {
		t.Errorf("method %s, want the ACK clock by capture time (the clock did not tick in a round trip)", tr.Method())
	}
}

// TestInferredMSS: without an MSS option the segment size is learned, and the
// rounds are counted again with the final one.
func TestInferredMSS(t *testing.T) {
	s := &script{}
	s.Request(0, 0, 100).Data(1, 500).Burst(1.01, 9, 1380, 0.01)
	s.Ack(101, 500+1380).Burst(101.01, 4, 1380, 0.01)
	rs, iw, tr := s.run(rounds.Config{Vantage: flow.VantageServer, RTTNs: 100 * msNs, SegmentCap: 1460}, rounds.EndingComplete)
	if tr.FullSegmentBytes() != 1380 {
		t.Errorf("full segment %d, want 1380", tr.FullSegmentBytes())
	}
	if rs[0].Segments != 10 { // ceil((500 + 9*1380) / 1380)
		t.Errorf("round 1: %d segments, want 10\n%s", rs[0].Segments, dump(rs))
	}
	if iw.Verdict != report.VerdictRange {
		t.Errorf("verdict %s, want range (a short frame inside)", iw.Verdict)
	}
}

func dump(rs []rounds.Round) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "  round %d: %d segs %d bytes %s (holes %d)\n", r.Index, r.Segments, r.Bytes, r.Limit, r.Holes)
	}
	return b.String()
}

// TestStalledCaptureIsNoPause: at the server, a burst of ten whose second half the
// capture read 39 ms late (a stalled capture process) while the server's timestamps
// show it sent them at once is one window's worth, not a pause; the same gap on the
// server's clock is a pause.
func TestStalledCaptureIsNoPause(t *testing.T) {
	for _, tc := range []struct {
		name     string
		secondTS uint32 // the server's timestamp on the burst's second half
		verdict  string
		segments int
	}{
		{"capture stalled", 1101, report.VerdictExact, 10},
		{"server paused", 1140, report.VerdictLowerBound, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := serverCfg()
			cfg.SYNACKNs, cfg.SYNACKTSVal = 1, 1000 // the server's clock: 1000 + ms
			s := &script{}
			s.Request(100, 0, 100).Burst(101, 5, mss, 0.01).Burst(140, 5, mss, 0.01)
			s.AckClocked(201, 0, 20, mss, 0.02)
			s.Ack(301, 22*mss).Burst(301.01, 10, mss, 0.01)
			for i := range s.Segs {
				seg := &s.Segs[i]
				seg.HasTS = true
				seg.TSVal = 1000 + uint32(seg.TimeNs/msNs)
				if seg.Dir == flow.ToClient && seg.TimeNs >= 140*msNs && seg.TimeNs < 141*msNs {
					seg.TSVal = tc.secondTS
				}
			}
			rs, iw, _ := s.run(cfg, rounds.EndingComplete)
			if iw.Verdict != tc.verdict || iw.Segments != tc.segments {
				t.Errorf("IW %d %s (%s), want %d %s\n%s", iw.Segments, iw.Verdict, iw.Reason, tc.segments, tc.verdict, dump(rs))
			}
		})
	}
}

// TestLossProbeRule: each bound of the one tail loss probe rule decides on its own.
func TestLossProbeRule(t *testing.T) {
	const ms = int64(1_000_000)
	ackless := rounds.LossProbeRule{RTTs: 0.75, MinGapNs: 4 * ms, SpacingTimes: 4}
	cases := []struct {
		name                    string
		rule                    rounds.LossProbeRule
		gapNs, rttNs, spacingNs int64
		want                    bool
	}{
		{"a silence of two RTTs after a tight round", rounds.LossProbe, 40 * ms, 20 * ms, ms / 100, true},
		{"exactly one RTT", rounds.LossProbe, 20 * ms, 20 * ms, 0, true},
		{"under one RTT", rounds.LossProbe, 19 * ms, 20 * ms, 0, false},
		{"under the 10 ms floor on a short path", rounds.LossProbe, 9 * ms, 2 * ms, 0, false},
		{"at the 10 ms floor on a short path", rounds.LossProbe, 10 * ms, 2 * ms, 0, true},
		{"not beyond four times the round's spacing (a paced round)", rounds.LossProbe, 40 * ms, 20 * ms, 10 * ms, false},
		{"just beyond four times the round's spacing", rounds.LossProbe, 40 * ms, 20 * ms, 10*ms - 1, true},
		{"without ACKs: three quarters of the RTT is enough", ackless, 15 * ms, 20 * ms, 0, true},
		{"without ACKs: under three quarters of the RTT", ackless, 14 * ms, 20 * ms, 0, false},
		{"without ACKs: 4 ms on a short path", ackless, 4 * ms, ms, 0, true},
		{"without ACKs: under 4 ms", ackless, 3 * ms, ms, 0, false},
		{"RTT unknown: the floor alone", rounds.LossProbe, 10 * ms, 0, 0, true},
	}
	for _, tc := range cases {
		if got := tc.rule.Holds(tc.gapNs, tc.rttNs, tc.spacingNs); got != tc.want {
			t.Errorf("%s: Holds(%d, %d, %d) = %v, want %v", tc.name, tc.gapNs, tc.rttNs, tc.spacingNs, got, tc.want)
		}
	}
}

// readWindow reads the window from a cleartext connection's rounds, with the
// handshake's round trip confirmed by the data's (the script's paths have no
// middlebox).
func readWindow(cfg rounds.Config, t *rounds.Tracker, rs []rounds.Round) *report.InitialWindow {
	in := verdict.Input{Rounds: rs, Path: verdict.Path{Vantage: cfg.Vantage, Method: t.Method(), HandshakeRTTNs: cfg.RTTNs, DataRTTNs: cfg.RTTNs}}
	in.Segment.Bytes, in.Segment.Proven = t.SegmentSize()
	in.Segment.Cap = cfg.SegmentCap
	return verdict.Read(in).InitialWindow
}

// TestMessageEndsEndRounds: a round that stops exactly where a response
// ended ended because the response did ("end"), whatever order the ends come
// in; a round that stops elsewhere is read by its other signs.
func TestMessageEndsEndRounds(t *testing.T) {
	s := &script{}
	// Three responses of 3, 2 and 4 full segments, each asked for 100 ms after the
	// one before was acknowledged, and a fourth sent in two rounds.
	s.Request(0, 0, 100).Burst(1, 3, mss, 0.01)
	s.Ack(101, 3*mss).Request(110, 100, 100).Burst(111, 2, mss, 0.01)
	s.Ack(211, 5*mss).Request(220, 200, 100).Burst(221, 4, mss, 0.01)
	s.Ack(321, 9*mss).Request(330, 300, 100).Burst(331, 2, mss, 0.01)
	s.Ack(431, 11*mss).Burst(431.01, 2, mss, 0.01)
	s.Ack(531, 13*mss)
	ends := []int64{9 * mss, 3 * mss, 13 * mss, 5 * mss} // out of order
	for _, order := range []string{"in order", "out of order"} {
		t.Run(order, func(t *testing.T) {
			tr := rounds.New(serverCfg())
			for i := range s.Segs {
				tr.Add(&s.Segs[i])
			}
			given := ends
			if order == "in order" {
				given = []int64{3 * mss, 5 * mss, 9 * mss, 13 * mss}
			}
			rs := tr.Label(given, rounds.EndingComplete)
			if len(rs) != 5 {
				t.Fatalf("%d rounds, want 5\n%s", len(rs), dump(rs))
			}
			for i, want := range []int64{3 * mss, 5 * mss, 9 * mss, 11 * mss, 13 * mss} {
				if rs[i].EndOffset != want {
					t.Fatalf("round %d ends at %d, want %d\n%s", i+1, rs[i].EndOffset, want, dump(rs))
				}
			}
			for i := range 3 {
				if rs[i].Limit != report.LimitEnd {
					t.Errorf("round %d (ends where a response did) limit %q, want %q\n%s", i+1, rs[i].Limit, report.LimitEnd, dump(rs))
				}
			}
			if rs[3].Limit == report.LimitEnd {
				t.Errorf("round 4 (ends inside a response) limit %q\n%s", rs[3].Limit, dump(rs))
			}
		})
	}
}
